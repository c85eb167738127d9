package tensordict

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/mpitest"
	"github.com/tdmpi/tdmpi/tensor"
)

// TestCollectiveAvgHalf checks ReduceAvg on float16 and bfloat16 leaves
// whose sum overflows where the mean fits: float16 near 60000 (the sum
// rounded to float16 was +Inf) and bfloat16 near 3e38 (whose sum
// overflows float32 too). The mean must be that of the values, rounded to
// the dtype once, by every path (one storage, a bucket, a leaf alone, a
// non-contiguous leaf) and every call (AllReduce, Reduce, IAllReduce,
// IReduce); the ranks that only send keep their values.
func TestCollectiveAvgHalf(t *testing.T) {
	g := mpitest.Need(t, 2)
	n, r := g.Size(), g.Rank()
	round := func(dt tensor.DType, v float64) float64 { return tensor.Full(dt, v, 1).At(0) }
	layouts := []struct {
		name string
		make func(t *testing.T, dt tensor.DType, v float64) *TensorDict
	}{
		{"storage", func(t *testing.T, dt tensor.DType, v float64) *TensorDict {
			td := New(2)
			require.NoError(t, td.Set(K("a"), tensor.Full(dt, v, 2, 3)))
			require.NoError(t, td.Set(K("b", "c"), tensor.Full(dt, v, 2)))
			c, err := td.Consolidate()
			require.NoError(t, err)
			return c
		}},
		{"bucket", func(t *testing.T, dt tensor.DType, v float64) *TensorDict {
			td := New(2)
			for i := range 5 {
				require.NoError(t, td.Set(K(fmt.Sprintf("s%d", i)), tensor.Full(dt, v, 2, i+1)))
			}
			return td
		}},
		{"alone", func(t *testing.T, dt tensor.DType, v float64) *TensorDict {
			td := New(2)
			require.NoError(t, td.Set(K("big"), tensor.Full(dt, v, 2, 64<<10+1)))
			return td
		}},
		{"view", func(t *testing.T, dt tensor.DType, v float64) *TensorDict {
			td := New(4)
			x, err := tensor.Full(dt, v, 4, 6).Slice(1, 0, 6, 2)
			require.NoError(t, err)
			require.NoError(t, td.Set(K("view"), x))
			return td
		}},
	}
	calls := []struct {
		name string
		dst  int // -1: every rank gets the mean
		call func(td *TensorDict) error
	}{
		{"AllReduce", -1, func(td *TensorDict) error { return td.AllReduce(ReduceAvg) }},
		{"Reduce0", 0, func(td *TensorDict) error { return td.Reduce(0, ReduceAvg) }},
		{"ReduceLast", n - 1, func(td *TensorDict) error { return td.Reduce(n-1, ReduceAvg) }},
		{"IAllReduce", -1, func(td *TensorDict) error {
			p, err := td.IAllReduce(ReduceAvg)
			if err != nil {
				return err
			}
			return p.Wait()
		}},
		{"IReduce", n - 1, func(td *TensorDict) error {
			p, err := td.IReduce(n-1, ReduceAvg)
			if err != nil {
				return err
			}
			return p.Wait()
		}},
	}
	for _, dt := range []tensor.DType{tensor.Float16, tensor.BFloat16} {
		base, step := 60000.0, 32.0
		if dt == tensor.BFloat16 {
			base, step = 3e38, 2e36
		}
		val := func(rank int) float64 { return round(dt, base+step*float64(rank)) }
		sum := 0.0
		for i := range n {
			sum += val(i)
		}
		mean := round(dt, sum/float64(n))
		for _, lay := range layouts {
			for _, c := range calls {
				mpitest.Run(t, fmt.Sprintf("%v/%s/%s", dt, lay.name, c.name), func(t *testing.T) {
					td := lay.make(t, dt, val(r))
					// A float32 leaf: ReduceAvg divides it after the sum;
					// in the "storage" layout it is left out (one dtype).
					if lay.name != "storage" {
						require.NoError(t, td.Set(K("f"), tensor.Full(tensor.Float32, float64(r+1), td.BatchSize()...)))
					}
					require.NoError(t, c.call(td))
					want, wantF := mean, float64(n+1)/2
					if c.dst >= 0 && r != c.dst {
						want, wantF = val(r), float64(r+1)
					}
					for _, k := range td.Keys(IncludeNested(), LeavesOnly()) {
						x, err := td.Get(k)
						require.NoError(t, err)
						if k.String() == K("f").String() {
							collRequireAll(t, x, wantF, "f")
							continue
						}
						collRequireAll(t, x, want, k.String())
					}
				})
			}
		}
	}
}
