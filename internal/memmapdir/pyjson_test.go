package memmapdir

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The expected strings are what Python 3's json.dumps(v) prints.
func TestMarshalPython(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{nil, `null`},
		{true, `true`},
		{"hello", `"hello"`},
		{"a<b>&c", `"a<b>&c"`},
		{"é日\U0001F600", `"\u00e9\u65e5\ud83d\ude00"`},
		{"q\"\\\n\r\t\b\f\x01\x7f", `"q\"\\\n\r\t\b\f\u0001` + "\x7f" + `"`},
		{42, `42`},
		{int64(-7), `-7`},
		{uint8(255), `255`},
		{1.0, `1.0`},
		{0.1, `0.1`},
		{-2.5, `-2.5`},
		{1e16, `1e+16`},
		{1e15, `1000000000000000.0`},
		{123456.789, `123456.789`},
		{0.0001, `0.0001`},
		{0.00001, `1e-05`},
		{1.5e-7, `1.5e-07`},
		{1.7976931348623157e308, `1.7976931348623157e+308`},
		{float32(0.1), `0.1`},
		{math.Inf(1), `Infinity`},
		{math.Inf(-1), `-Infinity`},
		{math.NaN(), `NaN`},
		{[]string{"a string!"}, `["a string!"]`},
		{[]any{1, "x", []int{2, 3}, nil}, `[1, "x", [2, 3], null]`},
		{map[string]any{"b": 1, "a": []float64{0.5}}, `{"a": [0.5], "b": 1}`},
		{json.RawMessage(`{"z":1,"a":[1,2.50]}`), `{"z": 1, "a": [1, 2.50]}`},
		{struct {
			A int `json:"a"`
		}{3}, `{"a": 3}`},
	} {
		got, err := MarshalPython(tc.v)
		require.NoError(t, err, "%#v", tc.v)
		assert.Equal(t, tc.want, string(got), "%#v", tc.v)
	}
}

func TestMarshalPythonErrors(t *testing.T) {
	_, err := MarshalPython(make(chan int))
	assert.Error(t, err)
	_, err = Respace([]byte(`[1, `))
	assert.Error(t, err)
	_, err = Respace([]byte(`1 2`))
	assert.ErrorContains(t, err, "trailing")
}

func TestDecodeData(t *testing.T) {
	_, err := DecodeData(json.RawMessage(`{"n": 3, "f": 2.5, "big": 1e400, "l": [true, null, "s"]}`))
	require.Error(t, err, "1e400 does not fit a float64")
	v, err := DecodeData(json.RawMessage(`{"n": 3, "f": 2.5, "l": [true, null, "s", 1.0]}`))
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"n": 3, "f": 2.5, "l": []any{true, nil, "s", 1.0}}, v)
}
