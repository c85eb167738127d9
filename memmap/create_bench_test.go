package memmap

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tdmpi/tdmpi/tensor"
)

// sparse sizes the file with ftruncate only: the baseline of the
// benchmarks, a file whose blocks are not reserved.
func sparse(fd *os.File, n int) error { return fd.Truncate(int64(n)) }

// BenchmarkCreate measures Empty (then touching every page) and FromTensor
// of an Expand view, 64 MiB, in a named file in os.TempDir and anonymously,
// with blocks reserved (fallocate) and sparse (the baseline: the file made
// by create as Empty makes it, sized with ftruncate, then the Expand view
// copied in as FromTensor copies it).
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
					dir := b.TempDir()
					b.SetBytes(n)
					for i := 0; i < b.N; i++ {
						path := ""
						if where == "named" {
							path = filepath.Join(dir, "x.memmap")
						}
						var m *tensor.Tensor
						var err error
						switch {
						case mode == "sparse":
							m, err = create("Empty", tensor.Uint8, path, ex.Shape(), n, nil, sparse)
							if err == nil && op == "FromTensor-expand" {
								err = m.CopyFrom(ex)
							}
						case op == "Empty+touch":
							m, err = Empty(tensor.Uint8, path, ex.Shape())
						default:
							m, err = FromTensor(ex, path)
						}
						if err == nil && op == "Empty+touch" {
							d, _ := m.Bytes()
							for j := 0; j < len(d); j += 4096 {
								d[j] = 1
							}
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
