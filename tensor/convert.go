package tensor

import "fmt"

// To returns a contiguous copy of t converted to dtype dt, in new heap
// storage, even when dt is t's own dtype (then it is Clone), so the result
// never shares memory with t.
//
// Conversions follow torch: to bool, a value is true when it is not zero
// (NaN is true); floating values become integers by truncation toward zero
// and integers wrap around when narrowed; float16 and bfloat16 round to
// nearest even, overflowing to ±Inf; complex values lose their imaginary
// part when converted to a real type. To panics if dt is not valid or t's
// storage was released.
func (t *Tensor) To(dt DType) *Tensor {
	if !dt.Valid() {
		panic(fmt.Sprintf("tensor: To: invalid dtype %v", dt))
	}
	if dt == t.dtype {
		return t.Clone()
	}
	src := t.Contiguous()
	out := mustAlloc("To", dt, t.shape(), true)
	convertFlat(out, src)
	return out
}

// realNum is the set of Go types with built-in real arithmetic that back a
// DType.
type realNum interface {
	uint8 | int8 | int16 | int32 | int64 | float32 | float64
}

// intNum is the set of Go integer types that back a DType.
type intNum interface {
	uint8 | int8 | int16 | int32 | int64
}

// convChunk is the number of elements converted per pass through the
// intermediate buffer.
const convChunk = 2048

// convertFlat writes the elements of the contiguous tensor src, converted,
// into the contiguous tensor dst of the same element count.
func convertFlat(dst, src *Tensor) {
	n := src.Numel()
	if n == 0 {
		return
	}
	if dst.dtype == src.dtype {
		db, _ := dst.Bytes()
		sb, _ := src.Bytes()
		copy(db, sb)
		return
	}
	switch {
	case src.dtype == Float32 && dst.dtype == Float16:
		d := span[F16](dst, 0, n)
		for i, v := range span[float32](src, 0, n) {
			d[i] = F16FromFloat32(v)
		}
		return
	case src.dtype == Float32 && dst.dtype == BFloat16:
		d := span[BF16](dst, 0, n)
		for i, v := range span[float32](src, 0, n) {
			d[i] = BF16FromFloat32(v)
		}
		return
	case src.dtype == Float16 && dst.dtype == Float32:
		d := span[float32](dst, 0, n)
		for i, v := range span[F16](src, 0, n) {
			d[i] = v.Float32()
		}
		return
	case src.dtype == BFloat16 && dst.dtype == Float32:
		d := span[float32](dst, 0, n)
		for i, v := range span[BF16](src, 0, n) {
			d[i] = v.Float32()
		}
		return
	}
	cs, cd := category(src.dtype), category(dst.dtype)
	switch {
	case cs == 3 || cd == 3:
		buf := make([]complex128, min(n, convChunk))
		for i := 0; i < n; i += convChunk {
			b := buf[:min(convChunk, n-i)]
			readC128(src, i, b)
			writeC128(dst, i, b)
		}
	case cs <= 1 && cd <= 1:
		buf := make([]int64, min(n, convChunk))
		for i := 0; i < n; i += convChunk {
			b := buf[:min(convChunk, n-i)]
			readI64(src, i, b)
			writeI64(dst, i, b)
		}
	default:
		buf := make([]float64, min(n, convChunk))
		for i := 0; i < n; i += convChunk {
			b := buf[:min(convChunk, n-i)]
			readF64(src, i, b)
			writeF64(dst, i, b)
		}
	}
}

// span returns the len(buf) elements of the contiguous tensor t from flat
// index i on.
func span[T Elem](t *Tensor, i, n int) []T { return elems[T](t)[i : i+n] }

func realToF64[T realNum](dst []float64, src []T) {
	for i, v := range src {
		dst[i] = float64(v)
	}
}

func f64ToReal[T realNum](dst []T, src []float64) {
	for i, v := range src {
		dst[i] = T(v)
	}
}

// f64ToInt truncates toward zero through int64, so that narrowing wraps
// around the same way for every integer type.
func f64ToInt[T intNum](dst []T, src []float64) {
	for i, v := range src {
		dst[i] = T(int64(v))
	}
}

func intToI64[T intNum](dst []int64, src []T) {
	for i, v := range src {
		dst[i] = int64(v)
	}
}

func i64ToInt[T intNum](dst []T, src []int64) {
	for i, v := range src {
		dst[i] = T(v)
	}
}

// readF64 converts len(buf) elements of the contiguous real tensor t, from
// flat index i, to float64.
func readF64(t *Tensor, i int, buf []float64) {
	n := len(buf)
	switch t.dtype {
	case Bool:
		for j, v := range span[bool](t, i, n) {
			buf[j] = b2f(v)
		}
	case Uint8:
		realToF64(buf, span[uint8](t, i, n))
	case Int8:
		realToF64(buf, span[int8](t, i, n))
	case Int16:
		realToF64(buf, span[int16](t, i, n))
	case Int32:
		realToF64(buf, span[int32](t, i, n))
	case Int64:
		realToF64(buf, span[int64](t, i, n))
	case Float16:
		for j, v := range span[F16](t, i, n) {
			buf[j] = float64(v.Float32())
		}
	case BFloat16:
		for j, v := range span[BF16](t, i, n) {
			buf[j] = float64(v.Float32())
		}
	case Float32:
		realToF64(buf, span[float32](t, i, n))
	case Float64:
		copy(buf, span[float64](t, i, n))
	case Complex64:
		for j, v := range span[complex64](t, i, n) {
			buf[j] = float64(real(v))
		}
	case Complex128:
		for j, v := range span[complex128](t, i, n) {
			buf[j] = real(v)
		}
	}
}

// writeF64 stores buf, converted, into the contiguous real tensor t from flat
// index i on.
func writeF64(t *Tensor, i int, buf []float64) {
	n := len(buf)
	switch t.dtype {
	case Bool:
		d := span[bool](t, i, n)
		for j, v := range buf {
			d[j] = v != 0
		}
	case Uint8:
		f64ToInt(span[uint8](t, i, n), buf)
	case Int8:
		f64ToInt(span[int8](t, i, n), buf)
	case Int16:
		f64ToInt(span[int16](t, i, n), buf)
	case Int32:
		f64ToInt(span[int32](t, i, n), buf)
	case Int64:
		f64ToInt(span[int64](t, i, n), buf)
	case Float16:
		d := span[F16](t, i, n)
		for j, v := range buf {
			d[j] = F16FromFloat32(float32(v))
		}
	case BFloat16:
		d := span[BF16](t, i, n)
		for j, v := range buf {
			d[j] = BF16FromFloat32(float32(v))
		}
	case Float32:
		f64ToReal(span[float32](t, i, n), buf)
	case Float64:
		copy(span[float64](t, i, n), buf)
	case Complex64:
		d := span[complex64](t, i, n)
		for j, v := range buf {
			d[j] = complex(float32(v), 0)
		}
	case Complex128:
		d := span[complex128](t, i, n)
		for j, v := range buf {
			d[j] = complex(v, 0)
		}
	}
}

// readI64 converts elements of a contiguous bool or integer tensor to int64.
func readI64(t *Tensor, i int, buf []int64) {
	n := len(buf)
	switch t.dtype {
	case Bool:
		for j, v := range span[bool](t, i, n) {
			if v {
				buf[j] = 1
			} else {
				buf[j] = 0
			}
		}
	case Uint8:
		intToI64(buf, span[uint8](t, i, n))
	case Int8:
		intToI64(buf, span[int8](t, i, n))
	case Int16:
		intToI64(buf, span[int16](t, i, n))
	case Int32:
		intToI64(buf, span[int32](t, i, n))
	case Int64:
		copy(buf, span[int64](t, i, n))
	default:
		panic("tensor: readI64 of " + t.dtype.String())
	}
}

// writeI64 stores int64 values into a contiguous bool or integer tensor,
// wrapping around when the type is narrower.
func writeI64(t *Tensor, i int, buf []int64) {
	n := len(buf)
	switch t.dtype {
	case Bool:
		d := span[bool](t, i, n)
		for j, v := range buf {
			d[j] = v != 0
		}
	case Uint8:
		i64ToInt(span[uint8](t, i, n), buf)
	case Int8:
		i64ToInt(span[int8](t, i, n), buf)
	case Int16:
		i64ToInt(span[int16](t, i, n), buf)
	case Int32:
		i64ToInt(span[int32](t, i, n), buf)
	case Int64:
		copy(span[int64](t, i, n), buf)
	default:
		panic("tensor: writeI64 of " + t.dtype.String())
	}
}

// readC128 converts elements of any contiguous tensor to complex128.
func readC128(t *Tensor, i int, buf []complex128) {
	n := len(buf)
	switch t.dtype {
	case Complex64:
		for j, v := range span[complex64](t, i, n) {
			buf[j] = complex128(v)
		}
	case Complex128:
		copy(buf, span[complex128](t, i, n))
	default:
		f := make([]float64, n)
		readF64(t, i, f)
		for j, v := range f {
			buf[j] = complex(v, 0)
		}
	}
}

// writeC128 stores complex128 values into any contiguous tensor; real types
// keep the real part.
func writeC128(t *Tensor, i int, buf []complex128) {
	n := len(buf)
	switch t.dtype {
	case Complex64:
		d := span[complex64](t, i, n)
		for j, v := range buf {
			d[j] = complex64(v)
		}
	case Complex128:
		copy(span[complex128](t, i, n), buf)
	default:
		f := make([]float64, n)
		for j, v := range buf {
			f[j] = real(v)
		}
		writeF64(t, i, f)
	}
}

// b2f returns 1 for true and 0 for false.
func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
