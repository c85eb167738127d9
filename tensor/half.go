package tensor

import "math"

// F16FromFloat32 converts f to half precision, rounding to nearest even.
// Values too large become ±Inf; NaN stays NaN.
func F16FromFloat32(f float32) F16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int((b >> 23) & 0xff)
	mant := b & 0x7fffff
	if exp == 0xff { // Inf or NaN
		if mant != 0 {
			return F16(sign | 0x7e00)
		}
		return F16(sign | 0x7c00)
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return F16(sign | 0x7c00)
	}
	if e <= 0 {
		// Subnormal half (or zero): shift the full significand into place.
		if e < -10 {
			return F16(sign)
		}
		m := mant | 0x800000
		shift := uint(14 - e)
		half := uint32(1) << (shift - 1)
		r := m >> shift
		rem := m & ((uint32(1) << shift) - 1)
		if rem > half || rem == half && r&1 == 1 {
			r++
		}
		return F16(sign | uint16(r))
	}
	r := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && r&1 == 1 {
		r++ // may carry into the exponent, up to Inf: correct
	}
	return F16(sign | uint16(r))
}

// Float32 returns h as a float32 (exactly).
func (h F16) Float32() float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		// Subnormal: value = mant * 2^-24.
		f := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			f = -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// BF16FromFloat32 converts f to bfloat16, rounding to nearest even. NaN stays
// NaN.
func BF16FromFloat32(f float32) BF16 {
	b := math.Float32bits(f)
	if b&0x7f800000 == 0x7f800000 && b&0x7fffff != 0 {
		return BF16(uint16(b>>16) | 0x40)
	}
	b += 0x7fff + (b>>16)&1
	return BF16(b >> 16)
}

// Float32 returns b as a float32 (exactly).
func (b BF16) Float32() float32 { return math.Float32frombits(uint32(b) << 16) }
