package tensordict

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/tensor"
)

// TestAlgebraScalarOverflow checks the TensorDict forms of issue 41's
// integer conversions: a scalar that does not fit an int32 leaf is an
// error naming the key where torch raises, and leaves nothing written;
// out of place, MulScalar(1e10) gives a float32 leaf, as torch's t * 1e10.
func TestAlgebraScalarOverflow(t *testing.T) {
	mk := func(t *testing.T) *TensorDict {
		td := New(2)
		require.NoError(t, td.Set(K("i"), tensor.Full(tensor.Int32, 3, 2)))
		return td
	}
	mask := tensor.Full(tensor.Bool, 1, 2)
	for _, tc := range []struct {
		name string
		call func(td *TensorDict) error
	}{
		{"Fill +Inf", func(td *TensorDict) error { return td.Fill(math.Inf(1)) }},
		{"Fill NaN", func(td *TensorDict) error { return td.Fill(math.NaN()) }},
		{"Fill 1e10", func(td *TensorDict) error { return td.Fill(1e10) }},
		{"MaskedFill NaN", func(td *TensorDict) error { _, err := td.MaskedFill(mask, math.NaN()); return err }},
		{"MaskedFillInPlace NaN", func(td *TensorDict) error { return td.MaskedFillInPlace(mask, math.NaN()) }},
		{"MulScalarInPlace 1e10", func(td *TensorDict) error { return td.MulScalarInPlace(1e10) }},
		{"AddScalarInPlace -Inf", func(td *TensorDict) error { return td.AddScalarInPlace(math.Inf(-1)) }},
		{"PowScalar -1", func(td *TensorDict) error { _, err := td.PowScalar(-1); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td := mk(t)
			err := tc.call(td)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "key i")
			x, err := td.Get(K("i"))
			require.NoError(t, err)
			assert.True(t, x.EqScalar(3).All(), "the leaf is unchanged: %v", x)
		})
	}
	got, err := mk(t).MulScalar(1e10).Get(K("i"))
	require.NoError(t, err)
	assert.Equal(t, tensor.Float32, got.DType())
	assert.Equal(t, float64(float32(3e10)), got.At(0))
}
