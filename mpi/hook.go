// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package mpi

import "github.com/tdmpi/tdmpi/internal/mpix/hook"

// init hands package internal/mpix the operations that only tdmpi's own
// packages use (see package hook).
func init() {
	hook.AfterInFlight = afterInFlight
	hook.InFlight = inFlightOps
	hook.WaitCopies = waitCopies
	hook.Yield = yield
	hook.SendCopy = sendCopy
	hook.SendConcat = sendConcat
	hook.SendUntil = sendUntil
	hook.MprobeUntil = mprobeUntil
	hook.MrecvUntil = mrecvUntil
	hook.MrecvConcat = mrecvConcat
	hook.RecvExact = recvExact
	hook.RecvExactUntil = recvExactUntil
	hook.IbcastUntil = ibcastUntilBytes
	hook.IallreduceUntil = iallreduceUntilBytes
}
