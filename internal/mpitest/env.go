// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package mpitest

import (
	"os"
	"strings"
)

// CleanEnv returns this process's environment without the variables of its
// own MPI job (Open MPI's OMPI_*, PMIX_*, OPAL_*, ORTE_*, except the
// run-as-root permissions; MPICH Hydra's PMI_*, HYDRA_*, MPI_LOCALNRANKS
// and MPI_LOCALRANKID), followed by extra. Tests that start a child process, alone
// or under its own mpirun, give it this environment so the child starts a
// job of its own instead of joining this one.
func CleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "OMPI_ALLOW_RUN_AS_ROOT") {
			env = append(env, kv)
			continue
		}
		if strings.HasPrefix(k, "OMPI_") || strings.HasPrefix(k, "PMIX_") ||
			strings.HasPrefix(k, "OPAL_") || strings.HasPrefix(k, "ORTE_") ||
			strings.HasPrefix(k, "PMI_") || strings.HasPrefix(k, "HYDRA_") ||
			k == "MPI_LOCALNRANKS" || k == "MPI_LOCALRANKID" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}
