// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package test

// This file's name sorts before main_test.go so that its init registers
// its helper before main_test.go's init dispatches to it.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/memmap"
	"github.com/tdmpi/tdmpi/tensor"
	"github.com/tdmpi/tdmpi/tensordict"
)

// helperTruncOps: the library's own accesses to files another process
// truncated after LoadMemmap and LoadConsolidated. The leaves (8 MiB in
// all) are large enough for Consolidate to copy with several goroutines.
const helperTruncOps = "truncated-ops"

func init() { localHelpers[helperTruncOps] = runTruncatedOps }

// runTruncatedOps loads a saved directory and a consolidated file, has
// truncate(1) shrink their files to nothing, then calls every library
// function that reads or writes the lost pages itself, and prints each
// one's outcome: "<op>: fault=<wraps memmap.ErrFault> efault=<EFAULT>
// err=<error>". Reaching the end line means the process survived.
func runTruncatedOps() int {
	base := os.Getenv(envDir)
	dir := filepath.Join(base, "saved")
	file := filepath.Join(base, "td.consolidated")
	src := tensordict.New(4)
	for _, k := range []tensordict.Key{tensordict.K("x"), tensordict.K("n", "y")} {
		if err := src.Set(k, tensor.Ones(tensor.Float32, 4, 1<<18)); err != nil {
			fmt.Println("setup:", err)
			return exitSetup
		}
	}
	if _, err := src.Memmap(dir); err != nil {
		fmt.Println("setup:", err)
		return exitSetup
	}
	if err := src.SaveConsolidated(file); err != nil {
		fmt.Println("setup:", err)
		return exitSetup
	}
	loaded, err := tensordict.LoadMemmap(dir)
	if err != nil {
		fmt.Println("setup:", err)
		return exitSetup
	}
	cons, err := tensordict.LoadConsolidated(file)
	if err != nil {
		fmt.Println("setup:", err)
		return exitSetup
	}
	copied, err := tensordict.LoadMemmap(dir, tensordict.InMemory())
	if err != nil {
		fmt.Println("setup:", err)
		return exitSetup
	}
	for _, f := range []string{filepath.Join(dir, "x.memmap"), filepath.Join(dir, "n", "y.memmap"), file} {
		if out, err := exec.Command("truncate", "-s", "0", f).CombinedOutput(); err != nil {
			fmt.Println("setup: truncate:", err, string(out))
			return exitSetup
		}
	}
	report := func(op string, err error) {
		fmt.Printf("%s: fault=%v efault=%v err=%v\n", op, errors.Is(err, memmap.ErrFault), errors.Is(err, syscall.EFAULT), err)
	}
	ones := tensor.Full(tensor.Float32, 2, 4, 1<<18)
	_, err = loaded.Consolidate()
	report("Consolidate", err)
	_, total, _ := tensordict.Layout(loaded)
	_, err = loaded.ConsolidateInto(make([]byte, total))
	report("ConsolidateInto", err)
	report("SaveConsolidated", loaded.SaveConsolidated(filepath.Join(base, "copy.consolidated")))
	_, err = loaded.Memmap(filepath.Join(base, "copy"))
	report("Memmap", err)
	report("SetInPlace", loaded.SetInPlace(tensordict.K("x"), ones))
	report("Set", loaded.Set(tensordict.K("n", "y"), ones))
	report("Guard", memmap.Guard(func() error {
		x, err := loaded.Get(tensordict.K("x"))
		if err != nil {
			return err
		}
		b, err := x.Bytes()
		if err != nil {
			return err
		}
		sum := 0
		for _, c := range b {
			sum += int(c)
		}
		return fmt.Errorf("read the whole leaf (sum %d) without a fault", sum)
	}))
	// Clone and EqScalar return no error: they panic with one, which
	// Guard returns.
	report("Clone", memmap.Guard(func() error { loaded.Clone(); return nil }))
	report("EqScalar", memmap.Guard(func() error { loaded.EqScalar(1); return nil }))
	c2, err := cons.Consolidate() // already consolidated: itself, nothing read
	report("LoadConsolidated Consolidate", err)
	_, err = cons.Select(tensordict.K("x")) // views only, nothing read
	report("LoadConsolidated Select", err)
	_ = c2
	report("LoadConsolidated SaveConsolidated", cons.SaveConsolidated(filepath.Join(base, "copy2.consolidated")))
	// Read into memory at load: nothing faults, Clone (which returns no
	// error and is not guarded) included.
	c3, err := copied.Clone().Consolidate()
	if err == nil && !c3.EqScalar(1).All() {
		err = errors.New("values changed")
	}
	report("InMemory Clone Consolidate", err)
	fmt.Println("survived")
	return exitOK
}

// TestTruncatedFileOps is issue 12 item 13: another process truncates the
// files of a loaded TensorDict. The library's own accesses to the lost
// pages (Consolidate, ConsolidateInto, SaveConsolidated, Memmap,
// SetInPlace, Set on a memory-mapped leaf) return an error, wrapping
// memmap.ErrFault where Go code touched the page and syscall.EFAULT where
// a write(2) did, and memmap.Guard does the same for the caller's own
// reads; the process survives. Before, each of these ended the process
// with SIGBUS. Clone and EqScalar, which return no error, panic with one
// that memmap.Guard returns. A TensorDict loaded with InMemory does not
// depend on the files at all. (MPI transfers, which read the pages in C,
// check them first; see TestSendTruncatedMapping in tensordict.)
func TestTruncatedFileOps(t *testing.T) {
	world := mpitest.Need(t, 1)
	if world.Rank() != 0 {
		return
	}
	if _, err := exec.LookPath("truncate"); err != nil {
		t.Skip("SKIP: needs truncate(1) to shrink the files from another process")
	}
	out, code := runLocalHelper(t, helperTruncOps, t.TempDir())
	t.Logf("child exit %d:\n%s", code, out)
	require.Contains(t, out, "survived", "the process survived every guarded access")
	assert.Equal(t, exitOK, code)
	for _, op := range []string{"Consolidate", "ConsolidateInto", "SetInPlace", "Set", "Guard", "Clone", "EqScalar"} {
		assert.Contains(t, out, op+": fault=true ", "%s reports the fault", op)
	}
	assert.Contains(t, out, "InMemory Clone Consolidate: fault=false efault=false err=<nil>")
	for _, op := range []string{"SaveConsolidated", "Memmap", "LoadConsolidated SaveConsolidated"} {
		assert.Regexp(t, "(?m)^"+op+": (fault=true|fault=false efault=true) ", out, "%s reports an error", op)
	}
}
