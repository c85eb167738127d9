// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package group_test

import (
	"fmt"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/mpi"
)

// Start MPI, then reduce over the world. Run with any number of ranks:
// go run . or mpirun -np 4 ./prog.
func Example() {
	g, err := group.Init()
	if err != nil {
		fmt.Println(err)
		return
	}
	// In a program: defer group.Finalize()

	sum := []int{g.Rank()}
	if err := mpi.AllreduceInPlace(g.Comm(), sum, mpi.OpSum); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sum[0] == g.Size()*(g.Size()-1)/2)
	// Output:
	// true
}

// A program's main: every rank runs the function; an error or a panic on
// any rank is printed as "rank R of N (host): <error>" and ends the whole
// job with status 1. Run it with mpirun -np 4 ./prog. (Main exits the
// process, so this example is compiled, not run.)
func ExampleMain() {
	group.Main(func(g *group.Group) error {
		sum := []int{g.Rank()}
		if err := mpi.AllreduceInPlace(g.Comm(), sum, mpi.OpSum); err != nil {
			return err
		}
		if want := g.Size() * (g.Size() - 1) / 2; sum[0] != want {
			return fmt.Errorf("the ranks sum to %d, want %d", sum[0], want)
		}
		if g.Rank() == 0 {
			fmt.Println("ranks:", g.Size())
		}
		return nil
	})
}

// Each rank makes the subgroup of itself alone; only members call New.
func ExampleGroup_New() {
	g := group.World()
	self, err := g.New([]int{g.Rank()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer self.Free()
	w, _ := self.WorldRank(0)
	fmt.Println(self.Size(), self.Rank(), w == g.Rank())

	_, err = g.New([]int{g.Size()})
	fmt.Println(err != nil)
	// Output:
	// 1 0 true
	// true
}

// Split the world into even and odd ranks.
func ExampleGroup_Split() {
	g := group.World()
	half, err := g.Split(g.Rank()%2, g.Rank())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer half.Free()
	w, _ := half.WorldRank(half.Rank())
	fmt.Println(w == g.Rank(), half.Rank() == g.Rank()/2)
	// Output:
	// true true
}
