package tensor

import (
	"fmt"

	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"
)

// Dense returns a *mat.Dense that shares t's memory: no copy. t must be a
// float64 tensor of 1 or 2 dimensions (a 1-D tensor is a single row) whose
// rows are contiguous; rows may be further apart than their length. Writes
// through the matrix change t.
func (t *Tensor) Dense() (*mat.Dense, error) {
	if t.dtype != Float64 {
		return nil, fmt.Errorf("tensor: Dense: tensor is %v, need float64", t.dtype)
	}
	if err := t.st.checkLive("Dense"); err != nil {
		return nil, err
	}
	var rows, cols, stride int
	switch len(t.shape()) {
	case 1:
		rows, cols, stride = 1, t.shape()[0], t.shape()[0]
		if cols > 1 && t.strides()[0] != 1 {
			return nil, fmt.Errorf("tensor: Dense: 1-D tensor of shape %v has stride %d, need 1", t.shape(), t.strides()[0])
		}
	case 2:
		rows, cols, stride = t.shape()[0], t.shape()[1], t.strides()[0]
		if cols > 1 && t.strides()[1] != 1 || rows > 1 && stride < cols {
			return nil, fmt.Errorf("tensor: Dense: tensor of shape %v with strides %v is not row-major; call Contiguous first", t.shape(), t.strides())
		}
		if rows <= 1 {
			stride = cols
		}
	default:
		return nil, fmt.Errorf("tensor: Dense: tensor has %d dimensions, need 1 or 2", len(t.shape()))
	}
	if rows == 0 || cols == 0 {
		return nil, fmt.Errorf("tensor: Dense: gonum matrices cannot be empty (shape %v)", t.shape())
	}
	n := (rows-1)*stride + cols
	data := fromBytes[float64](t.st.Bytes()[t.offset:t.offset+n*8], n)
	var m mat.Dense
	m.SetRawMatrix(blas64.General{Rows: rows, Cols: cols, Stride: stride, Data: data})
	return &m, nil
}
