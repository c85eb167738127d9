package tensordict

import (
	"errors"

	"github.com/tdmpi/tdmpi/internal/mem"
)

// guardFault runs f, the operation op that reads or writes leaves, and
// returns f's error or, when f touched a page of a memory-mapped leaf that
// is no longer backed (a file another process truncated), an error
// wrapping memmap.ErrFault that names op, instead of the process ending
// with SIGBUS. The families of TensorDict methods that return an error go
// through it once per call: rebuild (indexed, viewed, Apply), zip (the
// element-wise, stacking and concatenating methods), eachLeaf (the
// in-place methods), and the in-place writes of SetAt, ApplyInPlace,
// Update and the comparisons. The methods that return no error use
// faultPanics instead.
func guardFault(op string, f func() error) error {
	err := mem.CatchFault(f)
	var fe *mem.FaultError
	if errors.As(err, &fe) && fe.Op == "" {
		fe.Op = "tensordict: " + op
	}
	return err
}

// guarded is guardFault for an operation that returns a result.
func guarded[T any](op string, f func() (T, error)) (T, error) {
	var out T
	err := guardFault(op, func() error {
		var err error
		out, err = f()
		return err
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return out, nil
}

// guardedWalk is walkLeaves from the root under guardFault.
func (td *TensorDict) guardedWalk(op string, fn func(k Key, node *TensorDict, j int) error) error {
	return guardFault(op, func() error { return td.walkLeaves(nil, fn) })
}
