// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpi

import (
	"hash/fnv"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEnvironment(t *testing.T) {
	assert.True(t, Initialized())
	assert.False(t, Finalized())
	_, err := InitThread(ThreadMultiple)
	assert.Error(t, err, "second initialisation")
	_, err = InitThread(ThreadLevel(9))
	assert.ErrorIs(t, err, ErrArg)
	want := map[Family]string{FamilyOpenMPI: "Open MPI", FamilyMPICH: "MPICH"}[Library()]
	require.NotEmpty(t, want, "family %q", Library())
	assert.Contains(t, LibraryVersion(), want, "the library linked is the family built for")
	t0 := Wtime() // Open MPI counts from its first call
	time.Sleep(2 * time.Millisecond)
	assert.Greater(t, Wtime(), t0+0.001)
	assert.GreaterOrEqual(t, World().TagUB(), 32767)
	assert.Equal(t, World().TagUB(), Self().TagUB())
	assert.Equal(t, 0, Self().Rank())
	assert.Equal(t, 1, Self().Size())
	assert.Error(t, Abort(nil, 1), "Abort of nil communicator")
}

func TestThreadLevelString(t *testing.T) {
	for _, tc := range []struct {
		l    ThreadLevel
		want string
	}{
		{ThreadSingle, "MPI_THREAD_SINGLE"},
		{ThreadFunneled, "MPI_THREAD_FUNNELED"},
		{ThreadSerialized, "MPI_THREAD_SERIALIZED"},
		{ThreadMultiple, "MPI_THREAD_MULTIPLE"},
		{ThreadLevel(7), "ThreadLevel(7)"},
	} {
		assert.Equal(t, tc.want, tc.l.String())
	}
	assert.True(t, ThreadSingle < ThreadFunneled && ThreadFunneled < ThreadSerialized && ThreadSerialized < ThreadMultiple)
}

func TestDup(t *testing.T) {
	w := World()
	d, err := w.Dup()
	require.NoError(t, err)
	assert.Equal(t, w.Rank(), d.Rank())
	assert.Equal(t, w.Size(), d.Size())
	assert.Equal(t, w.TagUB(), d.TagUB())
	for r := range w.Size() {
		got, err := w.TranslateRank(r, d)
		require.NoError(t, err)
		assert.Equal(t, r, got)
	}

	// A message on d is invisible on w.
	req, err := Isend(d, []int{42}, d.Rank(), 9)
	require.NoError(t, err)
	ok, _, err := Iprobe(w, w.Rank(), 9)
	require.NoError(t, err)
	assert.False(t, ok, "message of the duplicate seen on World")
	buf := make([]int, 1)
	_, err = Recv(d, buf, d.Rank(), 9)
	require.NoError(t, err)
	assert.Equal(t, 42, buf[0])
	_, err = req.Wait()
	require.NoError(t, err)

	// The duplicate returns errors too.
	err = Send(d, buf, 0, d.TagUB()+1)
	assert.ErrorIs(t, err, ErrTag)

	require.NoError(t, d.Free())
	require.NoError(t, d.Free(), "second Free is a no-op")
	assert.ErrorIs(t, d.Barrier(), ErrComm)
	assert.ErrorIs(t, Send(d, buf, 0, 0), ErrComm)
	assert.PanicsWithValue(t, "mpi: Rank of nil or freed communicator", func() { d.Rank() })
	var nilComm *Comm
	assert.NoError(t, nilComm.Free())
	assert.ErrorIs(t, World().Free(), ErrComm)
	assert.ErrorIs(t, Self().Free(), ErrComm)
	require.NoError(t, World().Barrier(), "World still works")
}

func TestSplit(t *testing.T) {
	w := World()
	r, s := w.Rank(), w.Size()
	// Even and odd ranks, ranked in reverse; the last rank of an odd-sized
	// world (and rank 0 at size 1, 3, ...) tests Undefined when s is odd.
	color := r % 2
	if s%2 == 1 && r == s-1 {
		color = Undefined
	}
	c, err := w.Split(color, -r)
	require.NoError(t, err)
	if color == Undefined {
		assert.Nil(t, c)
	} else {
		require.NotNil(t, c)
		members := []int{}
		for i := color; i < s-s%2; i += 2 {
			members = append(members, i)
		}
		assert.Equal(t, len(members), c.Size())
		// Reverse order by key: the highest world rank is rank 0.
		assert.Equal(t, len(members)-1-r/2, c.Rank())
		got, err := c.TranslateRank(0, w)
		require.NoError(t, err)
		assert.Equal(t, members[len(members)-1], got)
		sum := []int{r}
		require.NoError(t, AllreduceInPlace(c, sum, OpSum))
		want := 0
		for _, m := range members {
			want += m
		}
		assert.Equal(t, want, sum[0])
		require.NoError(t, c.Free())
	}
	_, err = w.Split(-5, 0)
	assert.ErrorIs(t, err, ErrArg)
}

// SplitShared groups the ranks by node: here, by host name, in their
// order in the world.
func TestSplitShared(t *testing.T) {
	w := World()
	host, err := os.Hostname()
	require.NoError(t, err)
	h := fnv.New64a()
	h.Write([]byte(host))
	hosts := make([]uint64, w.Size())
	require.NoError(t, Allgather(w, []uint64{h.Sum64()}, hosts))
	var same []int // the world ranks on this node
	for r, x := range hosts {
		if x == hosts[w.Rank()] {
			same = append(same, r)
		}
	}
	c, err := w.SplitShared()
	require.NoError(t, err)
	require.Equal(t, len(same), c.Size(), "ranks on host %s", host)
	for i, want := range same {
		got, err := c.TranslateRank(i, w)
		require.NoError(t, err)
		assert.Equal(t, want, got, "rank %d on the node", i)
	}
	require.NoError(t, c.Free())
}

func TestCreateGroup(t *testing.T) {
	needRanks(t, 2)
	w := testComm(t)
	r, s := w.Rank(), w.Size()
	// Ranks s-1, 0 in that order; the others do not call.
	ranks := []int{s - 1, 0}
	if r == 0 || r == s-1 {
		c, err := w.CreateGroup(ranks, 7)
		require.NoError(t, err)
		assert.Equal(t, 2, c.Size())
		want := 0
		if r == 0 {
			want = 1
		}
		assert.Equal(t, want, c.Rank())
		for i, wr := range ranks {
			got, err := c.TranslateRank(i, w)
			require.NoError(t, err)
			assert.Equal(t, wr, got)
		}
		v := []float64{float64(r)}
		require.NoError(t, Bcast(c, v, 0)) // from world rank s-1
		assert.Equal(t, float64(s-1), v[0])
		require.NoError(t, c.Free())
	} else {
		_, err := w.CreateGroup(ranks, 7)
		assert.ErrorIs(t, err, ErrGroup, "non-member call")
		got, err := w.TranslateRank(r, Self())
		require.NoError(t, err)
		assert.Equal(t, 0, got)
	}
	if s > 2 && r == 1 {
		got, err := w.TranslateRank(0, Self())
		require.NoError(t, err)
		assert.Equal(t, Undefined, got, "rank 0 of World is not in Self of rank 1")
	}
	for _, bad := range [][]int{nil, {0, 0}, {-1}, {s}} {
		_, err := w.CreateGroup(bad, 0)
		assert.Error(t, err, "ranks %v", bad)
	}
	require.NoError(t, w.Barrier())
}

func TestErrors(t *testing.T) {
	c := World()
	err := Send(c, []int{1}, 99, 0)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "MPI_Send", e.Op)
	assert.ErrorIs(t, err, ErrRank)
	assert.NotErrorIs(t, err, ErrTag)
	assert.True(t, strings.HasPrefix(err.Error(), "mpi: MPI_Send: MPI_ERR_RANK: "), err.Error())

	for _, tc := range []struct {
		name string
		err  error
		want *Error
	}{
		{"negative dest", Send(c, []int{1}, -3, 0), ErrRank},
		{"negative tag", Send(c, []int{1}, 0, -1), ErrTag},
		{"AnyTag send", Send(c, []int{1}, 0, AnyTag), ErrTag},
		{"recv rank", func() error { _, err := Recv(c, []int{1}, 99, 0); return err }(), ErrRank},
		{"isend rank", func() error { _, err := Isend(c, []int{1}, 99, 0); return err }(), ErrRank},
		{"bcast root", Bcast(c, []int{1}, 99), ErrRoot},
		{"nil comm", Send(nil, []int{1}, 0, 0), ErrComm},
		{"band float", Allreduce(c, []float64{1}, []float64{1}, OpBand), ErrOp},
		{"min complex", Allreduce(c, []complex128{1}, []complex128{1}, OpMin), ErrOp},
		{"sum bool", Allreduce(c, []bool{true}, []bool{true}, OpSum), ErrOp},
		{"bad op", Allreduce(c, []int{1}, []int{1}, Op(42)), ErrOp},
		{"length mismatch", Allreduce(c, []int{1}, []int{1, 2}, OpSum), ErrBuffer},
	} {
		assert.ErrorIs(t, tc.err, tc.want, tc.name)
		assert.ErrorAs(t, tc.err, &e, tc.name)
	}

	// An error MPI itself reports: a message longer than the receive buffer.
	s := Self()
	req, err := Isend(s, []int64{1, 2, 3, 4}, 0, 1)
	require.NoError(t, err)
	_, err = Recv(s, make([]int64, 2), 0, 1)
	require.ErrorAs(t, err, &e)
	assert.ErrorIs(t, err, ErrTruncate)
	assert.Equal(t, "MPI_Recv", e.Op)
	// Every family's text starts with the class name (MPICH's own does not).
	assert.Contains(t, err.Error(), "mpi: MPI_Recv: MPI_ERR_TRUNCATE: ")
	_, err = req.Wait()
	require.NoError(t, err)
}

func TestOpString(t *testing.T) {
	assert.Equal(t, "MPI_SUM", OpSum.String())
	assert.Equal(t, "MPI_BXOR", OpBxor.String())
	assert.Equal(t, "Op(-1)", Op(-1).String())
}

func TestLibraryName(t *testing.T) {
	name := LibraryName()
	assert.NotContains(t, name, "\n")
	switch Library() {
	case FamilyOpenMPI:
		assert.Regexp(t, `^Open MPI v\d+\.\d+`, name)
	case FamilyMPICH:
		assert.Regexp(t, `^MPICH \d+\.\d+`, name)
	default:
		t.Fatalf("cgo build of family %q", Library())
	}
}
