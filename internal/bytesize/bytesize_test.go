// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package bytesize

import (
	"errors"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  string
	}{
		{in: "8", want: 8},
		{in: "8B", want: 8},
		{in: "8b", want: 8},
		{in: "64KiB", want: 64 << 10},
		{in: "64k", want: 64 << 10},
		{in: "64 KiB", want: 64 << 10},
		{in: "256MiB", want: 256 << 20},
		{in: "256M", want: 256 << 20},
		{in: "2GiB", want: 2 << 30},
		{in: "1KB", want: 1000},
		{in: "3mb", want: 3e6},
		{in: "1GB", want: 1e9},
		{in: "0B", want: 0},
		{in: "", err: "want a number of bytes"},
		{in: "MiB", err: "want a number of bytes"},
		{in: "-8B", err: "want a number of bytes"},
		{in: "1.5MiB", err: `unknown unit ".5MiB"`},
		{in: "8XB", err: `unknown unit "XB"`},
		{in: "99999999999999999999", err: "value out of range"},
		{in: "9000000000GiB", err: "too large"},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if tt.err != "" {
			require.Error(t, err, "Parse(%q)", tt.in)
			assert.Contains(t, err.Error(), tt.err, "Parse(%q)", tt.in)
			assert.Contains(t, err.Error(), `"`+tt.in+`"`, "the error names the input")
			continue
		}
		require.NoError(t, err, "Parse(%q)", tt.in)
		assert.Equal(t, tt.want, got, "Parse(%q)", tt.in)
	}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		in   int64
		want string
	}{
		{0, "0 B"},
		{8, "8 B"},
		{1023, "1023 B"},
		{1024, "1 KiB"},
		{1536, "1.5 KiB"},
		{64 << 10, "64 KiB"},
		{256 << 20, "256 MiB"},
		{(1 << 30) + (1 << 29), "1.5 GiB"},
		{1000, "1000 B"},
		{1e6, "976.56 KiB"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Format(tt.in), "Format(%d)", tt.in)
	}
}

func TestExact(t *testing.T) {
	tests := []struct {
		in   int64
		want string
	}{
		{0, "0B"},
		{8, "8B"},
		{1024, "1KiB"},
		{1536, "1536B"},
		{64 << 10, "64KiB"},
		{256 << 20, "256MiB"},
		{3 << 30, "3GiB"},
		{1e9, "1000000000B"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Exact(tt.in), "Exact(%d)", tt.in)
		back, err := Parse(Exact(tt.in))
		require.NoError(t, err)
		assert.Equal(t, tt.in, back, "Parse reads Exact back")
	}
}

func TestParseOutOfRangeIs(t *testing.T) {
	_, err := Parse("99999999999999999999")
	assert.True(t, errors.Is(err, strconv.ErrRange), "%v", err)
}
