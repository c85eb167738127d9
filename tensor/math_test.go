package tensor

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// numericDTypes are the dtypes with arithmetic (every dtype but bool).
func numericDTypes() []DType { return DTypes()[1:] }

// realDTypes are the numeric dtypes without the complex ones.
func realDTypes() []DType { return DTypes()[1:10] }

func TestPowEveryDType(t *testing.T) {
	for _, dt := range numericDTypes() {
		t.Run(dt.String(), func(t *testing.T) {
			a := of(t, dt, []float64{1, 2, 3, 4}, 2, 2)
			e := of(t, dt, []float64{3, 2}, 2) // broadcast row
			got, err := a.Pow(e)
			require.NoError(t, err)
			assert.Equal(t, dt, got.DType())
			assert.Equal(t, []float64{1, 4, 27, 16}, values(t, got))
			s, err := a.PowScalar(2)
			require.NoError(t, err)
			assert.Equal(t, dt, s.DType())
			assert.Equal(t, []float64{1, 4, 9, 16}, values(t, s))
			require.NoError(t, a.PowScalarInPlace(3))
			assert.Equal(t, []float64{1, 8, 27, 64}, values(t, a))
		})
	}
	// Integers wrap around exactly: 3^5 = 243 = -13 in int8; a negative
	// exponent tensor gives 0 except for bases 1 and -1.
	a := of(t, Int8, []float64{3, -1, 1, 2}, 4)
	got, err := a.Pow(of(t, Int8, []float64{5, -3, -2, -1}, 4))
	require.NoError(t, err)
	assert.Equal(t, []float64{-13, -1, 1, 0}, values(t, got))
	_, err = a.PowScalar(-1)
	require.ErrorContains(t, err, "negative integer powers are not allowed")
	h, err := a.PowScalar(0.5)
	require.NoError(t, err)
	assert.Equal(t, Float32, h.DType())
	_, err = Ones(Bool, 2).Pow(Ones(Bool, 2))
	require.ErrorContains(t, err, "bool to a bool power")
	_, err = Ones(Float32, 2).Pow(Ones(Float32, 3))
	require.ErrorContains(t, err, "do not broadcast")
	// float16: 1.1^2 computed in float32, rounded once to half.
	f16 := of(t, Float16, []float64{1.1}, 1)
	sq, err := f16.PowScalar(2)
	require.NoError(t, err)
	x := float32(F16FromFloat32(1.1).Float32())
	assert.Equal(t, float64(F16FromFloat32(x*x).Float32()), sq.At(0))
	// An int tensor cannot take a float power in place.
	require.ErrorContains(t, Ones(Int32, 2).PowScalarInPlace(0.5), "cannot be stored in int32 tensor")
}

func TestNegAbs(t *testing.T) {
	for _, dt := range numericDTypes() {
		t.Run(dt.String(), func(t *testing.T) {
			vals := []float64{-3, 0, 2, -1}
			if dt == Uint8 {
				vals = []float64{253, 0, 2, 255}
			}
			a := of(t, dt, vals, 4)
			n, err := a.Neg()
			require.NoError(t, err)
			want := []float64{3, 0, -2, 1}
			if dt == Uint8 {
				want = []float64{3, 0, 254, 1}
			}
			assert.Equal(t, want, values(t, n))
			ab, err := a.Abs()
			require.NoError(t, err)
			want = []float64{3, 0, 2, 1}
			if dt == Uint8 {
				want = vals
			}
			assert.Equal(t, want, values(t, ab))
			switch dt {
			case Complex64:
				assert.Equal(t, Float32, ab.DType())
				require.ErrorContains(t, a.AbsInPlace(), "cannot be stored in place")
			case Complex128:
				assert.Equal(t, Float64, ab.DType())
			default:
				assert.Equal(t, dt, ab.DType())
				require.NoError(t, a.AbsInPlace())
				assert.Equal(t, want, values(t, a))
			}
			require.NoError(t, a.NegInPlace())
		})
	}
	// int8 wraps: -(-128) = -128 and |-128| = -128, as in torch.
	m := of(t, Int8, []float64{-128}, 1)
	n, _ := m.Neg()
	ab, _ := m.Abs()
	assert.Equal(t, []float64{-128}, values(t, n))
	assert.Equal(t, []float64{-128}, values(t, ab))
	c, err := FromSlice([]complex128{3 + 4i})
	require.NoError(t, err)
	ab, err = c.Abs()
	require.NoError(t, err)
	assert.Equal(t, []float64{5}, values(t, ab))
	_, err = Ones(Bool, 1).Neg()
	require.ErrorContains(t, err, "bool")
	_, err = Ones(Bool, 1).Abs()
	require.ErrorContains(t, err, "bool")
	assert.Equal(t, []bool{false, true}, bools(t, of(t, Int32, []float64{3, 0}, 2).LogicalNot()))
}

func TestClamp(t *testing.T) {
	for _, dt := range realDTypes() {
		t.Run(dt.String(), func(t *testing.T) {
			a := of(t, dt, []float64{0, 3, 7, 10}, 4)
			got, err := a.Clamp(2, 8)
			require.NoError(t, err)
			assert.Equal(t, dt, got.DType())
			assert.Equal(t, []float64{2, 3, 7, 8}, values(t, got))
			lo, err := a.Clamp(5, math.Inf(1))
			require.NoError(t, err)
			assert.Equal(t, []float64{5, 5, 7, 10}, values(t, lo))
			inv, err := a.Clamp(8, 2) // lo > hi: every element is hi
			require.NoError(t, err)
			assert.Equal(t, []float64{2, 2, 2, 2}, values(t, inv))
			require.NoError(t, a.ClampInPlace(math.Inf(-1), 4))
			assert.Equal(t, []float64{0, 3, 4, 4}, values(t, a))
		})
	}
	f, err := of(t, Int64, []float64{0, 3}, 2).Clamp(0.5, 2.5)
	require.NoError(t, err)
	assert.Equal(t, Float32, f.DType())
	assert.Equal(t, []float64{0.5, 2.5}, values(t, f))
	nan, err := f64s(t, []float64{math.NaN(), 1}, 2).Clamp(0, 0.5)
	require.NoError(t, err)
	assert.True(t, math.IsNaN(nan.At(0)))
	assert.Equal(t, 0.5, nan.At(1))
	for _, dt := range []DType{Bool, Complex64} {
		_, err := Ones(dt, 1).Clamp(0, 1)
		require.ErrorContains(t, err, "not supported for "+dt.String())
	}
	require.ErrorContains(t, Ones(Int16, 1).ClampInPlace(0.5, 1), "cannot be stored")
}

func TestLerp(t *testing.T) {
	for _, dt := range []DType{Float16, BFloat16, Float32, Float64, Complex64, Complex128} {
		t.Run(dt.String(), func(t *testing.T) {
			s := of(t, dt, []float64{0, 2, 4, 8}, 4)
			e := of(t, dt, []float64{8, 4, 4, 0}, 4)
			got, err := s.LerpScalar(e, 0.25)
			require.NoError(t, err)
			assert.Equal(t, dt, got.DType())
			assert.Equal(t, []float64{2, 2.5, 4, 6}, values(t, got))
			w := of(t, dt, []float64{0, 1, 0.5, 0.75}, 4)
			got, err = s.Lerp(e, w)
			require.NoError(t, err)
			assert.Equal(t, []float64{0, 4, 4, 2}, values(t, got))
			require.NoError(t, s.LerpInPlace(e, of(t, dt, []float64{1}, 1)))
			assert.Equal(t, values(t, e), values(t, s), "weight 1 gives end exactly")
		})
	}
	_, err := Ones(Int32, 2).LerpScalar(Ones(Int32, 2), 0.5)
	require.ErrorContains(t, err, "needs floating or complex")
	_, err = Ones(Int32, 2).Lerp(Ones(Int32, 2), Ones(Int32, 2))
	require.ErrorContains(t, err, "needs floating or complex")
	_, err = Ones(Float32, 2).Lerp(Ones(Float32, 3), Ones(Float32, 1))
	require.ErrorContains(t, err, "do not broadcast")
}

func TestWhereMaskedFill(t *testing.T) {
	cond, err := FromSlice([]bool{true, false, false, true}, 2, 2)
	require.NoError(t, err)
	for _, dt := range DTypes() {
		t.Run(dt.String(), func(t *testing.T) {
			x := of(t, dt, []float64{1, 1, 1, 1}, 2, 2)
			y := of(t, dt, []float64{0}, 1)
			got, err := Where(cond, x, y)
			require.NoError(t, err)
			assert.Equal(t, dt, got.DType())
			assert.Equal(t, []float64{1, 0, 0, 1}, values(t, got))
			m, err := x.MaskedFill(cond, 0)
			require.NoError(t, err)
			assert.Equal(t, []float64{0, 1, 1, 0}, values(t, m))
			row, _ := x.Select(0, 1) // a view: writes reach x
			c1, _ := cond.Select(0, 0)
			require.NoError(t, row.MaskedFillInPlace(c1, 0))
			assert.Equal(t, []float64{1, 1, 0, 1}, values(t, x))
		})
	}
	got, err := Where(cond, of(t, Int32, []float64{5}, 1), f64s(t, []float64{0.5}, 1))
	require.NoError(t, err)
	assert.Equal(t, Float64, got.DType(), "promoted")
	assert.Equal(t, []float64{5, 0.5, 0.5, 5}, values(t, got))
	_, err = Where(Ones(Int8, 2), Ones(Int8, 2), Ones(Int8, 2))
	require.ErrorContains(t, err, "condition is int8")
	_, err = Where(cond, Ones(Int8, 3), Ones(Int8, 2))
	require.ErrorContains(t, err, "do not broadcast")
	_, err = Ones(Int8, 3).MaskedFill(Ones(Int8, 3), 1)
	require.ErrorContains(t, err, "mask is int8")
	_, err = Ones(Int8, 3).MaskedFill(cond, 1)
	require.ErrorContains(t, err, "do not broadcast")
	require.ErrorContains(t, Ones(Int8, 2).MaskedFillInPlace(cond, 1), "does not broadcast to [2]")
}

func TestIsClose(t *testing.T) {
	a := f64s(t, []float64{1, math.NaN(), math.Inf(1), 1, 100}, 5)
	b := f64s(t, []float64{1 + 1e-9, math.NaN(), math.Inf(1), 2, 101}, 5)
	c, err := a.IsClose(b, 1e-5, 1e-8, false)
	require.NoError(t, err)
	assert.Equal(t, []bool{true, false, true, false, false}, bools(t, c))
	c, err = a.IsClose(b, 0.01, 0, true)
	require.NoError(t, err)
	assert.Equal(t, []bool{true, true, true, false, true}, bools(t, c))
	ok, err := a.AllClose(a, 0, 0)
	require.NoError(t, err)
	assert.False(t, ok, "NaN is not close to NaN in AllClose")
	z, _ := FromSlice([]complex64{1 + 1i, complex(float32(math.NaN()), 0)})
	c, err = z.IsClose(z, 0, 0, true)
	require.NoError(t, err)
	assert.Equal(t, []bool{true, true}, bools(t, c))
	_, err = a.IsClose(Ones(Float64, 2), 0, 0, false)
	require.ErrorContains(t, err, "IsClose")
}

func TestScalarInPlace(t *testing.T) {
	for _, dt := range numericDTypes() {
		t.Run(dt.String(), func(t *testing.T) {
			base := of(t, dt, iota64(12), 3, 4)
			view, err := base.Transpose(0, 1) // strided: the generic path
			require.NoError(t, err)
			for _, x := range []*Tensor{base.Clone(), view} {
				want := values(t, x.MulScalar(3).AddScalar(2).SubScalar(1))
				require.NoError(t, x.MulScalarInPlace(3))
				require.NoError(t, x.AddScalarInPlace(2))
				require.NoError(t, x.SubScalarInPlace(1))
				assert.Equal(t, want, values(t, x))
				if category(dt) >= 2 {
					require.NoError(t, x.DivScalarInPlace(2))
					for i, w := range want {
						want[i] = w / 2
					}
					assert.InDeltaSlice(t, want, values(t, x), 0.02)
				} else {
					require.ErrorContains(t, x.DivScalarInPlace(2), "cannot be stored")
					require.ErrorContains(t, x.MulScalarInPlace(0.5), "cannot be stored")
				}
			}
		})
	}
	e, _ := Ones(Float32, 1).Expand(3)
	require.ErrorContains(t, e.MulScalarInPlace(2), "repeat elements")
	require.ErrorContains(t, Ones(Bool, 1).AddScalarInPlace(1), "cannot be stored in bool")
}
