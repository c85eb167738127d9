package tensor

import (
	"fmt"
	"math"
	"math/bits"
	"unsafe"
)

// Tensor is a dense N-dimensional array of one DType. Its elements live in a
// Storage, at a byte offset, laid out by strides counted in elements. Several
// tensors may view the same Storage: a stride of 0 repeats an element, as
// Expand does.
//
// A tensor never changes its shape or strides in place once made: views
// may share them (see viewSet).
//
// Elements are stored little-endian, in the same bytes torch uses, so a
// contiguous tensor's Bytes are exactly what Python tensordict writes to a file
// or sends on the wire.
type Tensor struct {
	// dims is the first of 2*nd ints, the shape then the strides (in
	// elements), nil for a scalar: a pointer and a count rather than a
	// slice make a Tensor 32 bytes, not 48, which a received TensorDict
	// of 16 leaves allocates 256 bytes fewer of.
	dims   *int
	nd     int32
	dtype  DType
	offset int // in bytes
	st     *Storage
}

// newTensor returns a tensor of dtype dt over st at offset bytes, laid
// out by dims (the shape, then the strides), which it keeps: the caller
// must not change them after.
func newTensor(dt DType, dims []int, offset int, st *Storage) *Tensor {
	t := tensorOf(dt, dims, offset, st)
	return &t
}

// tensorOf is newTensor's Tensor as a value.
func tensorOf(dt DType, dims []int, offset int, st *Storage) Tensor {
	if len(dims)%2 != 0 || len(dims)/2 > math.MaxInt32 {
		panic(fmt.Sprintf("tensor: %d dims, not a shape and its strides (a bug)", len(dims)))
	}
	return Tensor{dims: unsafe.SliceData(dims), nd: int32(len(dims) / 2), dtype: dt, offset: offset, st: st}
}

// allDims returns t's shape then its strides, which the caller must not
// change.
func (t *Tensor) allDims() []int { return unsafe.Slice(t.dims, 2*int(t.nd)) }

// shape returns t's shape, which the caller must not change.
func (t *Tensor) shape() []int {
	return unsafe.Slice(t.dims, int(t.nd))
}

// strides returns t's strides, in elements, which the caller must not
// change.
func (t *Tensor) strides() []int {
	return t.allDims()[t.nd:]
}

// Empty returns a contiguous tensor of dtype dt and the given shape, zeroed. A
// tensor with no shape is a scalar (one element). Empty panics if dt is
// invalid or a dimension is negative, and, if the tensor would not fit in
// memory, with an error value wrapping ErrNoMemory (New returns these as
// errors).
func Empty(dt DType, shape ...int) *Tensor { return mustAlloc("Empty", dt, shape, true) }

// Zeros returns a contiguous tensor of zeros. It panics like Empty.
func Zeros(dt DType, shape ...int) *Tensor { return mustAlloc("Zeros", dt, shape, true) }

// FromStorage returns a tensor of dtype dt and the given shape that views st
// contiguously from byte offset off. It returns an error if the view does not
// fit in the storage, the shape is bad, off is not aligned for dt, or (for
// bool) a byte is neither 0 nor 1.
func FromStorage(dt DType, st *Storage, off int, shape ...int) (*Tensor, error) {
	t := new(Tensor)
	if err := fromStorageInto(t, nil, dt, st, off, shape...); err != nil {
		return nil, err
	}
	return t, nil
}

// fromStorageInto is FromStorage into *t, with the shape and strides in
// dims when they fit (see internal/tensorx.FromStorageInto).
func fromStorageInto(t *Tensor, dims []int, dt DType, st *Storage, off int, shape ...int) error {
	nb, err := NBytesOf(dt, shape)
	if err != nil {
		return err
	}
	b, err := st.liveBytes("FromStorage")
	if err != nil {
		return err
	}
	if off < 0 || off > len(b) || nb > len(b)-off {
		return fmt.Errorf("tensor: FromStorage: %v%v needs bytes [%d, %d), storage has %d", dt, shape, off, off+nb, len(b))
	}
	if a := align(dt); off%a != 0 {
		return fmt.Errorf("tensor: FromStorage: offset %d is not a multiple of %d for %v", off, a, dt)
	} else if len(b) > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(b)))%uintptr(a) != 0 {
		return fmt.Errorf("tensor: FromStorage: storage memory is not aligned to %d bytes for %v", a, dt)
	}
	if dt == Bool {
		if err := checkBools(b[off : off+nb]); err != nil {
			return fmt.Errorf("tensor: FromStorage: %w", err)
		}
	}
	if n := len(shape); n > 0 && len(dims) == 2*n {
		dims = dims[: 2*n : 2*n]
		fillContiguousDims(dims, shape)
	} else {
		dims = contiguousDims(shape)
	}
	*t = tensorOf(dt, dims, off, st)
	return nil
}

// checkBools returns an error unless every byte of b is 0 or 1, as Go
// bools must be; bytes from a file or a peer may not be.
func checkBools(b []byte) error {
	for i, v := range b {
		if v > 1 {
			return fmt.Errorf("bool element %d is byte %d, want 0 or 1", i, v)
		}
	}
	return nil
}

// FromBytes returns a tensor of dtype dt and the given shape over b, which it
// shares (no copy) when b is aligned for dt, as memory from make, a memory
// map or a Storage is; misaligned bytes are copied first. b may be longer
// than the tensor needs; the extra bytes are ignored. It returns an error if
// b is too short.
func FromBytes(dt DType, b []byte, shape ...int) (*Tensor, error) {
	if uintptr(unsafe.Pointer(unsafe.SliceData(b)))%uintptr(align(dt)) != 0 {
		// Copy misaligned input so typed views stay legal.
		c := alignedBytes(len(b))
		copy(c, b)
		b = c
	}
	return FromStorage(dt, StorageOf(b), 0, shape...)
}

// FromSlice returns a tensor over data, which it shares (no copy). With no
// shape the tensor is 1-D of length len(data); otherwise the shape's element
// count must equal len(data).
func FromSlice[T Elem](data []T, shape ...int) (*Tensor, error) {
	if len(shape) == 0 {
		shape = []int{len(data)}
	}
	n, err := Numel(shape)
	if err != nil {
		return nil, err
	}
	if n != len(data) {
		return nil, fmt.Errorf("tensor: FromSlice: shape %v has %d elements, data has %d", shape, n, len(data))
	}
	dt := DTypeOf[T]()
	return newTensor(dt, contiguousDims(shape), 0, StorageOf(asBytes(data))), nil
}

// Data returns the elements of t as a []T that shares t's memory. t must be
// contiguous and of the DType that T stores.
func Data[T Elem](t *Tensor) ([]T, error) {
	want := DTypeOf[T]()
	if t.dtype != want {
		return nil, fmt.Errorf("tensor: Data: tensor is %v, not %v", t.dtype, want)
	}
	b, err := t.Bytes()
	if err != nil {
		return nil, err
	}
	return fromBytes[T](b, t.Numel()), nil
}

// align returns the alignment, in bytes, that typed views of dt need.
func align(dt DType) int {
	if s := dt.Size(); s < 8 {
		return s
	}
	return 8
}

// DType returns the element type of t.
func (t *Tensor) DType() DType { return t.dtype }

// Shape returns a copy of t's shape.
func (t *Tensor) Shape() []int { return cloneInts(t.shape()) }

// Strides returns a copy of t's strides, counted in elements.
func (t *Tensor) Strides() []int { return cloneInts(t.strides()) }

// Dim returns the number of dimensions of t.
func (t *Tensor) Dim() int { return len(t.shape()) }

// Size returns the length of dimension i; negative i counts from the end.
// It panics if i is out of range.
func (t *Tensor) Size(i int) int { return t.shape()[t.normDim(i)] }

// Numel returns the number of elements of t.
func (t *Tensor) Numel() int {
	n := 1
	for _, d := range t.shape() {
		n *= d
	}
	return n
}

// NBytes returns the number of bytes the elements of t occupy when contiguous.
func (t *Tensor) NBytes() int { return t.Numel() * t.dtype.Size() }

// Storage returns the storage t views.
func (t *Tensor) Storage() *Storage { return t.st }

// Offset returns the byte offset of t's first element in its storage.
func (t *Tensor) Offset() int { return t.offset }

// normDim resolves a possibly negative dimension index, panicking when out of
// range (a programming error).
func (t *Tensor) normDim(i int) int {
	if i < 0 {
		i += len(t.shape())
	}
	if i < 0 || i >= len(t.shape()) {
		panic(fmt.Sprintf("tensor: dimension %d out of range for shape %v", i, t.shape()))
	}
	return i
}

// IsContiguous reports whether t's elements are laid out row-major without
// gaps or repeats, so that Bytes can return them in place.
func (t *Tensor) IsContiguous() bool {
	expect := 1
	for i := len(t.shape()) - 1; i >= 0; i-- {
		if t.shape()[i] == 1 {
			continue
		}
		if t.shape()[i] == 0 {
			return true
		}
		if t.strides()[i] != expect {
			return false
		}
		expect *= t.shape()[i]
	}
	return true
}

// Bytes returns the little-endian bytes of a contiguous tensor, sharing its
// memory. It returns an error if t is not contiguous or its storage was
// released.
func (t *Tensor) Bytes() ([]byte, error) {
	if err := t.st.checkLive("Bytes"); err != nil {
		return nil, err
	}
	if !t.IsContiguous() {
		return nil, fmt.Errorf("tensor: Bytes: %v tensor of shape %v is not contiguous (strides %v); call Contiguous first", t.dtype, t.shape(), t.strides())
	}
	nb := t.NBytes()
	if nb == 0 {
		return []byte{}, nil // an empty view may point past the end
	}
	return t.st.Bytes()[t.offset : t.offset+nb : t.offset+nb], nil
}

// Contiguous returns t itself if it is contiguous, and otherwise a contiguous
// copy of it in new heap storage. It panics like Clone
// (ContiguousChecked returns an error instead).
func (t *Tensor) Contiguous() *Tensor {
	if t.IsContiguous() {
		return t
	}
	return t.Clone()
}

// Clone returns a contiguous copy of t in new heap storage. It panics if t's
// storage was released, and, if the copy would not fit in memory (a large
// Expand result), with an error value wrapping ErrNoMemory.
func (t *Tensor) Clone() *Tensor {
	if err := t.st.checkLive("Clone"); err != nil {
		panic(err)
	}
	out := mustAlloc("Clone", t.dtype, t.shape(), false)
	rawCopy(out, t)
	return out
}

// CopyFrom copies the elements of src into t, in place, like torch's
// copy_: src broadcasts to t's shape and is converted to t's dtype (as To
// converts). src may be any view (even of t's own storage); t must not
// repeat elements (no expanded dimensions). It returns an error if src does
// not broadcast to t's shape, t repeats elements or a storage was released.
func (t *Tensor) CopyFrom(src *Tensor) error {
	s, err := prepareSource("CopyFrom", t, src, t.shape())
	if err != nil {
		return err
	}
	rawCopy(t, s)
	return nil
}

// repeats reports whether some element of t is reached by two indices
// (a stride-0 dimension of size above 1).
func (t *Tensor) repeats() bool {
	for i, s := range t.strides() {
		if s == 0 && t.shape()[i] > 1 {
			return true
		}
	}
	return false
}

// Expand returns a view of t with the given shape, repeating size-1 dimensions
// with stride 0 and adding new leading dimensions, like torch.Tensor.expand.
// A size of -1 keeps that dimension. The result is not contiguous unless no
// dimension grew. It returns an error if the shape does not fit t's, or if
// its element count overflows an int (wrapping ErrNoMemory): a view is
// free, but it must be countable.
func (t *Tensor) Expand(shape ...int) (*Tensor, error) {
	if len(shape) < len(t.shape()) {
		return nil, fmt.Errorf("tensor: Expand: shape %v has fewer dimensions than tensor shape %v", shape, t.shape())
	}
	lead := len(shape) - len(t.shape())
	dims, outShape, outStrides := newDims(len(shape))
	for i, s := range shape {
		if i < lead {
			if s < 0 {
				return nil, fmt.Errorf("tensor: Expand: new leading dimension %d of shape %v must be non-negative", i, shape)
			}
			outShape[i], outStrides[i] = s, 0
			continue
		}
		cur := t.shape()[i-lead]
		switch {
		case s == -1 || s == cur:
			outShape[i], outStrides[i] = cur, t.strides()[i-lead]
		case cur == 1 && s >= 0:
			outShape[i], outStrides[i] = s, 0
		default:
			return nil, fmt.Errorf("tensor: Expand: cannot expand shape %v to %v (dimension %d is %d, not 1)", t.shape(), shape, i, cur)
		}
	}
	if _, err := Numel(outShape); err != nil {
		return nil, fmt.Errorf("tensor: Expand: %w", err) // no view may count more elements than an int holds
	}
	return t.viewDims(dims, t.offset), nil
}

// Reshape returns a tensor with the same elements in row-major order and the
// given shape. One dimension may be -1 and is inferred. The result views t's
// storage when t is contiguous, and is a copy otherwise.
func (t *Tensor) Reshape(shape ...int) (_ *Tensor, err error) {
	defer catchNoMemory(&err)
	shape = cloneInts(shape)
	infer := -1
	known := 1
	for i, d := range shape {
		switch {
		case d == -1 && infer < 0:
			infer = i
		case d < 0:
			return nil, fmt.Errorf("tensor: Reshape: invalid shape %v", shape)
		default:
			hi, lo := bits.Mul64(uint64(known), uint64(d))
			if hi != 0 || lo > math.MaxInt {
				return nil, fmt.Errorf("tensor: Reshape: shape %v: element count overflows", shape)
			}
			known = int(lo)
		}
	}
	n := t.Numel()
	if infer >= 0 {
		if known == 0 || n%known != 0 {
			return nil, fmt.Errorf("tensor: Reshape: cannot infer -1 in %v for %d elements", shape, n)
		}
		shape[infer] = n / known
	} else if known != n {
		return nil, fmt.Errorf("tensor: Reshape: shape %v has %d elements, tensor %v has %d", shape, known, t.shape(), n)
	}
	src := t.Contiguous()
	return newTensor(t.dtype, contiguousDims(shape), src.offset, src.st), nil
}
