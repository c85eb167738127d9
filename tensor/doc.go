// Package tensor provides dense N-dimensional tensors of every dtype Python
// tensordict stores: bool, unsigned and signed integers, float16, bfloat16,
// float32, float64, complex64 and complex128.
//
// # Layout
//
// A Tensor is a DType, a shape, strides counted in elements, and a byte offset
// into a Storage. Elements are little-endian, exactly as torch lays them out,
// so a contiguous tensor's Bytes can be written to a file or sent to a peer as
// they are. Views (Expand, Reshape of a contiguous tensor, indexing, slicing)
// share storage; Expand gives stride-0 dimensions, which are not contiguous.
//
// # Float64 and gonum
//
// float64 tensors are gonum arrays: Dense returns a *mat.Dense over the same
// memory, with no copy.
//
// # Memory
//
// Storage made by this package lives on the Go heap and is freed by the
// garbage collector. Storage made with NewExternalStorage (memory maps,
// off-heap buffers) belongs to whoever made it, who frees it with Release;
// using a tensor after its storage is released returns an error (or panics,
// for the accessors that cannot return one) rather than touching unmapped
// memory.
//
// # Errors
//
// Shapes and data that can come from a file or a peer are checked and
// reported as errors; Numel and NBytesOf check shapes for negative sizes and
// overflow before anything is allocated. Constructors that take a shape
// written by the programmer (Empty, Zeros, Ones, Full) panic on a negative
// dimension, as gonum's constructors do.
package tensor
