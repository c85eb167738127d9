package tensor_test

import (
	"fmt"
	"math"

	"github.com/tdmpi/tdmpi/tensor"
)

func Example() {
	x := tensor.Ones(tensor.Float32, 2)
	e, err := x.Expand(2, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(e.IsContiguous(), e.Contiguous().IsContiguous())
	fmt.Println(e.EqScalar(1).All())
	fmt.Println(e)
	// Output:
	// false true
	// true
	// float32[2 2] [[1 1] [1 1]]
}

func ExampleFromSlice() {
	x, err := tensor.FromSlice([]int64{1, 2, 3, 4, 5, 6}, 2, 3)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(x.DType(), x.Shape())
	fmt.Println(x)
	// Output:
	// int64 [2 3]
	// int64[2 3] [[1 2 3] [4 5 6]]
}

func ExampleTensor_Add() {
	a, _ := tensor.Arange(tensor.Float64, 0, 6, 1)
	a, _ = a.Reshape(2, 3)
	col, _ := tensor.FromSlice([]float64{10, 20}, 2, 1)
	sum, err := a.Add(col) // [2 3] + [2 1] broadcasts to [2 3]
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sum)
	_, err = a.Add(tensor.Ones(tensor.Float64, 3, 2))
	fmt.Println(err)
	// Output:
	// float64[2 3] [[10 11 12] [23 24 25]]
	// tensor: Add: shapes [2 3] and [3 2] do not broadcast
}

func ExampleTensor_MaskSelect() {
	x, _ := tensor.Arange(tensor.Int64, 0, 6, 1)
	x, _ = x.Reshape(3, 2)
	mask, _ := tensor.FromSlice([]bool{true, false, true})
	rows, err := x.MaskSelect(mask)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rows)
	fmt.Println(x.GtScalar(2))
	// Output:
	// int64[2 2] [[0 1] [4 5]]
	// bool[3 2] [[false false] [false true] [true true]]
}

func ExampleTensor_Slice() {
	x, _ := tensor.Arange(tensor.Int32, 0, 10, 1)
	evens, _ := x.Slice(0, 0, math.MaxInt, 2)  // x[::2]
	last3, _ := x.Slice(0, -3, math.MaxInt, 1) // x[-3:]
	fmt.Println(evens)
	fmt.Println(last3)
	// Output:
	// int32[5] [0 2 4 6 8]
	// int32[3] [7 8 9]
}

func ExampleStack() {
	a := tensor.Zeros(tensor.Float32, 2)
	b := tensor.Ones(tensor.Float32, 2)
	s, err := tensor.Stack([]*tensor.Tensor{a, b}, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(s)
	parts, _ := s.Unbind(0)
	fmt.Println(parts[1].Equal(b))
	// Output:
	// float32[2 2] [[0 0] [1 1]]
	// true
}

func ExampleTensor_To() {
	x, _ := tensor.FromSlice([]float32{1, -2, 0.1})
	h := x.To(tensor.Float16)
	bits, _ := tensor.Data[tensor.F16](h)
	fmt.Printf("%#04x\n", bits)
	fmt.Println(h)
	// Output:
	// [0x3c00 0xc000 0x2e66]
	// float16[3] [1 -2 0.1]
}

// PythonRepr prints a tensor as torch does, to compare with Python's output;
// String (what fmt prints) is the Go form.
func ExampleTensor_PythonRepr() {
	x, _ := tensor.FromSlice([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	fmt.Println(x)
	fmt.Println(x.PythonRepr())
	fmt.Println(x.To(tensor.Float64).PythonRepr())
	// Output:
	// float32[2 3] [[1 2 3] [4 5 6]]
	// tensor([[1., 2., 3.],
	//         [4., 5., 6.]])
	// tensor([[1., 2., 3.],
	//         [4., 5., 6.]], dtype=torch.float64)
}

func ExampleNewOffHeapStorage() {
	st, err := tensor.NewOffHeapStorage(4 * 8)
	if err != nil {
		fmt.Println(err)
		return
	}
	x, _ := tensor.FromStorage(tensor.Float64, st, 0, 2, 2)
	x.SetAt(3, 1, 1)
	fmt.Println(x.Sum())
	_ = st.Release() // the owner frees off-heap memory
	_, err = x.Bytes()
	fmt.Println(err)
	// Output:
	// 3
	// tensor: Bytes: storage was released (closed memory map?)
}

func ExampleTensor_Dense() {
	x, _ := tensor.FromSlice([]float64{1, 2, 3, 4}, 2, 2)
	m, err := x.Dense()
	if err != nil {
		fmt.Println(err)
		return
	}
	m.Set(0, 0, 9) // writes through to x
	fmt.Println(x.At(0, 0), m.At(1, 1))
	// Output:
	// 9 4
}
