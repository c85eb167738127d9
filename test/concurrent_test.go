// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package test

// This file's name sorts before main_test.go so that its init registers
// the helpers before main_test.go's init dispatches to them.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/tensor"
	"github.com/tdmpi/tdmpi/tensordict"
)

// Helper modes of the concurrent-memmap scenarios (issue 12 item 6).
const (
	helperMemmapWriter = "memmap-writer" // Memmap(envDir/saved, MemmapExistsOK()) of value envValue, for envSeconds
	helperMemmapReader = "memmap-reader" // LoadMemmap(envDir/saved) in a loop for envSeconds, counting mixed loads
)

// Parameters of the concurrent-memmap helpers.
const (
	envValue   = "TDMPI_TEST_VALUE"
	envSeconds = "TDMPI_TEST_SECONDS"
)

func init() {
	localHelpers[helperMemmapWriter] = runMemmapWriter
	localHelpers[helperMemmapReader] = runMemmapReader
}

// concurrentTD is what a writer saves: every element of every leaf is v,
// in leaves of several dtypes and two nesting levels, so that a load
// mixing two saves shows as leaves (or elements) with different values.
func concurrentTD(v float64) (*tensordict.TensorDict, error) {
	td := tensordict.New(4)
	for i, k := range []tensordict.Key{
		tensordict.K("a"), tensordict.K("b"), tensordict.K("n", "c"), tensordict.K("n", "d"),
		tensordict.K("n", "m", "e"), tensordict.K("f"), tensordict.K("g"), tensordict.K("n", "h"),
	} {
		dt := []tensor.DType{tensor.Float32, tensor.Int64, tensor.Float64, tensor.Int32}[i%4]
		if err := td.Set(k, tensor.Full(dt, v, 4, 2048)); err != nil {
			return nil, err
		}
	}
	return td, nil
}

// values returns the distinct element values of td's leaves.
func values(td *tensordict.TensorDict) (map[float64]int, error) {
	seen := map[float64]int{}
	for _, it := range td.Items(tensordict.IncludeNested(), tensordict.LeavesOnly()) {
		f := it.Tensor.To(tensor.Float64)
		d, err := tensor.Data[float64](f)
		if err != nil {
			return nil, err
		}
		for _, x := range d {
			seen[x]++
		}
	}
	return seen, nil
}

func helperSeconds() time.Duration {
	s, _ := strconv.ParseFloat(os.Getenv(envSeconds), 64)
	return time.Duration(s * float64(time.Second))
}

// runMemmapWriter saves its TensorDict over envDir/saved again and again.
func runMemmapWriter() int {
	v, err := strconv.ParseFloat(os.Getenv(envValue), 64)
	if err != nil {
		fmt.Println("setup:", err)
		return exitSetup
	}
	td, err := concurrentTD(v)
	if err != nil {
		fmt.Println("setup:", err)
		return exitSetup
	}
	dir := filepath.Join(os.Getenv(envDir), "saved")
	saves, fails := 0, 0
	for end := time.Now().Add(helperSeconds()); time.Now().Before(end); {
		out, err := td.Memmap(dir, tensordict.MemmapExistsOK(), tensordict.MemmapNoSync())
		if err != nil {
			fails++
			if fails <= 3 {
				fmt.Println("Memmap:", err)
			}
			continue
		}
		saves++
		_ = out.Release()
	}
	fmt.Printf("writer %v: saves=%d failed=%d\n", v, saves, fails)
	return exitOK
}

// runMemmapReader loads envDir/saved again and again and counts the loads
// whose leaves hold more than one writer's value.
func runMemmapReader() int {
	dir := filepath.Join(os.Getenv(envDir), "saved")
	loads, mixed, fails := 0, 0, 0
	for end := time.Now().Add(helperSeconds()); time.Now().Before(end); {
		td, err := tensordict.LoadMemmap(dir)
		if err != nil {
			fails++
			if fails <= 3 {
				fmt.Println("LoadMemmap:", err)
			}
			continue
		}
		loads++
		seen, err := values(td)
		if err != nil {
			fmt.Println("values:", err)
			return exitOpFailed
		}
		if len(seen) != 1 {
			mixed++
			if mixed <= 3 {
				fmt.Printf("mixed load: values %v\n", seen)
			}
		}
		_ = td.Release()
	}
	fmt.Printf("reader: loads=%d mixed=%d failed=%d\n", loads, mixed, fails)
	return exitOK
}

// startLocalHelper starts this test binary as helper mode, without MPI,
// with envDir=dir and the extra environment env. wait returns its combined
// output and exit code (128 + the signal's number if a signal ended it),
// and fails the test if the helper runs longer than limit.
func startLocalHelper(t *testing.T, mode, dir string, limit time.Duration, env ...string) (wait func() (string, int)) {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(self)
	cmd.Env = mpitest.CleanEnv(append([]string{helperEnv + "=" + mode, envDir + "=" + dir}, env...)...)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return func() (string, int) {
		t.Helper()
		var err error
		select {
		case err = <-done:
		case <-time.After(limit):
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("helper %s still running after %v:\n%s", mode, limit, out.String())
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				return out.String(), 128 + int(ws.Signal())
			}
			return out.String(), ee.ExitCode()
		}
		require.NoError(t, err, "helper %s", mode)
		return out.String(), 0
	}
}

var (
	readerLine = regexp.MustCompile(`reader: loads=(\d+) mixed=(\d+) failed=(\d+)`)
	writerLine = regexp.MustCompile(`writer (\d+): saves=(\d+) failed=(\d+)`)
)

// TestConcurrentMemmap is issue 12 item 6: two processes saving different
// TensorDicts into one directory with MemmapExistsOK while a third loads
// it. Before the directory lock, loads mixed the two saves (about 1 in
// 500-1500 loads) and concurrent saves could leave a mixed directory, all
// with nil errors. Now the saves take turns and every load, and the
// directory left at the end, holds exactly one writer's values.
func TestConcurrentMemmap(t *testing.T) {
	world := mpitest.Need(t, 1)
	if world.Rank() != 0 {
		return // one set of processes is enough; the others wait to agree
	}
	const seconds = "5"
	dir := t.TempDir()
	first, err := concurrentTD(0)
	require.NoError(t, err)
	_, err = first.Memmap(filepath.Join(dir, "saved"))
	require.NoError(t, err)

	waits := []func() (string, int){
		startLocalHelper(t, helperMemmapWriter, dir, time.Minute, envValue+"=1", envSeconds+"="+seconds),
		startLocalHelper(t, helperMemmapWriter, dir, time.Minute, envValue+"=2", envSeconds+"="+seconds),
		startLocalHelper(t, helperMemmapReader, dir, time.Minute, envSeconds+"="+seconds),
	}
	var all bytes.Buffer
	for _, w := range waits {
		out, code := w()
		all.WriteString(out)
		assert.Equal(t, exitOK, code, "helper output:\n%s", out)
	}
	t.Logf("helpers:\n%s", all.String())

	r := readerLine.FindStringSubmatch(all.String())
	require.NotNil(t, r, "no reader summary")
	loads, _ := strconv.Atoi(r[1])
	assert.Positive(t, loads, "the reader loaded")
	assert.Equal(t, "0", r[2], "loads mixing two saves")
	assert.Equal(t, "0", r[3], "failed loads")
	ws := writerLine.FindAllStringSubmatch(all.String(), -1)
	require.Len(t, ws, 2)
	for _, w := range ws {
		assert.NotEqual(t, "0", w[2], "writer %s saved", w[1])
		assert.Equal(t, "0", w[3], "failed saves of writer %s", w[1])
	}

	final, err := tensordict.LoadMemmap(filepath.Join(dir, "saved"))
	require.NoError(t, err)
	seen, err := values(final)
	require.NoError(t, err)
	assert.Len(t, seen, 1, "the directory left holds one save: %v", seen)
}
