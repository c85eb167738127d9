// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo

package mpi

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Calls in progress. Every call into MPI that may block or take long holds
// calls.mu for reading, so that Finalize, which must not run while another
// goroutine is inside MPI (MPI_Finalize then frees memory that call uses),
// can tell with TryLock and refuse. The counters name the calls for its
// error.
var calls struct {
	mu     sync.RWMutex
	counts sync.Map // op name -> *callCount
}

type callCount struct {
	op string
	n  atomic.Int64
}

// enter records that a call to MPI function op starts; the caller defers
// the returned count's leave.
func enter(op string) *callCount {
	calls.mu.RLock()
	v, ok := calls.counts.Load(op)
	if !ok {
		v, _ = calls.counts.LoadOrStore(op, &callCount{op: op})
	}
	c := v.(*callCount)
	c.n.Add(1)
	return c
}

// leave records that the call has returned.
func (c *callCount) leave() {
	c.n.Add(-1)
	calls.mu.RUnlock()
}

// inProgress describes the calls in progress, such as "MPI_Probe ×2, MPI_Recv".
func inProgress() string {
	var parts []string
	calls.counts.Range(func(_, v any) bool {
		c := v.(*callCount)
		switch n := c.n.Load(); {
		case n == 1:
			parts = append(parts, c.op)
		case n > 1:
			parts = append(parts, fmt.Sprintf("%s ×%d", c.op, n))
		}
		return true
	})
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}
