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
// cannot deadlock. The program exits with status 1 if a greeting is wrong or an MPI call
// fails, and with status 2 when started with fewer than two ranks.
package main

import (
	"fmt"
	"os"

	"github.com/tdmpi/tdmpi/mpi"
)

// tag marks the greeting messages.
const tag = 1

func main() {
	if err := mpi.Init(); err != nil {
		fmt.Fprintln(os.Stderr, "hello:", err)
		os.Exit(1)
	}
	code := run()
	if err := mpi.Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, "hello:", err)
		code = 1
	}
	os.Exit(code)
}

// run exchanges the greetings and returns the exit status.
func run() int {
	world := mpi.World()
	rank, size := world.Rank(), world.Size()
	if size < 2 {
		fmt.Fprintln(os.Stderr, "hello: needs at least 2 ranks; run: mpirun -np 2 hello")
		return 2
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
		fmt.Fprintf(os.Stderr, "hello: rank %d: %v\n", rank, err)
		return 1
	}

	fmt.Printf("rank %d of %d: received %q\n", rank, size, got)
	if want := fmt.Sprintf("hello from rank %d", prev); got != want {
		fmt.Fprintf(os.Stderr, "hello: rank %d: received %q, want %q\n", rank, got, want)
		return 1
	}
	return 0
}

// receive waits for a greeting from rank src and returns it as text.
func receive(c *mpi.Comm, buf []byte, src int) (string, error) {
	st, err := mpi.Recv(c, buf, src, tag)
	if err != nil {
		return "", err
	}
	return string(buf[:st.Bytes()]), nil
}
