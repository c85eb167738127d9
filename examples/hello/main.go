// How hpc/scripts/examples.sh runs and checks this program. This block is
// not the package documentation: a blank line separates it from the doc
// comment below.
//
// np: 2
// expect: ^rank 0 of 2: received "hello from rank 1"$
// expect: ^rank 1 of 2: received "hello from rank 0"$

// Command hello is the smallest complete tdmpi program: the ranks pass a greeting
// around a ring and each checks the one it receives.
//
// Run it with at least two ranks:
//
//	go build -o bin/examples/hello ./examples/hello
//	mpirun -np 2 --bind-to none bin/examples/hello
//
// Rank r sends "hello from rank r" to rank r+1 and receives from rank r-1 (modulo the
// size). Rank 0 sends first and every other rank receives first, so the blocking calls
// cannot deadlock. group.Main starts MPI and runs run on every rank; if a greeting is
// wrong, an MPI call fails, or the job has fewer than two ranks, it prints the error
// and ends the job with status 1.
package main

import (
	"fmt"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/mpi"
)

// tag marks the greeting messages.
const tag = 1

func main() {
	group.Main(run)
}

// run exchanges the greetings over the world group's communicator.
func run(g *group.Group) error {
	world := g.Comm()
	rank, size := g.Rank(), g.Size()
	if size < 2 {
		return fmt.Errorf("hello needs at least 2 ranks; run: mpirun -np 2 hello")
	}
	next, prev := (rank+1)%size, (rank+size-1)%size

	msg := []byte(fmt.Sprintf("hello from rank %d", rank))
	buf := make([]byte, 64)
	var got string
	var err error
	if rank == 0 {
		if err = mpi.Send(world, msg, next, tag); err == nil {
			got, err = receive(world, buf, prev)
		}
	} else {
		if got, err = receive(world, buf, prev); err == nil {
			err = mpi.Send(world, msg, next, tag)
		}
	}
	if err != nil {
		return err
	}

	fmt.Printf("rank %d of %d: received %q\n", rank, size, got)
	if want := fmt.Sprintf("hello from rank %d", prev); got != want {
		return fmt.Errorf("received %q, want %q", got, want)
	}
	return nil
}

// receive waits for a greeting from rank src and returns it as text.
func receive(c *mpi.Comm, buf []byte, src int) (string, error) {
	st, err := mpi.Recv(c, buf, src, tag)
	if err != nil {
		return "", err
	}
	return string(buf[:st.Bytes()]), nil
}
