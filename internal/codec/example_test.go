package codec_test

import (
	"fmt"

	"github.com/tdmpi/tdmpi/internal/codec"
	"github.com/tdmpi/tdmpi/tensor"
)

// Write the metadata of a TensorDict with batch size [2] and one leaf
// ("x", float32 [2 3]), decode it, and hash its structure.
func Example() {
	x := tensor.Zeros(tensor.Float32, 2, 3)
	b := codec.AppendNodeStart(nil)
	b = codec.AppendLeavesStart(b)
	b = codec.AppendLeaf(b, "x", x, 0, 24, 0)
	b = codec.AppendNodeEnd(codec.AppendNodeMetadata(b, []int{2}, false))
	fmt.Println(string(b))

	root, _, err := codec.Decode(b, 24, codec.DefaultLimits())
	if err != nil {
		fmt.Println(err)
		return
	}
	l := root.Leaves[0]
	fmt.Println(l.Name, l.DType, l.Shape, l.Start, l.Stop)

	h, err := codec.MetaHash(b)
	s := codec.Structure{Batch: []int{2}, Leaves: []codec.StructLeaf{{Key: codec.Key{"x"}, DType: tensor.Float32, Shape: []int{2, 3}}}}
	fmt.Println(err, h == s.Hash(codec.StorageOrder))

	_, _, err = codec.Decode(b, 16, codec.DefaultLimits())
	fmt.Println(err)
	// Output:
	// {"cls":"TensorDict","non_tensors":{},"leaves":{"x":["torch.float32",[2,3],0,24,0]},"cls_metadata":{"device":null,"names":[null],"batch_size":[2],"is_locked":false}}
	// x float32 [2 3] 0 24
	// <nil> true
	// leaf x: byte range [0, 24) is outside the storage of 16 bytes
}
