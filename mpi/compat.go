// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package mpi

import "time"

// The old names of what moved to internal/mpix, until the callers move.

const CopySendMax = copySendMax

func AfterInFlight(f func())                             { afterInFlight(f) }
func InFlight() int                                      { return inFlightOps() }
func WaitCopies(d time.Duration) (int, error)            { return waitCopies(d) }
func Yield() bool                                        { return yield() }
func SendCopy(c *Comm, b []byte, d, t int) (bool, error) { return sendCopy(c, b, d, t) }
func SendConcat(c *Comm, a, b []byte, d, t int) error    { return sendConcat(c, a, b, d, t) }
func SendUntil(c *Comm, b []byte, d, t int, done <-chan struct{}) (bool, error) {
	return sendUntil(c, b, d, t, done)
}
func MprobeUntil(m *Message, c *Comm, s, t int, done <-chan struct{}) (Status, bool, error) {
	return mprobeUntil(m, c, s, t, done)
}
func MrecvUntil(m *Message, b []byte, done <-chan struct{}) (Status, bool, error) {
	return mrecvUntil(m, b, done)
}
func MrecvConcat(m *Message, a, b []byte) (Status, error) { return mrecvConcat(m, a, b) }
func RecvExact(m *Message, c *Comm, b []byte, s, t int) (Status, bool, error) {
	return recvExact(m, c, b, s, t)
}
func RecvExactUntil(m *Message, c *Comm, b []byte, s, t int, done <-chan struct{}) (Status, bool, bool, error) {
	return recvExactUntil(m, c, b, s, t, done)
}
func IbcastUntil[T Scalar](c *Comm, b []T, r int, done <-chan struct{}) (bool, error) {
	return ibcastUntil(c, b, r, done)
}
func IallreduceInPlaceUntil[T Scalar](c *Comm, b []T, op Op, done <-chan struct{}) (bool, error) {
	return iallreduceInPlaceUntil(c, b, op, done)
}
