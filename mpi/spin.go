// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo

package mpi

// #include "shim.h"
// long long tdmpi_spin_ns;
import "C"

import (
	"sync"
	"time"
)

var spinMu sync.Mutex // serialises SetSpinWait

func init() { SetSpinWait(DefaultSpinWait) }

// SetSpinWait sets how long the blocking receives and probes of this
// package (Recv, Probe, Mprobe, RecvExact) poll MPI without pause before
// they yield their core to other threads after each poll (sched_yield),
// and returns the previous value. 0 or less never yields: every wait polls
// without pause, as MPI_Mprobe does. The default, DefaultSpinWait, leaves a
// short wait as fast as a busy poll and lets a long one share its core:
// MPI ranks polling on every core of a node otherwise keep the Go
// runtime's own threads (the garbage collector's workers, other
// goroutines) off them for a scheduler time slice at a time. Waits that
// have begun keep the value they started with.
func SetSpinWait(d time.Duration) time.Duration {
	spinMu.Lock()
	defer spinMu.Unlock()
	old := time.Duration(C.tdmpi_spin_ns)
	C.tdmpi_spin_ns = C.longlong(max(d, 0))
	return old
}
