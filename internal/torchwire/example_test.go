// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package torchwire_test

import (
	"errors"
	"fmt"

	"github.com/tdmpi/tdmpi/internal/torchwire"
)

func Example() {
	m := &torchwire.Meta{TotalBytes: 8, Root: torchwire.Node{
		BatchSize: []int{2},
		Leaves:    []torchwire.Leaf{{Name: "x", DType: "float32", Shape: []int{2}, Start: 0, Stop: 8}},
	}}
	p, err := m.Marshal(false)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, msg := range torchwire.Messages(torchwire.P2P, int64(len(p)), m.TotalBytes) {
		fmt.Printf("message %d: %s, %s x %d\n", msg.Index, msg.Send, msg.Datatype, msg.Count)
	}
	back, err := torchwire.ParseMeta(p, false, torchwire.Limits{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(back.Root.Leaves[0].Name, back.Root.Leaves[0].DType, back.Root.Leaves[0].Shape)

	// A pickle that names a global is refused before anything runs.
	_, err = torchwire.Decode([]byte("\x80\x04cos\nsystem\n."), torchwire.Limits{})
	fmt.Println(errors.Is(err, torchwire.ErrOpcode))
	// Output:
	// message 0: MPI_Isend, MPI_LONG x 1
	// message 1: MPI_Isend, MPI_UNSIGNED_CHAR x 157
	// message 2: MPI_Isend, MPI_UNSIGNED_CHAR x 8
	// x float32 [2]
	// true
}
