// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"reflect"
	"strconv"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/codec"
	"github.com/tdmpi/tdmpi/tensor"
)

// templateSource returns a consolidated TensorDict with what a template
// must copy: every dtype (bool among them) in a node of more than indexMin
// entries, awkward keys, non-tensor values and a stack of them, a locked
// child, a class name; and its metadata decoded.
func templateSource(t *testing.T) (*TensorDict, *codec.Node) {
	t.Helper()
	td := allDTypes(t)
	stack, err := NewNonTensorStack([]any{"a", map[string]any{"k": []any{1.0}}, nil}, 3)
	require.NoError(t, err)
	require.NoError(t, td.SetNonTensor(K("stacked"), stack))
	locked := New(3)
	require.NoError(t, locked.Set(K("w"), tensor.Ones(tensor.Int64, 3, 2)))
	require.NoError(t, td.SetTD(K("frozen"), locked.Lock()))
	td.SetClassName("Sample")
	c, err := td.Consolidate()
	require.NoError(t, err)
	meta, err := c.ConsolidatedMetadata()
	require.NoError(t, err)
	root, _, err := codec.Decode(meta, c.ConsolidatedStorage().Len(), codec.DefaultLimits())
	require.NoError(t, err)
	return c, root
}

// storageCopy returns a new storage holding st's bytes.
func storageCopy(t *testing.T, st *tensor.Storage) *tensor.Storage {
	t.Helper()
	c := tensor.NewStorage(st.Len())
	copy(c.Bytes(), st.Bytes())
	return c
}

// A copy of a template is the TensorDict buildFromMeta builds, over the
// new storage: same keys in the same order, batch sizes, bytes, values,
// lock states; every leaf and node views the new storage.
func TestTemplateSameAsBuild(t *testing.T) {
	c, root := templateSource(t)
	st := storageCopy(t, c.ConsolidatedStorage())
	want, err := buildFromMeta(root, st)
	require.NoError(t, err)
	cloneNonTensors(want)
	tp, err := newTemplate(root, st.Len())
	require.NoError(t, err)
	got, err := tp.instantiate(st)
	require.NoError(t, err)

	requireSameTD(t, want, got)
	wi, gi := want.Items(IncludeNested()), got.Items(IncludeNested())
	for i := range wi {
		switch {
		case gi[i].Tensor != nil:
			assert.Same(t, st, gi[i].Tensor.Storage(), "key %v", gi[i].Key)
		case gi[i].TD != nil:
			assert.Equal(t, wi[i].TD.IsLocked(), gi[i].TD.IsLocked(), "key %v", gi[i].Key)
			assert.Equal(t, *wi[i].TD.cons, *gi[i].TD.cons, "key %v", gi[i].Key)
			assert.Equal(t, wi[i].TD.class, gi[i].TD.class, "key %v", gi[i].Key)
		}
	}
	assert.True(t, mustTD(t, got, K("frozen")).IsLocked())
	assert.Equal(t, *want.cons, *got.cons)
	assert.True(t, mustTD(t, got, K("dtypes")).sharedIndex, "a node of %d entries shares the template's index", len(mustTD(t, got, K("dtypes")).entries))
	// The template keeps no storage: its own leaves view a released one.
	for _, e := range tp.entries {
		if e.kind == kindTensor {
			assert.True(t, e.t.Storage().Released(), "entry %q", e.name)
		}
	}
}

// instantiateCopy makes the copy instantiate makes over a copy of the
// bytes it is given: under copyMaxBytes, in the tree's own allocation
// (the storage at copyBlock.storageAt and its bytes at copyBlock.dataAt from the root node,
// which starts it), above, in one of their own. Changing the bytes given
// changes nothing.
func TestTemplateCopyOfBytes(t *testing.T) {
	small, smallRoot := templateSource(t)
	big := New()
	require.NoError(t, big.Set(K("x"), tensor.Ones(tensor.Float64, copyMaxBytes/8)))
	big, err := big.Consolidate()
	require.NoError(t, err)
	meta, err := big.ConsolidatedMetadata()
	require.NoError(t, err)
	bigRoot, _, err := codec.Decode(meta, big.ConsolidatedStorage().Len(), codec.DefaultLimits())
	require.NoError(t, err)
	for _, tt := range []struct {
		name   string
		td     *TensorDict
		root   *codec.Node
		inTree bool
	}{
		{"small", small, smallRoot, true},
		{"at copyMaxBytes", big, bigRoot, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := append([]byte(nil), tt.td.ConsolidatedStorage().Bytes()...)
			require.Equal(t, tt.inTree, len(b) < copyMaxBytes)
			tp, err := newTemplate(tt.root, len(b))
			require.NoError(t, err)
			want, err := tp.instantiate(storageCopy(t, tt.td.ConsolidatedStorage()))
			require.NoError(t, err)
			got, err := tp.instantiateCopy(b)
			require.NoError(t, err)
			clear(b)
			requireSameTD(t, want, got)
			data := unsafe.Pointer(unsafe.SliceData(got.ConsolidatedStorage().Bytes()))
			if tt.inTree {
				assert.Equal(t, tp.copyBlock.dataAt, uintptr(data)-uintptr(unsafe.Pointer(got)), "the bytes are not in the tree's allocation")
				assert.Equal(t, tp.copyBlock.storageAt, uintptr(unsafe.Pointer(got.ConsolidatedStorage()))-uintptr(unsafe.Pointer(got)), "the storage is not in the tree's allocation")
			}
			assert.NotEqual(t, unsafe.Pointer(unsafe.SliceData(b)), data)
			assert.Zero(t, uintptr(data)%8, "storage not 8-byte aligned")
			_, err = tp.instantiateCopy(b[:len(b)-8])
			assert.Error(t, err, "bytes of the wrong length")
		})
	}
}

// TestTemplateSpareCopy: a copy made with a spare (memory allocated for
// a copy of its template before the bytes arrived) lies in the spare and
// equals one made without; a spare of another template is left unused.
func TestTemplateSpareCopy(t *testing.T) {
	templateOf := func(td *TensorDict) (*treeTemplate, []byte) {
		c, err := td.Consolidate()
		require.NoError(t, err)
		meta, err := c.ConsolidatedMetadata()
		require.NoError(t, err)
		b := c.ConsolidatedStorage().Bytes()
		root, _, err := codec.Decode(meta, len(b), codec.DefaultLimits())
		require.NoError(t, err)
		tp, err := newTemplate(root, len(b))
		require.NoError(t, err)
		require.NotNil(t, tp.copyBlock.typ)
		return tp, b
	}
	a := New(2)
	require.NoError(t, a.Set(K("x"), tensor.Full(tensor.Float32, 1.5, 2, 3)))
	require.NoError(t, a.Set(K("n", "y"), tensor.Full(tensor.Int64, 7, 2)))
	require.NoError(t, a.SetNonTensor(K("note"), "a"))
	other := New()
	require.NoError(t, other.Set(K("z"), tensor.Full(tensor.Uint8, 3, 5)))
	tp, b := templateOf(a)
	otp, _ := templateOf(other)

	want, err := tp.instantiateCopy(b)
	require.NoError(t, err)
	spare := &spareCopy{tp: tp, block: reflect.New(tp.copyBlock.typ).UnsafePointer()}
	got, err := tp.instantiateCopyIn(b, spare)
	require.NoError(t, err)
	requireSameTD(t, want, got)
	assert.Equal(t, spare.block, unsafe.Pointer(got), "the copy is not in the spare")

	wrong := &spareCopy{tp: otp, block: reflect.New(otp.copyBlock.typ).UnsafePointer()}
	got, err = tp.instantiateCopyIn(b, wrong)
	require.NoError(t, err)
	requireSameTD(t, want, got)
	assert.NotEqual(t, wrong.block, unsafe.Pointer(got), "a spare of another template was used")
}

// A tree without tensor leaves (non-tensor values and empty nodes), and
// an empty one, are copied too: the parts of a copy's memory that hold no
// value are empty (go test -race checks the pointer arithmetic).
func TestTemplateWithoutTensors(t *testing.T) {
	noLeaves := New(2)
	require.NoError(t, noLeaves.SetNonTensor(K("note"), "x"))
	require.NoError(t, noLeaves.SetTD(K("empty"), New(2)))
	for _, td := range []*TensorDict{noLeaves, New()} {
		c, err := td.Consolidate()
		require.NoError(t, err)
		meta, err := c.ConsolidatedMetadata()
		require.NoError(t, err)
		st := c.ConsolidatedStorage()
		root, _, err := codec.Decode(meta, st.Len(), codec.DefaultLimits())
		require.NoError(t, err)
		want, err := buildFromMeta(root, st)
		require.NoError(t, err)
		tp, err := newTemplate(root, st.Len())
		require.NoError(t, err)
		requireSameTD(t, want, mustInstantiate(t, tp, storageCopy(t, st)))
	}
}

// Changing a copy (its entries, its index, its non-tensor values, its
// tensors' bytes) changes neither the template nor the other copies.
func TestTemplateCopiesAreIndependent(t *testing.T) {
	c, root := templateSource(t)
	tp, err := newTemplate(root, c.ConsolidatedStorage().Len())
	require.NoError(t, err)
	st1, st2 := storageCopy(t, c.ConsolidatedStorage()), storageCopy(t, c.ConsolidatedStorage())
	a, err := tp.instantiate(st1)
	require.NoError(t, err)
	b, err := tp.instantiate(st2)
	require.NoError(t, err)
	keys := b.Keys(IncludeNested())

	dt := mustTD(t, a, K("dtypes"))
	require.NoError(t, dt.Del(K("float64")))
	require.NoError(t, dt.Set(K("new"), tensor.Zeros(tensor.Int8, 3)))
	require.NoError(t, a.Del(K("label")))
	a.Unlock()
	require.NoError(t, a.Set(K("frozen", "w"), tensor.Zeros(tensor.Int64, 3, 2)))
	v, err := a.GetNonTensor(K("nested", "info"))
	require.NoError(t, err)
	v.(map[string]any)["n"] = 99
	require.NoError(t, mustGet(t, a, K("dtypes", "int32")).Fill(7))
	assert.False(t, dt.sharedIndex, "a changed node owns its index")

	for _, td := range []*TensorDict{b, mustInstantiate(t, tp, storageCopy(t, c.ConsolidatedStorage()))} {
		assert.Equal(t, keys, td.Keys(IncludeNested()))
		_, err := td.Get(K("dtypes", "float64"))
		require.NoError(t, err, "lookup through the shared index")
		_, err = td.Get(K("dtypes", "new"))
		require.Error(t, err)
		v, err = td.GetNonTensor(K("nested", "info"))
		require.NoError(t, err)
		assert.EqualValues(t, 3, v.(map[string]any)["n"])
		assert.True(t, mustTD(t, td, K("frozen")).IsLocked())
		assert.Equal(t, mustGet(t, c, K("dtypes", "int32")).Sum(), mustGet(t, td, K("dtypes", "int32")).Sum())
	}
	mustGet(t, a, K("dtypes", "new")) // a kept its changes
	_, err = a.Get(K("dtypes", "float64"))
	require.Error(t, err)
}

func mustTD(t *testing.T, td *TensorDict, k Key) *TensorDict {
	t.Helper()
	x, err := td.GetTD(k)
	require.NoError(t, err, "key %v", k)
	return x
}

func mustInstantiate(t *testing.T, tp *treeTemplate, st *tensor.Storage) *TensorDict {
	t.Helper()
	td, err := tp.instantiate(st)
	require.NoError(t, err)
	return td
}

// A copy checks its storage as building does: a bool byte that is not 0
// or 1, a storage of another size, a released one.
func TestTemplateChecksStorage(t *testing.T) {
	c, root := templateSource(t)
	tp, err := newTemplate(root, c.ConsolidatedStorage().Len())
	require.NoError(t, err)
	bad := storageCopy(t, c.ConsolidatedStorage())
	b := mustGet(t, c, K("dtypes", "bool"))
	bad.Bytes()[b.Offset()] = 2
	_, err = tp.instantiate(bad)
	require.ErrorContains(t, err, "bool element 0 is byte 2, want 0 or 1")

	_, err = tp.instantiate(tensor.NewStorage(c.ConsolidatedStorage().Len() + 8))
	require.ErrorContains(t, err, "template for")

	released := storageCopy(t, c.ConsolidatedStorage())
	require.NoError(t, released.Release())
	_, err = tp.instantiate(released)
	require.ErrorIs(t, err, tensor.ErrReleased)
}

// Copies made on several goroutines at once, and changed there, do not
// race (go test -race).
func TestTemplateConcurrentCopies(t *testing.T) {
	c, root := templateSource(t)
	var cache templateCache
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 20 {
				tp, err := cache.template(root, c.ConsolidatedStorage().Len())
				if !assert.NoError(t, err) {
					return
				}
				td, err := tp.instantiateCopy(c.ConsolidatedStorage().Bytes())
				if !assert.NoError(t, err) {
					return
				}
				_, err = td.Get(K("dtypes", "uint8"))
				assert.NoError(t, err)
				sub, err := td.GetTD(K("dtypes"))
				if assert.NoError(t, err) {
					assert.NoError(t, sub.Set(K("mine"), tensor.Zeros(tensor.Int8, 3)))
				}
			}
		})
	}
	wg.Wait()
	n := 0
	for _, tp := range cache.t {
		if tp != nil {
			n++
		}
	}
	assert.Equal(t, 1, n, "one template for one tree")
}

// The first InitRemote of a copy of a template that nothing changed reuses
// the encoding the first such copy recorded, and sends the same bytes as
// encoding it afresh; a changed copy, a copy under another class name (in
// both modes, and as Broadcast's source), or a tree with a non-scalar
// non-tensor value, is encoded afresh.
func TestTemplateInitEncoding(t *testing.T) {
	plainTD := func() *TensorDict {
		td := New(2)
		require.NoError(t, td.Set(K("a"), tensor.Full(tensor.Float32, 1, 2, 3)))
		require.NoError(t, td.Set(K("n", "b"), tensor.Ones(tensor.Bool, 2)))
		require.NoError(t, td.SetNonTensor(K("label"), "x"))
		td.SetClassName("Sample")
		c, err := td.Consolidate()
		require.NoError(t, err)
		return c
	}
	copyOf := func(tp *treeTemplate, c *TensorDict) *TensorDict { return templateCopy(t, tp, c) }
	fresh := func(td *TensorDict) []byte { // what firstInitFrame encodes without a template
		saved := td.tmpl
		td.tmpl = nil
		defer func() { td.tmpl = saved }()
		f, _, _, err := firstInitFrame("InitRemote", td, nil, false)
		require.NoError(t, err)
		return f
	}

	c := plainTD()
	tp := templateOf(t, c)
	require.True(t, tp.plain)

	a := copyOf(tp, c)
	fa, _, _, err := firstInitFrame("InitRemote", a, nil, false)
	require.NoError(t, err)
	require.NotNil(t, tp.enc.Load(), "the first unchanged copy records its encoding")
	assert.Equal(t, fresh(a), fa)

	b := copyOf(tp, c)
	enc, ok := b.templateEncoding()
	require.True(t, ok)
	require.NotNil(t, enc, "b's frame comes from a's encoding")
	fb, _, _, err := firstInitFrame("InitRemote", b, nil, false)
	require.NoError(t, err)
	assert.Equal(t, fresh(b), fb, "the recorded encoding is the one b would make")

	for name, change := range map[string]func(td *TensorDict){
		"new key":    func(td *TensorDict) { require.NoError(t, td.Set(K("z"), tensor.Zeros(tensor.Int8, 2))) },
		"nested del": func(td *TensorDict) { require.NoError(t, td.Del(K("n", "b"))) },
		"lock":       func(td *TensorDict) { td.Lock() },
		"class":      func(td *TensorDict) { td.SetClassName("Other") },
		"scalar":     func(td *TensorDict) { require.NoError(t, td.SetNonTensor(K("label"), "y")) },
		"batch":      func(td *TensorDict) { require.NoError(t, td.SetBatchSize()) },
	} {
		t.Run(name, func(t *testing.T) {
			d := copyOf(tp, c)
			change(d)
			_, ok := d.templateEncoding()
			require.False(t, ok)
			fd, _, _, err := firstInitFrame("InitRemote", d, nil, false)
			require.NoError(t, err)
			assert.Equal(t, fresh(d), fd)
			assert.NotEqual(t, fa, fd)
		})
	}

	// A receive sets a copy's class name from its frame without counting
	// an edit: a copy of the same template under another class name is
	// encoded afresh (the recorded encoding has the first one's name, and
	// its metadata is padded for that name's length).
	other := copyOf(tp, c)
	other.class = "AnotherSample"
	fo, _, _, err := firstInitFrame("InitRemote", other, nil, false)
	require.NoError(t, err)
	assert.Equal(t, fresh(other), fo, "a copy under another class name")
	again := copyOf(tp, c)
	again.class = "AnotherSample"
	_, class, _, _, _, err := bcastSource("Broadcast", again)
	require.NoError(t, err)
	assert.Equal(t, "AnotherSample", class, "Broadcast's source, a copy under another class name")

	// A map value may change in place, unseen: such a tree is never
	// taken as unchanged.
	m := plainTD()
	require.NoError(t, m.SetNonTensor(K("info"), map[string]any{"k": 1.0}))
	m, err = m.Consolidate()
	require.NoError(t, err)
	tm := templateOf(t, m)
	require.False(t, tm.plain)
	_, ok = copyOf(tm, m).templateEncoding()
	assert.False(t, ok)
}

// TestBroadcastSource: what the source of a Broadcast sends of a
// TensorDict (bcastSource) is what laying it out afresh gives: on its
// first, second and later sends (the last two from its Send/Recv state),
// for received copies passed on (from their template's encoding), after
// each kind of change, and for TensorDicts not consolidated or not whole
// in their storage; and sameLayout, which tells a receiver that it can
// take the same layout in place, agrees.
func TestBroadcastSource(t *testing.T) {
	plainTD := func() *TensorDict {
		td := New(2)
		require.NoError(t, td.Set(K("a"), tensor.Full(tensor.Float32, 1, 2, 3)))
		require.NoError(t, td.Set(K("n", "b"), tensor.Ones(tensor.Bool, 2)))
		require.NoError(t, td.Set(K("n", "c"), tensor.Full(tensor.Int64, 7, 2)))
		require.NoError(t, td.SetNonTensor(K("label"), "x"))
		td.SetClassName("Sample")
		c, err := td.Consolidate()
		require.NoError(t, err)
		return c
	}
	check := func(t *testing.T, td *TensorDict, what string) {
		t.Helper()
		tdc, class, meta, st, leaves, err := bcastSource("Broadcast", td)
		require.NoError(t, err, what)
		if td.IsConsolidated() {
			assert.Same(t, td, tdc, "%s: the source's result is td itself", what)
		}
		want, err := td.Consolidate()
		require.NoError(t, err, what)
		wantMeta, err := want.ConsolidatedMetadata()
		require.NoError(t, err, what)
		assert.Equal(t, want.ClassName(), class, what)
		assert.Equal(t, string(wantMeta), string(meta), what)
		assert.Equal(t, want.ConsolidatedStorage().Bytes(), st, what)
		assert.Equal(t, countTensorLeaves(want), leaves, what)
		if td.IsConsolidated() {
			total := int64(len(st))
			for range 2 { // the second from td's Send/Recv state
				assert.True(t, sameLayout(td, wantMeta, class, total), "%s: a receive in place", what)
			}
			assert.False(t, sameLayout(td, wantMeta, class, total+8), what)
			assert.False(t, sameLayout(td, append(wantMeta[:len(wantMeta):len(wantMeta)], ' '), class, total), what)
		}
	}

	td := plainTD()
	for i := range 3 {
		check(t, td, "send "+strconv.Itoa(i+1))
	}
	require.NotNil(t, td.p2p.Load(), "the second send keeps a state")
	for _, c := range []struct {
		name   string
		change func(td *TensorDict) *TensorDict // the TensorDict to send next
	}{
		{"scalar", func(td *TensorDict) *TensorDict { require.NoError(t, td.SetNonTensor(K("label"), "y")); return td }},
		{"batch", func(td *TensorDict) *TensorDict { require.NoError(t, td.SetBatchSize()); return td }},
		{"class", func(td *TensorDict) *TensorDict { td.SetClassName("Other"); return td }},
		{"values", func(td *TensorDict) *TensorDict {
			a, err := td.Get(K("a"))
			require.NoError(t, err)
			require.NoError(t, a.Fill(3))
			return td
		}},
		{"new key", func(td *TensorDict) *TensorDict {
			require.NoError(t, td.Set(K("z"), tensor.Zeros(tensor.Int8, 2)))
			return td
		}},
		{"consolidated anew", func(td *TensorDict) *TensorDict {
			c, err := td.Consolidate()
			require.NoError(t, err)
			return c
		}},
		{"lock", func(td *TensorDict) *TensorDict { td.Lock(); return td }},
	} {
		td = c.change(td)
		check(t, td, c.name)
		check(t, td, c.name+", again")
	}

	c := plainTD()
	tp := templateOf(t, c)
	copyOf := func() *TensorDict { return templateCopy(t, tp, c) }
	check(t, copyOf(), "first copy")
	require.NotNil(t, tp.enc.Load(), "the first copy passed on records its encoding")
	check(t, copyOf(), "second copy")
	d := copyOf()
	require.NoError(t, d.SetNonTensor(K("label"), "z"))
	check(t, d, "changed copy")

	nested, err := plainTD().GetTD(K("n"))
	require.NoError(t, err)
	check(t, nested, "a nested TensorDict of a consolidated one")
	check(t, nested, "a nested TensorDict of a consolidated one, again")
	loose := New(2)
	require.NoError(t, loose.Set(K("a"), tensor.Ones(tensor.Float64, 2)))
	check(t, loose, "not consolidated")
}

// templateOf returns the template of c's structure, as a receive of it
// makes (c is consolidated).
func templateOf(t *testing.T, c *TensorDict) *treeTemplate {
	t.Helper()
	meta, err := c.ConsolidatedMetadata()
	require.NoError(t, err)
	root, _, err := codec.Decode(meta, c.ConsolidatedStorage().Len(), codec.DefaultLimits())
	require.NoError(t, err)
	tp, err := newTemplate(root, c.ConsolidatedStorage().Len())
	require.NoError(t, err)
	return tp
}

// templateCopy returns a copy of template tp over a copy of c's storage,
// with c's class name: a received result, as a receive of c makes it.
func templateCopy(t *testing.T, tp *treeTemplate, c *TensorDict) *TensorDict {
	t.Helper()
	got := mustInstantiate(t, tp, storageCopy(t, c.ConsolidatedStorage()))
	got.cons.base, got.cons.end = 0, got.cons.st.Len()
	got.class = c.class
	return got
}
