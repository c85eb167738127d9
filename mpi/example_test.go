// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpi_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tdmpi/tdmpi/mpi"
)

// The package's TestMain has called mpi.Init; a program calls it first and
// mpi.Finalize last. These examples print the same lines at any size.

func ExampleAllreduce() {
	w := mpi.World()
	// Every rank contributes its rank; the sum is the same everywhere.
	x := []int{w.Rank(), 1}
	sum := make([]int, 2)
	if err := mpi.Allreduce(w, x, sum, mpi.OpSum); err != nil {
		fmt.Println(err)
		return
	}
	n := w.Size()
	fmt.Println(sum[0] == n*(n-1)/2, sum[1] == n)
	// Output: true true
}

func ExampleSend_error() {
	w := mpi.World()
	err := mpi.Send(w, []float64{1}, 99, 0)
	var e *mpi.Error
	fmt.Println(errors.As(err, &e), errors.Is(err, mpi.ErrRank), e.Op)
	// Output: true true MPI_Send
}

func ExampleMprobe() {
	self := mpi.Self()
	req, err := mpi.Isend(self, []int32{7, 8, 9}, 0, 5)
	if err != nil {
		fmt.Println(err)
		return
	}
	// Match the message, size the buffer from its status, receive it.
	m, st, err := mpi.Mprobe(self, mpi.AnySource, mpi.AnyTag)
	if err != nil {
		fmt.Println(err)
		return
	}
	buf := make([]int32, mpi.Count[int32](st))
	if _, err := mpi.Mrecv(m, buf); err != nil {
		fmt.Println(err)
		return
	}
	if _, err := req.Wait(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(st.Tag, buf)
	// Output: 5 [7 8 9]
}

func ExampleRequest_Await() {
	// Wait for a receive while watching a context: each Await polls for
	// a slice of the wait (pausing as a blocking receive does) and
	// returns, so that the loop can give up when the context ends.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	self := mpi.Self()
	got := make([]int32, 4)
	req, err := mpi.Irecv(self, got, 0, 6)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := mpi.Send(self, []int32{4, 2}, 0, 6); err != nil {
		fmt.Println(err)
		return
	}
	for {
		done, st, err := req.Await()
		if err != nil {
			fmt.Println(err)
			return
		}
		if done {
			fmt.Println(mpi.Count[int32](st), got)
			return
		}
		if ctx.Err() != nil {
			req.Abandon() // MPI still owns got until the message comes
			fmt.Println("gave up:", ctx.Err())
			return
		}
	}
	// Output: 2 [4 2 0 0]
}
