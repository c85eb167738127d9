package mpi

import "testing"

func TestSmoke(t *testing.T) {
	c := World()
	t.Log(c.Rank(), c.Size(), c.TagUB(), LibraryVersion())
	x := []float64{float64(c.Rank())}
	if err := Allreduce(c, nil, x, OpSum); err != nil {
		t.Fatal(err)
	}
	t.Log(x)
	if c.Size() > 1 {
		if c.Rank() == 0 {
			t.Log(Send(c, []int{1, 2, 3}, 1, 5))
			t.Log(Send(c, []int{1, 2, 3}, 99, 5))
		} else if c.Rank() == 1 {
			b := make([]int, 4)
			st, err := Recv(c, b, 0, AnyTag)
			t.Log(b, st, err, Count[int](st))
		}
	}
}
