// Package tensor provides dense N-dimensional tensors of every dtype Python
// tensordict stores: bool, unsigned and signed integers, float16, bfloat16,
// float32, float64, complex64 and complex128.
//
// # Layout
//
// A Tensor is a DType, a shape, strides counted in elements, and a byte offset
// into a Storage. Elements are little-endian, exactly as torch lays them out,
// so a contiguous tensor's Bytes can be written to a file or sent to a peer as
// they are. float16 and bfloat16 elements are the Go types F16 and BF16, bit
// patterns converted to and from float32 with rounding to nearest even.
//
// # Views and copies
//
// Expand, Reshape (of a contiguous tensor), Select, Narrow, Slice, Unbind,
// Unsqueeze, Squeeze, Permute and Transpose return views that share storage;
// Expand makes stride-0 dimensions, which are not contiguous. Everything else
// that returns a tensor (Contiguous of a non-contiguous tensor, Clone, To,
// IndexSelect, MaskSelect, Stack, Cat, arithmetic, comparisons) returns a new
// contiguous tensor on the Go heap.
//
// # Element-wise operations
//
// Comparisons (Eq, Lt, ... and EqScalar, LtScalar, ...) return bool tensors;
// arithmetic (Add, Sub, Mul, Div and their Scalar and InPlace forms) follows
// torch: operands broadcast against each other (BroadcastShapes) and compute
// in their promoted dtype (PromoteTypes), integers wrap around, division is
// true division, and float16 and bfloat16 compute in float32 and round back.
// Pow, Neg, Abs, Clamp and Lerp (and their Scalar and InPlace forms)
// compute once per kind of number: integers in int64, exactly, wrapping
// around as the narrow type would; float16, bfloat16 and float32 in float32,
// rounded once; float64 in float64; complex numbers in complex128. Where,
// MaskedFill and IsClose complete the element-wise set; in-place forms
// refuse a result of a higher kind than the tensor (a float into an
// integer tensor), as torch does.
//
// # Reductions
//
// The whole-tensor reductions Sum, Mean, Max and Min return a float64, for
// convenience. The reductions over dimensions (SumDims, MeanDims, ProdDims,
// MaxDims, MinDims, StdDims, VarDims, AllDims, AnyDims) return tensors with
// torch's dtypes: sum and prod of bool and integers give int64, mean, std
// and var need floating or complex input (std and var are real), max and
// min keep the dtype; MaxDim and MinDim also return the positions (int64),
// like torch.max(t, dim). They accumulate floating values in float64 and
// round once. Contiguous float64 data goes through gonum's floats package,
// contiguous float32 in-place Add, Sub and MulScalar through blas32.
//
// # Writes
//
// CopyFrom (torch's copy_) broadcasts and converts its source; Fill, Zero,
// IndexPut (t[idx] = src with an index list) and MaskPut (t[mask] = src)
// write in place through any view that does not repeat elements, so that a
// write into a view of a memory-mapped tensor reaches the file. Pad and
// PadDims return padded (or cropped) copies.
//
// # Float64 and gonum
//
// float64 tensors are gonum arrays: Dense returns a *mat.Dense over the same
// memory, with no copy.
//
// # Memory
//
// Storage is on the Go heap unless asked otherwise, and heap storage is freed
// by the garbage collector. Two kinds of storage live outside the heap and
// belong to whoever made them, who frees them with Release, exactly once,
// when no tensor, slice or MPI request uses them any more:
// NewOffHeapStorage (and EmptyOffHeap) maps anonymous memory advised to use
// huge pages, which MPI transfers faster and which nonblocking MPI calls may
// hold without pinning; NewExternalStorage wraps memory made elsewhere, such
// as a file mapping. Using a tensor after its storage is released returns an
// error from every operation that returns one, and panics in the accessors
// that cannot (At, Sum, To, EqScalar, ...), rather than touching unmapped
// memory; slices obtained earlier from Bytes, Data or Dense must not be used
// after Release. A Storage made over such a slice (StorageOf, FromBytes)
// while its storage is live refers to that storage, and is released with
// it.
//
// Every operation that allocates a result (or a temporary) from a shape
// checks its size first: an element or byte count that overflows an int,
// or more bytes than the machine (or the process's control group) has
// available (see internal/mem's Available), is an error wrapping
// ErrNoMemory, as torch raises one, rather than the Go runtime's fatal
// "out of memory", which no program can recover from. The operations that
// return an error (Add, Cat, Stack, Pad, IndexSelect, SumDims, Reshape, New,
// ContiguousChecked, ...) return it; those that return no error (Empty,
// Zeros, Ones, Full, Clone, Contiguous, To and the Scalar operations such
// as MulScalar and EqScalar) panic with it, an error value that recover
// returns and errors.Is(err, ErrNoMemory) recognizes. Expand makes no copy,
// but refuses a shape whose element count overflows an int. The check is
// not a reservation: memory that other processes take after it may still
// run out.
//
// A Tensor is not safe for concurrent writes; concurrent reads are safe.
//
// # Errors and panics
//
// Every problem that depends on data (shapes that do not match or broadcast,
// dtypes that do not fit, indices computed from data, released storage)
// returns an error naming the operation and the shapes, such as
// "tensor: Add: shapes [2 3] and [3 2] do not broadcast". Numel and NBytesOf
// check shapes from files or peers for negative sizes and overflow before
// anything is allocated. Panics are kept for programmer errors that no input
// can cause: an invalid DType constant, a negative dimension given to Empty,
// Zeros, Ones or Full (New returns these as errors), a wrong number of
// indices or an index out of range in At, SetAt, Get and Put, and Get or Put
// with a Go type that does not match the dtype; and for the operations
// without an error result, a result too large for memory (see Memory).
//
// # Printing
//
// fmt prints a tensor in a Go form (String): dtype, shape and the elements
// nested as fmt prints nested slices, each in its shortest exact form, as
// "float32[2 3] [[1 2 3] [4 5 6]]". Tensors of more than 1000 elements are
// summarized with "...". PythonRepr prints what torch prints,
// "tensor([[1., 2., 3.],\n        [4., 5., 6.]])", for comparing output with
// Python's; FormatElements gives the first n elements, as String shows them.
//
// # Files
//
//	alloc.go             allocating results with their size checked first;
//	                     New, ContiguousChecked
//	errors.go            ErrNoMemory, ErrReleased
//	tensor.go            Tensor: constructors (Empty, Zeros, FromStorage,
//	                     FromBytes, FromSlice, Data), shape and stride accessors,
//	                     Contiguous, Clone, CopyFrom, Expand, Reshape
//	dtype.go             DType, its names (String, TorchName, ParseDType), sizes
//	elem.go, half.go     Elem, the Go element types; F16 and BF16 conversions
//	shape.go             Numel, NBytesOf: shape arithmetic checked for overflow
//	storage.go           Storage: heap and external storages, Release
//	within.go            the live external storages' memory ranges, which
//	                     a Storage over part of one refers to
//	offheap*.go          NewOffHeapStorage, EmptyOffHeap: huge-page memory
//	                     outside the Go heap (Linux; elsewhere an error)
//	ones.go, arange.go   Ones, Full, Arange
//	access.go            At, SetAt, AtComplex, SetAtComplex, Get, Put
//	index.go             views and selections: Select, Narrow, Slice,
//	                     IndexSelect, MaskSelect
//	dims.go              Unsqueeze, Squeeze, Permute, Transpose
//	join.go              Stack, Cat, Unbind
//	convert.go           To: conversion between dtypes
//	promote.go           PromoteTypes: torch's type promotion
//	arith.go             Add, Sub, Mul, Div and their InPlace forms
//	scalar.go            AddScalar, SubScalar, MulScalar, DivScalar
//	compare.go           Eq, Lt, ..., their Scalar forms, Equal, All, Any
//	reduce.go            Sum, Mean, Max, Min, AllClose
//	iter.go, binary.go   walking operands row by row, BroadcastShapes
//	kernels.go           the inner loops of arithmetic and comparisons
//	copy.go              copying between layouts
//	dense.go             Dense: the gonum view of a float64 tensor
//	format.go            String (the Go form fmt prints), FormatElements,
//	                     GoString
//	pyrepr.go            PythonRepr: torch's tensor repr
package tensor
