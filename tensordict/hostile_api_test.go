package tensordict

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/internal/memmapdir"
	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/memmap"
	"github.com/tdmpi/tdmpi/tensor"
)

// The tests below are issue 12's items 14, 16 and 18: calls a hostile or
// careless user makes, which must give errors (or documented zero values)
// instead of panics, silent no-ops or writes into the wrong file.

// TestNilTensorDict: every method on a nil *TensorDict returns an error
// wrapping ErrNil or a zero value, never a panic.
func TestNilTensorDict(t *testing.T) {
	var td *TensorDict
	x := tensor.Ones(tensor.Float32, 2)
	errs := []struct {
		name string
		call func() error
	}{
		{"Get", func() error { _, err := td.Get(K("a")); return err }},
		{"GetTD", func() error { _, err := td.GetTD(K("a")); return err }},
		{"GetNonTensor", func() error { _, err := td.GetNonTensor(K("a")); return err }},
		{"Set", func() error { return td.Set(K("a"), x) }},
		{"SetTD", func() error { return td.SetTD(K("a"), New()) }},
		{"SetNonTensor", func() error { return td.SetNonTensor(K("a"), 1) }},
		{"SetInPlace", func() error { return td.SetInPlace(K("a"), x) }},
		{"Del", func() error { return td.Del(K("a")) }},
		{"SetBatchSize", func() error { return td.SetBatchSize(2) }},
		{"Consolidate", func() error { _, err := td.Consolidate(); return err }},
		{"ConsolidateInto", func() error { _, err := td.ConsolidateInto(nil); return err }},
		{"Memmap", func() error { _, err := td.Memmap(t.TempDir()); return err }},
		{"Memmap anonymous", func() error { _, err := td.Memmap(""); return err }},
		{"MemmapInPlace", func() error { _, err := td.MemmapInPlace(t.TempDir()); return err }},
		{"MemmapLike", func() error { _, err := td.MemmapLike(t.TempDir()); return err }},
		{"SaveConsolidated", func() error { return td.SaveConsolidated(filepath.Join(t.TempDir(), "f")) }},
		{"Layout", func() error { _, _, err := Layout(td); return err }},
		{"DiffStructure(nil, nil)", func() error { return DiffStructure(nil, nil) }},
		{"DiffStructure(td, nil)", func() error { return DiffStructure(New(), nil) }},
		{"DiffStructureMeta", func() error { return DiffStructureMeta(nil, []byte("{}")) }},
		{"Apply", func() error { _, err := td.Apply(nil); return err }},
	}
	for _, c := range errs {
		t.Run(c.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = c.call() })
			require.ErrorIs(t, err, ErrNil)
		})
	}
	require.NotPanics(t, func() {
		assert.Zero(t, td.Len())
		assert.Empty(t, td.Keys())
		assert.Empty(t, td.Keys(IncludeNested(), LeavesOnly()))
		assert.Empty(t, td.Items())
		assert.Nil(t, td.BatchSize())
		assert.Zero(t, td.BatchDims())
		assert.Zero(t, td.Numel())
		assert.False(t, td.Has(K("a")))
		assert.Nil(t, td.Clone())
		assert.Nil(t, td.Contiguous())
		assert.NoError(t, td.Release())
		assert.Zero(t, td.Signature())
		assert.False(t, td.IsConsolidated())
		assert.Nil(t, td.ConsolidatedStorage())
		assert.False(t, td.IsMemmap())
		assert.False(t, td.IsLocked())
		assert.Nil(t, td.Lock())
		assert.Nil(t, td.Unlock())
		assert.Empty(t, td.SavedPath())
		assert.Empty(t, td.ClassName())
		assert.Equal(t, "<nil>", fmt.Sprint(td))
	})
	_, err := td.ConsolidatedMetadata()
	require.Error(t, err)
}

// TestInvalidLimitOptions: options that would refuse everything are
// errors of the call, naming the option.
func TestInvalidLimitOptions(t *testing.T) {
	c, err := alignTD(t).Consolidate()
	require.NoError(t, err)
	meta, err := c.ConsolidatedMetadata()
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "td")
	require.NoError(t, c.SaveConsolidated(file))
	for _, tt := range []struct {
		opt  ConsolidatedOption
		name string
	}{
		{WithMaxDepth(0), "WithMaxDepth(0)"},
		{WithMaxDepth(-5), "WithMaxDepth(-5)"},
		{WithMaxEntries(0), "WithMaxEntries(0)"},
		{WithMaxMetadataBytes(-1), "WithMaxMetadataBytes(-1)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FromConsolidated(c.ConsolidatedStorage(), meta, tt.opt)
			require.ErrorContains(t, err, tt.name)
			_, err = LoadConsolidated(file, tt.opt)
			require.ErrorContains(t, err, tt.name)
		})
	}
	got, err := FromConsolidated(c.ConsolidatedStorage(), meta, WithMaxDepth(10), WithMaxEntries(10), WithMaxMetadataBytes(1<<20))
	require.NoError(t, err, "positive limits that fit")
	requireAlignValues(t, got)

	for _, n := range []int{0, -1} {
		_, err := alignTD(t).Memmap(filepath.Join(t.TempDir(), "m"), MemmapWorkers(n))
		require.ErrorContains(t, err, fmt.Sprintf("MemmapWorkers(%d)", n))
		_, err = alignTD(t).Memmap("", MemmapWorkers(n))
		require.ErrorContains(t, err, fmt.Sprintf("MemmapWorkers(%d)", n))
	}
	_, err = alignTD(t).Memmap(filepath.Join(t.TempDir(), "m"), MemmapWorkers(1))
	require.NoError(t, err)
}

// TestLoadMemmapEmptyPrefix: Memmap("") is anonymous, so LoadMemmap("")
// does not read the working directory.
func TestLoadMemmapEmptyPrefix(t *testing.T) {
	wd, err := os.Getwd()
	require.NoError(t, err)
	dir := t.TempDir()
	_, err = alignTD(t).Memmap(dir)
	require.NoError(t, err)
	require.NoError(t, os.Chdir(dir))
	defer os.Chdir(wd)
	_, err = LoadMemmap("")
	require.ErrorContains(t, err, "empty prefix")
	got, err := LoadMemmap(".")
	require.NoError(t, err, "the working directory is still reachable by name")
	requireSameTD(t, alignTD(t), got)
}

// TestZeroPending: a Pending that no ISend or IRecv returned.
func TestZeroPending(t *testing.T) {
	var nilP *Pending
	for _, p := range []*Pending{nilP, {}} {
		var err error
		require.NotPanics(t, func() { err = p.Wait() })
		require.ErrorContains(t, err, "not a Pending returned by ISend or IRecv")
		done, err := p.Test()
		assert.True(t, done)
		require.Error(t, err)
		assert.Zero(t, p.Tag())
	}
}

// TestFreedSubgroup: calls on a freed subgroup wrap group.ErrFreed.
func TestFreedSubgroup(t *testing.T) {
	world := mpitest.Need(t, 1)
	ranks := make([]int, world.Size())
	for i := range ranks {
		ranks[i] = i
	}
	sub, err := world.New(ranks)
	require.NoError(t, err)
	require.NoError(t, sub.Free())
	td := alignTD(t)
	peer := (world.Rank() + 1) % world.Size()
	calls := []struct {
		name string
		call func() error
	}{
		{"Send", func() error { return td.Send(peer, WithGroup(sub)) }},
		{"Recv", func() error { _, err := td.Recv(peer, WithGroup(sub)); return err }},
		{"ISend", func() error { _, err := td.ISend(peer, WithGroup(sub)); return err }},
		{"InitRemote", func() error { return td.InitRemote(peer, WithGroup(sub)) }},
		{"FromRemoteInit", func() error { _, err := FromRemoteInit(peer, WithGroup(sub)); return err }},
		{"Broadcast", func() error { _, err := td.Broadcast(0, WithGroup(sub)); return err }},
		{"AllReduce", func() error { return td.AllReduce(ReduceSum, WithGroup(sub)) }},
		{"AllGather", func() error { _, err := td.AllGather(WithGroup(sub)); return err }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			require.ErrorIs(t, err, group.ErrFreed)
			assert.Contains(t, err.Error(), "tensordict: "+c.name)
		})
	}
}

// TestSetWritesThroughMemmap: Set on an existing leaf of a memory-mapped
// TensorDict writes into the file, as Python tensordict does (issue 12
// item 16), instead of silently replacing the leaf by a heap tensor.
func TestSetWritesThroughMemmap(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "saved")
	src := New(2)
	require.NoError(t, src.Set(K("x"), tensor.Zeros(tensor.Float32, 2, 3)))
	require.NoError(t, src.Set(K("n", "y"), tensor.Zeros(tensor.Int64, 2)))
	saved, err := src.Memmap(dir)
	require.NoError(t, err)
	loaded, err := LoadMemmap(dir)
	require.NoError(t, err)

	for _, td := range []*TensorDict{saved, loaded} {
		before, err := td.Get(K("x"))
		require.NoError(t, err)
		require.NoError(t, td.Set(K("x"), tensor.Full(tensor.Float64, 2.5, 2, 3)), "another dtype is converted")
		require.NoError(t, td.Set(K("n", "y"), tensor.Full(tensor.Int64, 7, 2)))
		after, err := td.Get(K("x"))
		require.NoError(t, err)
		assert.Same(t, before, after, "the mapped leaf stays")
		assert.True(t, td.IsMemmap())
		assert.Equal(t, tensor.Float32, after.DType())

		err = td.Set(K("x"), tensor.Ones(tensor.Float32, 2, 4))
		require.ErrorIs(t, err, ErrLocked)
		assert.Contains(t, err.Error(), "memory-mapped")
		err = td.Set(K("new"), tensor.Ones(tensor.Float32, 2))
		require.ErrorIs(t, err, ErrLocked)
	}
	require.NoError(t, memmap.Flush(mustGet(t, loaded, K("x"))))
	again, err := LoadMemmap(dir)
	require.NoError(t, err)
	assert.True(t, again.EqScalar(0).Exclude(K("x"), K("n", "y")).All())
	x, y := mustGet(t, again, K("x")), mustGet(t, again, K("n", "y"))
	assert.True(t, x.EqScalar(2.5).All(), "the file holds what Set wrote: %v", x)
	assert.True(t, y.EqScalar(7).All(), "%v", y)

	// Unlocked, Set replaces the leaf as on any TensorDict.
	loaded.Unlock()
	heap := tensor.Ones(tensor.Float32, 2, 4)
	require.NoError(t, loaded.Set(K("x"), heap))
	assert.Same(t, heap, mustGet(t, loaded, K("x")))
	assert.True(t, mustGet(t, again, K("x")).EqScalar(2.5).All(), "the file is unchanged")
}

// TestLoadMemmapHardLink: a leaf of a foreign directory that is a hard
// link to another file is not mapped shared (issue 12 item 14), so
// SetInPlace cannot write into that file.
func TestLoadMemmapHardLink(t *testing.T) {
	root := t.TempDir()
	victim := filepath.Join(root, "victim.bin")
	require.NoError(t, os.WriteFile(victim, make([]byte, 24), 0o644))
	dir := filepath.Join(root, "foreign")
	src := New()
	require.NoError(t, src.Set(K("x"), tensor.Zeros(tensor.Float32, 6)))
	_, err := src.Memmap(dir)
	require.NoError(t, err)
	leaf := filepath.Join(dir, "x.memmap")
	require.NoError(t, os.Remove(leaf))
	require.NoError(t, os.Link(victim, leaf))

	_, err = LoadMemmap(dir)
	require.ErrorIs(t, err, memmap.ErrHardLink)
	assert.Contains(t, err.Error(), leaf)

	got, err := LoadMemmap(dir, CopyOnWrite())
	require.NoError(t, err, "copy-on-write cannot write through the link")
	require.NoError(t, got.SetInPlace(K("x"), tensor.Ones(tensor.Float32, 6)))
	require.NoError(t, got.Set(K("x"), tensor.Ones(tensor.Float32, 6)))
	b, err := os.ReadFile(victim)
	require.NoError(t, err)
	assert.Equal(t, make([]byte, 24), b, "the victim file is unchanged")
}

// TestLoadMemmapRewritten: LoadMemmap loads again when meta.json is
// replaced while it loads (by a writer that takes no lock), and gives up
// with ErrRewritten after loadAttempts loads that saw it replaced. The
// loads here are LoadMemmap's (loadUnchanged of a loader's loadTD), each
// followed by a rewrite of meta.json (same text, new file).
func TestLoadMemmapRewritten(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "saved")
	_, err := alignTD(t).Memmap(dir)
	require.NoError(t, err)
	meta := filepath.Join(dir, memmapdir.MetaFile)
	text, err := os.ReadFile(meta)
	require.NoError(t, err)
	rewrites := 0
	rewritten := func(times int) func() (*TensorDict, []*tensor.Tensor, error) {
		return func() (*TensorDict, []*tensor.Tensor, error) {
			l := &loader{}
			td, err := l.loadTD(dir, nil, 0)
			if rewrites < times {
				rewrites++
				require.NoError(t, memmapdir.WriteMetaNoSync(meta, text))
			}
			return td, l.mapped, err
		}
	}

	got, err := loadUnchanged(dir, rewritten(1))
	require.NoError(t, err, "the second load sees no change")
	requireSameTD(t, alignTD(t), got)
	assert.Equal(t, 1, rewrites)

	rewrites = 0
	_, err = loadUnchanged(dir, rewritten(1<<30))
	require.ErrorIs(t, err, ErrRewritten)
	assert.Equal(t, loadAttempts, rewrites)

	// LoadMemmap itself, with no writer, loads it at once.
	got, err = LoadMemmap(dir)
	require.NoError(t, err)
	requireSameTD(t, alignTD(t), got)
}
