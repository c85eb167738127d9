package tensor

import "fmt"

// category orders the dtype kinds for promotion: bool < integer < float <
// complex.
func category(d DType) int {
	switch {
	case d == Bool:
		return 0
	case d.IsInteger():
		return 1
	case d.IsFloat():
		return 2
	default:
		return 3
	}
}

// PromoteTypes returns the dtype that an operation on tensors of dtypes a and
// b computes in, following torch.promote_types: the higher category wins (bool
// < integer < floating < complex); within a category the wider type wins;
// uint8 with int8 gives int16, float16 with bfloat16 gives float32, and a
// complex type meeting float64 becomes complex128. It panics if a or b is not
// valid.
func PromoteTypes(a, b DType) DType {
	if !a.Valid() || !b.Valid() {
		panic(fmt.Sprintf("tensor: PromoteTypes of invalid dtype %v, %v", a, b))
	}
	if a == b {
		return a
	}
	ca, cb := category(a), category(b)
	if ca != cb {
		if ca < cb {
			a, b, ca, cb = b, a, cb, ca
		}
		// a is of the higher category.
		if a == Complex64 && b == Float64 {
			return Complex128
		}
		return a
	}
	switch ca {
	case 1:
		if a == Uint8 && b == Int8 || a == Int8 && b == Uint8 {
			return Int16
		}
		return max(a, b) // Uint8 < Int8 < ... < Int64 in declaration order
	case 2:
		if a == Float16 && b == BFloat16 || a == BFloat16 && b == Float16 {
			return Float32
		}
		return max(a, b)
	default:
		return max(a, b)
	}
}
