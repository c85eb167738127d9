// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package mpi

import "github.com/tdmpi/tdmpi/internal/mpix/hook"

// init hands package internal/mpix the operations that only tdmpi's own
// packages use (see package hook). Those on a Message take and return it
// by value: a pointer passed to a function value escapes to the heap, and
// the callers' Messages are local variables that must not.
func init() {
	hook.AfterInFlight = afterInFlight
	hook.InFlight = inFlightOps
	hook.WaitCopies = waitCopies
	hook.Yield = yield
	hook.SendCopy = sendCopy
	hook.SendConcat = sendConcat
	hook.SendBlocksUntil = sendBlocksUntil
	hook.SendUntil = sendUntil
	hook.MprobeUntil = func(m Message, c *Comm, src, tag int, done <-chan struct{}) (Message, Status, bool, error) {
		st, ended, err := mprobeUntil(&m, c, src, tag, done)
		return m, st, ended, err
	}
	hook.MrecvUntil = func(m Message, buf []byte, done <-chan struct{}) (Message, Status, bool, error) {
		st, ended, err := mrecvUntil(&m, buf, done)
		return m, st, ended, err
	}
	hook.MrecvConcat = func(m Message, a, b []byte) (Message, Status, error) {
		st, err := mrecvConcat(&m, a, b)
		return m, st, err
	}
	hook.RecvExactUntil = func(m Message, c *Comm, buf []byte, src, tag int, done <-chan struct{}) (Message, Status, bool, bool, error) {
		st, got, ended, err := recvExactUntil(&m, c, buf, src, tag, done)
		return m, st, got, ended, err
	}
	hook.IbcastUntil = ibcastUntilBytes
	hook.IallreduceUntil = iallreduceUntilBytes
}
