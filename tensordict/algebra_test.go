package tensordict

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/tensor"
)

// algTD returns a TensorDict of batch size [4, 3]: "a" float32 [4 3 2] with
// a[i,j,k] = 6i+2j+k, nested "n" of batch size [4 3 5] holding "b" int64
// [4 3 5] with b[i,j,l] = 100i+10j+l, and a non-tensor "name".
func algTD(t testing.TB) *TensorDict {
	t.Helper()
	td := New(4, 3)
	require.NoError(t, td.Set(K("a"), arange(t, 4, 3, 2)))
	b := tensor.Zeros(tensor.Int64, 4, 3, 5)
	for i := range 4 {
		for j := range 3 {
			for l := range 5 {
				b.SetAt(float64(100*i+10*j+l), i, j, l)
			}
		}
	}
	n := New(4, 3, 5)
	require.NoError(t, n.Set(K("b"), b))
	require.NoError(t, td.SetTD(K("n"), n))
	require.NoError(t, td.SetNonTensor(K("name"), "x"))
	return td
}

func leaf(t testing.TB, td *TensorDict, k ...string) *tensor.Tensor {
	t.Helper()
	x, err := td.Get(K(k...))
	require.NoError(t, err)
	return x
}

func batchOf(t testing.TB, td *TensorDict, k ...string) []int {
	t.Helper()
	n, err := td.GetTD(K(k...))
	require.NoError(t, err)
	return n.BatchSize()
}

// sharesWith reports whether a write through view's leaf a reaches td's.
func sharesWith(t *testing.T, td, view *TensorDict) bool {
	t.Helper()
	v := leaf(t, view, "a")
	if v.Numel() == 0 {
		return true
	}
	before := leaf(t, td, "a").Sum()
	require.NoError(t, v.Fill(1000))
	return leaf(t, td, "a").Sum() != before
}

func TestShapeOpsAreViews(t *testing.T) {
	tests := []struct {
		name   string
		op     func(*TensorDict) (*TensorDict, error)
		batch  []int
		nbatch []int
		// at maps an index of the result's leaf a to the index of td's.
		a  []int
		at func(i []int) []int
	}{
		{"Transpose", func(td *TensorDict) (*TensorDict, error) { return td.Transpose(0, 1) }, []int{3, 4}, []int{3, 4, 5}, []int{3, 4, 2},
			func(i []int) []int { return []int{i[1], i[0], i[2]} }},
		{"Permute", func(td *TensorDict) (*TensorDict, error) { return td.Permute(-1, 0) }, []int{3, 4}, []int{3, 4, 5}, []int{3, 4, 2},
			func(i []int) []int { return []int{i[1], i[0], i[2]} }},
		{"Unsqueeze", func(td *TensorDict) (*TensorDict, error) { return td.Unsqueeze(1) }, []int{4, 1, 3}, []int{4, 1, 3, 5}, []int{4, 1, 3, 2},
			func(i []int) []int { return []int{i[0], i[2], i[3]} }},
		{"UnsqueezeEnd", func(td *TensorDict) (*TensorDict, error) { return td.Unsqueeze(-1) }, []int{4, 3, 1}, []int{4, 3, 1, 5}, []int{4, 3, 1, 2},
			func(i []int) []int { return []int{i[0], i[1], i[3]} }},
		{"Reshape", func(td *TensorDict) (*TensorDict, error) { return td.Reshape(-1) }, []int{12}, []int{12, 5}, []int{12, 2},
			func(i []int) []int { return []int{i[0] / 3, i[0] % 3, i[1]} }},
		{"View", func(td *TensorDict) (*TensorDict, error) { return td.View(2, 6) }, []int{2, 6}, []int{2, 6, 5}, []int{2, 6, 2},
			func(i []int) []int { f := i[0]*6 + i[1]; return []int{f / 3, f % 3, i[2]} }},
		{"Flatten", func(td *TensorDict) (*TensorDict, error) { return td.Flatten(0, -1) }, []int{12}, []int{12, 5}, []int{12, 2},
			func(i []int) []int { return []int{i[0] / 3, i[0] % 3, i[1]} }},
		{"Unflatten", func(td *TensorDict) (*TensorDict, error) { return td.Unflatten(0, 2, -1) }, []int{2, 2, 3}, []int{2, 2, 3, 5}, []int{2, 2, 3, 2},
			func(i []int) []int { return []int{2*i[0] + i[1], i[2], i[3]} }},
		{"Split", func(td *TensorDict) (*TensorDict, error) {
			p, err := td.Split(3, 0)
			if err != nil {
				return nil, err
			}
			if len(p) != 2 {
				return nil, assert.AnError
			}
			return p[1], nil
		}, []int{1, 3}, []int{1, 3, 5}, []int{1, 3, 2}, func(i []int) []int { return []int{3, i[1], i[2]} }},
		{"Chunk", func(td *TensorDict) (*TensorDict, error) {
			p, err := td.Chunk(2, 1) // ceil(3/2) = 2: sizes 2, 1
			if err != nil {
				return nil, err
			}
			if len(p) != 2 {
				return nil, assert.AnError
			}
			return p[1], nil
		}, []int{4, 1}, []int{4, 1, 5}, []int{4, 1, 2}, func(i []int) []int { return []int{i[0], 2, i[2]} }},
		{"SplitSizes", func(td *TensorDict) (*TensorDict, error) {
			p, err := td.SplitSizes([]int{1, 0, 3}, 0)
			if err != nil {
				return nil, err
			}
			return p[2], nil
		}, []int{3, 3}, []int{3, 3, 5}, []int{3, 3, 2}, func(i []int) []int { return []int{i[0] + 1, i[1], i[2]} }},
		{"Squeeze", func(td *TensorDict) (*TensorDict, error) {
			u, err := td.Unsqueeze(0)
			if err != nil {
				return nil, err
			}
			return u.Squeeze(0)
		}, []int{4, 3}, []int{4, 3, 5}, []int{4, 3, 2}, func(i []int) []int { return i }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			td := algTD(t)
			got, err := tc.op(td)
			require.NoError(t, err)
			assert.Equal(t, tc.batch, got.BatchSize())
			assert.Equal(t, tc.nbatch, batchOf(t, got, "n"))
			a := leaf(t, got, "a")
			require.Equal(t, tc.a, a.Shape())
			orig := arange(t, 4, 3, 2)
			idx := make([]int, a.Dim())
			var walk func(d int)
			walk = func(d int) {
				if d == len(idx) {
					assert.Equal(t, orig.At(tc.at(idx)...), a.At(idx...), "a%v", idx)
					return
				}
				for i := range tc.a[d] {
					idx[d] = i
					walk(d + 1)
				}
			}
			walk(0)
			v, err := got.GetNonTensor(K("name"))
			require.NoError(t, err)
			assert.Equal(t, "x", v)
			assert.True(t, sharesWith(t, td, got), "a write through the result reaches td")
		})
	}
}

func TestShapeOpErrors(t *testing.T) {
	td := algTD(t)
	tr, err := td.Transpose(0, 1)
	require.NoError(t, err)
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"Reshape", second(td.Reshape(5)), "batch size [5] has 5 elements"},
		{"ReshapeInfer", second(td.Reshape(-1, 5)), "cannot infer -1"},
		{"ReshapeNeg", second(td.Reshape(-2, 6)), "invalid batch size"},
		{"ViewStrided", second(tr.View(12)), "a view is impossible"},
		{"Flatten", second(td.Flatten(1, 0)), "comes before"},
		{"FlattenRange", second(td.Flatten(0, 2)), "dimension 2 out of range"},
		{"Unflatten", second(td.Unflatten(0, 3, -1)), "cannot infer -1"},
		{"Squeeze", second(td.Squeeze(2)), "dimension 2 out of range"},
		{"Unsqueeze", second(td.Unsqueeze(4)), "dimension 4 out of range"},
		{"PermuteLen", second(td.Permute(0)), "1 dimensions [0]"},
		{"PermuteRepeat", second(td.Permute(1, -1)), "repeated"},
		{"Transpose", second(td.Transpose(0, 2)), "out of range"},
		{"Split", second(td.Split(0, 0)), "size 0 must be positive"},
		{"SplitSizes", second(td.SplitSizes([]int{1, 2}, 0)), "add up to 3"},
		{"SplitSizesNeg", second(td.SplitSizes([]int{5, -1}, 0)), "size 5 at position 0"},
		{"Chunk", second(td.Chunk(0, 0)), "must be positive"},
		{"ExpandAs", second(td.ExpandAs(nil)), "nil tensordict"},
		{"ExpandAsBad", second(td.ExpandAs(New(2, 3))), "cannot expand"},
		{"Pad", second(td.Pad([]int{1}, 0)), "need pairs"},
		{"PadNeg", second(td.Pad([]int{-3, -2}, 0)), "has size -1"},
		{"Cat", second(Cat(nil, 0)), "no tensordicts"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Error(t, tc.err)
			assert.Contains(t, tc.err.Error(), tc.want)
		})
	}
}

// second returns the error of a two-valued call.
func second[T any](_ T, err error) error { return err }

func TestCatPad(t *testing.T) {
	td := algTD(t)
	parts, err := td.Split(1, 0)
	require.NoError(t, err)
	require.Len(t, parts, 4)
	back, err := Cat(parts, 0)
	require.NoError(t, err)
	eq, err := back.Eq(td)
	require.NoError(t, err)
	assert.True(t, eq.All())
	assert.Equal(t, []int{4, 3, 5}, batchOf(t, back, "n"))
	c1, err := Cat([]*TensorDict{td, td}, -1)
	require.NoError(t, err)
	assert.Equal(t, []int{4, 6}, c1.BatchSize())
	assert.Equal(t, []int{4, 6, 5}, batchOf(t, c1, "n"))
	assert.Equal(t, leaf(t, td, "a").At(1, 2, 1), leaf(t, c1, "a").At(1, 5, 1))
	// A write into the result does not reach the inputs (new storage).
	require.NoError(t, leaf(t, back, "a").Fill(-1))
	assert.Equal(t, 1.0, leaf(t, td, "a").At(0, 0, 1))

	other := algTD(t)
	require.NoError(t, other.Del(K("n", "b")))
	require.NoError(t, other.Set(K("n", "c"), tensor.Zeros(tensor.Int64, 4, 3, 5)))
	_, err = Cat([]*TensorDict{td, other}, 0)
	require.ErrorContains(t, err, "key n.b missing from tensordict 1")
	flat, err := td.Reshape(12)
	require.NoError(t, err)
	_, err = Cat([]*TensorDict{td, flat}, 0)
	require.ErrorContains(t, err, "only dimension 0 may differ")
	diff := algTD(t)
	require.NoError(t, diff.SetNonTensor(K("name"), "y"))
	joined, err := Cat([]*TensorDict{td, diff}, 0)
	require.NoError(t, err, "differing non-tensor values make a NonTensorStack")
	name, err := joined.GetNonTensor(K("name"))
	require.NoError(t, err)
	require.IsType(t, &NonTensorStack{}, name)
	assert.Equal(t, []int{8, 3}, name.(*NonTensorStack).Shape())

	p, err := td.Pad([]int{1, 0, 0, 2}, -1)
	require.NoError(t, err)
	assert.Equal(t, []int{5, 5}, p.BatchSize())
	assert.Equal(t, []int{5, 5, 5}, batchOf(t, p, "n"))
	pa := leaf(t, p, "a")
	assert.Equal(t, -1.0, pa.At(0, 0, 0))
	assert.Equal(t, -1.0, pa.At(1, 4, 1))
	assert.Equal(t, leaf(t, td, "a").At(0, 2, 1), pa.At(1, 2, 1))

	seqs := []*TensorDict{New(2), New(3)}
	require.NoError(t, seqs[0].Set(K("x"), tensor.Ones(tensor.Float32, 2, 4)))
	require.NoError(t, seqs[1].Set(K("x"), tensor.Ones(tensor.Float32, 3, 4)))
	ps, mask, err := PadSequence(seqs, 0, 0)
	require.NoError(t, err)
	assert.Equal(t, []int{2, 3}, ps.BatchSize())
	assert.Equal(t, 20.0, leaf(t, ps, "x").Sum())
	m, err := tensor.Data[bool](mask)
	require.NoError(t, err)
	assert.Equal(t, []bool{true, true, false, true, true, true}, m)
	_, _, err = PadSequence(nil, 0, 0)
	require.ErrorContains(t, err, "no tensordicts")
	_, _, err = PadSequence([]*TensorDict{New()}, 0, 0)
	require.ErrorContains(t, err, "tensordict 0: ")
}

func TestArithmeticEveryDType(t *testing.T) {
	for _, dt := range tensor.DTypes()[1:] {
		t.Run(dt.String(), func(t *testing.T) {
			mk := func(vals ...float64) *TensorDict {
				x, err := tensor.FromSlice(vals, 2, 2)
				require.NoError(t, err)
				td := New(2)
				require.NoError(t, td.Set(K("p", "x"), x.To(dt)))
				require.NoError(t, td.SetNonTensor(K("tag"), "v"))
				return td
			}
			a, b := mk(1, 2, 6, 4), mk(1, 2, 3, 1)
			vals := func(td *TensorDict) []float64 {
				x := leaf(t, td, "p", "x").To(tensor.Float64)
				d, err := tensor.Data[float64](x)
				require.NoError(t, err)
				return d
			}
			for _, c := range []struct {
				name string
				f    func(*TensorDict) (*TensorDict, error)
				want []float64
			}{
				{"Add", a.Add, []float64{2, 4, 9, 5}},
				{"Sub", a.Sub, []float64{0, 0, 3, 3}},
				{"Mul", a.Mul, []float64{1, 4, 18, 4}},
				{"Div", a.Div, []float64{1, 1, 2, 4}},
				{"Pow", a.Pow, []float64{1, 4, 216, 4}},
			} {
				got, err := c.f(b)
				require.NoError(t, err, c.name)
				if c.name == "Pow" && dt == tensor.Int8 {
					c.want[2] = 216 - 256 // wraps around, as in torch
				}
				assert.Equal(t, c.want, vals(got), c.name)
				v, err := got.GetNonTensor(K("tag"))
				require.NoError(t, err)
				assert.Equal(t, "v", v)
			}
			assert.Equal(t, []float64{3, 4, 8, 6}, vals(a.AddScalar(2)))
			assert.Equal(t, []float64{2, 4, 12, 8}, vals(a.MulScalar(2)))
			assert.Equal(t, []float64{0.5, 1, 3, 2}, vals(a.DivScalar(2)))
			if dt != tensor.Uint8 {
				assert.Equal(t, []float64{-1, 0, 4, 2}, vals(a.SubScalar(2)))
			}
			x := a.Clone()
			require.NoError(t, x.AddInPlace(b))
			require.NoError(t, x.MulScalarInPlace(2))
			require.NoError(t, x.SubInPlace(b))
			assert.Equal(t, []float64{3, 6, 15, 9}, vals(x))
			require.NoError(t, x.CopyFrom(b))
			assert.Equal(t, []float64{1, 2, 3, 1}, vals(x))
			require.NoError(t, x.Zero())
			assert.Equal(t, []float64{0, 0, 0, 0}, vals(x))
			require.NoError(t, x.Fill(7))
			assert.Equal(t, []float64{7, 7, 7, 7}, vals(x))
			floating := dt.IsFloat() || dt.IsComplex()
			if floating {
				require.NoError(t, x.DivScalarInPlace(7))
				require.NoError(t, x.DivInPlace(b))
				assert.InDeltaSlice(t, []float64{1, 0.5, 1.0 / 3, 1}, vals(x), 2e-3)
				l, err := a.Lerp(b, 0.5)
				require.NoError(t, err)
				assert.Equal(t, []float64{1, 2, 4.5, 2.5}, vals(l))
				require.NoError(t, x.LerpInPlace(b, 1))
				assert.Equal(t, vals(b), vals(x))
			} else {
				require.ErrorContains(t, x.DivScalarInPlace(2), "key p.x")
				_, err := a.Lerp(b, 0.5)
				require.ErrorContains(t, err, "key p.x")
			}
			n, err := a.Neg()
			require.NoError(t, err)
			if dt == tensor.Uint8 {
				assert.Equal(t, []float64{255, 254, 250, 252}, vals(n))
			} else {
				assert.Equal(t, []float64{-1, -2, -6, -4}, vals(n))
				ab, err := n.Abs()
				require.NoError(t, err)
				assert.Equal(t, []float64{1, 2, 6, 4}, vals(ab))
			}
			if !dt.IsComplex() {
				c, err := a.Clamp(2, 5)
				require.NoError(t, err)
				assert.Equal(t, []float64{2, 2, 5, 4}, vals(c))
				lt, err := a.Gt(b)
				require.NoError(t, err)
				g, _ := lt.Get(K("p", "x"))
				assert.Equal(t, []float64{0, 0, 1, 1}, vals(mustSet(t, g)))
				assert.Equal(t, []float64{1, 1, 0, 0}, vals(mustSet(t, leaf(t, a.LeScalar(2), "p", "x"))))
			}
			ok, err := a.AllClose(a.Clone(), 0, 0)
			require.NoError(t, err)
			assert.True(t, ok)
		})
	}
}

// mustSet wraps a bool tensor of shape [2 2] as the leaf p.x of a
// TensorDict, for the vals helper.
func mustSet(t *testing.T, x *tensor.Tensor) *TensorDict {
	t.Helper()
	td := New(2)
	require.NoError(t, td.Set(K("p", "x"), x))
	return td
}

func TestArithmeticErrors(t *testing.T) {
	td := algTD(t)
	other := algTD(t)
	require.NoError(t, other.Del(K("n", "b")))
	require.NoError(t, other.Set(K("n", "z"), tensor.Zeros(tensor.Int64, 4, 3, 5)))
	_, err := td.Add(other)
	require.ErrorContains(t, err, "tensordict: Add: key n.b missing from tensordict 1")
	before := leaf(t, td, "a").Sum()
	require.ErrorContains(t, td.AddInPlace(other), "key n.b missing")
	assert.Equal(t, before, leaf(t, td, "a").Sum(), "nothing written on a structure error")
	_, err = td.Mul(nil)
	require.ErrorContains(t, err, "tensordict 1 is nil")
	flat, err := td.Reshape(12)
	require.NoError(t, err)
	_, err = td.Sub(flat)
	require.ErrorContains(t, err, "tensordict 1 has batch size [12]")
	require.ErrorContains(t, td.MulScalarInPlace(0.5), "key n.b")
	_, err = td.Neg()
	require.NoError(t, err)
	bad := New(2)
	require.NoError(t, bad.Set(K("m"), tensor.Ones(tensor.Bool, 2)))
	_, err = bad.Neg()
	require.ErrorContains(t, err, "tensordict: Neg: key m")
	_, err = td.Where(nil, td)
	require.ErrorContains(t, err, "nil condition")
	_, err = td.MaskedFill(tensor.Ones(tensor.Bool, 5), 0)
	require.ErrorContains(t, err, "not a prefix")
}

func TestWhereMaskedFillAllAny(t *testing.T) {
	td := algTD(t)
	zero := td.MulScalar(0)
	cond, err := tensor.FromSlice([]bool{true, false, true, false}, 4)
	require.NoError(t, err)
	w, err := td.Where(cond, zero)
	require.NoError(t, err)
	a := leaf(t, w, "a")
	assert.Equal(t, 3.0, a.At(0, 1, 1))
	assert.Equal(t, leaf(t, td, "a").At(2, 1, 1), a.At(2, 1, 1))
	assert.Equal(t, 0.0, a.At(1, 1, 1))
	assert.Equal(t, 0.0, leaf(t, w, "n", "b").At(3, 2, 4))
	m, err := td.MaskedFill(cond, -5)
	require.NoError(t, err)
	assert.Equal(t, -5.0, leaf(t, m, "n", "b").At(0, 2, 4))
	assert.Equal(t, 123.0, leaf(t, m, "n", "b").At(1, 2, 3))
	require.NoError(t, td.MaskedFillInPlace(cond, 0))
	all, err := td.AllDim(1)
	require.NoError(t, err)
	assert.Equal(t, []int{4}, all.BatchSize())
	assert.Equal(t, []int{4, 5}, batchOf(t, all, "n"))
	ab := leaf(t, all, "a")
	assert.Equal(t, []int{4, 2}, ab.Shape())
	assert.Equal(t, 0.0, ab.At(0, 0))
	assert.Equal(t, 1.0, ab.At(1, 1))
	anyT, err := td.AnyDim(0)
	require.NoError(t, err)
	assert.Equal(t, 1.0, leaf(t, anyT, "a").At(0, 1))
}

func TestReductions(t *testing.T) {
	td := algTD(t)
	s, err := td.Sum()
	require.NoError(t, err)
	assert.Equal(t, []int{}, s.BatchSize())
	assert.Equal(t, 276.0, leaf(t, s, "a").At()) // 0 + ... + 23
	b := leaf(t, s, "n", "b")
	assert.Equal(t, tensor.Int64, b.DType())
	// Σ 100i+10j+l over 4x3x5 = 15*100*6 + 20*10*3 + 12*10
	assert.Equal(t, 9000.0+600+120, b.At())
	s0, err := td.Sum(0)
	require.NoError(t, err)
	assert.Equal(t, []int{3}, s0.BatchSize())
	assert.Equal(t, []int{3, 5}, batchOf(t, s0, "n"))
	assert.Equal(t, 1.0+7+13+19, leaf(t, s0, "a").At(0, 1))
	mx, err := td.Max(0, 1)
	require.NoError(t, err)
	assert.Equal(t, []float64{22, 23}, []float64{leaf(t, mx, "a").At(0), leaf(t, mx, "a").At(1)})
	mn, err := td.Min(-1)
	require.NoError(t, err)
	assert.Equal(t, 300.0, leaf(t, mn, "n", "b").At(3, 0))
	p, err := td.Prod(1)
	require.NoError(t, err)
	assert.Equal(t, 1.0*3*5, leaf(t, p, "a").At(0, 1))
	_, err = td.Mean()
	require.ErrorContains(t, err, "tensordict: Mean: key n.b")
	fl := td.To(tensor.Float64)
	mean, err := fl.Mean(0)
	require.NoError(t, err)
	assert.Equal(t, 9.0, leaf(t, mean, "a").At(0, 0)) // (0+6+12+18)/4
	v, err := fl.Var(0)
	require.NoError(t, err)
	assert.Equal(t, 60.0, leaf(t, v, "a").At(0, 0)) // deviations ±9, ±3: (81+9+9+81)/3
	sd, err := fl.StdCorrection(0, 0)
	require.NoError(t, err)
	assert.InDelta(t, math.Sqrt(45), leaf(t, sd, "a").At(1, 1), 1e-12)
	_, err = td.Sum(2)
	require.ErrorContains(t, err, "dimension 2 out of range for batch size [4 3]")
	_, err = td.Sum(0, -2)
	require.ErrorContains(t, err, "repeated")
	nv, err := s.GetNonTensor(K("name"))
	require.NoError(t, err)
	assert.Equal(t, "x", nv)
}

func TestMaxMinDim(t *testing.T) {
	td := algTD(t)
	v, i, err := td.MaxDim(1)
	require.NoError(t, err)
	assert.Equal(t, []int{4}, v.BatchSize())
	assert.Equal(t, []int{4, 5}, batchOf(t, i, "n"))
	assert.Equal(t, 6.0*3+2*2+1, leaf(t, v, "a").At(3, 1))
	assert.Equal(t, 2.0, leaf(t, i, "a").At(3, 1))
	assert.Equal(t, tensor.Int64, leaf(t, i, "n", "b").DType())
	v, i, err = td.MinDim(-2)
	require.NoError(t, err)
	assert.Equal(t, []int{3}, v.BatchSize())
	assert.Equal(t, 24.0, leaf(t, v, "n", "b").At(2, 4)) // b[i,j,l] = 100i+10j+l is least at i = 0
	assert.Equal(t, 0.0, leaf(t, i, "n", "b").At(2, 4))
	_, _, err = td.MaxDim(2)
	require.ErrorContains(t, err, "dimension 2 out of range")
}
