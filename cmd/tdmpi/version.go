// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package main

import (
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/tdmpi/tdmpi/mpi"
)

var versionCmd = &command{
	name:  "version",
	args:  "",
	short: "print the versions of tdmpi, Go and the MPI library",
	long: `
Version prints tdmpi's module version and VCS revision (from the build
information Go records in the binary), the Go version and platform it was
built for, and the MPI library's version string. It does not start MPI:
MPI_Get_library_version may be called before MPI_Init.`,
	flags: func(fs *flag.FlagSet, sio *stdio) func([]string) error {
		return func(args []string) error {
			if len(args) > 0 {
				return usagef("unexpected argument %q", args[0])
			}
			bi, _ := debug.ReadBuildInfo()
			lib := mpi.LibraryVersion()
			if mpi.Library() == mpi.FamilyNone {
				lib = "not built in (tdmpi was built without cgo or with -tags nompi)"
			}
			writeVersion(sio.out, bi, lib)
			return nil
		}
	},
}

// writeVersion prints the version report from the build information bi
// (nil if the binary has none) and the MPI library version lib.
func writeVersion(w io.Writer, bi *debug.BuildInfo, lib string) {
	mod, version, goVersion := "github.com/tdmpi/tdmpi", "unknown", runtime.Version()
	var revision, vcsTime, modified string
	if bi != nil {
		if bi.Main.Path != "" {
			mod = bi.Main.Path
		}
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.time":
				vcsTime = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
	}
	fmt.Fprintf(w, "tdmpi    %s %s\n", mod, version)
	if revision != "" {
		fmt.Fprintf(w, "revision %s", revision)
		if vcsTime != "" {
			fmt.Fprintf(w, " %s", vcsTime)
		}
		if modified == "true" {
			fmt.Fprintf(w, " (modified)")
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "go       %s %s/%s\n", goVersion, runtime.GOOS, runtime.GOARCH)
	if lib == "" {
		lib = "unknown (MPI_Get_library_version failed)"
	}
	fmt.Fprintf(w, "mpi      %s\n", lib)
}
