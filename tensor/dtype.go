package tensor

import (
	"fmt"
	"strings"
)

// DType identifies the element type of a Tensor. The zero value is not a valid
// DType; every constant below is.
type DType uint8

// The element types tdmpi supports: the dtypes of Python tensordict that have a
// fixed size and a plain little-endian layout.
const (
	Bool DType = iota + 1
	Uint8
	Int8
	Int16
	Int32
	Int64
	Float16
	BFloat16
	Float32
	Float64
	Complex64
	Complex128
	numDTypes = Complex128 // the largest valid DType
)

// dtypeInfo holds the fixed facts of one DType.
type dtypeInfo struct {
	name string // short name, as numpy and String print it
	size int    // bytes per element
}

var dtypeTable = [...]dtypeInfo{
	Bool:       {"bool", 1},
	Uint8:      {"uint8", 1},
	Int8:       {"int8", 1},
	Int16:      {"int16", 2},
	Int32:      {"int32", 4},
	Int64:      {"int64", 8},
	Float16:    {"float16", 2},
	BFloat16:   {"bfloat16", 2},
	Float32:    {"float32", 4},
	Float64:    {"float64", 8},
	Complex64:  {"complex64", 8},
	Complex128: {"complex128", 16},
}

// DTypes returns every valid DType in declaration order.
func DTypes() []DType {
	out := make([]DType, 0, int(numDTypes))
	for d := Bool; d <= numDTypes; d++ {
		out = append(out, d)
	}
	return out
}

// Valid reports whether d is one of the declared DType constants.
func (d DType) Valid() bool { return d >= Bool && d <= numDTypes }

// String returns the short name of d, such as "float32". An invalid DType
// prints as "DType(N)".
func (d DType) String() string {
	if !d.Valid() {
		return fmt.Sprintf("DType(%d)", uint8(d))
	}
	return dtypeTable[d].name
}

// TorchName returns the name Python tensordict writes for d, such as
// "torch.float32".
func (d DType) TorchName() string { return "torch." + d.String() }

// Size returns the number of bytes of one element of type d. It panics if d is
// not valid.
func (d DType) Size() int {
	if !d.Valid() {
		panic(fmt.Sprintf("tensor: Size of invalid %v", d))
	}
	return dtypeTable[d].size
}

// IsFloat reports whether d is a real floating-point type.
func (d DType) IsFloat() bool {
	return d == Float16 || d == BFloat16 || d == Float32 || d == Float64
}

// IsComplex reports whether d is a complex type.
func (d DType) IsComplex() bool { return d == Complex64 || d == Complex128 }

// IsInteger reports whether d is an integer type (Bool excluded).
func (d DType) IsInteger() bool { return d >= Uint8 && d <= Int64 }

// ParseDType returns the DType named s. It accepts the short names that String
// returns ("float32") and Python tensordict's names ("torch.float32"), and the
// usual torch aliases ("torch.float", "torch.long", "torch.half", ...).
func ParseDType(s string) (DType, error) {
	name := strings.TrimPrefix(s, "torch.")
	for d := Bool; d <= numDTypes; d++ {
		if dtypeTable[d].name == name {
			return d, nil
		}
	}
	if d, ok := dtypeAliases[name]; ok {
		return d, nil
	}
	return 0, fmt.Errorf("tensor: unknown dtype %q", s)
}

// dtypeAliases are the other spellings torch accepts for the same types.
var dtypeAliases = map[string]DType{
	"half":    Float16,
	"float":   Float32,
	"double":  Float64,
	"short":   Int16,
	"int":     Int32,
	"long":    Int64,
	"cfloat":  Complex64,
	"cdouble": Complex128,
}
