package tensor

import (
	"fmt"
	"math"
)

// maxArange bounds the length of Arange, so that a wrong step cannot ask for
// an absurd allocation.
const maxArange = 1 << 40

// Arange returns the 1-D tensor start, start+step, ... of the values below
// stop (above stop, for a negative step), converted to dt, like
// torch.arange. Element i is start + i*step computed in float64. It returns
// an error if step is zero, the arguments are not finite, step points away
// from stop, or the length is absurd.
func Arange(dt DType, start, stop, step float64) (_ *Tensor, err error) {
	defer catchNoMemory(&err)
	if !dt.Valid() {
		return nil, fmt.Errorf("tensor: Arange: invalid dtype %v", dt)
	}
	for _, v := range []float64{start, stop, step} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("tensor: Arange: start %v, stop %v, step %v must be finite", start, stop, step)
		}
	}
	if step == 0 || (stop-start)/step < 0 {
		return nil, fmt.Errorf("tensor: Arange: step %v cannot go from %v to %v", step, start, stop)
	}
	fn := math.Ceil((stop - start) / step)
	if fn > maxArange {
		return nil, fmt.Errorf("tensor: Arange: %v elements from %v to %v by %v is too many", fn, start, stop, step)
	}
	x, err := alloc("Arange", Float64, []int{int(fn)}, false)
	if err != nil {
		return nil, err
	}
	vals := elems[float64](x)
	for i := range vals {
		vals[i] = start + float64(i)*step
	}
	if dt == Float64 {
		return x, nil
	}
	return x.To(dt), nil
}
