// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package main

import (
	"errors"
	"flag"
)

var benchCmd = &command{
	name:  "bench",
	args:  "[flags]",
	short: "measure tdmpi's transfers beside raw MPI (under mpirun -np 2)",
	long:  `Bench is being written.`,
	flags: func(fs *flag.FlagSet, sio *stdio) func([]string) error {
		return func([]string) error { return errors.New("not implemented yet") }
	},
}
