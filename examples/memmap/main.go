// How hpc/scripts/examples.sh runs and checks this program. This block is
// not the package documentation: a blank line separates it from the doc
// comment below.
//
// np: 2
// nodes: 1
// expect: ^rank 0: saved 1000 samples \([0-9]+ bytes\) to .+$
// expect: ^rank 0: 1 other rank\(s\) loaded the dataset and saw the new labels$
// expect: ^OK$

// Command memmap shares a memory-mapped dataset between the ranks of one node:
// rank 0 saves a TensorDict to disk with Memmap, in Python tensordict's
// layout, and the other ranks map the same files with LoadMemmap instead of
// receiving the data. A change rank 0 writes into a file is then seen by every
// rank, without a message.
//
// Run it with two or more ranks on one machine:
//
//	go build -o bin/examples/memmap ./examples/memmap
//	mpirun -np 2 --bind-to none bin/examples/memmap
//
// Rank 0 makes a scratch folder and broadcasts its name (and its host name, so
// that ranks on another node fail clearly). It saves a dataset of 1000 samples
// there; after a barrier the other ranks load it and check the values. Rank 0
// then writes new labels into the mapped file in place and flushes it; after a
// second barrier the other ranks find the new labels in the mapping they
// already hold. Rank 0 removes the folder at the end. The program exits with
// status 1 if a check or a call fails.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/tdmpi/tdmpi/group"
	"github.com/tdmpi/tdmpi/memmap"
	"github.com/tdmpi/tdmpi/tensor"
	"github.com/tdmpi/tdmpi/tensordict"
)

// n is the number of samples in the dataset.
const n = 1000

func main() {
	// Main starts MPI and runs its function on every rank with the world
	// group; an error or a panic on any rank is printed and ends the job.
	group.Main(func(g *group.Group) error {
		var dir string
		err := run(g, &dir)
		if dir != "" {
			os.RemoveAll(dir) // rank 0's scratch folder, also when a check failed
		}
		return err
	})
}

// dataset returns the samples: obs[i] = [i, i, i, i] and label[i] = i % 10.
func dataset() (*tensordict.TensorDict, error) {
	idx, err := tensor.Arange(tensor.Float32, 0, n, 1)
	if err != nil {
		return nil, err
	}
	col, err := idx.Reshape(n, 1)
	if err != nil {
		return nil, err
	}
	obs, err := col.Expand(n, 4) // a stride-0 view; Memmap writes it out densely
	if err != nil {
		return nil, err
	}
	labels := make([]int64, n)
	for i := range labels {
		labels[i] = int64(i % 10)
	}
	label, err := tensor.FromSlice(labels, n)
	if err != nil {
		return nil, err
	}
	td := tensordict.New(n)
	if err := td.Set(tensordict.K("obs"), obs); err != nil {
		return nil, err
	}
	if err := td.Set(tensordict.K("target", "label"), label); err != nil {
		return nil, err
	}
	return td, nil
}

// run saves, loads, updates and checks the dataset. On rank 0 it sets *dir to
// the scratch folder, for main to remove.
func run(g *group.Group, dir *string) error {
	if g.Size() < 2 {
		return fmt.Errorf("needs at least 2 ranks; run: mpirun -np 2 memmap")
	}
	host, err := os.Hostname()
	if err != nil {
		return err
	}

	// Rank 0 makes the folder. Its name and rank 0's host name reach the
	// other ranks as non-tensor values of a broadcast TensorDict.
	var where *tensordict.TensorDict
	if g.Rank() == 0 {
		if *dir, err = os.MkdirTemp("", "tdmpi-memmap-"); err != nil {
			return err
		}
		where = tensordict.New()
		if err := where.SetNonTensor(tensordict.K("prefix"), filepath.Join(*dir, "dataset")); err != nil {
			return err
		}
		if err := where.SetNonTensor(tensordict.K("host"), host); err != nil {
			return err
		}
	}
	if where, err = where.Broadcast(0); err != nil {
		return err
	}
	prefix, _ := where.GetNonTensor(tensordict.K("prefix"))
	host0, _ := where.GetNonTensor(tensordict.K("host"))
	if host0 != host {
		return fmt.Errorf("rank 0 runs on %v and this rank on %s: the ranks must share one node's disk", host0, host)
	}
	if g.Rank() == 0 {
		return writer(g, prefix.(string))
	}
	return reader(g, prefix.(string))
}

// writer is rank 0: it saves the dataset, then changes the labels in place.
func writer(g *group.Group, prefix string) error {
	td, err := dataset()
	if err != nil {
		return err
	}
	// Memmap writes prefix/meta.json, prefix/obs.memmap,
	// prefix/target/meta.json and prefix/target/label.memmap, and returns a
	// locked TensorDict whose leaves map those files.
	saved, err := td.Memmap(prefix)
	if err != nil {
		return err
	}
	defer saved.Release()
	_, size, err := tensordict.Layout(saved)
	if err != nil {
		return err
	}
	fmt.Printf("rank 0: saved %d samples (%d bytes) to %s\n", n, size, prefix)
	if err := g.Barrier(); err != nil { // 1: the files are complete
		return err
	}
	if err := g.Barrier(); err != nil { // 2: the others have checked them
		return err
	}

	// Write label[i] = 100 + i%10 into the mapped file. SetInPlace copies into
	// the existing leaf, which keeps its mapping (Set would replace it with an
	// ordinary tensor); locked TensorDicts allow it.
	label, err := saved.Get(tensordict.K("target", "label"))
	if err != nil {
		return err
	}
	if err := saved.SetInPlace(tensordict.K("target", "label"), label.AddScalar(100)); err != nil {
		return err
	}
	// Flush makes the change durable on disk. Ranks mapping the file see it at
	// once anyway: the mapping is shared.
	if err := memmap.Flush(label); err != nil {
		return err
	}
	if err := g.Barrier(); err != nil { // 3: the labels are updated
		return err
	}
	if err := g.Barrier(); err != nil { // 4: the others have seen them
		return err
	}
	fmt.Printf("rank 0: %d other rank(s) loaded the dataset and saw the new labels\n", g.Size()-1)
	fmt.Println("OK")
	return nil
}

// reader is every other rank: it maps the saved dataset and checks it, then
// checks rank 0's change through the same mapping.
func reader(g *group.Group, prefix string) error {
	if err := g.Barrier(); err != nil { // 1: the files are complete
		return err
	}
	// LoadMemmap maps the files; no data is read or copied.
	td, err := tensordict.LoadMemmap(prefix)
	if err != nil {
		return err
	}
	defer td.Release()
	if !td.IsMemmap() {
		return fmt.Errorf("loaded dataset is not memory-mapped")
	}
	want, err := dataset()
	if err != nil {
		return err
	}
	if err := check(td, want); err != nil {
		return fmt.Errorf("after loading: %w", err)
	}
	if err := g.Barrier(); err != nil { // 2: checked
		return err
	}

	if err := g.Barrier(); err != nil { // 3: rank 0 updated the labels
		return err
	}
	label, err := want.Get(tensordict.K("target", "label"))
	if err != nil {
		return err
	}
	if err := want.Set(tensordict.K("target", "label"), label.AddScalar(100)); err != nil {
		return err
	}
	if err := check(td, want); err != nil {
		return fmt.Errorf("after rank 0's update: %w", err)
	}
	return g.Barrier() // 4: seen
}

// check returns an error unless got and want hold equal values.
func check(got, want *tensordict.TensorDict) error {
	eq, err := got.Eq(want)
	if err != nil {
		return err
	}
	if !eq.All() {
		label, _ := got.Get(tensordict.K("target", "label"))
		return fmt.Errorf("dataset differs from the expected one; labels %v", label)
	}
	return nil
}
