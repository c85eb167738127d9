// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package main

import (
	"encoding/json"
	"strings"

	"github.com/tdmpi/tdmpi/tensor"
)

// leadingValues returns the first n elements of t in row-major order, as
// JSON values: json.Number for integers and finite floats (in the shortest
// form that reads back as the same value of t's dtype), bool for bool
// tensors, and strings for complex numbers ("1+2i") and non-finite floats
// ("NaN", "+Inf", "-Inf"). truncated reports that t has more than n
// elements. The result is never nil. t's storage must not be released.
func leadingValues(t *tensor.Tensor, n int) (vals []any, truncated bool) {
	elems, truncated := t.FormatElements(n)
	vals = make([]any, len(elems))
	dt := t.DType()
	for i, s := range elems {
		switch {
		case dt == tensor.Bool:
			vals[i] = s == "true"
		case dt.IsComplex():
			vals[i] = strings.TrimSuffix(strings.TrimPrefix(s, "("), ")")
		case s == "NaN" || s == "+Inf" || s == "-Inf":
			vals[i] = s
		default:
			vals[i] = json.Number(s)
		}
	}
	return vals, truncated
}
