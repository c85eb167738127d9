package tensordict

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/tensor"
)

// arange returns a float32 tensor 0, 1, 2, ... of the given shape.
func arange(t testing.TB, shape ...int) *tensor.Tensor {
	t.Helper()
	n, err := tensor.Numel(shape)
	require.NoError(t, err)
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i)
	}
	x, err := tensor.FromSlice(v, shape...)
	require.NoError(t, err)
	return x
}

func floats(t testing.TB, x *tensor.Tensor) []float32 {
	t.Helper()
	v, err := tensor.Data[float32](x.Contiguous())
	require.NoError(t, err)
	return v
}

func TestSeed(t *testing.T) {
	td := seedTD(t)
	assert.Equal(t, []Key{K("a"), K("c"), K("d")}, td.Keys())
	assert.Equal(t, []Key{K("a"), K("a", "b"), K("c"), K("d"), K("d", "e"), K("d", "e", "f")}, td.Keys(IncludeNested()))
	assert.Equal(t, []Key{K("a", "b"), K("c"), K("d", "e", "f")}, td.Keys(IncludeNested(), LeavesOnly()))
	assert.Equal(t, []int{1, 2}, td.BatchSize())
	assert.True(t, td.EqScalar(1).All())
	assert.False(t, td.EqScalar(2).Any())
	f, err := td.Get(K("d", "e", "f"))
	require.NoError(t, err)
	assert.Equal(t, []int{1, 2, 2}, f.Shape())
	assert.True(t, f.IsContiguous())
	e, err := td.GetTD(K("d", "e"))
	require.NoError(t, err)
	assert.Equal(t, []int{1, 2}, e.BatchSize())
	assert.True(t, td.IsContiguous())
}

func TestSetErrors(t *testing.T) {
	td := New(2, 3)
	require.NoError(t, td.Set(K("x"), tensor.Zeros(tensor.Float32, 2, 3, 4)))
	tests := []struct {
		name string
		k    Key
		v    *tensor.Tensor
		want []string
	}{
		{"batch mismatch", K("y"), tensor.Zeros(tensor.Float32, 3, 2), []string{"key y", "[3 2]", "[2 3]"}},
		{"too few dims", K("a", "b"), tensor.Zeros(tensor.Float32, 2), []string{"key a.b", "[2]", "[2 3]"}},
		{"through a leaf", K("x", "z"), tensor.Zeros(tensor.Float32, 2, 3), []string{"key x.z", "entry x is a tensor"}},
		{"nil", K("n"), nil, []string{"key n", "nil tensor"}},
		{"empty key", K(), tensor.Zeros(tensor.Float32, 2, 3), []string{"empty key"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := td.Set(tc.k, tc.v)
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
	assert.Equal(t, []Key{K("x")}, td.Keys(IncludeNested()), "failed Sets must not leave levels behind")
}

func TestGetKinds(t *testing.T) {
	td := New()
	require.NoError(t, td.Set(K("a", "t"), tensor.Ones(tensor.Int32, 3)))
	require.NoError(t, td.SetNonTensor(K("a", "s"), "str"))
	_, err := td.Get(K("a"))
	assert.ErrorIs(t, err, ErrKind)
	_, err = td.GetTD(K("a", "t"))
	assert.ErrorIs(t, err, ErrKind)
	_, err = td.GetNonTensor(K("a", "t"))
	assert.ErrorIs(t, err, ErrKind)
	_, err = td.Get(K("a", "missing"))
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = td.Get(K("nope", "t"))
	assert.ErrorIs(t, err, ErrNotFound)
	v, err := td.GetNonTensor(K("a", "s"))
	require.NoError(t, err)
	assert.Equal(t, "str", v)
	assert.True(t, td.Has(K("a", "s")))
	assert.False(t, td.Has(K("a", "s", "x")))

	require.NoError(t, td.Del(K("a", "t")))
	assert.ErrorIs(t, td.Del(K("a", "t")), ErrNotFound)
	assert.Equal(t, []Key{K("a"), K("a", "s")}, td.Keys(IncludeNested()))
}

func TestDelKeepsOrder(t *testing.T) {
	td := New()
	for _, n := range []string{"p", "q", "r", "s"} {
		require.NoError(t, td.Set(K(n), tensor.Ones(tensor.Uint8)))
	}
	require.NoError(t, td.Del(K("q")))
	require.NoError(t, td.Set(K("q"), tensor.Ones(tensor.Uint8)))
	assert.Equal(t, []Key{K("p"), K("r"), K("s"), K("q")}, td.Keys())
	_, err := td.Get(K("s"))
	assert.NoError(t, err)
}

func TestLocked(t *testing.T) {
	td := New(2)
	require.NoError(t, td.Set(K("a", "b"), tensor.Ones(tensor.Float32, 2)))
	require.NoError(t, td.SetNonTensor(K("s"), "x"))
	td.Lock()
	require.True(t, td.IsLocked())
	sub, err := td.GetTD(K("a"))
	require.NoError(t, err)
	assert.True(t, sub.IsLocked(), "lock reaches nested levels")

	refused := []struct {
		name string
		do   func() error
	}{
		{"new leaf", func() error { return td.Set(K("c"), tensor.Ones(tensor.Float32, 2)) }},
		{"new nested leaf", func() error { return td.Set(K("a", "c"), tensor.Ones(tensor.Float32, 2)) }},
		{"new level", func() error { return td.Set(K("x", "y"), tensor.Ones(tensor.Float32, 2)) }},
		{"del", func() error { return td.Del(K("a", "b")) }},
		{"del td", func() error { return td.Del(K("a")) }},
		{"new non-tensor", func() error { return td.SetNonTensor(K("t"), 1) }},
		{"kind change", func() error { return td.Set(K("s"), tensor.Ones(tensor.Float32, 2)) }},
		{"new td", func() error { return td.SetTD(K("z"), New(2)) }},
		{"update new key", func() error {
			o := New(2)
			require.NoError(t, o.Set(K("new"), tensor.Ones(tensor.Float32, 2)))
			return td.Update(o)
		}},
	}
	for _, r := range refused {
		t.Run(r.name, func(t *testing.T) {
			assert.ErrorIs(t, r.do(), ErrLocked)
		})
	}
	assert.Equal(t, []Key{K("a"), K("a", "b"), K("s")}, td.Keys(IncludeNested()))

	// In-place writes are allowed, and keep the storage.
	b, _ := td.Get(K("a", "b"))
	require.NoError(t, td.SetInPlace(K("a", "b"), tensor.Full(tensor.Float64, 7, 2)))
	b2, _ := td.Get(K("a", "b"))
	assert.Same(t, b, b2)
	assert.Equal(t, []float32{7, 7}, floats(t, b2))
	assert.Error(t, td.SetInPlace(K("a", "b"), tensor.Ones(tensor.Float32, 3)))
	// Replacing an existing leaf is allowed too.
	require.NoError(t, td.Set(K("a", "b"), tensor.Zeros(tensor.Float32, 2)))
	require.NoError(t, td.SetNonTensor(K("s"), "y"))

	td.Unlock()
	assert.False(t, sub.IsLocked())
	assert.NoError(t, td.Set(K("c"), tensor.Ones(tensor.Float32, 2)))
}

func TestKeysSortedAndItems(t *testing.T) {
	td := New()
	require.NoError(t, td.Set(K("z"), tensor.Ones(tensor.Int8)))
	require.NoError(t, td.Set(K("_", "b"), tensor.Ones(tensor.Int8)))
	require.NoError(t, td.SetNonTensor(K("a"), []string{"x"}))
	assert.Equal(t, []Key{K("_"), K("_", "b"), K("a"), K("z")}, td.Keys(IncludeNested(), Sorted()))
	assert.Equal(t, []Key{K("z"), K("_", "b")}, td.Keys(IncludeNested(), LeavesOnly()))
	items := td.Items(IncludeNested())
	require.Len(t, items, 4)
	assert.NotNil(t, items[0].Tensor)
	assert.NotNil(t, items[1].TD)
	assert.True(t, items[3].IsNonTensor)
	assert.Equal(t, []any{"x"}, items[3].Value)
}

func TestNonTensorValues(t *testing.T) {
	type label string
	tests := []struct {
		in   any
		want any
		err  string
	}{
		{nil, nil, ""},
		{"s", "s", ""},
		{label("l"), "l", ""},
		{3, int64(3), ""},
		{uint8(4), int64(4), ""},
		{uint64(math.MaxUint64), float64(math.MaxUint64), ""},
		{float32(0.5), 0.5, ""},
		{true, true, ""},
		{[]int{1, 2}, []any{int64(1), int64(2)}, ""},
		{[2]string{"a", "b"}, []any{"a", "b"}, ""},
		{map[string][]bool{"k": {true}}, map[string]any{"k": []any{true}}, ""},
		{math.NaN(), nil, "not representable"},
		{map[int]int{1: 1}, nil, "keys must be strings"},
		{struct{}{}, nil, "not JSON-able"},
		{tensor.Ones(tensor.Float32), nil, "not JSON-able"},
		{"\xff", nil, "UTF-8"},
		{make(chan int), nil, "not JSON-able"},
	}
	for _, tc := range tests {
		td := New()
		err := td.SetNonTensor(K("v"), tc.in)
		if tc.err != "" {
			require.Error(t, err, "%#v", tc.in)
			assert.Contains(t, err.Error(), tc.err)
			assert.Contains(t, err.Error(), "key v")
			continue
		}
		require.NoError(t, err, "%#v", tc.in)
		got, err := td.GetNonTensor(K("v"))
		require.NoError(t, err)
		assert.Equal(t, tc.want, got)
	}
}

func TestExpandContiguousClone(t *testing.T) {
	td := New(1)
	require.NoError(t, td.Set(K("x"), arange(t, 1, 3)))
	require.NoError(t, td.Set(K("n", "y"), arange(t, 1, 2)))
	ex, err := td.Expand(4, 2)
	require.NoError(t, err, "a size-1 batch dim may grow")
	assert.Equal(t, []int{4, 2}, ex.BatchSize())
	ex, err = td.Expand(4, -1)
	require.NoError(t, err)
	assert.Equal(t, []int{4, 1}, ex.BatchSize())
	n, _ := ex.GetTD(K("n"))
	assert.Equal(t, []int{4, 1}, n.BatchSize())
	x, _ := ex.Get(K("x"))
	assert.Equal(t, []int{4, 1, 3}, x.Shape())
	assert.False(t, ex.IsContiguous())
	c := ex.Contiguous()
	assert.True(t, c.IsContiguous())
	assert.Same(t, c, c.Contiguous())
	eq, err := c.Eq(ex)
	require.NoError(t, err)
	assert.True(t, eq.All())

	_, err = c.Expand(5, 1)
	assert.ErrorContains(t, err, "cannot expand")
	ex2, err := td.Expand(5)
	require.NoError(t, err)
	assert.Equal(t, []int{5}, ex2.BatchSize())

	cl := c.Clone()
	cx, _ := cl.Get(K("x"))
	require.NoError(t, cl.SetInPlace(K("x"), tensor.Zeros(tensor.Float32, 4, 1, 3)))
	ox, _ := c.Get(K("x"))
	assert.NotEqual(t, floats(t, cx), floats(t, ox), "clone shares nothing")
}

func TestApplyToUpdate(t *testing.T) {
	td := New(2)
	require.NoError(t, td.Set(K("a"), arange(t, 2)))
	require.NoError(t, td.Set(K("n", "b"), arange(t, 2, 2)))
	require.NoError(t, td.SetNonTensor(K("s"), "keep"))
	out, err := td.Apply(func(k Key, x *tensor.Tensor) (*tensor.Tensor, error) {
		if k.Equal(K("a")) {
			return nil, nil
		}
		return x.To(tensor.Float64), nil
	})
	require.NoError(t, err)
	assert.Equal(t, []Key{K("n"), K("n", "b"), K("s")}, out.Keys(IncludeNested()))
	b, _ := out.Get(K("n", "b"))
	assert.Equal(t, tensor.Float64, b.DType())

	_, err = td.Apply(func(k Key, x *tensor.Tensor) (*tensor.Tensor, error) { return tensor.Ones(tensor.Float32, 3), nil })
	assert.ErrorContains(t, err, "key a")

	i64 := td.To(tensor.Int64)
	a, _ := i64.Get(K("a"))
	assert.Equal(t, tensor.Int64, a.DType())

	o := New(2)
	require.NoError(t, o.Set(K("n", "c"), tensor.Ones(tensor.Int8, 2)))
	require.NoError(t, o.Set(K("a"), tensor.Zeros(tensor.Int8, 2)))
	require.NoError(t, td.Update(o))
	assert.Equal(t, []Key{K("a"), K("n"), K("n", "b"), K("n", "c"), K("s")}, td.Keys(IncludeNested()))
	a, _ = td.Get(K("a"))
	assert.Equal(t, tensor.Int8, a.DType())
}

func TestSelectExcludeFlatten(t *testing.T) {
	td := New(2)
	require.NoError(t, td.Set(K("a", "b"), arange(t, 2)))
	require.NoError(t, td.Set(K("a", "c"), arange(t, 2)))
	require.NoError(t, td.Set(K("d"), arange(t, 2)))
	require.NoError(t, td.SetTD(K("e"), New(2, 1)))

	s, err := td.Select(K("a", "c"), K("d"))
	require.NoError(t, err)
	assert.Equal(t, []Key{K("a"), K("a", "c"), K("d")}, s.Keys(IncludeNested()))
	_, err = td.Select(K("a", "zz"))
	assert.ErrorIs(t, err, ErrNotFound)

	x := td.Exclude(K("a", "b"), K("e"), K("nope"))
	assert.Equal(t, []Key{K("a"), K("a", "c"), K("d")}, x.Keys(IncludeNested()))

	f, err := td.FlattenKeys(".")
	require.NoError(t, err)
	assert.Equal(t, []Key{K("a.b"), K("a.c"), K("d"), K("e")}, f.Keys())
	u, err := f.UnflattenKeys(".")
	require.NoError(t, err)
	assert.Equal(t, td.Keys(IncludeNested()), u.Keys(IncludeNested()))
	e, _ := u.GetTD(K("e"))
	assert.Equal(t, []int{2, 1}, e.BatchSize())

	clash := New()
	require.NoError(t, clash.Set(K("a.b"), tensor.Ones(tensor.Int8)))
	require.NoError(t, clash.Set(K("a", "b"), tensor.Ones(tensor.Int8)))
	_, err = clash.FlattenKeys(".")
	assert.ErrorContains(t, err, `"a.b"`)
}

func TestIndexing(t *testing.T) {
	td := New(3, 2)
	require.NoError(t, td.Set(K("x"), arange(t, 3, 2)))
	require.NoError(t, td.Set(K("n", "y"), arange(t, 3, 2, 2)))
	require.NoError(t, td.SetNonTensor(K("s"), "lbl"))

	r, err := td.Index(1)
	require.NoError(t, err)
	assert.Equal(t, []int{2}, r.BatchSize())
	x, _ := r.Get(K("x"))
	assert.Equal(t, []float32{2, 3}, floats(t, x))
	y, _ := r.Get(K("n", "y"))
	assert.Equal(t, []int{2, 2}, y.Shape())
	s, _ := r.GetNonTensor(K("s"))
	assert.Equal(t, "lbl", s)

	r, err = td.Index(-1)
	require.NoError(t, err)
	x, _ = r.Get(K("x"))
	assert.Equal(t, []float32{4, 5}, floats(t, x))
	_, err = td.Index(3)
	assert.ErrorContains(t, err, "out of range")

	sl, err := td.Slice(0, 0, math.MaxInt, 2)
	require.NoError(t, err)
	assert.Equal(t, []int{2, 2}, sl.BatchSize())
	x, _ = sl.Get(K("x"))
	assert.Equal(t, []float32{0, 1, 4, 5}, floats(t, x))
	sl, err = td.Slice(1, 1, 2, 1)
	require.NoError(t, err)
	assert.Equal(t, []int{3, 1}, sl.BatchSize())
	_, err = td.Slice(2, 0, 1, 1)
	assert.Error(t, err)

	is, err := td.IndexSelect([]int{2, 0, 2})
	require.NoError(t, err)
	x, _ = is.Get(K("x"))
	assert.Equal(t, []float32{4, 5, 0, 1, 4, 5}, floats(t, x))

	mask, err := tensor.FromSlice([]bool{true, false, true})
	require.NoError(t, err)
	m, err := td.Mask(mask)
	require.NoError(t, err)
	assert.Equal(t, []int{2, 2}, m.BatchSize())
	x, _ = m.Get(K("x"))
	assert.Equal(t, []float32{0, 1, 4, 5}, floats(t, x))
	nm, _ := m.GetTD(K("n"))
	assert.Equal(t, []int{2, 2}, nm.BatchSize())

	mask2, err := tensor.FromSlice([]bool{false, true, true, false, false, true}, 3, 2)
	require.NoError(t, err)
	m, err = td.Mask(mask2)
	require.NoError(t, err)
	assert.Equal(t, []int{3}, m.BatchSize())
	x, _ = m.Get(K("x"))
	assert.Equal(t, []float32{1, 2, 5}, floats(t, x))

	_, err = td.Mask(tensor.Ones(tensor.Bool, 2))
	assert.ErrorContains(t, err, "mask shape [2]")
	_, err = td.Mask(tensor.Ones(tensor.Float32, 3))
	assert.ErrorContains(t, err, "want bool")
}

func TestStackUnbind(t *testing.T) {
	td := New(3, 2)
	require.NoError(t, td.Set(K("x"), arange(t, 3, 2)))
	require.NoError(t, td.Set(K("n", "y"), arange(t, 3, 2, 4)))
	require.NoError(t, td.SetNonTensor(K("s"), "same"))
	for _, dim := range []int{0, 1, -1} {
		parts, err := td.Unbind(dim)
		require.NoError(t, err)
		d := dim
		if d < 0 {
			d += 2
		}
		require.Len(t, parts, td.BatchSize()[d])
		back, err := Stack(parts, dim)
		require.NoError(t, err)
		assert.Equal(t, td.BatchSize(), back.BatchSize())
		eq, err := back.Eq(td)
		require.NoError(t, err)
		assert.True(t, eq.All(), "dim %d", dim)
	}
	parts, _ := td.Unbind(0)
	st, err := Stack(parts, 1)
	require.NoError(t, err)
	assert.Equal(t, []int{2, 3}, st.BatchSize(), "stack at the end of the batch dims")

	bad := parts[1].Clone()
	require.NoError(t, bad.Set(K("n", "y"), tensor.Ones(tensor.Float64, 2, 4)))
	_, err = Stack([]*TensorDict{parts[0], bad}, 0)
	assert.ErrorContains(t, err, "key n.y")
	other := parts[1].Clone()
	require.NoError(t, other.SetNonTensor(K("s"), "different"))
	st, err = Stack([]*TensorDict{parts[0], other}, 0)
	require.NoError(t, err, "differing non-tensor values make a NonTensorStack")
	sv, err := st.GetNonTensor(K("s"))
	require.NoError(t, err)
	require.IsType(t, &NonTensorStack{}, sv)
	assert.Equal(t, "different", sv.(*NonTensorStack).Values()[sv.(*NonTensorStack).Len()-1])
	_, err = Stack(nil, 0)
	assert.Error(t, err)
}

func TestEqNe(t *testing.T) {
	a := New(2)
	require.NoError(t, a.Set(K("x"), arange(t, 2)))
	require.NoError(t, a.Set(K("n", "y"), tensor.Ones(tensor.Int64, 2)))
	b := a.Clone()
	eq, err := a.Eq(b)
	require.NoError(t, err)
	assert.True(t, eq.All())
	ne, err := a.Ne(b)
	require.NoError(t, err)
	assert.False(t, ne.Any())

	require.NoError(t, b.SetInPlace(K("x"), tensor.Full(tensor.Float32, 1, 2)))
	eq, _ = a.Eq(b)
	assert.False(t, eq.All())
	assert.True(t, eq.Any())

	c := New(2)
	require.NoError(t, c.Set(K("x"), arange(t, 2)))
	_, err = a.Eq(c)
	assert.ErrorContains(t, err, "key sets differ")
}

func TestPythonRepr(t *testing.T) {
	td := New(2)
	require.NoError(t, td.Set(K("c"), tensor.Ones(tensor.Float32, 2)))
	require.NoError(t, td.Set(K("a", "b"), tensor.Ones(tensor.Int64, 2, 3)))
	require.NoError(t, td.SetNonTensor(K("l"), "hi"))
	want := `TensorDict(
    fields={
        a: TensorDict(
            fields={
                b: Tensor(shape=torch.Size([2, 3]), device=cpu, dtype=torch.int64, is_shared=False)},
            batch_size=torch.Size([2]),
            device=None,
            is_shared=False),
        c: Tensor(shape=torch.Size([2]), device=cpu, dtype=torch.float32, is_shared=False),
        l: NonTensorData(data=hi, batch_size=torch.Size([2]), device=None)},
    batch_size=torch.Size([2]),
    device=None,
    is_shared=False)`
	assert.Equal(t, want, td.PythonRepr())
}

func TestKeyString(t *testing.T) {
	assert.Equal(t, "a.b", K("a", "b").String())
	assert.Equal(t, `("a.b", "c")`, K("a.b", "c").String())
	assert.Equal(t, `("")`, K("").String())
}

func TestSetBatchSize(t *testing.T) {
	td := New()
	require.NoError(t, td.Set(K("x"), arange(t, 3, 2)))
	require.NoError(t, td.Set(K("n", "y"), arange(t, 3)))
	require.NoError(t, td.SetBatchSize(3))
	n, _ := td.GetTD(K("n"))
	assert.Equal(t, []int{3}, n.BatchSize())
	err := td.SetBatchSize(3, 2)
	assert.ErrorContains(t, err, "key n.y")
	assert.Equal(t, []int{3}, td.BatchSize())
}

func TestSetTDCycle(t *testing.T) {
	a := New()
	b := New()
	require.NoError(t, a.SetTD(K("b"), b))
	err := b.SetTD(K("a"), a)
	assert.ErrorContains(t, err, "contain itself")
	assert.ErrorContains(t, a.SetTD(K("self"), a), "itself")
	require.NoError(t, b.Set(K("x"), tensor.Ones(tensor.Int8)))
	assert.True(t, a.Has(K("b", "x")), "SetTD stores the same object")
	assert.True(t, strings.Contains(a.String(), "└── x  int8"), "%v", a)
}

func TestNonTensorCompareHugeBatch(t *testing.T) {
	// A batch size read from a file can be huge when there are no leaves;
	// comparing a non-tensor entry must not allocate it.
	st := tensor.NewStorage(0)
	td, err := FromConsolidated(st, []byte(`{"cls":"TensorDict","non_tensors":{"s":["x",[1099511627776],null]},"leaves":{},"cls_metadata":{"batch_size":[1099511627776]}}`))
	require.NoError(t, err)
	eq := td.EqScalar(1)
	b, err := eq.Get(K("s"))
	require.NoError(t, err)
	assert.Equal(t, []int{1 << 40}, b.Shape())
	other := td.Clone()
	e2, err := td.Eq(other)
	require.NoError(t, err)
	assert.True(t, e2.Any())
	assert.True(t, e2.All())
	assert.False(t, td.NeScalar(1).All() == false)
}
