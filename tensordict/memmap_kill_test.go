package tensordict

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/tensor"
)

// The kill test re-executes this test binary with killChildEnv set to a
// directory; init (which runs before TestMain starts MPI) then saves a large
// TensorDict there and waits to be killed.
const killChildEnv = "TDMPI_MEMMAP_KILL_CHILD"

// killTD builds the TensorDict the child saves: generation gen fills leaf i
// with gen*1000+i, so a load can tell an old save from a new one and from a
// mix of both.
func killTD(gen int) *TensorDict {
	td := New(4)
	for i := 0; i < 24; i++ {
		k := K(fmt.Sprintf("g%d", i%4), fmt.Sprintf("leaf %d", i))
		if err := td.Set(k, tensor.Full(tensor.Int32, float64(gen*1000+i), 4, 64<<10)); err != nil {
			panic(err)
		}
	}
	if err := td.SetNonTensor(K("g0", "gen"), gen); err != nil {
		panic(err)
	}
	return td
}

func init() {
	dir := os.Getenv(killChildEnv)
	if dir == "" {
		return
	}
	gen, _ := strconv.Atoi(os.Getenv(killChildEnv + "_GEN"))
	var opts []MemmapOption
	if gen > 1 {
		opts = append(opts, MemmapExistsOK())
	}
	td := killTD(gen)
	fmt.Fprintln(os.Stdout, "ready")
	if _, err := td.Memmap(dir, opts...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(0)
}

// checkKilled loads dir, which a killed Memmap left, and returns the
// generation it holds (0 if it does not load). A directory that loads must
// hold one generation completely, never a mix.
func checkKilled(t *testing.T, dir string, allowed ...int) int {
	t.Helper()
	td, err := LoadMemmap(dir)
	if err != nil {
		return 0
	}
	defer td.Release()
	g, err := td.GetNonTensor(K("g0", "gen"))
	require.NoError(t, err)
	gen := int(g.(int64))
	require.Contains(t, allowed, gen)
	requireSameTD(t, killTD(gen), td)
	return gen
}

func TestMemmapKilledMidway(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills child processes; skipped in short mode")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	// Time one uninterrupted save to spread the kill delays over it.
	start := time.Now()
	probe := filepath.Join(t.TempDir(), "probe")
	m, err := killTD(1).Memmap(probe)
	require.NoError(t, err)
	require.NoError(t, m.Release())
	full := time.Since(start)
	t.Logf("one save of 24 MiB in 24 leaves takes %v", full)

	outcomes := map[string]int{}
	for i, frac := range []float64{0, 0.15, 0.3, 0.5, 0.7, 0.9, 1.2} {
		delay := time.Duration(frac * float64(full))
		for _, gen := range []int{1, 2} {
			dir := filepath.Join(t.TempDir(), fmt.Sprintf("td%d", i))
			if gen == 2 {
				// Overwrite a complete first generation.
				m, err := killTD(1).Memmap(dir)
				require.NoError(t, err)
				require.NoError(t, m.Release())
			}
			cmd := exec.Command(exe, "-test.run=^$")
			cmd.Env = append(os.Environ(), killChildEnv+"="+dir, killChildEnv+"_GEN="+strconv.Itoa(gen))
			out, err := cmd.StdoutPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			buf := make([]byte, 6)
			_, _ = out.Read(buf) // "ready": the child is about to write
			time.Sleep(delay)
			_ = cmd.Process.Signal(syscall.SIGKILL)
			werr := cmd.Wait()
			if ee, ok := werr.(*exec.ExitError); ok && ee.ExitCode() == 2 {
				t.Fatalf("child failed to save: %v", werr)
			}
			allowed := []int{gen}
			if gen == 2 {
				allowed = []int{1, 2}
			}
			got := checkKilled(t, dir, allowed...)
			outcomes[fmt.Sprintf("gen %d written, loads as %d", gen, got)]++
			// Every nested level that loads is whole too.
			for g := 0; g < 4; g++ {
				sub, err := LoadMemmap(dir, SubPath(fmt.Sprintf("g%d", g)))
				if err != nil {
					continue
				}
				want, _ := killTD(1).GetTD(K(fmt.Sprintf("g%d", g)))
				x, _ := sub.Get(want.Keys()[0])
				d, _ := tensor.Data[int32](x)
				assert.Contains(t, []int32{int32(1000 + g), int32(2000 + g)}, d[0])
				assert.Equal(t, d[0], d[len(d)-1])
				sub.Release()
			}
		}
	}
	t.Logf("outcomes: %v", outcomes)
}
