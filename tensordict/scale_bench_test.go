// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package tensordict

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tdmpi/tdmpi/internal/codec"
	"github.com/tdmpi/tdmpi/tensor"
)

// The Scale benchmarks time, in one process, each stage of a transfer of N
// float32[4] leaves, so that the cost per leaf can be compared across N: it
// should not grow with N. Each reports ns/leaf (wall time) and cpu-ns/leaf
// (the process's CPU time, collector included, steadier on a shared
// machine). The trees are flat (N leaves in the root) or nested (three
// levels: N/256 TensorDicts of 16 TensorDicts of 16 leaves). Compare the
// ratios of one run: per-leaf cost at 64Ki against 1Ki, and each stage
// against Set (building the TensorDict).

// scaleSizes are the leaf counts of the Scale benchmarks.
var scaleSizes = []int{1 << 10, 8 << 10, 64 << 10}

// scaleKeys returns the keys of a Scale tree of n leaves and a tensor for
// each, made once so that the benchmarks time the TensorDict alone.
func scaleKeys(n int, nested bool) ([]Key, []*tensor.Tensor) {
	keys := make([]Key, n)
	ts := make([]*tensor.Tensor, n)
	for i := range n {
		if nested {
			keys[i] = K(fmt.Sprintf("a%d", i/256), fmt.Sprintf("b%d", i/16%16), fmt.Sprintf("l%d", i%16))
		} else {
			keys[i] = K(fmt.Sprintf("l%d", i))
		}
		ts[i] = tensor.Full(tensor.Float32, float64(i), 4)
	}
	return keys, ts
}

// scaleBuild sets every key to its tensor in a new TensorDict.
func scaleBuild(tb testing.TB, keys []Key, ts []*tensor.Tensor) *TensorDict {
	td := New()
	for i, k := range keys {
		if err := td.Set(k, ts[i]); err != nil {
			tb.Fatal(err)
		}
	}
	return td
}

// perLeaf runs the sub-benchmarks of f for each shape and size of the Scale
// trees, reporting per-leaf times. f iterates with loop, b.Loop that also
// times the process's CPU.
func perLeaf(b *testing.B, f func(b *testing.B, keys []Key, ts []*tensor.Tensor, loop func() bool)) {
	for _, shape := range []string{"flat", "nested"} {
		for _, n := range scaleSizes {
			b.Run(fmt.Sprintf("%s/%d", shape, n), func(b *testing.B) {
				keys, ts := scaleKeys(n, shape == "nested")
				f(b, keys, ts, perLeafLoop(b, len(keys)))
			})
		}
	}
}

// perLeafLoop returns b.Loop, made to report, when it ends, b's wall and
// CPU time per leaf for leaves leaves an iteration. The CPU time is the
// process's from the loop's start to its end (collector included).
func perLeafLoop(b *testing.B, leaves int) func() bool {
	b.ReportAllocs()
	var cpu time.Duration
	started := false
	return func() bool {
		if !started {
			started, cpu = true, cpuTime(b)
		}
		if b.Loop() {
			return true
		}
		per := float64(b.N * leaves)
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/per, "ns/leaf")
		b.ReportMetric(float64(cpuTime(b)-cpu)/per, "cpu-ns/leaf")
		return false
	}
}

// BenchmarkScaleSet times building the tree with New and Set: the user's
// cost the transfer is held against.
func BenchmarkScaleSet(b *testing.B) {
	perLeaf(b, func(b *testing.B, keys []Key, ts []*tensor.Tensor, loop func() bool) {
		for loop() {
			scaleBuild(b, keys, ts)
		}
	})
}

// BenchmarkScaleSetNew times building the tree as a program does: each
// key and each tensor (tensor.Zeros) made just before its Set.
func BenchmarkScaleSetNew(b *testing.B) {
	perLeaf(b, func(b *testing.B, keys []Key, _ []*tensor.Tensor, loop func() bool) {
		nested := len(keys[0]) > 1
		for loop() {
			td := New()
			for i := range keys {
				var k Key
				if nested {
					k = K(fmt.Sprintf("a%d", i/256), fmt.Sprintf("b%d", i/16%16), fmt.Sprintf("l%d", i%16))
				} else {
					k = K(fmt.Sprintf("l%d", i))
				}
				if err := td.Set(k, tensor.Zeros(tensor.Float32, 4)); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// BenchmarkScalePlan times laying the tree out (makePlan).
func BenchmarkScalePlan(b *testing.B) {
	perLeaf(b, func(b *testing.B, keys []Key, ts []*tensor.Tensor, loop func() bool) {
		td := scaleBuild(b, keys, ts)
		for loop() {
			if _, err := makePlan("bench", td, 0, false); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkScaleMeta times writing the consolidated metadata of a laid-out
// tree (encodeMetadata).
func BenchmarkScaleMeta(b *testing.B) {
	perLeaf(b, func(b *testing.B, keys []Key, ts []*tensor.Tensor, loop func() bool) {
		p, err := makePlan("bench", scaleBuild(b, keys, ts), 0, false)
		require.NoError(b, err)
		for loop() {
			if _, err := encodeMetadata(p); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkScaleHash times the structure hash of the tree (signature).
func BenchmarkScaleHash(b *testing.B) {
	perLeaf(b, func(b *testing.B, keys []Key, ts []*tensor.Tensor, loop func() bool) {
		td := scaleBuild(b, keys, ts)
		for loop() {
			signature(td)
		}
	})
}

// BenchmarkScaleSend times the sender's work of a first InitRemote of the
// tree before MPI: its layout, metadata and structure hash, and its packed
// storage.
func BenchmarkScaleSend(b *testing.B) {
	perLeaf(b, func(b *testing.B, keys []Key, ts []*tensor.Tensor, loop func() bool) {
		td := scaleBuild(b, keys, ts)
		for loop() {
			scaleSend(b, td)
		}
	})
}

// scaleSend returns what the first InitRemote of td sends, made as it
// makes it: the metadata (with the layout and the structure hash) and
// the packed storage.
func scaleSend(b *testing.B, td *TensorDict) ([]byte, []byte) {
	p, err := makePlan("bench", td, 0, false)
	if err != nil {
		b.Fatal(err)
	}
	meta, err := encodeMetadata(p)
	if err != nil {
		b.Fatal(err)
	}
	signature(td)
	buf := make([]byte, p.total)
	if err := pack(buf, p, true); err != nil {
		b.Fatal(err)
	}
	return meta, buf
}

// scaleSent returns the metadata and storage a first InitRemote of the
// tree sends.
func scaleSent(b *testing.B, keys []Key, ts []*tensor.Tensor) ([]byte, *tensor.Storage) {
	meta, buf := scaleSend(b, scaleBuild(b, keys, ts))
	return meta, tensor.StorageOf(buf)
}

// BenchmarkScaleDecode times decoding and checking the metadata (the
// receiver's codec.Decode).
func BenchmarkScaleDecode(b *testing.B) {
	perLeaf(b, func(b *testing.B, keys []Key, ts []*tensor.Tensor, loop func() bool) {
		meta, st := scaleSent(b, keys, ts)
		for loop() {
			d := codec.NewDecoder()
			if _, _, err := d.Decode(meta, st.Len(), codec.DefaultLimits()); err != nil {
				b.Fatal(err)
			}
			d.Release()
		}
	})
}

// BenchmarkScaleBuild times making the TensorDict of decoded metadata over
// a storage (buildFromMeta), as a receive does.
func BenchmarkScaleBuild(b *testing.B) {
	perLeaf(b, func(b *testing.B, keys []Key, ts []*tensor.Tensor, loop func() bool) {
		meta, st := scaleSent(b, keys, ts)
		root, _, err := codec.Decode(meta, st.Len(), codec.DefaultLimits())
		require.NoError(b, err)
		for loop() {
			if _, err := buildFromMeta(root, st); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkScaleTemplate times making the receive template of decoded
// metadata and a first copy of it, as the first receive of a structure
// whose metadata the receive cache keeps does (small trees only).
func BenchmarkScaleTemplate(b *testing.B) {
	perLeaf(b, func(b *testing.B, keys []Key, ts []*tensor.Tensor, loop func() bool) {
		meta, st := scaleSent(b, keys, ts)
		if len(meta) > codec.CacheMaxBytes || st.Len() > templateMaxBytes {
			b.Skip("the receive cache does not keep such metadata")
		}
		root, _, err := codec.Decode(meta, st.Len(), codec.DefaultLimits())
		require.NoError(b, err)
		for loop() {
			tp, err := newTemplate(root, st.Len())
			if err != nil {
				b.Fatal(err)
			}
			if _, err := tp.instantiate(st); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkScaleRecvAgain times the receiver's work of a FromRemoteInit
// of the structure it received last besides MPI: the decoded metadata
// from the receive cache (codec.Cache), the tree copied from its receive
// template with a copy of the storage (as fromConsolidatedCached does),
// or, for metadata the cache does not keep, decoded and built again.
func BenchmarkScaleRecvAgain(b *testing.B) {
	perLeaf(b, func(b *testing.B, keys []Key, ts []*tensor.Tensor, loop func() bool) {
		meta, st := scaleSent(b, keys, ts)
		var cache codec.Cache
		var templates templateCache
		for loop() {
			root, _, err := cache.Decode(meta, st.Len(), codec.DefaultLimits())
			if err != nil {
				b.Fatal(err)
			}
			if !cache.Keeps(meta) || st.Len() > templateMaxBytes {
				c, err := copyStorage(st.Bytes())
				if err != nil {
					b.Fatal(err)
				}
				if _, err := buildFromMeta(root, c); err != nil {
					b.Fatal(err)
				}
				continue
			}
			tp, err := templates.template(root, st.Len())
			if err != nil {
				b.Fatal(err)
			}
			if _, err := tp.instantiateCopy(st.Bytes()); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkScaleRecv times the receiver's work of a FromRemoteInit of a
// new structure besides MPI: FromConsolidated of the metadata over a copy
// of the storage.
func BenchmarkScaleRecv(b *testing.B) {
	perLeaf(b, func(b *testing.B, keys []Key, ts []*tensor.Tensor, loop func() bool) {
		meta, st := scaleSent(b, keys, ts)
		for loop() {
			scaleRecv(b, meta, st.Bytes())
		}
	})
}

// scaleRecv builds the TensorDict a receive of meta and storage makes.
func scaleRecv(b *testing.B, meta, storage []byte) *TensorDict {
	st, err := copyStorage(storage)
	if err != nil {
		b.Fatal(err)
	}
	td, err := FromConsolidated(st, meta)
	if err != nil {
		b.Fatal(err)
	}
	return td
}

// BenchmarkScaleTransfer times both sides' work of an InitRemote of a new
// structure besides MPI (BenchmarkScaleSend, then BenchmarkScaleRecv of
// what it sent) against building the tree with Set, alternately in each
// iteration: ns/leaf is the transfer's (cpu-ns/leaf counts both),
// set-ns/leaf is Set's, and x-set the ratio of the transfer's wall time
// to Set's (the target is at most 1).
func BenchmarkScaleTransfer(b *testing.B) {
	perLeaf(b, func(b *testing.B, keys []Key, ts []*tensor.Tensor, loop func() bool) {
		td := scaleBuild(b, keys, ts)
		var set time.Duration
		for loop() {
			b.StopTimer()
			start := time.Now()
			scaleBuild(b, keys, ts)
			set += time.Since(start)
			b.StartTimer()
			meta, buf := scaleSend(b, td)
			scaleRecv(b, meta, buf)
		}
		b.ReportMetric(float64(set.Nanoseconds())/float64(b.N*len(keys)), "set-ns/leaf")
		b.ReportMetric(float64(b.Elapsed())/float64(set), "x-set")
	})
}

// BenchmarkScaleDepth times Set and a transfer's work (as
// BenchmarkScaleTransfer) of 16 keys each of depth 64 or 256 (16
// separate chains of nested TensorDicts), reporting per key (as ns/leaf
// and cpu-ns/leaf); the cost of a key should grow linearly with its depth.
func BenchmarkScaleDepth(b *testing.B) {
	for _, depth := range []int{64, 256} {
		keys := make([]Key, 16)
		ts := make([]*tensor.Tensor, len(keys))
		for i := range keys {
			k := make(Key, depth)
			k[0] = fmt.Sprintf("k%d", i)
			for j := 1; j < depth; j++ {
				k[j] = fmt.Sprintf("d%d", j)
			}
			keys[i], ts[i] = k, tensor.Full(tensor.Float32, float64(i), 4)
		}
		b.Run(fmt.Sprintf("Set/%d", depth), func(b *testing.B) {
			loop := perLeafLoop(b, len(keys))
			for loop() {
				scaleBuild(b, keys, ts)
			}
		})
		b.Run(fmt.Sprintf("Transfer/%d", depth), func(b *testing.B) {
			td := scaleBuild(b, keys, ts)
			loop := perLeafLoop(b, len(keys))
			for loop() {
				meta, buf := scaleSend(b, td)
				scaleRecv(b, meta, buf)
			}
		})
	}
}
