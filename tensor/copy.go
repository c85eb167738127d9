package tensor

import "unsafe"

// rawElems returns t's storage from t's first element on as a []T, where T is
// any type of t's element size; copying needs no arithmetic, only the bits.
func rawElems[T any](t *Tensor) []T {
	b := t.st.Bytes()
	if t.offset >= len(b) {
		return []T{} // an empty view may point past the end
	}
	b = b[t.offset:]
	var z T
	n := len(b) / int(unsafe.Sizeof(z))
	if n == 0 {
		return []T{}
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// rawCopy copies the elements of src into dst, which have the same dtype and
// shape and do not overlap. Either may be any view; dst must not repeat
// elements.
func rawCopy(dst, src *Tensor) {
	switch dst.dtype.Size() {
	case 1:
		copyKernel[uint8](dst, src)
	case 2:
		copyKernel[uint16](dst, src)
	case 4:
		copyKernel[uint32](dst, src)
	case 8:
		copyKernel[uint64](dst, src)
	default:
		copyKernel[[2]uint64](dst, src)
	}
}

func copyKernel[T any](dst, src *Tensor) {
	d, s := rawElems[T](dst), rawElems[T](src)
	forRows(dst.shape(), [][]int{dst.strides(), src.strides()}, func(p []int, n int, st []int) {
		i, j := p[0], p[1]
		switch {
		case st[0] == 1 && st[1] == 1:
			copy(d[i:i+n], s[j:j+n])
			return
		case st[0] == 1 && st[1] == 0: // an expanded dimension
			row, v := d[i:i+n], s[j]
			for k := range row {
				row[k] = v
			}
			return
		}
		for range n {
			d[i] = s[j]
			i += st[0]
			j += st[1]
		}
	})
}
