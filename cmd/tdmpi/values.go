// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package main

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/tdmpi/tdmpi/tensor"
)

// leadingValues returns the first n elements of t in row-major order, as
// JSON values: json.Number for integers and finite floats, bool for bool
// tensors, and strings for complex numbers ("1+2i") and non-finite floats
// ("NaN", "+Inf", "-Inf"). truncated reports that t has more than n
// elements. The result is never nil. t's storage must not be released.
func leadingValues(t *tensor.Tensor, n int) (vals []any, truncated bool) {
	total := t.Numel()
	m := min(n, total)
	vals = make([]any, 0, m)
	shape := t.Shape()
	idx := make([]int, len(shape))
	for i := 0; i < m; i++ {
		vals = append(vals, elemValue(t, idx))
		// Advance the multi-index in row-major order.
		for d := len(idx) - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
	}
	return vals, total > m
}

// elemValue returns the element of t at idx as a JSON value.
func elemValue(t *tensor.Tensor, idx []int) any {
	switch dt := t.DType(); dt {
	case tensor.Bool:
		return t.At(idx...) != 0
	case tensor.Int64:
		return json.Number(strconv.FormatInt(tensor.Get[int64](t, idx...), 10))
	case tensor.Uint8, tensor.Int8, tensor.Int16, tensor.Int32:
		return json.Number(strconv.FormatInt(int64(t.At(idx...)), 10))
	case tensor.Complex64, tensor.Complex128:
		bits := 128
		if dt == tensor.Complex64 {
			bits = 64
		}
		s := strconv.FormatComplex(t.AtComplex(idx...), 'g', -1, bits)
		return strings.TrimSuffix(strings.TrimPrefix(s, "("), ")")
	case tensor.Float64:
		return floatValue(t.At(idx...), 64)
	default: // float32, float16, bfloat16: exact in float32
		return floatValue(t.At(idx...), 32)
	}
}

// floatValue formats v in its shortest form for a float of bits bits.
func floatValue(v float64, bits int) any {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return json.Number(strconv.FormatFloat(v, 'g', -1, bits))
}

// formatValues formats values for the text tree: "[1, 2, 3, ...]".
func formatValues(vals []any, truncated bool) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, v := range vals {
		if i > 0 {
			b.WriteString(", ")
		}
		switch v := v.(type) {
		case json.Number:
			b.WriteString(string(v))
		case bool:
			b.WriteString(strconv.FormatBool(v))
		case string:
			b.WriteString(v)
		}
	}
	if truncated {
		if len(vals) > 0 {
			b.WriteString(", ")
		}
		b.WriteString("...")
	}
	b.WriteByte(']')
	return b.String()
}
