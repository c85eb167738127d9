package tensor

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Ones returns a contiguous tensor filled with ones. It panics like Empty.
func Ones(dt DType, shape ...int) *Tensor { return Full(dt, 1, shape...) }

// Full returns a contiguous tensor with every element set to v, converted to
// dt (bool: v != 0; integers: truncated toward zero; complex: real part v). It
// panics like Empty, and with an error value if v does not fit dt (NaN or
// ±Inf into an integer dtype, 1e10 into int32, as torch.full raises).
func Full(dt DType, v float64, shape ...int) *Tensor {
	if err := checkScalar(dt, v); err != nil {
		panic(fmt.Errorf("tensor: Full: %w", err))
	}
	t := mustAlloc("Full", dt, shape, false)
	t.fillWith(v)
	return t
}

// fillWith sets every element of t, contiguous in a storage of its own
// (new from alloc), to v converted to t's dtype.
func (t *Tensor) fillWith(v float64) {
	es := t.dtype.Size()
	b := t.st.Bytes()
	if len(b) == 0 {
		return
	}
	encodeFloat(t.dtype, v, b[:es])
	for filled := es; filled < len(b); filled *= 2 {
		copy(b[filled:], b[:filled])
	}
}

// encodeFloat writes v converted to dt into b (dt.Size() bytes, little endian).
func encodeFloat(dt DType, v float64, b []byte) {
	switch dt {
	case Bool:
		if v != 0 {
			b[0] = 1
		} else {
			b[0] = 0
		}
	case Uint8:
		b[0] = uint8(int64(v))
	case Int8:
		b[0] = uint8(int8(int64(v)))
	case Int16:
		binary.LittleEndian.PutUint16(b, uint16(int16(int64(v))))
	case Int32:
		binary.LittleEndian.PutUint32(b, uint32(int32(int64(v))))
	case Int64:
		binary.LittleEndian.PutUint64(b, uint64(int64(v)))
	case Float16:
		binary.LittleEndian.PutUint16(b, uint16(F16FromFloat32(float32(v))))
	case BFloat16:
		binary.LittleEndian.PutUint16(b, uint16(BF16FromFloat32(float32(v))))
	case Float32:
		binary.LittleEndian.PutUint32(b, math.Float32bits(float32(v)))
	case Float64:
		binary.LittleEndian.PutUint64(b, math.Float64bits(v))
	case Complex64:
		binary.LittleEndian.PutUint32(b, math.Float32bits(float32(v)))
		binary.LittleEndian.PutUint32(b[4:], 0)
	case Complex128:
		binary.LittleEndian.PutUint64(b, math.Float64bits(v))
		binary.LittleEndian.PutUint64(b[8:], 0)
	default:
		panic(fmt.Sprintf("tensor: invalid dtype %v", dt))
	}
}
