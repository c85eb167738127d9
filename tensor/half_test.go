package tensor

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestF16Bits(t *testing.T) {
	p := func(e int) float32 { return float32(math.Ldexp(1, e)) }
	for _, c := range []struct {
		name string
		f    float32
		h    F16
	}{
		{"negative zero", float32(math.Copysign(0, -1)), 0x8000},
		{"smallest subnormal", p(-24), 0x0001},
		{"largest subnormal", 1023 * p(-24), 0x03ff},
		{"smallest normal", p(-14), 0x0400},
		{"half the smallest subnormal ties to zero", p(-25), 0x0000},
		{"just above half the smallest subnormal", p(-25) * 1.0001, 0x0001},
		{"1.5 subnormal units ties to 2", 3 * p(-25), 0x0002},
		{"2.5 subnormal units ties to 2", 5 * p(-25), 0x0002},
		{"subnormal rounding carries into normal", 1023.5 * p(-24), 0x0400},
		{"float32 subnormal", 1e-40, 0x0000},
		{"negative subnormal", -p(-24), 0x8001},
		{"max", 65504, 0x7bff},
		{"below the overflow midpoint", 65519.99, 0x7bff},
		{"overflow midpoint rounds to inf", 65520, 0x7c00},
		{"-overflow", -1e6, 0xfc00},
		{"inf", float32(math.Inf(1)), 0x7c00},
		{"-inf", float32(math.Inf(-1)), 0xfc00},
		{"tie 1+2^-11 to even", 1 + p(-11), 0x3c00},
		{"tie 1+3*2^-11 to even", 1 + 3*p(-11), 0x3c02},
		{"above tie", 1 + p(-11) + p(-20), 0x3c01},
		{"pi", math.Pi, 0x4248},
		{"-0.1", -0.1, 0xae66},
	} {
		assert.Equal(t, c.h, F16FromFloat32(c.f), "%s: %v", c.name, c.f)
	}
	nan := F16FromFloat32(float32(math.NaN()))
	assert.True(t, math.IsNaN(float64(nan.Float32())))
	assert.Equal(t, F16(0x7e00), nan&0x7fff)
	assert.Equal(t, float32(65504), F16(0x7bff).Float32())
	assert.Equal(t, float32(math.Ldexp(1, -24)), F16(0x0001).Float32())
	assert.True(t, math.Signbit(float64(F16(0x8000).Float32())))
}

func TestBF16Bits(t *testing.T) {
	p := func(e int) float32 { return float32(math.Ldexp(1, e)) }
	for _, c := range []struct {
		name string
		f    float32
		b    BF16
	}{
		{"one", 1, 0x3f80},
		{"tie 1+2^-8 to even", 1 + p(-8), 0x3f80},
		{"tie 1+3*2^-8 to even", 1 + 3*p(-8), 0x3f82},
		{"above tie", 1 + p(-8) + p(-20), 0x3f81},
		{"max float32 rounds to inf", math.MaxFloat32, 0x7f80},
		{"inf", float32(math.Inf(1)), 0x7f80},
		{"-inf", float32(math.Inf(-1)), 0xff80},
		{"float32 subnormal", math.Float32frombits(0x000116c2), 0x0001},
		{"negative zero", float32(math.Copysign(0, -1)), 0x8000},
		{"pi", math.Pi, 0x4049},
	} {
		assert.Equal(t, c.b, BF16FromFloat32(c.f), "%s: %v", c.name, c.f)
	}
	assert.Equal(t, BF16(0x7fc0), BF16FromFloat32(float32(math.NaN())))
	// A NaN whose payload lies only in the low bits stays NaN.
	low := BF16FromFloat32(math.Float32frombits(0x7f800001))
	assert.True(t, math.IsNaN(float64(low.Float32())))
}

func TestHalfRoundTripEveryPattern(t *testing.T) {
	for b := range 1 << 16 {
		h := F16(b)
		if f := h.Float32(); !math.IsNaN(float64(f)) {
			require.Equal(t, h, F16FromFloat32(f), "f16 %#04x", b)
		}
		bf := BF16(b)
		if f := bf.Float32(); !math.IsNaN(float64(f)) {
			require.Equal(t, bf, BF16FromFloat32(f), "bf16 %#04x", b)
		}
	}
}

// TestF16AgainstNearest checks F16FromFloat32 against a search for the
// nearest half value, ties to even, on random and halfway inputs.
func TestF16AgainstNearest(t *testing.T) {
	// Every non-negative finite half, in increasing order of value.
	var halves []float64
	for b := range 0x7c00 {
		halves = append(halves, float64(F16(b).Float32()))
	}
	nearest := func(f float32) F16 {
		a := math.Abs(float64(f))
		var h F16
		if a >= 65520 {
			h = 0x7c00
		} else {
			i := sort.SearchFloat64s(halves, a)
			switch {
			case i == len(halves):
				i--
			case halves[i] != a && i > 0:
				lo, hi := a-halves[i-1], halves[i]-a
				if lo < hi || lo == hi && (i-1)%2 == 0 {
					i--
				}
			}
			h = F16(i)
		}
		if math.Signbit(float64(f)) {
			h |= 0x8000
		}
		return h
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		f := math.Float32frombits(r.Uint32())
		if math.IsNaN(float64(f)) {
			continue
		}
		require.Equal(t, nearest(f), F16FromFloat32(f), "%v (%#08x)", f, math.Float32bits(f))
	}
	for i := 1; i < len(halves); i++ {
		mid := float32((halves[i-1] + halves[i]) / 2)
		require.Equal(t, nearest(mid), F16FromFloat32(mid), "midpoint %v", mid)
	}
}
