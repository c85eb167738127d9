// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/log"
	"github.com/tdmpi/tdmpi/internal/mpix"
	"github.com/tdmpi/tdmpi/internal/proto"
	"github.com/tdmpi/tdmpi/internal/wire"
	"github.com/tdmpi/tdmpi/internal/xfer"
	"github.com/tdmpi/tdmpi/mpi"
	"github.com/tdmpi/tdmpi/tensor"
	"github.com/tdmpi/tdmpi/tensordict"
)

// Bounds of TestReceiveStallMidPayload.
const (
	stallMidBytes    = 64 << 20               // the payload, far above every eager limit
	stallMidFrame    = 16 << 20               // the header message of case "header" (the default metadata limit)
	stallMidDeadline = time.Second            // rank 1's WithContext deadline
	stallMidPause    = 2 * time.Second        // how long rank 0 makes no MPI call
	stallMidMargin   = 500 * time.Millisecond // beyond the deadline, for a loaded machine
	stallMidFill     = 7                      // every payload byte rank 0 sends
	stallMidDrain    = 20 * time.Second       // how long rank 1 waits for an abandoned receive to complete
)

// stallMidCases are the FromRemoteInit receives of runStallMid's first
// part, in order: into memory the package allocates, into a WithMemmap
// file, into a WithAllocator storage, and one whose header message itself
// (stallMidFrame bytes, as a header with a large metadata) stalls.
var stallMidCases = []string{"heap", "memmap", "allocator", "header"}

// stallInitResult is what rank 1 saw in one of stallMidCases.
type stallInitResult struct {
	Case      string
	Err       string   // FromRemoteInit's error
	Ms        float64  // its duration
	Abandoned bool     // the error wraps tensordict.ErrReceiveAbandoned
	Deadline  bool     // and context.DeadlineExceeded
	InFlight  int      // mpix.InFlight just after the error
	DrainedMs float64  // from the error until mpix.InFlight was 0 (-1: never)
	Left      []string // memmap: the files left in the WithMemmap directory after the error
	Written   bool     // allocator: the storage held the sender's bytes once the receive completed
}

// stallMidResult is what rank 1 of helperStallMid writes to envDir/result.
type stallMidResult struct {
	Init []stallInitResult

	// A Recv into a TensorDict (the sender's ISend stalls), and a second
	// Recv into it, which must be refused at once.
	Recv, Again         string
	RecvMs, AgainMs     float64
	RecvAbandoned       bool
	RecvDeadline        bool
	AgainAbandoned      bool
	RecvDrainedMs       float64
	RecvInFlightAtError int
}

// runStallMid: for each of stallMidCases, rank 0, a crafted InitRemote
// sender, posts the header and a stallMidBytes payload chunk (MPI_Isend;
// case "header": only a header message of stallMidFrame bytes), then
// makes no MPI call for stallMidPause, as a sender whose link died
// mid-payload: over TCP, where only the sender's progress moves a
// rendezvous message's data, the receiver has matched the message and
// waits for its bytes (rank 0 first trickles the start of it out, so that
// it is matched). Rank 1 receives with a stallMidDeadline WithContext,
// then waits for the abandoned receive to complete once rank 0 resumes
// (mpix.InFlight back to 0). It writes what it saw to envDir/result. Both
// then meet in a barrier, run stallMidRecv, and finalize (which refuses
// while a receive is in flight).
func runStallMid() int {
	g, code := startRank()
	if g == nil {
		return code
	}
	// Rank 0's messages are made before the ranks meet: rank 1's deadline
	// covers the wait for the header, and writing 64 MiB of new memory
	// once took 1.5 s on this project's VM (a fresh-clone make test).
	var payload, bigHeader []byte
	if g.Rank() == 0 {
		payload = bytes.Repeat([]byte{stallMidFill}, stallMidBytes)
		bigHeader = bytes.Repeat([]byte{0}, stallMidFrame)
	}
	// Connect the ranks first (TCP connects lazily, with both sides'
	// progress), so that rank 0's sends leave at once.
	if err := g.Barrier(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitSetup
	}
	var res stallMidResult
	for _, name := range stallMidCases {
		var code int
		if g.Rank() == 0 {
			code = stallInitSend(g, name, payload, bigHeader)
		} else {
			var r stallInitResult
			r, code = stallInitRecv(g, name)
			res.Init = append(res.Init, r)
		}
		if code != exitOK {
			return code
		}
		if err := g.Barrier(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return exitOpFailed
		}
	}
	if g.Rank() == 1 {
		b, _ := json.Marshal(res)
		if err := os.WriteFile(filepath.Join(os.Getenv(envDir), "result"), b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return exitSetup
		}
	}
	if code := stallMidRecv(g); code != exitOK {
		return code
	}
	if err := g.Barrier(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitOpFailed
	}
	if err := group.Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitOpFailed
	}
	return exitOK
}

// stallInitSend is rank 0's side of case name of runStallMid: payload
// (stallMidBytes of stallMidFill) follows the header of the storage cases;
// bigHeader (stallMidFrame bytes) is case "header"'s message. Both are
// free again when it returns.
func stallInitSend(g *group.Group, name string, payload, bigHeader []byte) int {
	c := proto.LibComm(g)
	var reqs []*mpi.Request
	post := func(b []byte, tag int) bool {
		r, err := mpi.Isend(c, b, 1, tag)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return false
		}
		reqs = append(reqs, r)
		return true
	}
	if name == "header" {
		// Never parsed: the receive is abandoned before its end arrives.
		if !post(bigHeader, xfer.InitHeaderTag) {
			return exitOpFailed
		}
	} else {
		h := wire.Header{Kind: wire.KindInit, Flags: wire.FlagConsolidated, Leaves: 1,
			Total: stallMidBytes, Chunk: wire.MaxChunk, PayloadTag: proto.PayloadTag(g)}
		frame := wire.AppendFrame(nil, &h, "", hostileMeta("torch.uint8", "["+strconv.Itoa(stallMidBytes)+"]", 0, stallMidBytes), nil)
		if !post(frame, xfer.InitHeaderTag) || !post(payload, h.PayloadTag) {
			return exitOpFailed
		}
	}
	// Trickle the payload out (one MPI_Test every 20 ms, each moving a
	// few socket buffers of 64 KiB), so that rank 1 matches it and is
	// receiving it when its deadline passes; then stall. The header
	// message alone gets no test: its first fragment, which the
	// receiver's probe matches, leaves as it is posted, and the rest
	// would move too fast (the receiver spinning in a blocking receive
	// took it whole from one MPI_Test of the sender).
	for t0 := time.Now(); time.Since(t0) < stallMidDeadline+stallMidMargin; time.Sleep(20 * time.Millisecond) {
		if name == "header" {
			continue
		}
		if _, err := xfer.TestAll(reqs); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return exitOpFailed
		}
	}
	log.Logger().Info().Str("case", name).Msg("stalling")
	time.Sleep(stallMidPause)
	if err := mpi.WaitAll(reqs...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitOpFailed
	}
	log.Logger().Info().Str("case", name).Msg("sent")
	return exitOK
}

// stallInitRecv is rank 1's side of case name of runStallMid.
func stallInitRecv(g *group.Group, name string) (stallInitResult, int) {
	r := stallInitResult{Case: name, DrainedMs: -1}
	ctx, cancel := context.WithTimeout(context.Background(), stallMidDeadline)
	defer cancel()
	opts := []tensordict.RemoteOption{tensordict.WithContext(ctx)}
	prefix := filepath.Join(os.Getenv(envDir), "memmap")
	var mine []byte // the allocator's storage
	switch name {
	case "memmap":
		opts = append(opts, tensordict.WithMemmap(prefix))
	case "allocator":
		opts = append(opts, tensordict.WithAllocator(func(n int) (*tensor.Storage, error) {
			mine = make([]byte, n)
			return tensor.StorageOf(mine), nil
		}))
	}
	start := time.Now()
	_, err := tensordict.FromRemoteInit(0, opts...)
	end := time.Now()
	r.Ms = float64(end.Sub(start).Microseconds()) / 1000
	if err != nil {
		r.Err = err.Error()
		r.Abandoned = errors.Is(err, tensordict.ErrReceiveAbandoned)
		r.Deadline = errors.Is(err, context.DeadlineExceeded)
	}
	r.InFlight = mpix.InFlight()
	if name == "memmap" {
		entries, _ := os.ReadDir(prefix)
		for _, e := range entries {
			r.Left = append(r.Left, e.Name())
		}
	}
	if !r.Abandoned && name != "header" {
		// Take the payload anyway, or rank 0 never completes its send.
		if m, st, err := mpi.Mprobe(proto.LibComm(g), 0, mpi.AnyTag); err == nil {
			_ = xfer.Discard(m, st.Bytes(), nil)
		}
	}
	for limit := time.Now().Add(stallMidDrain); time.Now().Before(limit); time.Sleep(10 * time.Millisecond) {
		if mpix.InFlight() == 0 {
			r.DrainedMs = float64(time.Since(end).Microseconds()) / 1000
			break
		}
	}
	if n := len(mine); n > 0 && r.DrainedMs >= 0 {
		r.Written = mine[0] == stallMidFill && mine[n/2] == stallMidFill && mine[n-1] == stallMidFill
	}
	return r, exitOK
}

// stallMidRecv is runStallMid's second part: rank 0 ISends a TensorDict
// with one stallMidBytes leaf, trickles it out and stalls as before; rank
// 1 Recvs into a TensorDict of the same structure with a deadline, then
// tries a second Recv into it, and adds what it saw to envDir/result.
func stallMidRecv(g *group.Group) int {
	td := tensordict.New()
	if err := td.Set(tensordict.K("x"), tensor.Zeros(tensor.Uint8, stallMidBytes)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitSetup
	}
	if g.Rank() == 0 {
		p, err := td.ISend(1)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return exitOpFailed
		}
		// An Iprobe drives MPI's progress as a Test does.
		for t0 := time.Now(); time.Since(t0) < stallMidDeadline+stallMidMargin; time.Sleep(20 * time.Millisecond) {
			if _, _, err := mpi.Iprobe(proto.LibComm(g), 1, 0); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return exitOpFailed
			}
		}
		time.Sleep(stallMidPause)
		if err := p.Wait(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return exitOpFailed
		}
		return exitOK
	}
	path := filepath.Join(os.Getenv(envDir), "result")
	var r stallMidResult
	if b, err := os.ReadFile(path); err != nil || json.Unmarshal(b, &r) != nil {
		fmt.Fprintln(os.Stderr, "stallmid: the first part's result is unreadable")
		return exitSetup
	}
	recvWithin := func(d time.Duration) (string, float64, error) {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		start := time.Now()
		_, err := td.Recv(0, tensordict.WithContext(ctx))
		ms := float64(time.Since(start).Microseconds()) / 1000
		if err == nil {
			return "", ms, nil
		}
		return err.Error(), ms, err
	}
	var err error
	r.Recv, r.RecvMs, err = recvWithin(stallMidDeadline)
	end := time.Now()
	r.RecvAbandoned = errors.Is(err, tensordict.ErrReceiveAbandoned)
	r.RecvDeadline = errors.Is(err, context.DeadlineExceeded)
	r.RecvInFlightAtError = mpix.InFlight()
	r.Again, r.AgainMs, err = recvWithin(stallMidDeadline)
	r.AgainAbandoned = errors.Is(err, tensordict.ErrReceiveAbandoned)
	r.RecvDrainedMs = -1
	for limit := time.Now().Add(stallMidDrain); time.Now().Before(limit); time.Sleep(10 * time.Millisecond) {
		if mpix.InFlight() == 0 {
			r.RecvDrainedMs = float64(time.Since(end).Microseconds()) / 1000
			break
		}
	}
	b, _ := json.Marshal(r)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitSetup
	}
	return exitOK
}

// TestReceiveStallMidPayload: the sender of an InitRemote stalls in the
// middle of its payload, a single 64 MiB message that the receiver has
// already matched (the single-node form of a link that dies mid-transfer;
// TestClusterLinkDown has the real one). The job runs over TCP (btl
// tcp,self): shared memory would let the receiver copy the message
// without the sender. In each of stallMidCases, rank 1's FromRemoteInit
// must return within its deadline, with an error wrapping
// ErrReceiveAbandoned and the context's error, and the abandoned receive
// completes once the sender resumes: into memory the package allocated,
// into a WithMemmap file (removed by the error, its mapping kept for MPI:
// the process survives MPI's writes), into a WithAllocator storage (which
// MPI then fills), and in the header message itself. Then the same for a
// Recv into a TensorDict (the sender's ISend stalls), whose next Recv
// must be refused at once with an error wrapping ErrReceiveAbandoned; the
// job ends cleanly.
func TestReceiveStallMidPayload(t *testing.T) {
	needOwnJob(t)
	bin := helperBinary(t, "tdmpi-stallmid")
	flags := []string{"--mca", "btl", "tcp,self", "--mca", "btl_tcp_sndbuf", "65536", "--mca", "btl_tcp_rcvbuf", "65536"}
	j := startJob(t, bin, helperStallMid, 2, jobLimit, flags, "TDMPI_LOG=info")
	require.True(t, j.wait(jobLimit+20*time.Second), "the job did not end; mpirun:\n%s", j.out.String())
	b, err := os.ReadFile(filepath.Join(j.dir, "result"))
	require.NoError(t, err, "rank 1 wrote no result; mpirun:\n%s\nrank 0:\n%s\nrank 1:\n%s", j.out.String(), j.rankLog(0), j.rankLog(1))
	var r stallMidResult
	require.NoError(t, json.Unmarshal(b, &r))
	require.Len(t, r.Init, len(stallMidCases))
	for _, c := range r.Init {
		t.Logf("rank 1, %s: FromRemoteInit returned after %.1f ms: %s; in flight %d, all complete %.0f ms later", c.Case, c.Ms, clip(c.Err), c.InFlight, c.DrainedMs)
		require.NotEmpty(t, c.Err, "%s: FromRemoteInit succeeded from a stalled sender", c.Case)
		assert.True(t, c.Abandoned, "%s: the error should wrap ErrReceiveAbandoned", c.Case)
		assert.True(t, c.Deadline, "%s: the error should wrap context.DeadlineExceeded", c.Case)
		assert.Less(t, c.Ms, float64((stallMidDeadline + stallMidMargin).Milliseconds()), "%s: FromRemoteInit should return by its deadline", c.Case)
		assert.Equal(t, 1, c.InFlight, "%s: the abandoned receive is in flight", c.Case)
		assert.GreaterOrEqual(t, c.DrainedMs, 0.0, "%s: the abandoned receive never completed after the sender resumed", c.Case)
		switch c.Case {
		case "memmap":
			assert.Empty(t, c.Left, "the abandoned WithMemmap receive's file should be removed")
		case "allocator":
			assert.True(t, c.Written, "MPI should have completed the abandoned receive into the allocator's storage")
		}
	}
	t.Logf("rank 1: Recv returned after %.1f ms: %s; in flight %d, all complete %.0f ms later; the next Recv into the TensorDict, after %.1f ms: %s",
		r.RecvMs, clip(r.Recv), r.RecvInFlightAtError, r.RecvDrainedMs, r.AgainMs, clip(r.Again))
	assert.True(t, r.RecvAbandoned, "Recv's error should wrap ErrReceiveAbandoned: %s", r.Recv)
	assert.True(t, r.RecvDeadline, "Recv's error should wrap context.DeadlineExceeded")
	assert.Less(t, r.RecvMs, float64((stallMidDeadline + stallMidMargin).Milliseconds()), "Recv should return by its deadline")
	assert.Equal(t, 1, r.RecvInFlightAtError, "the abandoned receive is in flight")
	assert.True(t, r.AgainAbandoned, "a Recv into a TensorDict MPI may still write should be refused: %s", r.Again)
	assert.Less(t, r.AgainMs, float64(stallMidMargin.Milliseconds()), "the refusal should be immediate")
	assert.GreaterOrEqual(t, r.RecvDrainedMs, 0.0, "the abandoned Recv never completed after the sender resumed")
	assert.NoError(t, j.err, "the job; mpirun:\n%s\nrank 0:\n%s\nrank 1:\n%s", j.out.String(), j.rankLog(0), j.rankLog(1))
	assert.Equal(t, len(stallMidCases), strings.Count(j.rankLog(0), `"message":"sent"`))
}
