// How hpc/scripts/examples.sh runs and checks this program. This block is
// not the package documentation: a blank line separates it from the doc
// comment below.
//
// np: 3
// expect: ^rank 0: sent 120 batches
// expect: ^rank 2: received 60 batches
// expect: ^OK$

// Command pipeline streams batches from a producer to consumers, the way a
// data-loading rank feeds training ranks: the structure goes once, with
// InitRemote, and every batch after it is one message straight into the
// receiver's existing buffer (tensordict's consolidated send and recv), with
// communication overlapped with work on both sides.
//
// Run it with two or more ranks:
//
//	go build -o bin/examples/pipeline ./examples/pipeline
//	mpirun -np 3 --oversubscribe --bind-to none bin/examples/pipeline
//
// Rank 0 produces 120 batches of 256 samples (about 1 MiB each) and deals them
// round-robin to ranks 1, 2, ... Each batch's values encode its index, so each
// consumer checks that it got the right batch, whole, in order. Both sides keep
// two buffers: the producer fills one while the other is being sent (ISend),
// the consumers check one while the next arrives in the other (IRecv). At the
// end rank 0 gathers everyone's counts and times with GatherAndStack and prints
// the throughput. The program exits with status 1 if a check or a call fails.
package main

import (
	"fmt"
	"time"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/tensor"
	"github.com/tdmpi/tdmpi/tensordict"
)

const (
	batches = 120  // batches the producer sends in all
	samples = 256  // samples per batch: the TensorDict's batch size
	width   = 1024 // float32 features per sample
)

func main() {
	// Main starts MPI and runs run on every rank with the world group; an
	// error or a panic on any rank is printed and ends the whole job.
	group.Main(run)
}

// newBatch returns an empty batch, consolidated: its leaves view one byte
// storage, which ISend sends as it is, with no copy.
func newBatch() (*tensordict.TensorDict, error) {
	td := tensordict.New(samples)
	if err := td.Set(tensordict.K("obs"), tensor.Zeros(tensor.Float32, samples, width)); err != nil {
		return nil, err
	}
	if err := td.Set(tensordict.K("meta", "sample"), tensor.Zeros(tensor.Int64, samples)); err != nil {
		return nil, err
	}
	return td.Consolidate()
}

// fill writes batch i into td, in place: every obs value is i, and sample j
// has the global sample number i*samples + j.
func fill(td *tensordict.TensorDict, i int) error {
	obs, sample, err := leaves(td)
	if err != nil {
		return err
	}
	for k := range obs {
		obs[k] = float32(i)
	}
	for j := range sample {
		sample[j] = int64(i*samples + j)
	}
	return nil
}

// check returns an error unless td holds batch i, as fill wrote it.
func check(td *tensordict.TensorDict, i int) error {
	obs, sample, err := leaves(td)
	if err != nil {
		return err
	}
	for k, v := range obs {
		if v != float32(i) {
			return fmt.Errorf("batch %d: obs[%d] = %v, want %d", i, k, v, i)
		}
	}
	for j, v := range sample {
		if v != int64(i*samples+j) {
			return fmt.Errorf("batch %d: meta.sample[%d] = %d, want %d", i, j, v, i*samples+j)
		}
	}
	return nil
}

// leaves returns typed slices over td's two leaves; writing to them writes
// into td's storage.
func leaves(td *tensordict.TensorDict) ([]float32, []int64, error) {
	obs, err := td.Get(tensordict.K("obs"))
	if err != nil {
		return nil, nil, err
	}
	sample, err := td.Get(tensordict.K("meta", "sample"))
	if err != nil {
		return nil, nil, err
	}
	o, err := tensor.Data[float32](obs)
	if err != nil {
		return nil, nil, err
	}
	s, err := tensor.Data[int64](sample)
	if err != nil {
		return nil, nil, err
	}
	return o, s, nil
}

func run(g *group.Group) error {
	if g.Size() < 2 {
		return fmt.Errorf("needs at least 2 ranks; run: mpirun -np 3 --oversubscribe pipeline")
	}
	var st *tensordict.TensorDict // this rank's statistics
	var err error
	if g.Rank() == 0 {
		st, err = produce(g)
	} else {
		st, err = consume(g)
	}
	if err != nil {
		return err
	}
	return report(g, st)
}

// stats returns a rank's statistics as a TensorDict of scalars (batch size
// []): how many batches it moved, their size in bytes, and how long it took.
func stats(n int, batch *tensordict.TensorDict, elapsed time.Duration) (*tensordict.TensorDict, error) {
	size := len(batch.ConsolidatedStorage().Bytes())
	st := tensordict.New()
	if err := st.Set(tensordict.K("batches"), tensor.Full(tensor.Int64, float64(n))); err != nil {
		return nil, err
	}
	if err := st.Set(tensordict.K("bytes"), tensor.Full(tensor.Int64, float64(n*size))); err != nil {
		return nil, err
	}
	if err := st.Set(tensordict.K("seconds"), tensor.Full(tensor.Float64, elapsed.Seconds())); err != nil {
		return nil, err
	}
	return st, nil
}

// produce is rank 0: it deals the batches round-robin to the other ranks
// and returns its statistics.
func produce(g *group.Group) (*tensordict.TensorDict, error) {
	var bufs [2]*tensordict.TensorDict
	for b := range bufs {
		var err error
		if bufs[b], err = newBatch(); err != nil {
			return nil, err
		}
	}
	// Set up each consumer: InitRemote sends the structure (and the empty
	// values), from which the consumer builds its receive buffers.
	for r := 1; r < g.Size(); r++ {
		if err := bufs[0].InitRemote(r); err != nil {
			return nil, err
		}
	}

	// The steady state. pending[b] is the send in flight from bufs[b].
	start := time.Now()
	var pending [2]*tensordict.Pending
	for i := range batches {
		b := i % 2
		// bufs[b] was last sent as batch i-2: wait for that send to finish
		// before overwriting it. Batch i-1 may still be on its way.
		if pending[b] != nil {
			if err := pending[b].Wait(); err != nil {
				return nil, err
			}
		}
		if err := fill(bufs[b], i); err != nil {
			return nil, err
		}
		dst := 1 + i%(g.Size()-1)
		p, err := bufs[b].ISend(dst, tensordict.WithConsolidated())
		if err != nil {
			return nil, err
		}
		pending[b] = p
	}
	for _, p := range pending {
		if p != nil {
			if err := p.Wait(); err != nil {
				return nil, err
			}
		}
	}
	return stats(batches, bufs[0], time.Since(start))
}

// consume is every other rank: it receives and checks its share of the
// batches and returns its statistics.
func consume(g *group.Group) (*tensordict.TensorDict, error) {
	// FromRemoteInit learns the structure and returns a consolidated
	// TensorDict; a consolidated copy of it is the second buffer, with the
	// same layout.
	first, err := tensordict.FromRemoteInit(0)
	if err != nil {
		return nil, err
	}
	second, err := first.Clone().Consolidate()
	if err != nil {
		return nil, err
	}
	bufs := [2]*tensordict.TensorDict{first, second}

	consumers := g.Size() - 1
	mine := (batches - g.Rank() + consumers) / consumers // how many batches come here
	start := time.Now()
	// Receives complete in the order IRecv is called, so the next receive can
	// be posted before the current batch is checked.
	next, err := bufs[0].IRecv(0, tensordict.WithConsolidated())
	if err != nil {
		return nil, err
	}
	for j := range mine {
		if err := next.Wait(); err != nil {
			return nil, err
		}
		cur := bufs[j%2]
		if j+1 < mine {
			if next, err = bufs[(j+1)%2].IRecv(0, tensordict.WithConsolidated()); err != nil {
				return nil, err
			}
		}
		// This rank's j-th batch is batch number g.Rank()-1 + j*consumers.
		if err := check(cur, g.Rank()-1+j*consumers); err != nil {
			return nil, err
		}
	}
	return stats(mine, first, time.Since(start))
}

// report gathers every rank's statistics on rank 0, which prints them.
// GatherAndStack stacks the ranks' TensorDicts along a new first batch
// dimension, in rank order: entry r of each leaf comes from rank r.
func report(g *group.Group, st *tensordict.TensorDict) error {
	all, err := st.GatherAndStack(0)
	if err != nil || g.Rank() != 0 {
		return err
	}
	batches, _ := all.Get(tensordict.K("batches"))
	bytes, _ := all.Get(tensordict.K("bytes"))
	seconds, _ := all.Get(tensordict.K("seconds"))
	for r := range g.Size() {
		verb := "received"
		if r == 0 {
			verb = "sent"
		}
		mib, s := bytes.At(r)/(1<<20), seconds.At(r)
		fmt.Printf("rank %d: %s %d batches (%.1f MiB) in %.3f s: %.0f MiB/s\n",
			r, verb, int(batches.At(r)), mib, s, mib/s)
	}
	fmt.Println("OK")
	return nil
}
