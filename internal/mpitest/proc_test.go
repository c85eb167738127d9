// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package mpitest

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestProcStatus(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skipf("SKIPPED: no /proc/self/status here: %v", err)
	}
	for _, tc := range []struct {
		name     string
		positive bool
	}{
		{"VmRSS", true},
		{"VmPeak", true},
		{"Threads", true}, // a count, not in kB: still a number
		{"NoSuchField", false},
		{"VmRS", false}, // a prefix of a field is not the field
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ProcStatus(tc.name)
			if tc.positive {
				require.Positive(t, got)
			} else {
				require.Equal(t, int64(-1), got)
			}
		})
	}
}
