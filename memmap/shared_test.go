package memmap

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/tensor"
)

// writerChildEnv makes the test binary, re-executed by
// TestFromFileSeesOtherProcess, map the named file and write to it.
const writerChildEnv = "TDMPI_MEMMAP_WRITER_CHILD"

func init() {
	path := os.Getenv(writerChildEnv)
	if path == "" {
		return
	}
	err := func() error {
		m, err := FromFile(path, tensor.Int64, []int{8})
		if err != nil {
			return err
		}
		defer Close(m)
		d, err := tensor.Data[int64](m)
		if err != nil {
			return err
		}
		for i := range d {
			d[i] = int64(100 + i)
		}
		return Flush(m)
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestFromFileSeesOtherProcess checks that a shared mapping sees, with no
// reload, what another process writes through its own mapping and flushes.
func TestFromFileSeesOtherProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.memmap")
	mine, err := Zeros(tensor.Int64, path, []int{8})
	require.NoError(t, err)
	defer Close(mine)
	reader, err := FromFile(path, tensor.Int64, []int{8})
	require.NoError(t, err)
	defer Close(reader)

	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), writerChildEnv+"="+path)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "child: %s", out)

	for _, m := range []*tensor.Tensor{mine, reader} {
		d, err := tensor.Data[int64](m)
		require.NoError(t, err)
		assert.Equal(t, []int64{100, 101, 102, 103, 104, 105, 106, 107}, d)
	}
}
