// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/internal/torchwire/wirefixture"
	"github.com/tdmpi/tdmpi/mpi"
	"github.com/tdmpi/tdmpi/tensordict"
)

// The two sides of an MPMD job with a torch rank: world rank 0 makes only
// the MPI calls torch's ProcessGroupMPI makes (MPI_Init_thread, the init
// barrier when envTorchBarrier is 1, Isend+Wait / Irecv+Wait on tag 0 of the
// world, MPI_Bcast), replaying every recorded transcript and receiving
// what Go sends back as Python's from_remote_init would; ranks 1 and up are
// Go, started with group.WithTorchPeers. A world collective that torch does
// not make, on either side, leaves the job hanging until mpirun's timeout.
const (
	helperFakeTorch = "faketorch"
	helperGoPeer    = "gopeer"
	envTorchBarrier = "TDMPI_TEST_TORCH_BARRIER"
)

// The helpers are registered by a variable's initializer, which runs
// before main_test.go's init dispatches to them.
var _ = func() bool {
	localHelpers[helperFakeTorch] = runFakeTorch
	localHelpers[helperGoPeer] = runGoPeer
	return true
}()

func TestTorchPeersMPMD(t *testing.T) {
	world := mpitest.Need(t, 1)
	if world.Rank() != 0 {
		return
	}
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("mpirun is not installed: apt-get install openmpi-bin (make deps)")
	}
	self, err := os.Executable()
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		barrier string // what the torch rank does: torch 1.x, or torch 2.x by default
		goEnv   string // TORCH_DIST_INIT_BARRIER as the Go ranks see it
	}{
		{"torch 1.x (init barrier)", "1", ""},
		{"torch 2.x (no init barrier)", "0", "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, mpirun, "--oversubscribe", "--bind-to", "none", "--timeout", "150",
				"-np", "1", "-x", helperEnv+"="+helperFakeTorch, "-x", envTorchBarrier+"="+tc.barrier, self,
				":", "-np", "2", "-x", helperEnv+"="+helperGoPeer, "-x", "TORCH_DIST_INIT_BARRIER="+tc.goEnv, self)
			cmd.Env = mpitest.CleanEnv("OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "the MPMD job failed:\n%s", out)
			assert.Contains(t, string(out), "faketorch: OK")
			assert.Contains(t, string(out), "gopeer world rank 1: OK")
			assert.Contains(t, string(out), "gopeer world rank 2: OK")
		})
	}
}

// runFakeTorch is world rank 0: torch's calls, with recorded payloads.
func runFakeTorch() int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "faketorch: "+format+"\n", args...)
		return exitOpFailed
	}
	if _, err := mpi.InitThread(mpi.ThreadSerialized); err != nil {
		return fail("%v", err)
	}
	if os.Getenv(envTorchBarrier) == "1" {
		if err := mpi.World().Barrier(); err != nil {
			return fail("%v", err)
		}
	}
	cases, err := wirefixture.Load()
	if err != nil {
		return fail("%v", err)
	}
	n := 0
	for _, c := range cases {
		for _, mode := range []string{"p2p", "bcast"} {
			md := c.Modes[mode]
			bcast := mode == "bcast"
			if err := wirefixture.SendAsTorch(md, bcast, 1); err != nil {
				return fail("%s/%s: sending: %v", c.Name, mode, err)
			}
			back, err := wirefixture.RecvAsTorch(1, bcast)
			if err != nil {
				return fail("%s/%s: receiving: %v", c.Name, mode, err)
			}
			if !bytes.Equal(back[2], md.Payload[2]) {
				return fail("%s/%s: the storage Go sent back differs from Python's", c.Name, mode)
			}
			if err := sameMeta(md.Payload[1], back[1]); err != nil {
				return fail("%s/%s: %v", c.Name, mode, err)
			}
			n++
		}
	}
	fmt.Printf("faketorch: OK: %d transfers each way\n", n)
	if err := mpi.Finalize(); err != nil {
		return fail("%v", err)
	}
	return exitOK
}

// sameMeta compares two metadata pickles, dimension names aside.
func sameMeta(want, got []byte) error {
	a, err := wirefixture.PlainMeta(want)
	if err != nil {
		return err
	}
	b, err := wirefixture.PlainMeta(got)
	if err != nil {
		return err
	}
	if !reflect.DeepEqual(a, b) {
		return fmt.Errorf("the metadata Go sent back differs from Python's:\n%v\n%v", a, b)
	}
	return nil
}

// runGoPeer is a Go rank of the job: it receives every transfer, sends it
// back, and uses its own group for Go-to-Go traffic.
func runGoPeer() int {
	g, err := group.Init(group.WithTorchPeers())
	if err != nil {
		fmt.Fprintf(os.Stderr, "gopeer: %v\n", err)
		return exitSetup
	}
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "gopeer world rank %d: "+format+"\n", append([]any{g.Rank()}, args...)...)
		return exitOpFailed
	}
	gg := g.GoGroup()
	if gg == nil || gg.Size() != g.Size()-1 || !g.TorchPeers() {
		return fail("GoGroup is %v, want the %d Go ranks", gg, g.Size()-1)
	}
	if wr, err := gg.WorldRank(0); err != nil || wr != 1 {
		return fail("GoGroup rank 0 is world rank %d (%v), want 1", wr, err)
	}
	cases, err := wirefixture.Load()
	if err != nil {
		return fail("%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, c := range cases {
		for _, mode := range []string{"p2p", "bcast"} {
			opts := []tensordict.RemoteOption{tensordict.WithTorch(), tensordict.WithContext(ctx)}
			if mode == "bcast" {
				opts = append(opts, tensordict.WithBroadcast())
			} else if g.Rank() != 1 {
				continue
			}
			td, err := tensordict.FromRemoteInit(0, opts...)
			if err != nil {
				return fail("%s/%s: %v", c.Name, mode, err)
			}
			if g.Rank() == 1 {
				err = td.InitRemote(0, opts...)
			} else {
				_, err = tensordict.FromRemoteInit(1, opts...)
			}
			if err != nil {
				return fail("%s/%s back: %v", c.Name, mode, err)
			}
		}
	}
	// Go-to-Go on the Go ranks' own group, with tdmpi's own protocol.
	if gg.Rank() == 0 {
		td := tensordict.New(2)
		if err := td.SetNonTensor(tensordict.K("hello"), "go"); err != nil {
			return fail("%v", err)
		}
		err = td.InitRemote(1, tensordict.WithGroup(gg))
	} else if gg.Rank() == 1 {
		var td *tensordict.TensorDict
		if td, err = tensordict.FromRemoteInit(0, tensordict.WithGroup(gg), tensordict.WithContext(ctx)); err == nil {
			if v, _ := td.GetNonTensor(tensordict.K("hello")); v != "go" {
				err = fmt.Errorf("Go-to-Go: got %v", v)
			}
		}
	}
	if err != nil {
		return fail("%v", err)
	}
	if err := gg.Barrier(); err != nil {
		return fail("%v", err)
	}
	fmt.Printf("gopeer world rank %d: OK\n", g.Rank())
	if err := group.Finalize(); err != nil {
		return fail("%v", err)
	}
	return exitOK
}
