//go:build !linux

package tensor

import "fmt"

// NewOffHeapStorage returns a Storage of n bytes outside the Go heap. It is
// implemented on Linux only; elsewhere it returns an error.
func NewOffHeapStorage(n int) (*Storage, error) {
	return nil, fmt.Errorf("tensor: NewOffHeapStorage: not supported on this platform")
}
