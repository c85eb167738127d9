package tensordict

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/tensor"
)

type obsTC struct {
	Pixels *tensor.Tensor `td:"pixels"`
	Reward *tensor.Tensor
}

type stepTC struct {
	Batch  []int          `td:",batch"`
	Obs    obsTC          `td:"obs"`
	Next   *obsTC         `td:"next"`
	Action *tensor.Tensor `td:"action"`
	Label  string         `td:"label"`
	Tags   []string       `td:"tags"`
	Score  float64        `td:"score"`
	Extra  *TensorDict    `td:"extra"`
	Cache  map[string]int `td:"-"`
	hidden int
}

func init() { RegisterClass[stepTC]("tdmpi.test.Step") }

func newStep(t *testing.T) stepTC {
	return stepTC{
		Batch:  []int{2},
		Obs:    obsTC{Pixels: arange(t, 2, 3), Reward: tensor.Ones(tensor.Float32, 2)},
		Next:   &obsTC{Pixels: tensor.Zeros(tensor.Uint8, 2, 3)},
		Action: tensor.Full(tensor.Int64, 1, 2),
		Label:  "walk",
		Tags:   []string{"a", "b"},
		Score:  0.25,
		Cache:  map[string]int{"skip": 1},
		hidden: 1,
	}
}

func TestTensorclassRoundTrip(t *testing.T) {
	s := newStep(t)
	td, err := FromStruct(&s)
	require.NoError(t, err)
	assert.Equal(t, "tdmpi.test.Step", td.ClassName())
	assert.Equal(t, []int{2}, td.BatchSize())
	assert.Equal(t, []Key{K("obs"), K("obs", "pixels"), K("obs", "Reward"), K("next"), K("next", "pixels"), K("action"), K("label"), K("tags"), K("score")},
		td.Keys(IncludeNested()), "nil fields are left out, td:\"-\" skipped")

	// Through the consolidated format and back into the registered type.
	c := mustConsolidate(t, td)
	meta, err := c.ConsolidatedMetadata()
	require.NoError(t, err)
	back, err := FromConsolidated(c.ConsolidatedStorage(), meta)
	require.NoError(t, err)
	back.SetClassName(c.ClassName()) // the transport header carries it
	typ, ok := Lookup(back.ClassName())
	require.True(t, ok)
	assert.Equal(t, reflect.TypeFor[stepTC](), typ)

	v, err := Instantiate(back)
	require.NoError(t, err)
	got := v.(*stepTC)
	assert.Equal(t, []int{2}, got.Batch)
	assert.Equal(t, "walk", got.Label)
	assert.Equal(t, []string{"a", "b"}, got.Tags)
	assert.Equal(t, 0.25, got.Score)
	assert.Nil(t, got.Cache)
	require.NotNil(t, got.Next)
	assert.Equal(t, []float32{0, 1, 2, 3, 4, 5}, floats(t, got.Obs.Pixels))
	assert.True(t, got.Next.Pixels.EqScalar(0).All())

	v2, err := As[stepTC](back)
	require.NoError(t, err)
	assert.Equal(t, got.Label, v2.Label)
	p, err := As[*stepTC](back)
	require.NoError(t, err)
	assert.Equal(t, "walk", p.Label)
	assert.Equal(t, "tdmpi.test.Step", ClassName(p))
	assert.Equal(t, "", ClassName(obsTC{}))
}

func TestTensorclassErrors(t *testing.T) {
	s := newStep(t)
	s.Action = tensor.Ones(tensor.Int64, 3)
	_, err := FromStruct(s)
	assert.ErrorContains(t, err, "field action")
	assert.ErrorContains(t, err, "[3]")

	_, err = FromStruct(42)
	assert.Error(t, err)
	type badBatch struct {
		B []int64 `td:",batch"`
	}
	_, err = FromStruct(badBatch{})
	assert.ErrorContains(t, err, "batch field must be []int")
	type ch struct{ C chan int }
	_, err = FromStruct(ch{C: make(chan int)})
	assert.ErrorContains(t, err, "not JSON-able")

	td := New(2)
	require.NoError(t, td.Set(K("unknown"), tensor.Ones(tensor.Int8, 2)))
	_, err = As[stepTC](td)
	assert.ErrorContains(t, err, "key unknown has no field")

	td = New(2)
	require.NoError(t, td.SetNonTensor(K("label"), 3))
	_, err = As[stepTC](td)
	assert.ErrorContains(t, err, "key label")

	td = New(2)
	require.NoError(t, td.Set(K("label"), tensor.Ones(tensor.Int8, 2)))
	_, err = As[stepTC](td)
	assert.ErrorContains(t, err, "does not fit field of type string")

	td = New()
	td.SetClassName("other.Class")
	_, err = As[stepTC](td)
	assert.ErrorContains(t, err, `holds class "other.Class"`)
	_, err = Instantiate(td)
	assert.ErrorContains(t, err, "not registered")

	assert.Panics(t, func() { RegisterClass[int]("x") })
	assert.Panics(t, func() { RegisterClass[obsTC]("tdmpi.test.Step") })
	assert.NotPanics(t, func() { RegisterClass[stepTC]("tdmpi.test.Step") })
}

func TestTensorclassBatchOption(t *testing.T) {
	o := obsTC{Pixels: arange(t, 4, 2)}
	td, err := FromStruct(o, WithBatchSize(4))
	require.NoError(t, err)
	assert.Equal(t, []int{4}, td.BatchSize())
	td, err = FromStruct(o)
	require.NoError(t, err)
	assert.Equal(t, []int{}, td.BatchSize())
}

func TestStructure(t *testing.T) {
	a := seedTD(t)
	b := seedTD(t)
	assert.Equal(t, a.Signature(), b.Signature())
	require.NoError(t, DiffStructure(a, b))
	meta, _, err := Layout(a)
	require.NoError(t, err)
	h, err := StructureHash(meta)
	require.NoError(t, err)
	assert.Equal(t, a.Signature(), h)
	require.NoError(t, DiffStructureMeta(b, meta))

	// Values do not matter; dtype, shape, keys and order do.
	require.NoError(t, b.SetInPlace(K("c"), tensor.Zeros(tensor.Float32, 1, 2)))
	assert.Equal(t, a.Signature(), b.Signature())

	tests := []struct {
		name   string
		change func(td *TensorDict)
		want   string
	}{
		{"dtype", func(td *TensorDict) { td.Set(K("c"), tensor.Ones(tensor.Float64, 1, 2)) }, "key c: float32[1 2] vs float64[1 2]"},
		{"shape", func(td *TensorDict) { td.Set(K("d", "e", "f"), tensor.Ones(tensor.Float32, 1, 2, 3)) }, "key d.e.f: float32[1 2 2] vs float32[1 2 3]"},
		{"missing", func(td *TensorDict) { td.Del(K("d")) }, "key d.e.f only in the first"},
		{"extra", func(td *TensorDict) { td.Set(K("z"), tensor.Ones(tensor.Float32, 1, 2)) }, "key z only in the second"},
		{"order", func(td *TensorDict) { td.Del(K("a")); td.Set(K("a", "b"), tensor.Ones(tensor.Float32, 1, 2)) }, "leaf 0: key a.b vs c"},
		{"batch", func(td *TensorDict) { td.SetBatchSize(1) }, "batch size [1 2] vs [1]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := seedTD(t)
			tc.change(o)
			assert.NotEqual(t, a.Signature(), o.Signature())
			err := DiffStructure(a, o)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			om, _, err := Layout(o)
			require.NoError(t, err)
			h, err := StructureHash(om)
			require.NoError(t, err)
			assert.Equal(t, o.Signature(), h)
			assert.Error(t, DiffStructureMeta(a, om))
		})
	}
}
