// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package tensordict_test

import (
	"fmt"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/tensor"
	"github.com/tdmpi/tdmpi/tensordict"
)

// InitRemote with WithBroadcast sends a TensorDict from rank 0 to every
// other rank of the world, which rebuild it with FromRemoteInit. It runs
// on any number of ranks, one included.
func ExampleTensorDict_InitRemote() {
	g := group.World() // started by group.Init (here, by TestMain)
	var got *tensordict.TensorDict
	if g.Rank() == 0 {
		td := tensordict.New(2)
		td.Set(tensordict.K("a", "b"), tensor.Ones(tensor.Float32, 2))
		td.Set(tensordict.K("c"), tensor.Ones(tensor.Float32, 2))
		if err := td.InitRemote(0, tensordict.WithBroadcast()); err != nil {
			fmt.Println(err)
			return
		}
		got = td
	} else {
		var err error
		if got, err = tensordict.FromRemoteInit(0, tensordict.WithBroadcast()); err != nil {
			fmt.Println(err)
			return
		}
	}
	fmt.Println(got.Keys(), got.EqScalar(1).All())
	// Output: [a c] true
}

// Send and Recv with WithConsolidated move the whole storage of a
// TensorDict in one message, into the receiver's existing storage.
func ExampleTensorDict_Send() {
	g := group.World()
	td := tensordict.New(3)
	td.Set(tensordict.K("x"), tensor.Zeros(tensor.Float64, 3))
	td, _ = td.Consolidate()
	if g.Size() >= 2 {
		switch g.Rank() {
		case 0:
			td.SetInPlace(tensordict.K("x"), tensor.Full(tensor.Float64, 2, 3))
			if err := td.Send(1, tensordict.WithConsolidated()); err != nil {
				fmt.Println(err)
			}
		case 1:
			if _, err := td.Recv(0, tensordict.WithConsolidated()); err != nil {
				fmt.Println(err)
			}
		}
	}
	x, _ := td.Get(tensordict.K("x"))
	fmt.Println(x.Shape())
	// Output: [3]
}

// WithAllocator lets a loop of FromRemoteInit calls reuse one storage:
// each result is built in the storage of the previous one, which the loop
// no longer needs. It runs on any number of ranks, one included.
func ExampleWithAllocator() {
	g := group.World()
	var spare *tensor.Storage // the storage of the previous result
	reuse := func(n int) (*tensor.Storage, error) {
		if spare != nil && spare.Len() == n {
			return spare, nil
		}
		return tensor.NewStorage(n), nil
	}
	for step := range 3 {
		var got *tensordict.TensorDict
		if g.Rank() == 0 {
			got = tensordict.New()
			got.Set(tensordict.K("w"), tensor.Full(tensor.Float32, float64(step), 4))
			if err := got.InitRemote(0, tensordict.WithBroadcast()); err != nil {
				fmt.Println(err)
				return
			}
		} else {
			var err error
			got, err = tensordict.FromRemoteInit(0, tensordict.WithBroadcast(), tensordict.WithAllocator(reuse))
			if err != nil {
				fmt.Println(err)
				return
			}
			spare = got.ConsolidatedStorage() // done with got after this step
		}
		fmt.Println(step, got.EqScalar(float64(step)).All())
	}
	// Output:
	// 0 true
	// 1 true
	// 2 true
}
