// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

// logBytes returns the bytes of td's tensor leaves for a start line (see
// runCollective); td may be nil.
func (td *TensorDict) logBytes(int) int64 { return tensorBytes(td) }

// tensorBytes returns the bytes of td's tensor leaves, or -1 for a nil td.
func tensorBytes(td *TensorDict) int64 {
	if td == nil {
		return -1
	}
	var n int64
	for i := range td.entries {
		switch e := &td.entries[i]; e.kind {
		case kindTensor:
			n += int64(e.t.NBytes())
		case kindTD:
			n += tensorBytes(e.td)
		}
	}
	return n
}
