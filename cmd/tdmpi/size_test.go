// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseSize(t *testing.T) {
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
		got, err := parseSize(tt.in)
		if tt.err != "" {
			require.Error(t, err, "parseSize(%q)", tt.in)
			assert.Contains(t, err.Error(), tt.err, "parseSize(%q)", tt.in)
			assert.Contains(t, err.Error(), `"`+tt.in+`"`, "the error names the input")
			continue
		}
		require.NoError(t, err, "parseSize(%q)", tt.in)
		assert.Equal(t, tt.want, got, "parseSize(%q)", tt.in)
	}
}

func TestFormatSize(t *testing.T) {
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
		assert.Equal(t, tt.want, formatSize(tt.in), "formatSize(%d)", tt.in)
	}
}

func TestByteSizeFlag(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"8B", "8B"},
		{"64KiB", "64KiB"},
		{"1024", "1KiB"},
		{"256MiB", "256MiB"},
		{"1GB", "1000000000B"},
		{"3GiB", "3GiB"},
	}
	for _, tt := range tests {
		var b byteSize
		require.NoError(t, b.Set(tt.in))
		assert.Equal(t, tt.want, b.String(), "after Set(%q)", tt.in)
		var back byteSize
		require.NoError(t, back.Set(b.String()), "String is read back")
		assert.Equal(t, b, back)
	}
	var b byteSize
	assert.Error(t, b.Set("lots"))
	assert.Equal(t, "0B", (*byteSize)(nil).String())
}
