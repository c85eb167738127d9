package tensor

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestArithEveryDType(t *testing.T) {
	for _, dt := range DTypes() {
		t.Run(dt.String(), func(t *testing.T) {
			a := of(t, dt, []float64{1, 2, 6, 4}, 2, 2)
			b := of(t, dt, []float64{1, 2, 3, 1}, 2, 2)
			if dt == Bool {
				a = of(t, dt, []float64{0, 1, 1, 0}, 2, 2)
				b = of(t, dt, []float64{0, 0, 1, 1}, 2, 2)
				sum, err := a.Add(b)
				require.NoError(t, err)
				assert.Equal(t, []float64{0, 1, 1, 1}, values(t, sum), "or")
				prod, err := a.Mul(b)
				require.NoError(t, err)
				assert.Equal(t, []float64{0, 0, 1, 0}, values(t, prod), "and")
				_, err = a.Sub(b)
				require.Error(t, err)
				q, err := a.Div(b)
				require.NoError(t, err)
				assert.Equal(t, Float32, q.DType())
				return
			}
			for _, c := range []struct {
				name string
				f    func(*Tensor) (*Tensor, error)
				want []float64
			}{
				{"Add", a.Add, []float64{2, 4, 9, 5}},
				{"Sub", a.Sub, []float64{0, 0, 3, 3}},
				{"Mul", a.Mul, []float64{1, 4, 18, 4}},
				{"Div", a.Div, []float64{1, 1, 2, 4}},
			} {
				got, err := c.f(b)
				require.NoError(t, err, c.name)
				assert.Equal(t, c.want, values(t, got), c.name)
				wantDT := dt
				if c.name == "Div" && dt.IsInteger() {
					wantDT = Float32
				}
				assert.Equal(t, wantDT, got.DType(), c.name)
			}
			for _, c := range []struct {
				name string
				f    func(float64) *Tensor
				want []float64
			}{
				{"AddScalar", a.AddScalar, []float64{3, 4, 8, 6}},
				{"SubScalar", a.SubScalar, []float64{-1, 0, 4, 2}},
				{"MulScalar", a.MulScalar, []float64{2, 4, 12, 8}},
				{"DivScalar", a.DivScalar, []float64{0.5, 1, 3, 2}},
			} {
				got := c.f(2)
				want := c.want
				if dt == Uint8 && c.name == "SubScalar" {
					want = []float64{255, 0, 4, 2}
				}
				assert.Equal(t, want, values(t, got), c.name)
			}
			// In place, with a broadcast row.
			x := a.Clone()
			require.NoError(t, x.AddInPlace(of(t, dt, []float64{1, 0}, 2)))
			assert.Equal(t, []float64{2, 2, 7, 4}, values(t, x))
			require.NoError(t, x.MulInPlace(of(t, dt, []float64{2}, 1)))
			assert.Equal(t, []float64{4, 4, 14, 8}, values(t, x))
			require.NoError(t, x.SubInPlace(b))
			assert.Equal(t, []float64{3, 2, 11, 7}, values(t, x))
			if dt.IsFloat() || dt.IsComplex() {
				require.NoError(t, x.DivInPlace(of(t, dt, []float64{1, 2, 11, 7}, 2, 2)))
				assert.Equal(t, []float64{3, 1, 1, 1}, values(t, x))
			} else {
				require.EqualError(t, x.DivInPlace(b), "tensor: DivInPlace: result float32 cannot be stored in "+dt.String()+" tensor")
			}
		})
	}
}

func TestArithBroadcast(t *testing.T) {
	a := f64s(t, iota64(6), 2, 3)
	col := of(t, Int32, []float64{10, 20}, 2, 1)
	got, err := a.Add(col)
	require.NoError(t, err)
	assert.Equal(t, Float64, got.DType())
	assert.Equal(t, []float64{10, 11, 12, 23, 24, 25}, values(t, got))

	// [2,1] with [3] gives [2,3].
	row := of(t, Float32, []float64{1, 2, 3}, 3)
	got, err = col.Mul(row)
	require.NoError(t, err)
	assert.Equal(t, []int{2, 3}, got.Shape())
	assert.Equal(t, Float32, got.DType())
	assert.Equal(t, []float64{10, 20, 30, 20, 40, 60}, values(t, got))

	// A 0-d tensor operand.
	s, _ := f64s(t, []float64{2}, 1).Reshape()
	got, err = s.Sub(a)
	require.NoError(t, err)
	assert.Equal(t, []float64{2, 1, 0, -1, -2, -3}, values(t, got))

	_, err = a.Add(f64s(t, iota64(6), 3, 2))
	require.EqualError(t, err, "tensor: Add: shapes [2 3] and [3 2] do not broadcast")
	err = col.AddInPlace(a)
	require.EqualError(t, err, "tensor: AddInPlace: shape [2 3] does not broadcast to [2 1]")
	e, _ := col.Expand(2, 3)
	require.EqualError(t, e.AddInPlace(col), "tensor: AddInPlace: tensor of shape [2 3] has strides [1 0] that repeat elements")
	require.EqualError(t, col.AddInPlace(Ones(Float32, 1)), "tensor: AddInPlace: result float32 cannot be stored in int32 tensor")
}

func TestArithOnViewsAndAliases(t *testing.T) {
	x := f64s(t, iota64(6), 2, 3)
	tr, _ := x.Transpose(0, 1)
	got, err := tr.Add(tr)
	require.NoError(t, err)
	assert.Equal(t, []float64{0, 6, 2, 8, 4, 10}, values(t, got))
	// In place with an operand aliasing the destination.
	flat, err := tr.Reshape(2, 3) // [[0 3 1] [4 2 5]], a copy
	require.NoError(t, err)
	require.NoError(t, x.AddInPlace(flat))
	assert.Equal(t, []float64{0, 4, 3, 7, 6, 10}, values(t, x))
	require.NoError(t, tr.AddInPlace(tr))
	assert.Equal(t, []float64{0, 8, 6, 14, 12, 20}, values(t, x))
	// An operand overlapping the destination shifted by one element.
	y := f64s(t, iota64(4), 4)
	head, _ := y.Narrow(0, 0, 3)
	tail, _ := y.Narrow(0, 1, 3)
	require.NoError(t, tail.AddInPlace(head))
	assert.Equal(t, []float64{0, 1, 3, 5}, values(t, y))
}

func TestArithSpecial(t *testing.T) {
	// Integers wrap around.
	i8, _ := FromSlice([]int8{127, -128})
	got, err := i8.Add(of(t, Int8, []float64{1, -1}, 2))
	require.NoError(t, err)
	assert.Equal(t, []float64{-128, 127}, values(t, got))
	// uint8 with int8 promotes to int16.
	got, err = of(t, Uint8, []float64{200}, 1).Add(of(t, Int8, []float64{100}, 1))
	require.NoError(t, err)
	assert.Equal(t, Int16, got.DType())
	assert.Equal(t, []float64{300}, values(t, got))
	// Division by zero.
	got, err = f64s(t, []float64{1, -1, 0}, 3).Div(Zeros(Float64, 3))
	require.NoError(t, err)
	v := values(t, got)
	assert.True(t, math.IsInf(v[0], 1) && math.IsInf(v[1], -1) && math.IsNaN(v[2]))
	got, err = of(t, Int64, []float64{1}, 1).Div(Zeros(Int64, 1))
	require.NoError(t, err)
	assert.True(t, math.IsInf(values(t, got)[0], 1))
	// Scalars behave like Python numbers.
	assert.Equal(t, Int32, of(t, Int32, []float64{1}, 1).AddScalar(2).DType())
	assert.Equal(t, Float32, of(t, Int32, []float64{1}, 1).AddScalar(0.5).DType())
	assert.Equal(t, Int64, Ones(Bool, 1).AddScalar(1).DType())
	assert.Equal(t, Float16, Ones(Float16, 1).MulScalar(3).DType())
	// Halves compute in float32 and round once: 2048 + 1 ties to 2048.
	h := of(t, Float16, []float64{2048}, 1)
	got, err = h.Add(Ones(Float16, 1))
	require.NoError(t, err)
	assert.Equal(t, []float64{2048}, values(t, got))
	got, err = h.Add(of(t, Float16, []float64{3}, 1))
	require.NoError(t, err)
	assert.Equal(t, []float64{2052}, values(t, got))
	// float16 with bfloat16 gives float32.
	got, err = h.Add(Ones(BFloat16, 1))
	require.NoError(t, err)
	assert.Equal(t, Float32, got.DType())
	assert.Equal(t, []float64{2049}, values(t, got))
	// Complex.
	c, _ := FromSlice([]complex128{1 + 2i})
	got, err = c.Mul(c)
	require.NoError(t, err)
	assert.Equal(t, complex(-3, 4), got.AtComplex(0))
	got, err = c.Add(f64s(t, []float64{1}, 1))
	require.NoError(t, err)
	assert.Equal(t, Complex128, got.DType())
	assert.Equal(t, complex(2, 2), got.AtComplex(0))
}

func TestPromoteTypes(t *testing.T) {
	for _, c := range []struct{ a, b, want DType }{
		{Bool, Bool, Bool},
		{Bool, Uint8, Uint8},
		{Uint8, Int8, Int16},
		{Int8, Int64, Int64},
		{Int64, Float16, Float16},
		{Float16, BFloat16, Float32},
		{BFloat16, Float64, Float64},
		{Float32, Complex64, Complex64},
		{Float64, Complex64, Complex128},
		{Complex128, Int8, Complex128},
		{Bool, Complex64, Complex64},
	} {
		assert.Equal(t, c.want, PromoteTypes(c.a, c.b), "%v %v", c.a, c.b)
		assert.Equal(t, c.want, PromoteTypes(c.b, c.a), "%v %v", c.b, c.a)
	}
}
