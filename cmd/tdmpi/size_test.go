// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
