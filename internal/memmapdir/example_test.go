package memmapdir_test

import (
	"fmt"

	"github.com/tdmpi/tdmpi/internal/memmapdir"
	"github.com/tdmpi/tdmpi/tensor"
)

// File names of entry keys, as tensordict 0.13 and later encode them.
func ExampleEncodeKey() {
	for _, k := range []string{"obs", "a/b", "100% done", "..", ""} {
		fmt.Printf("%q -> %q\n", k, memmapdir.EncodeKey(k))
	}
	// Output:
	// "obs" -> "obs"
	// "a/b" -> "a%2Fb"
	// "100% done" -> "100%25%20done"
	// ".." -> "%2E%2E"
	// "" -> "%"
}

// The meta.json of a TensorDict node, as tensordict writes it.
func ExampleTensorDictMeta_Marshal() {
	m := &memmapdir.TensorDictMeta{
		Entries: []memmapdir.Entry{
			{Key: "obs", Leaf: &memmapdir.Leaf{Device: "cpu", Shape: []int{2, 3}, DType: tensor.Float32}},
			{Key: "nested", Kind: memmapdir.KindTensorDict},
		},
		BatchSize: []int{2},
		Device:    "cpu",
	}
	b, _ := m.Marshal()
	fmt.Println(string(b))
	// Output: {"obs": {"device": "cpu", "shape": [2, 3], "dtype": "torch.float32", "is_nested": false}, "nested": {"type": "TensorDict"}, "shape": [2], "device": "cpu", "_type": "<class 'tensordict._td.TensorDict'>"}
}
