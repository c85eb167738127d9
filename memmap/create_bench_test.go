package memmap

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/tdmpi/tdmpi/tensor"
)

// sparseFallocate sizes the file with ftruncate only, as the package did
// before it reserved blocks: the baseline of the benchmarks.
func sparseFallocate(fd int, _ uint32, _, n int64) error { return unix.Ftruncate(fd, n) }

// BenchmarkCreate measures Empty (then touching every page) and FromTensor
// of an Expand view, 64 MiB, in a named file in os.TempDir and anonymously,
// with blocks reserved (fallocate) and sparse (the baseline).
func BenchmarkCreate(b *testing.B) {
	const n = 64 << 20
	row := tensor.Ones(tensor.Uint8, 1, 1<<20)
	ex, err := row.Expand(n>>20, 1<<20)
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"reserve", "sparse"} {
		for _, where := range []string{"named", "anonymous"} {
			for _, op := range []string{"Empty+touch", "FromTensor-expand"} {
				b.Run(mode+"/"+where+"/"+op, func(b *testing.B) {
					if mode == "sparse" {
						saved := fallocate
						fallocate = sparseFallocate
						defer func() { fallocate = saved }()
					}
					dir := b.TempDir()
					b.SetBytes(n)
					for i := 0; i < b.N; i++ {
						path := ""
						if where == "named" {
							path = filepath.Join(dir, "x.memmap")
						}
						var m *tensor.Tensor
						var err error
						if op == "Empty+touch" {
							m, err = Empty(tensor.Uint8, path, []int{n})
							if err == nil {
								d, _ := m.Bytes()
								for j := 0; j < len(d); j += 4096 {
									d[j] = 1
								}
							}
						} else {
							m, err = FromTensor(ex, path)
						}
						if err != nil {
							b.Fatal(err)
						}
						_ = Close(m)
						if path != "" {
							os.Remove(path)
						}
					}
				})
			}
		}
	}
}
