// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensor

import "github.com/tdmpi/tdmpi/internal/tensorx/hook"

// init hands package internal/tensorx what only tdmpi's own packages use
// (see package hook).
func init() {
	hook.FromStorageInto = fromStorageInto
	hook.NewViewSet = func(like []Tensor) (any, error) {
		v, err := newViewSet(like)
		if err != nil {
			return nil, err
		}
		return v, nil
	}
	hook.Reusable = func(s *Storage) bool { return s.reusable }
}
