// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package test

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/mpitest"
)

// helperBinary copies this test binary to a file named name in a fresh
// directory and returns its path, so that the helper processes started
// from it have a name of their own for pgrep.
func helperBinary(t *testing.T, name string) string {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	src, err := os.Open(self)
	require.NoError(t, err)
	defer src.Close()
	path := filepath.Join(t.TempDir(), name)
	dst, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, err)
	require.NoError(t, dst.Close())
	return path
}

// syncBuffer is a bytes.Buffer that a command writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// job is a helper program started under its own mpirun.
type job struct {
	cmd  *exec.Cmd
	out  syncBuffer // mpirun's own output (and the ranks', merged)
	dir  string     // envDir of the helpers
	logs string     // --output-filename directory
	done chan struct{}
	err  error // cmd.Wait's result, once done is closed
	end  time.Time
}

// needOwnJobs skips a test whose rank 0 starts MPI jobs of its own when the
// test binary itself runs on more than one rank: the nested jobs do not
// depend on the outer launch, so make test runs them once, in the
// single-process run (test-unit), not again under each of mpirun -np 2,
// -np 4, TCP and -race.
func needOwnJobs(t *testing.T, world *group.Group) {
	t.Helper()
	if world.Size() > 1 {
		t.Skipf("starts MPI jobs of its own, which do not depend on this launch of %d ranks: "+
			"they run when the test binary runs alone (go test ./test/, make test-unit)", world.Size())
	}
}

// needOwnJob starts a test that runs one MPI job of its own (see
// needOwnJobs: the test binary then runs alone, as a world of one), and
// gives that job jobLimit and 30 s more.
func needOwnJob(t *testing.T) {
	t.Helper()
	needOwnJobs(t, mpitest.Need(t, 1))
	mpitest.Expect(t, jobLimit+30*time.Second)
}

// startJob starts bin as helper mode on np ranks under mpirun, with the
// helper parameters env (NAME=value) and extra mpirun flags, bounded by
// limit (mpirun --timeout, and a kill of the process group after). It
// skips the test if mpirun is not installed.
func startJob(t *testing.T, bin, mode string, np int, limit time.Duration, flags []string, env ...string) *job {
	t.Helper()
	return startJobIn(t, nil, bin, mode, np, limit, flags, env...)
}

// startJobIn is startJob with mpirun run by the command prefix (such as
// salloc and its arguments), if not empty.
func startJobIn(t *testing.T, prefix []string, bin, mode string, np int, limit time.Duration, flags []string, env ...string) *job {
	t.Helper()
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("mpirun is not installed: apt-get install openmpi-bin (make deps)")
	}
	j := &job{dir: t.TempDir(), done: make(chan struct{})}
	j.logs = filepath.Join(j.dir, "out")
	env = append(env, helperEnv+"="+mode, envDir+"="+j.dir)
	args := []string{"-np", strconv.Itoa(np), "--oversubscribe", "--bind-to", "none",
		"--timeout", strconv.Itoa(int(limit.Seconds())), "--output-filename", j.logs}
	args = append(args, flags...)
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		args = append(args, "-x", name)
	}
	args = append(args, bin)
	if len(prefix) > 0 {
		args = append(append(prefix[1:len(prefix):len(prefix)], mpirun), args...)
		mpirun = prefix[0]
	}
	j.cmd = exec.Command(mpirun, args...)
	j.cmd.Env = mpitest.CleanEnv(append(env, "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")...)
	j.start(t, limit, nil)
	return j
}

// start starts j.cmd in a process group of its own, with its output in
// j.out, and closes j.done when it ends. The group is killed limit + 10 s
// after the start, and at the end of the test if still running; then
// after (if not nil) runs.
func (j *job) start(t *testing.T, limit time.Duration, after func()) {
	t.Helper()
	j.cmd.Stdout, j.cmd.Stderr = &j.out, &j.out
	j.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, j.cmd.Start())
	go func() {
		j.err = j.cmd.Wait()
		j.end = time.Now()
		close(j.done)
	}()
	hard := time.AfterFunc(limit+10*time.Second, func() { _ = syscall.Kill(-j.cmd.Process.Pid, syscall.SIGKILL) })
	t.Cleanup(func() {
		hard.Stop()
		select {
		case <-j.done:
		default:
			_ = syscall.Kill(-j.cmd.Process.Pid, syscall.SIGKILL)
			<-j.done
		}
		if after != nil {
			after()
		}
	})
}

// ranksEnded reports whether every process j's launcher started has
// exited (gone, or a zombie the launcher has not reaped): what tells a
// launcher that hangs after its ranks ended from ranks that hang. Open
// MPI 4.1's mpirun sometimes does, in futex waits, as it aborts a job one
// of whose ranks exited with an error while another was in MPI_Finalize.
func (j *job) ranksEnded() bool {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(j.cmd.Process.Pid) {
			continue
		}
		if f[0] != "Z" && f[0] != "X" {
			return false
		}
	}
	return true
}

// kill kills j's process group and waits for the launcher to end.
func (j *job) kill() {
	_ = syscall.Kill(-j.cmd.Process.Pid, syscall.SIGKILL)
	<-j.done
}

// wait waits at most d for the job to end and reports whether it did.
func (j *job) wait(d time.Duration) bool {
	select {
	case <-j.done:
		return true
	case <-time.After(d):
		return false
	}
}

// rankLog returns what rank r wrote to its stderr so far.
func (j *job) rankLog(r int) string {
	b, _ := os.ReadFile(filepath.Join(j.logs, "1", "rank."+strconv.Itoa(r), "stderr"))
	return string(b)
}

// rankPid returns the pid rank r wrote to envDir, waiting for it until ctx
// ends.
func (j *job) rankPid(ctx context.Context, r int) (int, error) {
	for {
		b, err := os.ReadFile(filepath.Join(j.dir, "rank-"+strconv.Itoa(r)+".pid"))
		if err == nil {
			if pid, err := strconv.Atoi(string(b)); err == nil {
				return pid, nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-j.done:
			return 0, os.ErrNotExist
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// leftovers returns the pids of processes whose command line contains
// bin, waiting up to d for them to go.
func leftovers(bin string, d time.Duration) []string {
	end := time.Now().Add(d)
	for {
		out, _ := exec.Command("pgrep", "-f", bin).Output()
		pids := strings.Fields(string(out))
		if len(pids) == 0 || time.Now().After(end) {
			return pids
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestJobRanksEnded checks ranksEnded on launchers that do not reap their
// children (a shell that execs into sleep): ended when the children are
// zombies, not while one runs.
func TestJobRanksEnded(t *testing.T) {
	for _, c := range []struct {
		script string
		ended  bool
	}{
		{"sleep 0.1 & sleep 0.1 & exec sleep 30", true},
		{"sleep 0.1 & sleep 30 & exec sleep 30", false},
	} {
		j := &job{cmd: exec.Command("sh", "-c", c.script), done: make(chan struct{})}
		j.start(t, time.Minute, nil)
		time.Sleep(time.Second)
		require.Equal(t, c.ended, j.ranksEnded(), "%s", c.script)
		j.kill()
	}
}
