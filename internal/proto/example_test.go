// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package proto_test

import (
	"fmt"
	"testing"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/internal/proto"
	"github.com/tdmpi/tdmpi/mpi"
)

func TestMain(m *testing.M) { mpitest.Main(m) }

// Exclusive keeps a two-message protocol on the library communicator
// together when several goroutines use the same group.
func ExampleExclusive() {
	g, err := group.Init()
	if err != nil {
		fmt.Println(err)
		return
	}
	err = proto.Exclusive(g, func() error {
		if g.Size() < 2 {
			return nil
		}
		hdr, data := []int64{3}, []float64{1, 2, 3}
		switch g.Rank() {
		case 0:
			if err := mpi.Send(proto.LibComm(g), hdr, 1, 1); err != nil {
				return err
			}
			return mpi.Send(proto.LibComm(g), data, 1, 2)
		case 1:
			if _, err := mpi.Recv(proto.LibComm(g), hdr, 0, 1); err != nil {
				return err
			}
			buf := make([]float64, hdr[0])
			_, err := mpi.Recv(proto.LibComm(g), buf, 0, 2)
			return err
		}
		return nil
	})
	fmt.Println(err)
	// Output:
	// <nil>
}
