package tensordict

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/tensor"
)

// rowTD returns a TensorDict of batch size [n] whose leaves are a (float32
// [n 2]) and n.b (int64 [n]), every element v.
func rowTD(t testing.TB, n int, v float64) *TensorDict {
	t.Helper()
	td := New(n)
	require.NoError(t, td.Set(K("a"), tensor.Full(tensor.Float32, v, n, 2)))
	require.NoError(t, td.Set(K("n", "b"), tensor.Full(tensor.Int64, v, n)))
	return td
}

// rows returns the first element of every row of leaf k of td.
func rows(t testing.TB, td *TensorDict, k ...string) []float64 {
	t.Helper()
	x := leaf(t, td, k...)
	out := make([]float64, x.Size(0))
	for i := range out {
		idx := make([]int, x.Dim())
		idx[0] = i
		out[i] = x.At(idx...)
	}
	return out
}

func TestSetAt(t *testing.T) {
	mask, err := tensor.FromSlice([]bool{false, true, false, true, true})
	require.NoError(t, err)
	tests := []struct {
		name string
		ix   Index
		src  *TensorDict
		want []float64
	}{
		{"At", IndexAt(-1), rowTD(t, 1, 7).mustIndex(t, 0), []float64{0, 0, 0, 0, 7}},
		{"Range", IndexRange(1, math.MaxInt, 2), rowTD(t, 2, 7), []float64{0, 7, 0, 7, 0}},
		{"List", IndexList(4, 0), rowTD(t, 2, 7), []float64{7, 0, 0, 0, 7}},
		{"Mask", IndexMask(mask), rowTD(t, 3, 7), []float64{0, 7, 0, 7, 7}},
		{"MaskBroadcast", IndexMask(mask), rowTD(t, 1, 7), []float64{0, 7, 0, 7, 7}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			td := rowTD(t, 5, 0)
			require.NoError(t, td.SetAt(tc.ix, tc.src))
			assert.Equal(t, tc.want, rows(t, td, "a"))
			assert.Equal(t, tc.want, rows(t, td, "n", "b"))
		})
	}
	td := rowTD(t, 5, 0)
	errs := []struct {
		name string
		err  error
		want string
	}{
		{"AtRange", td.SetAt(IndexAt(5), rowTD(t, 1, 1).mustIndex(t, 0)), "index 5 out of range"},
		{"Step", td.SetAt(IndexRange(0, 2, 0), rowTD(t, 2, 1)), "step 0 must be positive"},
		{"List", td.SetAt(IndexList(0, -6), rowTD(t, 2, 1)), "index -6 (position 1) out of range"},
		{"MaskNil", td.SetAt(IndexMask(nil), rowTD(t, 2, 1)), "nil mask"},
		{"MaskShape", td.SetAt(IndexMask(tensor.Ones(tensor.Bool, 4)), rowTD(t, 2, 1)), "does not match"},
		{"Invalid", td.SetAt(Index{}, rowTD(t, 2, 1)), "invalid index"},
		{"Nil", td.SetAt(IndexAt(0), nil), "nil tensordict"},
		{"NoBatch", New().SetAt(IndexAt(0), New()), "no batch dimension"},
		{"Key", td.SetAt(IndexList(0, 1), func() *TensorDict { o := rowTD(t, 2, 1); _ = o.Set(K("zz"), tensor.Ones(tensor.Float32, 2)); return o }()), "key zz: key not found"},
		{"Shape", td.SetAt(IndexList(0, 1), rowTD(t, 3, 1)), "key a at [0 1]"},
		{"Key2", td.SetAtKey(K("q"), tensor.Ones(tensor.Float32, 2), IndexAt(0)), "key not found"},
	}
	for _, e := range errs {
		require.Error(t, e.err, e.name)
		assert.Contains(t, e.err.Error(), e.want, e.name)
	}
	assert.Equal(t, []float64{0, 0, 0, 0, 0}, rows(t, td, "a"), "failed writes before any leaf change nothing")
	require.NoError(t, td.SetAtKey(K("n", "b"), tensor.Full(tensor.Int64, 3), IndexRange(0, 2, 1)))
	assert.Equal(t, []float64{3, 3, 0, 0, 0}, rows(t, td, "n", "b"))
	got, err := td.GetAt(IndexList(1, 0))
	require.NoError(t, err)
	assert.Equal(t, []float64{3, 3}, rows(t, got, "n", "b"))
	_, err = td.GetAt(IndexAt(9))
	require.ErrorContains(t, err, "GetAt: index 9")
	assert.Equal(t, "[1:3:1]", IndexRange(1, 3, 1).String())
}

func (td *TensorDict) mustIndex(t testing.TB, i int) *TensorDict {
	t.Helper()
	x, err := td.Index(i)
	require.NoError(t, err)
	return x
}

// TestSetAtMemmapWritesThrough writes into a loaded memory-mapped
// TensorDict with SetAt, UpdateInPlace, Update(WriteInPlace), CopyFrom,
// AddInPlace and DivScalarInPlace, and reads the files back.
func TestSetAtMemmapWritesThrough(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "buf")
	saved, err := rowTD(t, 4, 0).Memmap(dir)
	require.NoError(t, err)
	require.NoError(t, saved.Release())
	reload := func() *TensorDict {
		l, err := LoadMemmap(dir)
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Release() })
		return l
	}
	buf := reload()
	require.NoError(t, buf.SetAt(IndexAt(1), rowTD(t, 1, 5).mustIndex(t, 0)))
	require.NoError(t, buf.SetAt(IndexList(3), rowTD(t, 1, 2)))
	assert.Equal(t, []float64{0, 5, 0, 2}, rows(t, reload(), "a"))
	require.NoError(t, buf.UpdateInPlace(rowTD(t, 4, 1), K("n")))
	assert.Equal(t, []float64{0, 5, 0, 2}, rows(t, reload(), "a"), "only n was updated")
	assert.Equal(t, []float64{1, 1, 1, 1}, rows(t, reload(), "n", "b"))
	require.NoError(t, buf.Update(rowTD(t, 4, 4), WriteInPlace(), UpdateKeys(K("a"))))
	assert.Equal(t, []float64{4, 4, 4, 4}, rows(t, reload(), "a"))
	require.NoError(t, buf.AddInPlace(rowTD(t, 4, 2)))
	onlyA, err := buf.Select(K("a"))
	require.NoError(t, err)
	require.NoError(t, onlyA.DivScalarInPlace(2), "Select shares the leaves")
	require.NoError(t, buf.Exclude(K("a")).AddScalarInPlace(-1))
	r := reload()
	assert.Equal(t, []float64{3, 3, 3, 3}, rows(t, r, "a"))
	assert.Equal(t, []float64{2, 2, 2, 2}, rows(t, r, "n", "b"))
	require.NoError(t, buf.CopyFrom(rowTD(t, 4, 9)))
	assert.Equal(t, []float64{9, 9, 9, 9}, rows(t, reload(), "n", "b"))
}

func TestUpdateOptions(t *testing.T) {
	td := rowTD(t, 2, 0)
	a := leaf(t, td, "a")
	src := rowTD(t, 2, 1)
	require.NoError(t, src.SetNonTensor(K("tag"), "t"))
	require.NoError(t, td.Update(src, UpdateKeys(K("n", "b"), K("tag"))))
	assert.Same(t, a, leaf(t, td, "a"), "a not selected")
	assert.Same(t, leaf(t, src, "n", "b"), leaf(t, td, "n", "b"), "shared by default")
	require.NoError(t, td.Update(src, UpdateClone()))
	assert.NotSame(t, leaf(t, src, "a"), leaf(t, td, "a"))
	assert.Equal(t, []float64{1, 1}, rows(t, td, "a"))
	old := leaf(t, td, "a")
	require.NoError(t, td.Update(rowTD(t, 2, 3), WriteInPlace()))
	assert.Same(t, old, leaf(t, td, "a"), "in place keeps the leaf")
	assert.Equal(t, []float64{3, 3}, rows(t, td, "a"))
	extra := New(2)
	require.NoError(t, extra.Set(K("new"), tensor.Ones(tensor.Int8, 2)))
	require.NoError(t, td.Update(extra, WriteInPlace()), "in place adds missing keys")
	require.ErrorContains(t, td.UpdateInPlace(func() *TensorDict { o := New(2); _ = o.Set(K("zz"), tensor.Ones(tensor.Int8, 2)); return o }()), "UpdateInPlace: tensordict: Get: key zz: key not found")
	require.ErrorContains(t, td.UpdateInPlace(nil), "nil tensordict")
	deep := New(2)
	require.NoError(t, deep.Set(K("m", "x"), tensor.Ones(tensor.Int8, 2)))
	require.ErrorContains(t, td.UpdateInPlace(deep), "UpdateInPlace: tensordict: GetTD: key m: key not found")
	assert.False(t, td.Has(K("m")), "nothing created for a missing nested tensordict")
	require.ErrorContains(t, td.Update(rowTD(t, 3, 0), WriteInPlace()), "key a")
}

func TestApplyWith(t *testing.T) {
	a, b := rowTD(t, 3, 1), rowTD(t, 3, 2)
	sum, err := a.ApplyWith([]*TensorDict{b, b}, func(_ Key, ts []*tensor.Tensor) (*tensor.Tensor, error) {
		s, err := ts[0].Add(ts[1])
		if err != nil {
			return nil, err
		}
		return s.Add(ts[2])
	})
	require.NoError(t, err)
	assert.Equal(t, []float64{5, 5, 5}, rows(t, sum, "a"))
	// In place: td's leaves keep their storage.
	old := leaf(t, a, "a")
	got, err := a.ApplyWith([]*TensorDict{b}, func(_ Key, ts []*tensor.Tensor) (*tensor.Tensor, error) { return ts[1].MulScalar(3), nil }, ApplyInto())
	require.NoError(t, err)
	assert.Same(t, a, got)
	assert.Same(t, old, leaf(t, a, "a"))
	assert.Equal(t, []float64{6, 6, 6}, rows(t, a, "n", "b"))
	// A new batch size: [3] -> [3 2] for leaf a only (others dropped).
	nb, err := a.ApplyWith(nil, func(k Key, ts []*tensor.Tensor) (*tensor.Tensor, error) {
		if k.Equal(K("a")) {
			return ts[0], nil
		}
		return nil, nil
	}, ApplyBatchSize(3, 2))
	require.NoError(t, err)
	assert.Equal(t, []int{3, 2}, nb.BatchSize())
	assert.Equal(t, []int{3, 2}, batchOf(t, nb, "n"))
	_, err = a.ApplyWith(nil, func(_ Key, ts []*tensor.Tensor) (*tensor.Tensor, error) { return ts[0], nil }, ApplyBatchSize(4))
	require.ErrorContains(t, err, "does not start with batch size [4]")
	_, err = a.ApplyWith(nil, nil, ApplyBatchSize(4), ApplyInto())
	require.ErrorContains(t, err, "cannot be applied in place")
	_, err = a.ApplyWith(nil, nil, ApplyBatchSize(-1))
	require.ErrorContains(t, err, "negative")
	_, err = a.ApplyWith([]*TensorDict{New(3)}, nil, ApplyInto())
	require.ErrorContains(t, err, "ApplyWith: key a missing from tensordict 1")
	require.NoError(t, a.ApplyInPlace(func(_ Key, x *tensor.Tensor) (*tensor.Tensor, error) { return x.AddScalar(1), nil }))
	assert.Equal(t, []float64{7, 7, 7}, rows(t, a, "n", "b"))
	require.ErrorContains(t, a.ApplyInPlace(func(_ Key, x *tensor.Tensor) (*tensor.Tensor, error) { return tensor.Ones(tensor.Float32, 5), nil }), "ApplyInPlace: key a")
}

func TestFromMapToMap(t *testing.T) {
	x := tensor.Ones(tensor.Float32, 2, 3)
	sub := New(2, 3)
	require.NoError(t, sub.Set(K("s"), tensor.Zeros(tensor.Int8, 2, 3)))
	m := map[string]any{
		"x":   x,
		"n":   map[string]any{"y": tensor.Zeros(tensor.Int64, 2), "meta": []any{"a", 1}},
		"sub": sub,
		"v":   3.5,
	}
	td, err := FromMap(m, 2)
	require.NoError(t, err)
	assert.Equal(t, []Key{K("n"), K("sub"), K("v"), K("x")}, td.Keys(), "sorted")
	assert.Same(t, x, leaf(t, td, "x"))
	assert.Equal(t, []int{2}, batchOf(t, td, "n"))
	back := td.ToMap()
	assert.Same(t, x, back["x"])
	assert.Equal(t, 3.5, back["v"])
	n := back["n"].(map[string]any)
	assert.Equal(t, []any{"a", int64(1)}, n["meta"])
	assert.Same(t, leaf(t, td, "sub", "s"), back["sub"].(map[string]any)["s"])
	_, err = FromMap(map[string]any{"bad": tensor.Ones(tensor.Float32, 3)}, 2)
	require.ErrorContains(t, err, "FromMap: key bad")
	_, err = FromMap(map[string]any{"c": make(chan int)})
	require.ErrorContains(t, err, "FromMap: key c")
	_, err = FromMap(nil, -1)
	require.ErrorContains(t, err, "negative")
	loop := map[string]any{}
	loop["self"] = loop
	_, err = FromMap(loop)
	require.ErrorContains(t, err, "nesting deeper")
}

// FuzzAlgebraArgs drives the dimension, size, index and pad arguments of
// the TensorDict algebra with arbitrary integers: none may panic.
func FuzzAlgebraArgs(f *testing.F) {
	f.Add(0, 1, 2, -1)
	f.Add(-3, 7, 0, 100)
	f.Fuzz(func(t *testing.T, a, b, c, d int) {
		td := algTD(t)
		_, _ = td.Reshape(a, b)
		_, _ = td.View(a)
		_, _ = td.Flatten(a, b)
		_, _ = td.Unflatten(a, b, c)
		_, _ = td.Squeeze(a)
		_, _ = td.Unsqueeze(a)
		_, _ = td.Permute(a, b)
		_, _ = td.Transpose(a, b)
		_, _ = td.Split(a, b)
		_, _ = td.SplitSizes([]int{a, b, c}, d)
		_, _ = td.Chunk(a, b)
		_, _ = td.Sum(a, b)
		_, _ = td.Max(a)
		_, _ = td.AllDim(a)
		_, _ = Cat([]*TensorDict{td, td}, a)
		_, _ = td.Expand(a, b, c)
		bound := func(v int) int { return v % 8 }
		_, _ = td.Pad([]int{bound(a), bound(b), bound(c), bound(d)}[:2*(uint(d)%3)], 0)
		_ = td.SetAt(IndexAt(a), rowTD(t, 1, 1).mustIndex(t, 0))
		_ = td.SetAt(IndexRange(a, b, c), algTD(t))
		_ = td.SetAt(IndexList(a, b), algTD(t))
		_, _ = td.GetAt(IndexRange(a, b, c))
	})
}
