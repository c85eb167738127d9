package tensordict

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/memmap"
	"github.com/tdmpi/tdmpi/tensor"
)

// fixtureDir is the golden directory Python tensordict wrote.
var fixtureDir = filepath.Join("..", "testdata", "tensordict", "mmap_example")

// checkFixtureNested checks the nested TensorDict of the fixture.
func checkFixtureNested(t *testing.T, nested *TensorDict) {
	t.Helper()
	assert.Equal(t, []int{2, 1}, nested.BatchSize())
	assert.Equal(t, []Key{K("int64"), K("string"), K("bfloat16")}, nested.Keys())
	i64, err := nested.Get(K("int64"))
	require.NoError(t, err)
	assert.Equal(t, tensor.Int64, i64.DType())
	assert.Equal(t, []int{2, 1}, i64.Shape())
	d, err := tensor.Data[int64](i64)
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 2}, d)

	bf, err := nested.Get(K("bfloat16"))
	require.NoError(t, err)
	assert.Equal(t, tensor.BFloat16, bf.DType())
	assert.Equal(t, []int{2, 1}, bf.Shape())
	b, err := tensor.Data[tensor.BF16](bf)
	require.NoError(t, err)
	assert.Equal(t, []tensor.BF16{0x3f80, 0x3f80}, b, "bfloat16 ones")

	s, err := nested.GetNonTensor(K("string"))
	require.NoError(t, err)
	assert.Equal(t, []any{"a string!"}, s)
}

func TestLoadMemmapPythonFixture(t *testing.T) {
	// CopyOnWrite keeps the golden files safe from any write.
	td, err := LoadMemmap(fixtureDir, CopyOnWrite())
	require.NoError(t, err)
	defer td.Release()
	assert.Equal(t, []int{2, 1}, td.BatchSize())
	assert.True(t, td.IsLocked())
	assert.True(t, td.IsMemmap())
	abs, _ := filepath.Abs(fixtureDir)
	assert.Equal(t, abs, td.SavedPath())
	assert.Equal(t, []Key{K("nested"), K("nested", "int64"), K("nested", "string"), K("nested", "bfloat16")},
		td.Keys(IncludeNested()))
	nested, err := td.GetTD(K("nested"))
	require.NoError(t, err)
	checkFixtureNested(t, nested)
	assert.Equal(t, filepath.Join(abs, "nested"), nested.SavedPath())

	for name, opts := range map[string][]LoadOption{
		"directory": nil,
		"SubPath":   {SubPath("nested")},
	} {
		t.Run(name, func(t *testing.T) {
			dir := fixtureDir
			if opts == nil {
				dir = filepath.Join(fixtureDir, "nested")
			}
			sub, err := LoadMemmap(dir, append(opts, CopyOnWrite())...)
			require.NoError(t, err)
			defer sub.Release()
			checkFixtureNested(t, sub)
		})
	}
	_, err = LoadMemmap(fixtureDir, SubPath("nested", "string"))
	assert.ErrorContains(t, err, "not a TensorDict")
	_, err = LoadMemmap(fixtureDir, SubPath("absent"))
	assert.ErrorContains(t, err, "missing")
}

// allDTypes returns a TensorDict with one leaf of every dtype, nested keys,
// awkward key names and non-tensor values, with batch size [3].
func allDTypes(t *testing.T) *TensorDict {
	td := New(3)
	for i, dt := range tensor.DTypes() {
		v, err := tensor.Arange(dt, 0, float64(3*(i+2)), 1)
		require.NoError(t, err)
		v, err = v.Reshape(3, i+2)
		require.NoError(t, err)
		require.NoError(t, td.Set(K("dtypes", dt.String()), v))
	}
	for _, k := range []Key{
		K("with space"), K("a/b"), K("100%"), K(".."), K("."), K(""), K("é日本"),
		K("nested", "deeper", "x"), K("C:x"), K("tab\there"),
	} {
		require.NoError(t, td.Set(k, tensor.Full(tensor.Float32, float64(len(k.String())), 3, 2)))
	}
	require.NoError(t, td.Set(K("scalarish"), tensor.Ones(tensor.Float64, 3)))
	require.NoError(t, td.Set(K("empty"), tensor.Zeros(tensor.Int32, 3, 0)))
	require.NoError(t, td.SetNonTensor(K("label"), "hello"))
	require.NoError(t, td.SetNonTensor(K("nested", "info"), map[string]any{"n": 3, "f": 0.5, "l": []any{"x", nil, true}}))
	require.NoError(t, td.SetNonTensor(K("none"), nil))
	return td
}

// requireSameTD checks that got has want's keys in the same order, batch
// sizes, leaves (bytes) and non-tensor values.
func requireSameTD(t *testing.T, want, got *TensorDict) {
	t.Helper()
	require.Equal(t, want.Keys(IncludeNested()), got.Keys(IncludeNested()))
	wi, gi := want.Items(IncludeNested()), got.Items(IncludeNested())
	for i := range wi {
		w, g := wi[i], gi[i]
		switch {
		case w.Tensor != nil:
			require.NotNil(t, g.Tensor, "key %v", w.Key)
			assert.Equal(t, w.Tensor.DType(), g.Tensor.DType(), "key %v", w.Key)
			assert.Equal(t, w.Tensor.Shape(), g.Tensor.Shape(), "key %v", w.Key)
			wb, err := w.Tensor.Contiguous().Bytes()
			require.NoError(t, err)
			gb, err := g.Tensor.Bytes()
			require.NoError(t, err)
			assert.Equal(t, wb, gb, "key %v", w.Key)
		case w.TD != nil:
			require.NotNil(t, g.TD, "key %v", w.Key)
			assert.Equal(t, w.TD.BatchSize(), g.TD.BatchSize(), "key %v", w.Key)
		default:
			assert.True(t, g.IsNonTensor, "key %v", w.Key)
			assert.Equal(t, w.Value, g.Value, "key %v", w.Key)
		}
	}
	assert.Equal(t, want.BatchSize(), got.BatchSize())
}

func TestMemmapRoundTrip(t *testing.T) {
	src := allDTypes(t)
	dir := filepath.Join(t.TempDir(), "td")
	saved, err := src.Memmap(dir)
	require.NoError(t, err)
	defer saved.Release()
	assert.True(t, saved.IsLocked())
	assert.True(t, saved.IsMemmap())
	assert.False(t, src.IsMemmap(), "Memmap leaves its receiver alone")
	assert.Equal(t, dir, saved.SavedPath())
	requireSameTD(t, src, saved)

	loaded, err := LoadMemmap(dir)
	require.NoError(t, err)
	defer loaded.Release()
	requireSameTD(t, src, loaded)
	assert.True(t, loaded.IsMemmap())

	// Every name on disk is the encoded key, inside its directory.
	names, err := os.ReadDir(dir)
	require.NoError(t, err)
	var got []string
	for _, e := range names {
		got = append(got, e.Name())
	}
	for _, want := range []string{"with%20space.memmap", "a%2Fb.memmap", "100%25.memmap", "%2E%2E.memmap", "%2E.memmap", "%.memmap", "é日本.memmap", "C%3Ax.memmap", "tab%09here.memmap", "label", "nested", "dtypes", "meta.json"} {
		assert.Contains(t, got, want)
	}
	assert.NotContains(t, got, "empty.memmap", "a zero-element tensor has no file")

	// A nested level loads on its own.
	deeper, err := LoadMemmap(dir, SubPath("nested", "deeper"))
	require.NoError(t, err)
	defer deeper.Release()
	assert.Equal(t, []Key{K("x")}, deeper.Keys())
}

func TestMemmapWritesTensordictLayout(t *testing.T) {
	// The worked example of the reference: written files match, byte for
	// byte, the golden copy of what Python tensordict writes.
	td := New(2)
	require.NoError(t, td.Set(K("obs"), tensor.Zeros(tensor.Float32, 2, 3)))
	require.NoError(t, td.Set(K("nested", "reward"), tensor.Ones(tensor.Int64, 2, 1)))
	require.NoError(t, td.SetNonTensor(K("nested", "label"), "hello"))
	dir := filepath.Join(t.TempDir(), "td")
	saved, err := td.Memmap(dir)
	require.NoError(t, err)
	defer saved.Release()

	golden := filepath.Join("..", "testdata", "tensordict", "golden", "spec_example")
	want := listFiles(t, golden)
	require.Equal(t, want, listFiles(t, dir))
	for _, rel := range want {
		w, err := os.ReadFile(filepath.Join(golden, rel))
		require.NoError(t, err)
		g, err := os.ReadFile(filepath.Join(dir, rel))
		require.NoError(t, err)
		assert.Equal(t, string(w), string(g), rel)
	}
}

// listFiles returns the regular files below dir, relative and sorted.
func listFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	}))
	sort.Strings(out)
	return out
}

func TestMemmapInPlaceAndLike(t *testing.T) {
	td := New(2)
	require.NoError(t, td.Set(K("a"), tensor.Full(tensor.Int16, 7, 2, 2)))
	require.NoError(t, td.Set(K("n", "b"), tensor.Full(tensor.Float64, 2.5, 2)))
	require.NoError(t, td.SetNonTensor(K("s"), "x"))

	like, err := td.MemmapLike(filepath.Join(t.TempDir(), "like"))
	require.NoError(t, err)
	defer like.Release()
	assert.True(t, like.IsMemmap())
	a, _ := like.Get(K("a"))
	d, _ := tensor.Data[int16](a)
	assert.Equal(t, []int16{0, 0, 0, 0}, d, "MemmapLike does not copy content")
	s, _ := like.GetNonTensor(K("s"))
	assert.Equal(t, "x", s)

	dir := filepath.Join(t.TempDir(), "inplace")
	self, err := td.MemmapInPlace(dir)
	require.NoError(t, err)
	assert.Same(t, td, self)
	assert.True(t, td.IsMemmap())
	assert.Equal(t, dir, td.SavedPath())
	a, _ = td.Get(K("a"))
	assert.True(t, memmap.Is(a))
	name, err := memmap.Filename(a)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "a.memmap"), name)

	// Writes through the TensorDict reach the files.
	require.NoError(t, td.SetInPlace(K("a"), tensor.Full(tensor.Int16, 9, 2, 2)))
	again, err := LoadMemmap(dir)
	require.NoError(t, err)
	defer again.Release()
	a2, _ := again.Get(K("a"))
	d2, _ := tensor.Data[int16](a2)
	assert.Equal(t, []int16{9, 9, 9, 9}, d2)

	// Saving again to the same place keeps the mapped leaves.
	_, err = td.MemmapInPlace(dir, MemmapExclusive())
	require.ErrorIs(t, err, fs.ErrExist)
	_, err = td.MemmapInPlace(dir)
	require.NoError(t, err)
	a3, _ := td.Get(K("a"))
	assert.Same(t, a, a3)

	td.Unlock()
	assert.False(t, td.IsMemmap(), "unlocking ends memmap mode, as in tensordict")
	require.NoError(t, td.Release())
}

func TestMemmapAnonymous(t *testing.T) {
	td := New(2)
	require.NoError(t, td.Set(K("a", "b"), tensor.Ones(tensor.Float32, 2)))
	m, err := td.Memmap("")
	require.NoError(t, err)
	defer m.Release()
	assert.True(t, m.IsMemmap())
	assert.Equal(t, "", m.SavedPath())
	b, _ := m.Get(K("a", "b"))
	f, ok := memmap.Of(b)
	require.True(t, ok)
	assert.True(t, f.Anonymous())
}

func TestMemmapExclusiveAndExistsOK(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "td")
	one := New(1)
	require.NoError(t, one.Set(K("x"), tensor.Full(tensor.Int64, 1, 1)))
	m, err := one.Memmap(dir)
	require.NoError(t, err)
	defer m.Release()

	two := New(1)
	require.NoError(t, two.Set(K("x"), tensor.Full(tensor.Int64, 2, 1)))
	_, err = two.Memmap(dir, MemmapExclusive())
	require.ErrorIs(t, err, fs.ErrExist)
	assert.Contains(t, err.Error(), filepath.Join(dir, "meta.json"))
	// A leaf file without a meta.json is refused too.
	require.NoError(t, os.Remove(filepath.Join(dir, "meta.json")))
	_, err = two.Memmap(dir, MemmapExclusive())
	require.ErrorIs(t, err, fs.ErrExist)
	assert.Contains(t, err.Error(), filepath.Join(dir, "x.memmap"))

	// Overwriting is the default, as in Python; MemmapExistsOK undoes
	// MemmapExclusive.
	m2, err := two.Memmap(dir, MemmapExclusive(), MemmapExistsOK(), MemmapWorkers(1))
	require.NoError(t, err)
	defer m2.Release()
	back, err := LoadMemmap(dir)
	require.NoError(t, err)
	defer back.Release()
	x, _ := back.Get(K("x"))
	d, _ := tensor.Data[int64](x)
	assert.Equal(t, []int64{2}, d)
	// The first save's tensor still reads its own (replaced) file.
	x1, _ := m.Get(K("x"))
	d1, _ := tensor.Data[int64](x1)
	assert.Equal(t, []int64{1}, d1)
}

func TestMemmapRefusals(t *testing.T) {
	for _, key := range []string{"shape", "device", "_type"} {
		td := New()
		require.NoError(t, td.Set(K("n", key), tensor.Ones(tensor.Int8, 1)))
		_, err := td.Memmap(filepath.Join(t.TempDir(), "td"))
		assert.ErrorContains(t, err, "member of meta.json", key)
	}
	td := New()
	require.NoError(t, td.Set(K("bad\xff"), tensor.Ones(tensor.Int8, 1)))
	_, err := td.Memmap(filepath.Join(t.TempDir(), "td"))
	assert.ErrorContains(t, err, "UTF-8")

	// A nested directory that is a symbolic link is not written through.
	dir := filepath.Join(t.TempDir(), "td")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	outside := t.TempDir()
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "n")))
	td = New()
	require.NoError(t, td.Set(K("n", "x"), tensor.Ones(tensor.Int8, 1)))
	_, err = td.Memmap(dir)
	assert.ErrorContains(t, err, "symbolic link")
	ents, _ := os.ReadDir(outside)
	assert.Empty(t, ents)
}

// saveSmall saves a small TensorDict and returns its directory.
func saveSmall(t *testing.T) string {
	t.Helper()
	td := New(2)
	require.NoError(t, td.Set(K("x"), tensor.Full(tensor.Float32, 1, 2, 3)))
	require.NoError(t, td.Set(K("n", "y"), tensor.Full(tensor.Int64, 2, 2)))
	require.NoError(t, td.SetNonTensor(K("n", "s"), "str"))
	dir := filepath.Join(t.TempDir(), "td")
	m, err := td.Memmap(dir)
	require.NoError(t, err)
	require.NoError(t, m.Release())
	return dir
}

func TestLoadMemmapDamaged(t *testing.T) {
	const ty = `"_type": "<class 'tensordict._td.TensorDict'>"`
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string)
		want   []string // parts of the error
	}{
		{"missing tensor file", func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, "x.memmap")))
		}, []string{"x.memmap", "missing"}},
		{"truncated tensor file", func(t *testing.T, dir string) {
			require.NoError(t, os.Truncate(filepath.Join(dir, "n", "y.memmap"), 9))
		}, []string{"y.memmap", "9 bytes", "needs 16"}},
		{"missing root meta", func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, "meta.json")))
		}, []string{"meta.json"}},
		{"missing nested meta", func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, "n", "meta.json")))
		}, []string{filepath.Join("n")}},
		{"missing non-tensor dir", func(t *testing.T, dir string) {
			require.NoError(t, os.RemoveAll(filepath.Join(dir, "n", "s")))
		}, []string{"\"s\"", "missing"}},
		{"bad JSON", func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "n", "meta.json"), []byte(`{"y": {`), 0o644))
		}, []string{filepath.Join("n", "meta.json"), "bad JSON"}},
		{"unknown dtype", func(t *testing.T, dir string) {
			writeMeta(t, dir, `{"x": {"device": "cpu", "shape": [2, 3], "dtype": "torch.quint4x2", "is_nested": false}, "shape": [2], "device": "cpu", `+ty+`}`)
		}, []string{"meta.json", "torch.quint4x2"}},
		{"shape larger than file", func(t *testing.T, dir string) {
			writeMeta(t, dir, `{"x": {"device": "cpu", "shape": [2, 30], "dtype": "torch.float32", "is_nested": false}, "shape": [2], "device": "cpu", `+ty+`}`)
		}, []string{"x.memmap", "24 bytes", "needs 240"}},
		{"shape not matching batch", func(t *testing.T, dir string) {
			writeMeta(t, dir, `{"x": {"device": "cpu", "shape": [3, 2], "dtype": "torch.float32", "is_nested": false}, "shape": [2], "device": "cpu", `+ty+`}`)
		}, []string{"meta.json", "does not start with batch size"}},
		{"numel overflow", func(t *testing.T, dir string) {
			writeMeta(t, dir, `{"x": {"device": "cpu", "shape": [2, 4611686018427387904, 4], "dtype": "torch.float32", "is_nested": false}, "shape": [2], "device": "cpu", `+ty+`}`)
		}, []string{"meta.json", "overflows"}},
		{"nested batch not extending parent", func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "n", "meta.json"), []byte(`{"shape": [5], "device": "cpu", `+ty+`}`), 0o644))
		}, []string{filepath.Join("n", "meta.json"), "batch size [5]"}},
		{"key escaping upwards", func(t *testing.T, dir string) {
			// Even if a file exists where the raw key points, the key is
			// looked up by its encoded name only.
			require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(dir), "secret.memmap"), make([]byte, 64), 0o644))
			writeMeta(t, dir, `{"../secret": {"device": "cpu", "shape": [2], "dtype": "torch.float32", "is_nested": false}, "shape": [2], "device": "cpu", `+ty+`}`)
		}, []string{"..%2Fsecret.memmap", "missing"}},
		{"absolute key", func(t *testing.T, dir string) {
			writeMeta(t, dir, `{"/etc": {"type": "TensorDict"}, "shape": [2], "device": "cpu", `+ty+`}`)
		}, []string{"%2Fetc", "missing"}},
		{"dot-dot collection", func(t *testing.T, dir string) {
			writeMeta(t, dir, `{"..": {"type": "TensorDict"}, "shape": [2], "device": "cpu", `+ty+`}`)
		}, []string{"%2E%2E", "missing"}},
		{"symlinked tensor file", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "x.memmap")
			require.NoError(t, os.Rename(p, p+".real"))
			require.NoError(t, os.Symlink(p+".real", p))
		}, []string{"x.memmap", "symbolic link"}},
		{"symlinked directory", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "n")
			require.NoError(t, os.Rename(p, p+".real"))
			require.NoError(t, os.Symlink(p+".real", p))
		}, []string{"symbolic link"}},
		{"symlinked meta.json", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "n", "meta.json")
			require.NoError(t, os.Rename(p, p+".real"))
			require.NoError(t, os.Symlink(p+".real", p))
		}, []string{"symbolic link"}},
		{"100 MB meta.json", func(t *testing.T, dir string) {
			require.NoError(t, os.Truncate(filepath.Join(dir, "meta.json"), 100<<20))
		}, []string{"meta.json", "limit"}},
		{"pickled non-tensor", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "n", "s")
			require.NoError(t, os.WriteFile(filepath.Join(p, "meta.json"), []byte(`{"_type": "<class 'tensordict.tensorclass.NonTensorData'>", "_metadata": null}`), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(p, "other.pickle"), []byte("\x80\x04."), 0o644))
		}, []string{"pickle"}},
		{"lazy stack", func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "n", "meta.json"), []byte(`{"_type": "<class 'tensordict._lazy.LazyStackedTensorDict'>", "stack_dim": 0}`), 0o644))
		}, []string{"lazy stack"}},
		{"nested tensor", func(t *testing.T, dir string) {
			writeMeta(t, dir, `{"x": {"device": "cpu", "shape": [2, 3], "dtype": "torch.float32", "is_nested": true}, "shape": [2], "device": "cpu", `+ty+`}`)
		}, []string{"jagged"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := saveSmall(t)
			tc.damage(t, dir)
			td, err := LoadMemmap(dir)
			if err == nil {
				td.Release()
			}
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.True(t, strings.HasPrefix(err.Error(), "tensordict: LoadMemmap: "), err.Error())
		})
	}
}

// writeMeta replaces the root meta.json of dir.
func writeMeta(t *testing.T, dir, text string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "meta.json"), []byte(text), 0o644))
}

func TestLoadMemmapLegacyNamesAndCompactJSON(t *testing.T) {
	// tensordict before 0.13 wrote raw key names, and orjson writes compact
	// JSON: both load.
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a b.memmap"), []byte{1, 2}, 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub dir"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sub dir", "meta.json"),
		[]byte(`{"shape":[2],"device":"cpu","_type":"<class 'tensordict._td.TensorDict'>"}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "meta.json"),
		[]byte(`{"a b":{"device":"cpu","shape":[2],"dtype":"torch.uint8","is_nested":false},"sub dir":{"type":"TensorDict"},"shape":[2],"device":"cpu","_type":"<class 'tensordict._td.TensorDict'>"}`), 0o644))
	td, err := LoadMemmap(dir)
	require.NoError(t, err)
	defer td.Release()
	x, err := td.Get(K("a b"))
	require.NoError(t, err)
	d, _ := tensor.Data[uint8](x)
	assert.Equal(t, []uint8{1, 2}, d)
	assert.True(t, td.Has(K("sub dir")))
}

func TestLoadMemmapSharedWrites(t *testing.T) {
	dir := saveSmall(t)
	a, err := LoadMemmap(dir)
	require.NoError(t, err)
	defer a.Release()
	b, err := LoadMemmap(dir)
	require.NoError(t, err)
	defer b.Release()
	require.NoError(t, a.SetInPlace(K("n", "y"), tensor.Full(tensor.Int64, 5, 2)))
	y, _ := a.Get(K("n", "y"))
	require.NoError(t, memmap.Flush(y))
	yb, _ := b.Get(K("n", "y"))
	d, _ := tensor.Data[int64](yb)
	assert.Equal(t, []int64{5, 5}, d)

	c, err := LoadMemmap(dir, CopyOnWrite())
	require.NoError(t, err)
	defer c.Release()
	require.NoError(t, c.SetInPlace(K("n", "y"), tensor.Full(tensor.Int64, 8, 2)))
	d, _ = tensor.Data[int64](yb)
	assert.Equal(t, []int64{5, 5}, d, "copy-on-write changes stay private")
}

func TestLoadMemmapAfterRelease(t *testing.T) {
	dir := saveSmall(t)
	td, err := LoadMemmap(dir)
	require.NoError(t, err)
	x, _ := td.Get(K("x"))
	require.NoError(t, td.Release())
	_, err = x.Bytes()
	assert.ErrorContains(t, err, "released")
	_, err = td.Memmap(filepath.Join(t.TempDir(), "again"))
	assert.ErrorContains(t, err, "released")
}

func TestMemmapKeepsClassName(t *testing.T) {
	td := New(2)
	require.NoError(t, td.Set(K("n", "x"), tensor.Ones(tensor.Float32, 2)))
	sub, _ := td.GetTD(K("n"))
	sub.SetClassName("MyData")
	dir := filepath.Join(t.TempDir(), "td")
	m, err := td.Memmap(dir)
	require.NoError(t, err)
	defer m.Release()
	meta, err := os.ReadFile(filepath.Join(dir, "n", "meta.json"))
	require.NoError(t, err)
	assert.Contains(t, string(meta), `"_tdmpi_class": "MyData", "shape": [2]`)
	back, err := LoadMemmap(dir)
	require.NoError(t, err)
	defer back.Release()
	bn, err := back.GetTD(K("n"))
	require.NoError(t, err)
	assert.Equal(t, "MyData", bn.ClassName())
	assert.Equal(t, "", back.ClassName())
}

// TestMemmapOverwritesByDefault is issue 43 item 7: Memmap into a
// directory that holds a save overwrites it, as Python's default
// existsok=True does and as SaveConsolidated replaces a file.
func TestMemmapOverwritesByDefault(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "td")
	file := filepath.Join(t.TempDir(), "td.consolidated")
	for _, v := range []float64{1, 2} {
		td := New(2)
		require.NoError(t, td.Set(K("n", "x"), tensor.Full(tensor.Int64, v, 2)))
		m, err := td.Memmap(dir)
		require.NoError(t, err, "Memmap %d", v)
		require.NoError(t, m.Release())
		require.NoError(t, td.SaveConsolidated(file), "SaveConsolidated %d", v)
	}
	for _, load := range []func() (*TensorDict, error){
		func() (*TensorDict, error) { return LoadMemmap(dir) },
		func() (*TensorDict, error) { return LoadConsolidated(file) },
	} {
		back, err := load()
		require.NoError(t, err)
		x, err := back.Get(K("n", "x"))
		require.NoError(t, err)
		d, err := tensor.Data[int64](x)
		require.NoError(t, err)
		assert.Equal(t, []int64{2, 2}, d)
		require.NoError(t, back.Release())
	}
}
