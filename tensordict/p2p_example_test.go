// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/mpi"
	"github.com/tdmpi/tdmpi/tensor"
	"github.com/tdmpi/tdmpi/tensordict"
)

// An IRecv that nothing will arrive for holds no goroutine and no MPI
// call; Cancel ends it, after which Finalize has nothing to wait for.
func ExamplePending_Cancel() {
	g := group.World()
	cancelled := true
	if g != nil && g.Size() >= 2 { // g is nil in a build without MPI
		td := tensordict.New(2)
		td.Set(tensordict.K("x"), tensor.Zeros(tensor.Float32, 2))
		// Nobody sends on tag 77.
		p, err := td.IRecv((g.Rank()+1)%g.Size(), tensordict.WithTag(77))
		if err != nil {
			fmt.Println(err)
			return
		}
		if err := p.Cancel(); err != nil {
			fmt.Println(err)
		}
		cancelled = errors.Is(p.Wait(), context.Canceled)
	}
	fmt.Println(cancelled, mpi.Busy() == nil)
	// Output: true true
}
