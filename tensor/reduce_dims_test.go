package tensor

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReduceDimsEveryDType(t *testing.T) {
	// x = [[1 2 3] [4 5 6]]: sums by hand.
	for _, dt := range DTypes() {
		t.Run(dt.String(), func(t *testing.T) {
			vals := []float64{1, 2, 3, 4, 5, 6}
			if dt == Bool {
				vals = []float64{1, 0, 1, 1, 1, 0}
			}
			x := of(t, dt, vals, 2, 3)
			sum, err := x.SumDims([]int{1}, false)
			require.NoError(t, err)
			prod, err := x.ProdDims([]int{0}, true)
			require.NoError(t, err)
			wantDT := dt
			if category(dt) <= 1 {
				wantDT = Int64
			}
			assert.Equal(t, wantDT, sum.DType())
			assert.Equal(t, wantDT, prod.DType())
			assert.Equal(t, []int{2}, sum.Shape())
			assert.Equal(t, []int{1, 3}, prod.Shape())
			if dt == Bool {
				assert.Equal(t, []float64{2, 2}, values(t, sum))
				assert.Equal(t, []float64{1, 0, 0}, values(t, prod))
			} else {
				assert.Equal(t, []float64{6, 15}, values(t, sum))
				assert.Equal(t, []float64{4, 10, 18}, values(t, prod))
			}
			all, err := x.SumDims(nil, false)
			require.NoError(t, err)
			assert.Equal(t, []int{}, all.Shape())
			if !dt.IsComplex() {
				mx, err := x.MaxDims([]int{-1}, false)
				require.NoError(t, err)
				mn, err := x.MinDims([]int{0, 1}, true)
				require.NoError(t, err)
				assert.Equal(t, dt, mx.DType())
				assert.Equal(t, []int{1, 1}, mn.Shape())
				if dt == Bool {
					assert.Equal(t, []float64{1, 1}, values(t, mx))
					assert.Equal(t, []float64{0}, values(t, mn))
				} else {
					assert.Equal(t, []float64{3, 6}, values(t, mx))
					assert.Equal(t, []float64{1}, values(t, mn))
				}
			} else {
				_, err := x.MaxDims(nil, false)
				require.ErrorContains(t, err, "not supported for "+dt.String())
			}
			if category(dt) >= 2 {
				mean, err := x.MeanDims([]int{0}, false)
				require.NoError(t, err)
				assert.Equal(t, dt, mean.DType())
				assert.Equal(t, []float64{2.5, 3.5, 4.5}, values(t, mean))
				v, err := x.VarDims([]int{1}, 1, false)
				require.NoError(t, err)
				assert.Equal(t, []float64{1, 1}, values(t, v)) // ((1)^2+0+(1)^2)/2
				s, err := x.StdDims(nil, 0, false)
				require.NoError(t, err)
				assert.InDelta(t, math.Sqrt(17.5/6), s.At(), 1e-2) // population std of 1..6
				assert.False(t, s.DType().IsComplex())
			} else {
				_, err := x.MeanDims(nil, false)
				require.ErrorContains(t, err, "needs a floating or complex tensor")
				_, err = x.StdDims(nil, 1, false)
				require.ErrorContains(t, err, "needs a floating or complex tensor")
			}
			anyT, err := x.AnyDims([]int{0}, false)
			require.NoError(t, err)
			allT, err := x.AllDims([]int{1}, false)
			require.NoError(t, err)
			boolDT := Bool
			if dt == Uint8 {
				boolDT = Uint8
			}
			assert.Equal(t, boolDT, anyT.DType())
			assert.Equal(t, []float64{1, 1, 1}, values(t, anyT))
			if dt == Bool {
				assert.Equal(t, []float64{0, 0}, values(t, allT))
			} else {
				assert.Equal(t, []float64{1, 1}, values(t, allT))
			}
		})
	}
}

func TestReduceDimsEdges(t *testing.T) {
	// int8 sums are exact in int64: 100+100 does not wrap.
	s, err := of(t, Int8, []float64{100, 100}, 2).SumDims(nil, false)
	require.NoError(t, err)
	assert.Equal(t, 200.0, s.At())
	// A NaN propagates through max and min.
	m, err := f64s(t, []float64{1, math.NaN(), 3}, 3).MaxDims(nil, false)
	require.NoError(t, err)
	assert.True(t, math.IsNaN(m.At()))
	// Empty reductions: sum 0, prod 1, all true, any false; max is an error.
	e := Zeros(Float32, 2, 0)
	for _, c := range []struct {
		f    func([]int, bool) (*Tensor, error)
		want float64
	}{{e.SumDims, 0}, {e.ProdDims, 1}, {e.AllDims, 1}, {e.AnyDims, 0}} {
		r, err := c.f([]int{1}, false)
		require.NoError(t, err)
		assert.Equal(t, []float64{c.want, c.want}, values(t, r))
	}
	_, err = e.MaxDims([]int{1}, false)
	require.ErrorContains(t, err, "reduction over no elements")
	mean, err := e.MeanDims([]int{1}, false)
	require.NoError(t, err)
	assert.True(t, math.IsNaN(mean.At(0)))
	// Unbiased variance of one element divides by zero.
	v, err := Ones(Float64, 1).VarDims(nil, 1, false)
	require.NoError(t, err)
	assert.True(t, math.IsNaN(v.At()))
	// Variance of complex values uses the squared modulus.
	z, _ := FromSlice([]complex128{1i, -1i})
	v, err = z.VarDims(nil, 0, false)
	require.NoError(t, err)
	assert.Equal(t, Float64, v.DType())
	assert.Equal(t, 1.0, v.At())
	// Bad dimensions.
	x := Ones(Float32, 2, 3)
	_, err = x.SumDims([]int{2}, false)
	require.ErrorContains(t, err, "dimension 2 out of range")
	_, err = x.SumDims([]int{1, -1}, false)
	require.ErrorContains(t, err, "repeated")
	// A strided view reduces like its copy.
	tr, _ := f64s(t, iota64(6), 2, 3).Transpose(0, 1)
	r, err := tr.SumDims([]int{0}, false)
	require.NoError(t, err)
	assert.Equal(t, []float64{3, 12}, values(t, r))
}

func TestMaxMinDim(t *testing.T) {
	for _, dt := range DTypes()[:10] {
		t.Run(dt.String(), func(t *testing.T) {
			vals := []float64{3, 1, 3, 0, 5, 2}
			if dt == Bool {
				vals = []float64{0, 1, 1, 0, 0, 0}
			}
			x := of(t, dt, vals, 2, 3)
			v, i, err := x.MaxDim(1, false)
			require.NoError(t, err)
			assert.Equal(t, dt, v.DType())
			assert.Equal(t, Int64, i.DType())
			if dt == Bool {
				assert.Equal(t, []float64{1, 0}, values(t, v))
				assert.Equal(t, []float64{1, 0}, values(t, i), "first on ties")
			} else {
				assert.Equal(t, []float64{3, 5}, values(t, v))
				assert.Equal(t, []float64{0, 1}, values(t, i), "first on ties")
			}
			v, i, err = x.MinDim(0, true)
			require.NoError(t, err)
			assert.Equal(t, []int{1, 3}, v.Shape())
			if dt != Bool {
				assert.Equal(t, []float64{0, 1, 2}, values(t, v))
				assert.Equal(t, []float64{1, 0, 1}, values(t, i))
			}
		})
	}
	big, err := FromSlice([]int64{1<<60 + 1, 1 << 60, 1<<60 + 2})
	require.NoError(t, err)
	_, i, err := big.MinDim(0, false)
	require.NoError(t, err)
	assert.Equal(t, 1.0, i.At(), "int64 compared exactly")
	_, i, err = big.MaxDim(0, false)
	require.NoError(t, err)
	assert.Equal(t, 2.0, i.At())
	_, i, err = f64s(t, []float64{1, math.NaN(), 5}, 3).MaxDim(0, false)
	require.NoError(t, err)
	assert.Equal(t, 1.0, i.At(), "NaN wins")
	_, _, err = Zeros(Float32, 2, 0).MaxDim(1, false)
	require.ErrorContains(t, err, "is empty")
	_, _, err = Zeros(Float32, 0, 3).MaxDim(0, false)
	require.ErrorContains(t, err, "is empty")
	v, _, err := Zeros(Float32, 2, 0).MaxDim(0, false)
	require.NoError(t, err, "no rows: nothing to pick")
	assert.Equal(t, []int{0}, v.Shape())
	_, _, err = Ones(Complex64, 2).MaxDim(0, false)
	require.ErrorContains(t, err, "not supported")
	_, _, err = Ones(Float32, 2).MinDim(1, false)
	require.ErrorContains(t, err, "out of range")
}
