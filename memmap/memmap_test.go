package memmap

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/tensor"
)

func TestFromTensorFileLayout(t *testing.T) {
	for _, dt := range tensor.DTypes() {
		t.Run(dt.String(), func(t *testing.T) {
			src := tensor.Full(dt, 3, 2, 3)
			path := filepath.Join(t.TempDir(), "x.memmap")
			m, err := FromTensor(src, path)
			require.NoError(t, err)
			defer Close(m)
			assert.True(t, Is(m))
			assert.Equal(t, dt, m.DType())
			assert.Equal(t, []int{2, 3}, m.Shape())
			want, _ := src.Bytes()
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, want, got, "file holds the raw little-endian elements")
			name, err := Filename(m)
			require.NoError(t, err)
			assert.Equal(t, path, name)
		})
	}
}

func TestFromTensorNonContiguous(t *testing.T) {
	src, err := tensor.FromSlice([]int32{1, 2}, 2, 1)
	require.NoError(t, err)
	ex, err := src.Expand(2, 3)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "e.memmap")
	m, err := FromTensor(ex, path)
	require.NoError(t, err)
	defer Close(m)
	d, err := tensor.Data[int32](m)
	require.NoError(t, err)
	assert.Equal(t, []int32{1, 1, 1, 2, 2, 2}, d)
}

func TestAnonymous(t *testing.T) {
	m, err := FromTensor(tensor.Ones(tensor.Float32, 2, 2), "")
	require.NoError(t, err)
	assert.True(t, Is(m))
	f, ok := Of(m)
	require.True(t, ok)
	assert.True(t, f.Anonymous())
	_, err = Filename(m)
	assert.ErrorContains(t, err, "anonymous")
	d, err := tensor.Data[float32](m)
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 1, 1, 1}, d)
	// FromTensor of an anonymous memmap without a filename returns it.
	same, err := FromTensor(m, "")
	require.NoError(t, err)
	assert.Same(t, m, same)
	require.NoError(t, Flush(m))
	require.NoError(t, Close(m))
}

func TestCloseIsIdempotentAndTensorErrors(t *testing.T) {
	m, err := Zeros(tensor.Int64, filepath.Join(t.TempDir(), "z.memmap"), []int{4})
	require.NoError(t, err)
	view, err := m.Reshape(2, 2)
	require.NoError(t, err)
	require.NoError(t, Close(m))
	require.NoError(t, Close(m))
	_, err = m.Bytes()
	assert.ErrorContains(t, err, "storage was released")
	_, err = tensor.Data[int64](view)
	assert.ErrorContains(t, err, "storage was released")
	assert.ErrorContains(t, Flush(m), "closed")
	_, err = FromTensor(m, "")
	assert.ErrorContains(t, err, "released")
}

func TestNotMemmap(t *testing.T) {
	h := tensor.Ones(tensor.Float32, 2)
	assert.False(t, Is(h))
	_, err := Filename(h)
	assert.ErrorContains(t, err, "not memory-mapped")
	assert.ErrorContains(t, Flush(h), "not memory-mapped")
	assert.ErrorContains(t, Close(h), "not memory-mapped")
}

func TestExclusiveCreateAndExistsOK(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.memmap")
	m, err := Full(tensor.Int16, 7, path, []int{3})
	require.NoError(t, err)
	require.NoError(t, Close(m))

	_, err = Zeros(tensor.Int16, path, []int{3})
	require.ErrorIs(t, err, fs.ErrExist)
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), "already exists")

	z, err := Zeros(tensor.Int16, path, []int{5}, ExistsOK())
	require.NoError(t, err)
	defer Close(z)
	d, err := tensor.Data[int16](z)
	require.NoError(t, err)
	assert.Equal(t, []int16{0, 0, 0, 0, 0}, d, "ExistsOK replaces the old content")
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.EqualValues(t, 10, fi.Size())
}

func TestSymlinksRefused(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	require.NoError(t, os.WriteFile(target, make([]byte, 16), 0o644))
	link := filepath.Join(dir, "link.memmap")
	require.NoError(t, os.Symlink(target, link))
	for _, opts := range [][]Option{nil, {ExistsOK()}} {
		_, err := Zeros(tensor.Int64, link, []int{2}, opts...)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "symbolic link")
	}
	_, err := FromFile(link, tensor.Int64, []int{2})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "symbolic link")
	// A dangling link is refused too, and nothing is created through it.
	dangling := filepath.Join(dir, "dangling.memmap")
	require.NoError(t, os.Symlink(filepath.Join(dir, "nowhere"), dangling))
	_, err = Zeros(tensor.Int64, dangling, []int{2}, ExistsOK())
	require.Error(t, err)
	_, err = os.Stat(filepath.Join(dir, "nowhere"))
	assert.True(t, os.IsNotExist(err))
}

func TestZeroElementsCreateNoFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.memmap")
	m, err := FromTensor(tensor.Zeros(tensor.Float32, 0, 3), path)
	require.NoError(t, err)
	assert.Equal(t, []int{0, 3}, m.Shape())
	assert.True(t, Is(m))
	_, err = os.Stat(path)
	assert.True(t, os.IsNotExist(err))
	l, err := FromFile(path, tensor.Float32, []int{0, 3})
	require.NoError(t, err)
	assert.Equal(t, 0, l.Numel())
	require.NoError(t, Close(m))
}

func TestFromFileSizes(t *testing.T) {
	dir := t.TempDir()
	long := filepath.Join(dir, "long")
	require.NoError(t, os.WriteFile(long, []byte{0x80, 0x3f, 0x80, 0x3f, 0x0a, 0x00}, 0o644))
	m, err := FromFile(long, tensor.BFloat16, []int{2, 1})
	require.NoError(t, err)
	d, err := tensor.Data[tensor.BF16](m)
	require.NoError(t, err)
	assert.Equal(t, []tensor.BF16{0x3f80, 0x3f80}, d)
	require.NoError(t, Close(m))

	_, err = FromFile(long, tensor.Int64, []int{1})
	require.Error(t, err)
	for _, part := range []string{long, "6 bytes", "needs 8"} {
		assert.Contains(t, err.Error(), part)
	}
	_, err = FromFile(filepath.Join(dir, "absent"), tensor.Int64, []int{1})
	assert.ErrorContains(t, err, "absent")
	_, err = FromFile(dir, tensor.Int64, []int{1})
	assert.Error(t, err, "a directory is not a tensor file")
	_, err = FromFile(long, tensor.Int64, []int{-1})
	assert.ErrorContains(t, err, "negative")
	_, err = FromFile(long, tensor.Int64, []int{1 << 40, 1 << 40})
	assert.ErrorContains(t, err, "overflows")
}

func TestFromFileSharedSeesOtherWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.memmap")
	w, err := Zeros(tensor.Int32, path, []int{4})
	require.NoError(t, err)
	defer Close(w)
	r, err := FromFile(path, tensor.Int32, []int{4})
	require.NoError(t, err)
	defer Close(r)
	wd, _ := tensor.Data[int32](w)
	rd, _ := tensor.Data[int32](r)
	wd[2] = 42
	require.NoError(t, Flush(w))
	assert.Equal(t, int32(42), rd[2])
	// A write(2) by someone else is seen through the shared mapping too.
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{9, 0, 0, 0}, 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	assert.Equal(t, int32(9), rd[0])
}

func TestFromFilePrivateIsCopyOnWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cow.memmap")
	require.NoError(t, os.WriteFile(path, []byte{1, 2, 3, 4}, 0o644))
	m, err := FromFile(path, tensor.Uint8, []int{4}, Private())
	require.NoError(t, err)
	defer Close(m)
	f, _ := Of(m)
	assert.True(t, f.Private())
	d, _ := tensor.Data[uint8](m)
	d[0] = 99
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, []byte{1, 2, 3, 4}, got)
	assert.ErrorContains(t, Flush(m), "copy-on-write")
}

func TestFromFileReadOnlyFile(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root may write any file; the read-only fallback cannot be observed")
	}
	path := filepath.Join(t.TempDir(), "ro.memmap")
	require.NoError(t, os.WriteFile(path, []byte{1, 2}, 0o444))
	m, err := FromFile(path, tensor.Uint8, []int{2})
	require.NoError(t, err)
	defer Close(m)
	f, _ := Of(m)
	assert.True(t, f.Private())
}

func TestFromTensorSamePathReturnsInput(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.memmap")
	m, err := Full(tensor.Float64, 2, path, []int{2})
	require.NoError(t, err)
	defer Close(m)
	again, err := FromTensor(m, path)
	require.NoError(t, err)
	assert.Same(t, m, again)
	// To another path it is copied.
	other := filepath.Join(filepath.Dir(path), "o.memmap")
	c, err := FromTensor(m, other)
	require.NoError(t, err)
	defer Close(c)
	n, _ := Filename(c)
	assert.Equal(t, other, n)
}

func TestEmptyBadArguments(t *testing.T) {
	_, err := Empty(tensor.Float32, "", []int{2, -3})
	assert.ErrorContains(t, err, "negative")
	_, err = Empty(tensor.DType(0), "", []int{2})
	assert.ErrorContains(t, err, "invalid dtype")
	_, err = Empty(tensor.Float32, filepath.Join(t.TempDir(), "no", "dir", "x"), []int{2})
	assert.ErrorContains(t, err, "no such file")
}

func TestExistsOKKeepsOldMappingsValid(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.memmap")
	old, err := Full(tensor.Int32, 5, path, []int{1000})
	require.NoError(t, err)
	defer Close(old)
	nw, err := Full(tensor.Int32, 6, path, []int{10}, ExistsOK())
	require.NoError(t, err)
	defer Close(nw)
	od, err := tensor.Data[int32](old)
	require.NoError(t, err)
	assert.Equal(t, int32(5), od[999], "the old mapping keeps its file")
	again, err := FromFile(path, tensor.Int32, []int{10})
	require.NoError(t, err)
	defer Close(again)
	ad, _ := tensor.Data[int32](again)
	assert.Equal(t, int32(6), ad[9])
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, ents, 1, "no temporary file is left")
}

func TestFromTensorRefusesOverwritingItsOwnView(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.memmap")
	m, err := Full(tensor.Int64, 1, path, []int{4, 1})
	require.NoError(t, err)
	defer Close(m)
	ex, err := m.Expand(4, 3)
	require.NoError(t, err)
	_, err = FromTensor(ex, path, ExistsOK())
	assert.ErrorContains(t, err, "view of that same file")
}
