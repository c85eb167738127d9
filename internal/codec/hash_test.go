package codec

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/tensor"
)

func testStructure() Structure {
	return Structure{Batch: []int{2}, Leaves: []StructLeaf{
		{Key: Key{"z"}, DType: tensor.Float32, Shape: []int{2}},
		{Key: Key{"a", "b"}, DType: tensor.Int64, Shape: []int{2, 3}},
		{Key: Key{"a"}, DType: tensor.Bool, Shape: []int{2}},
	}}
}

func TestStructureHash(t *testing.T) {
	s := testStructure()
	storage, sorted := s.Hash(StorageOrder), s.Hash(SortedOrder)
	assert.NotEqual(t, storage, sorted, "the order is part of the hash")
	assert.Equal(t, sorted, s.Sorted().Hash(SortedOrder), "sorted order does not depend on the listing")
	assert.Equal(t, []Key{{"a"}, {"a", "b"}, {"z"}}, []Key{s.Sorted().Leaves[0].Key, s.Sorted().Leaves[1].Key, s.Sorted().Leaves[2].Key})

	// Every field counts.
	for name, change := range map[string]func(*Structure){
		"batch": func(s *Structure) { s.Batch = []int{3} },
		"key":   func(s *Structure) { s.Leaves[0].Key = Key{"y"} },
		"split": func(s *Structure) { s.Leaves[1].Key = Key{"ab"} },
		"dtype": func(s *Structure) { s.Leaves[0].DType = tensor.Float64 },
		"shape": func(s *Structure) { s.Leaves[0].Shape = []int{2, 1} },
		"drop":  func(s *Structure) { s.Leaves = s.Leaves[:2] },
	} {
		c := testStructure()
		change(&c)
		assert.NotEqual(t, storage, c.Hash(StorageOrder), name)
		assert.NotEqual(t, sorted, c.Hash(SortedOrder), name)
		assert.Error(t, Diff(s, c), name)
	}
	assert.NoError(t, Diff(s, testStructure()))
	assert.EqualError(t, Diff(s, s.Sorted()), "leaf 0: key z vs a")
}

func TestHasherTensorLeaf(t *testing.T) {
	s := testStructure()
	h := NewHasher(StorageOrder, s.Batch, len(s.Leaves))
	for _, l := range s.Leaves {
		h.TensorLeaf(l.Key[:len(l.Key)-1], l.Key[len(l.Key)-1], tensor.Zeros(l.DType, l.Shape...))
	}
	assert.Equal(t, s.Hash(StorageOrder), h.Sum64())
	x := tensor.Zeros(tensor.Float32, 4, 3)
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		h := NewHasher(SortedOrder, nil, 1)
		h.TensorLeaf([]string{"a"}, "b", x)
		_ = h.Sum64()
	}))
}

func TestMetaHash(t *testing.T) {
	meta := []byte(`{"cls":"TensorDict","leaves":{"z":["torch.float32",[2],8,16,0]},"cls_metadata":{"batch_size":[2]},` +
		`"a":{"cls":"TensorDict","leaves":{"a":["torch.bool",[2],0,8,6]},"cls_metadata":{"batch_size":[2]}}}`)
	s, err := MetaStructure(meta)
	require.NoError(t, err)
	assert.Equal(t, Structure{Batch: []int{2}, Leaves: []StructLeaf{
		{Key: Key{"a", "a"}, DType: tensor.Bool, Shape: []int{2}},
		{Key: Key{"z"}, DType: tensor.Float32, Shape: []int{2}},
	}}, s, "storage order: by start")
	h, err := MetaHash(meta)
	require.NoError(t, err)
	assert.Equal(t, s.Hash(StorageOrder), h)
}

func TestCompareKeys(t *testing.T) {
	tests := []struct {
		a, b Key
		want int
	}{
		{Key{"a"}, Key{"a"}, 0},
		{Key{"a"}, Key{"b"}, -1},
		{Key{"a", "z"}, Key{"b"}, -1},
		{Key{"a"}, Key{"a", "b"}, -1},
		{Key{"b"}, Key{"a", "b"}, 1},
	}
	for _, tt := range tests {
		got := CompareKeys(tt.a, tt.b)
		assert.Equal(t, tt.want, min(max(got, -1), 1), "%v vs %v", tt.a, tt.b)
	}
}

func TestFNV64a(t *testing.T) {
	// The FNV-1a test vectors of the specification.
	assert.Equal(t, uint64(0xcbf29ce484222325), FNV64a(nil))
	assert.Equal(t, uint64(0xaf63dc4c8601ec8c), FNV64a([]byte("a")))
	assert.Equal(t, uint64(0x85944171f73967e8), FNV64a([]byte("foobar")))
}
