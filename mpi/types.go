// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package mpi

import (
	"reflect"
	"unsafe"
)

// kind indexes the datatype table; the values match tdmpi_datatype in shim.h.
type kind uint8

const (
	kInvalid kind = iota
	kBool
	kInt8
	kUint8
	kInt16
	kUint16
	kInt32
	kUint32
	kInt64
	kUint64
	kFloat32
	kFloat64
	kComplex64
	kComplex128
	kByte
	nKinds
)

var reflectKinds = [...]kind{
	reflect.Bool:       kBool,
	reflect.Int8:       kInt8,
	reflect.Uint8:      kUint8,
	reflect.Int16:      kInt16,
	reflect.Uint16:     kUint16,
	reflect.Int32:      kInt32,
	reflect.Uint32:     kUint32,
	reflect.Int64:      kInt64,
	reflect.Uint64:     kUint64,
	reflect.Int:        kInt64,
	reflect.Uint:       kUint64,
	reflect.Float32:    kFloat32,
	reflect.Float64:    kFloat64,
	reflect.Complex64:  kComplex64,
	reflect.Complex128: kComplex128,
}

func init() {
	if unsafe.Sizeof(int(0)) != 8 {
		reflectKinds[reflect.Int] = kInt32
		reflectKinds[reflect.Uint] = kUint32
	}
}

// kindOf returns the datatype kind of T.
func kindOf[T Scalar]() kind {
	var z T
	switch any(z).(type) {
	case byte:
		return kUint8
	case float64:
		return kFloat64
	case float32:
		return kFloat32
	case int64:
		return kInt64
	case int32:
		return kInt32
	case int:
		return reflectKinds[reflect.Int]
	}
	return reflectKinds[reflect.TypeFor[T]().Kind()]
}

func isInteger(k kind) bool { return k >= kInt8 && k <= kUint64 || k == kByte }
func isFloat(k kind) bool   { return k == kFloat32 || k == kFloat64 }
func isComplex(k kind) bool { return k == kComplex64 || k == kComplex128 }

var kindNames = [nKinds]string{"invalid", "bool", "int8", "uint8", "int16", "uint16", "int32", "uint32",
	"int64", "uint64", "float32", "float64", "complex64", "complex128", "byte"}

func (k kind) String() string { return kindNames[k] }

// validFor reports whether o applies to elements of kind k.
func (o Op) validFor(k kind) bool {
	switch o {
	case OpSum, OpProd:
		return isInteger(k) || isFloat(k) || isComplex(k)
	case OpMin, OpMax:
		return isInteger(k) || isFloat(k)
	case OpLand, OpLor, OpLxor:
		return isInteger(k) || k == kBool
	case OpBand, OpBor, OpBxor:
		return isInteger(k)
	}
	return false
}

func checkOp(name string, o Op, k kind) error {
	if o < 0 || o >= nOps {
		return argError(name, classOp, "invalid operation %v", o)
	}
	if !o.validFor(k) {
		return argError(name, classOp, "%v does not apply to %v", o, k)
	}
	return nil
}
