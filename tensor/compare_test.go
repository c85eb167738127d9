package tensor

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCompareEveryDType(t *testing.T) {
	for _, dt := range DTypes() {
		t.Run(dt.String(), func(t *testing.T) {
			a := of(t, dt, []float64{0, 1, 1, 0}, 2, 2)
			b := of(t, dt, []float64{1, 1, 0, 0}, 2, 2)
			for _, c := range []struct {
				name string
				f    func(*Tensor) (*Tensor, error)
				want []bool
			}{
				{"Eq", a.Eq, []bool{false, true, false, true}},
				{"Ne", a.Ne, []bool{true, false, true, false}},
				{"Lt", a.Lt, []bool{true, false, false, false}},
				{"Le", a.Le, []bool{true, true, false, true}},
				{"Gt", a.Gt, []bool{false, false, true, false}},
				{"Ge", a.Ge, []bool{false, true, true, true}},
			} {
				got, err := c.f(b)
				require.NoError(t, err, c.name)
				assert.Equal(t, []int{2, 2}, got.Shape(), c.name)
				assert.Equal(t, c.want, bools(t, got), c.name)
			}
			for _, c := range []struct {
				name string
				f    func(float64) *Tensor
				want []bool
			}{
				{"EqScalar", a.EqScalar, []bool{false, true, true, false}},
				{"NeScalar", a.NeScalar, []bool{true, false, false, true}},
				{"LtScalar", a.LtScalar, []bool{true, false, false, true}},
				{"LeScalar", a.LeScalar, []bool{true, true, true, true}},
				{"GtScalar", a.GtScalar, []bool{false, false, false, false}},
				{"GeScalar", a.GeScalar, []bool{false, true, true, false}},
			} {
				assert.Equal(t, c.want, bools(t, c.f(1)), c.name)
			}
			assert.True(t, a.Equal(a.Clone()))
			assert.False(t, a.Equal(b))
			assert.True(t, a.Any())
			assert.False(t, a.All())
			assert.True(t, Ones(dt, 3).All())
			assert.False(t, Zeros(dt, 3).Any())
		})
	}
}

func TestCompareBroadcastAndPromote(t *testing.T) {
	a := of(t, Int32, []float64{1, 2, 3, 4, 5, 6}, 2, 3)
	row := of(t, Float16, []float64{1, 5, 6}, 3)
	got, err := a.Ge(row)
	require.NoError(t, err)
	assert.Equal(t, []bool{true, false, false, true, true, true}, bools(t, got))

	col := of(t, Uint8, []float64{2, 5}, 2, 1)
	got, err = a.Eq(col)
	require.NoError(t, err)
	assert.Equal(t, []int{2, 3}, got.Shape())
	assert.Equal(t, []bool{false, true, false, false, true, false}, bools(t, got))

	// A 0-d tensor broadcasts against anything.
	s, err := of(t, Float64, []float64{3}, 1).Reshape()
	require.NoError(t, err)
	got, err = s.Lt(a)
	require.NoError(t, err)
	assert.Equal(t, []bool{false, false, false, true, true, true}, bools(t, got))

	_, err = a.Eq(of(t, Int32, []float64{1, 2}, 2))
	require.EqualError(t, err, "tensor: Eq: shapes [2 3] and [2] do not broadcast")
}

func TestCompareOnViews(t *testing.T) {
	x := f64s(t, iota64(12), 3, 4)
	tr, err := x.Transpose(0, 1) // 4x3, not contiguous
	require.NoError(t, err)
	ex, err := of(t, Float64, []float64{0, 4, 8}, 3).Expand(4, 3)
	require.NoError(t, err)
	got, err := tr.Eq(ex)
	require.NoError(t, err)
	assert.Equal(t, []bool{true, true, true, false, false, false, false, false, false, false, false, false}, bools(t, got))
}

func TestCompareSpecialValues(t *testing.T) {
	nan := math.NaN()
	x := f64s(t, []float64{nan, 1, math.Inf(1)}, 3)
	assert.Equal(t, []bool{false, true, false}, bools(t, x.EqScalar(1)))
	assert.Equal(t, []bool{true, true, true}, bools(t, x.NeScalar(nan)))
	assert.False(t, x.Equal(x), "NaN is not equal to itself, as in torch.equal")
	assert.True(t, x.All(), "NaN counts as true")

	// Integers compare exactly with integral scalars, beyond float64's 2^53.
	big, _ := FromSlice([]int64{1<<53 + 1, 1 << 53})
	assert.Equal(t, []bool{false, true}, bools(t, big.EqScalar(1<<53)))
	// And as floats with fractional ones.
	i, _ := FromSlice([]int8{1, 2})
	assert.Equal(t, []bool{true, false}, bools(t, i.LtScalar(1.5)))

	// Complex numbers are ordered by real, then imaginary part.
	c, _ := FromSlice([]complex128{1 + 1i, 1 - 1i, 2, complex(nan, 0)})
	assert.Equal(t, []bool{false, true, false, false}, bools(t, c.LtScalar(1)))
	assert.Equal(t, []bool{false, false, true, false}, bools(t, c.EqScalar(2)))
	d, _ := FromSlice([]complex64{1, 1, 1, 1})
	got, err := c.Gt(d)
	require.NoError(t, err)
	assert.Equal(t, []bool{true, false, true, false}, bools(t, got))
}

func TestEqualChecksDTypeAndShape(t *testing.T) {
	a := Ones(Float32, 2, 2)
	assert.False(t, a.Equal(Ones(Float64, 2, 2)))
	assert.False(t, a.Equal(Ones(Float32, 4)))
	assert.True(t, Zeros(Int8, 0).Equal(Zeros(Int8, 0)))
	assert.True(t, Zeros(Int8, 0).All())
	assert.False(t, Zeros(Int8, 0).Any())
}
