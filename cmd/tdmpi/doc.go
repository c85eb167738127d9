// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

// Tdmpi inspects saved TensorDicts and measures tdmpi's transfers over MPI.
//
// Usage:
//
//	tdmpi <command> [flags] [arguments]
//
// The commands are:
//
//	inspect   print a saved TensorDict (memmap directory or consolidated file)
//	bench     measure tdmpi's transfers beside raw MPI (run under mpirun -np 2)
//	env       print what each rank sees of its launcher and of MPI
//	version   print the versions of tdmpi, Go and the MPI library
//
// "tdmpi <command> -h" describes a command and its flags. Usage and
// diagnostics go to standard error, results to standard output. The exit
// status is 0 on success, 1 when the command fails and 2 for a usage error
// (an unknown command or flag, a missing or malformed argument).
//
// # Inspect
//
//	tdmpi inspect [-json] [-n N] DIR|FILE
//
// Inspect loads a TensorDict saved by Memmap (a directory with a meta.json,
// also one written by Python tensordict's memmap) or by SaveConsolidated
// (one file, also one written by Python's consolidate(filename=...)), and
// prints it as a tree: every key with its dtype, shape, size in bytes and
// the first N elements of each tensor (-n, default 6), every nested
// TensorDict with its batch size, and every non-tensor value. The tree is the
// one fmt.Print of a TensorDict prints (tensordict's TensorDict.WriteTree),
// elements in tensor's Go form ("[0.1 1.5 -2 ...]"). Inspect does not start
// MPI and runs without mpirun.
//
// With -json, inspect prints one JSON object instead, whose schema is stable
// (fields are only ever added):
//
//	{
//	  "schema": "tdmpi.inspect/v1",
//	  "path": "<the argument>",
//	  "format": "memmap" | "consolidated",
//	  "leaves": <number of tensor leaves>,
//	  "bytes": <total bytes of the tensor leaves>,
//	  "root": <node>
//	}
//
// A node is a TensorDict:
//
//	{"batch_size": [2, 1], "class": "<tensorclass name or omitted>",
//	 "locked": true, "entries": [<entry>, ...]}
//
// and an entry is one of
//
//	{"key": "obs", "kind": "tensor", "dtype": "float32", "shape": [2, 3],
//	 "bytes": 24, "values": [1, 2, 3, ...], "truncated": true}
//	{"key": "nested", "kind": "tensordict", "node": <node>}
//	{"key": "label", "kind": "non_tensor", "value": <the JSON value>}
//
// in insertion order. "values" holds the first elements in row-major
// order: numbers, booleans for bool tensors, and strings for complex
// numbers ("1+2i") and for the non-finite floats "NaN", "+Inf" and "-Inf".
// "truncated" is true when the tensor has more elements than "values".
//
// # Bench
//
//	mpirun -np 2 --bind-to none tdmpi bench [-min 8B] [-max 256MiB] [-leaves 16] [-time 200ms] [-iters 5] [-out tdmpi-bench]
//
// Bench measures, in one run and for every power of two from -min to -max
// bytes, the one-way time of:
//
//	raw-p2p        mpi.Send and mpi.Recv of a []byte in 4 KiB pages, ping-pong
//	               (the p2p baseline)
//	raw-bcast      mpi.Bcast of a []byte in 4 KiB pages, the root alternating
//	               (the bcast baseline)
//	raw-p2p-hp     raw-p2p on off-heap huge-page memory (tensor.NewOffHeapStorage):
//	               the ceiling; tdmpi's storages from 4 MiB up, consolidated
//	               or received, are huge pages too (its receive pool's regions)
//	initremote     InitRemote and FromRemoteInit, ping-pong, each result
//	               released (TensorDict.Release) before the next receive
//	initremote-bc  InitRemote and FromRemoteInit with WithBroadcast, the source alternating
//	initremote-re  initremote with WithAllocator handing each receive the
//	               storage of the previous result (no fresh memory)
//	initremote-set InitRemote of TensorDicts whose leaves were set one by one
//	               (a storage each, never consolidated), ping-pong, each
//	               result dropped, not released
//	broadcast      Broadcast (the collective), the source alternating, each
//	               result released once broadcast on
//	send-consol    Send and Recv with WithConsolidated, ping-pong
//	send-leaves    Send and Recv, one message per leaf, ping-pong
//	raw-allreduce  mpi.AllreduceInPlace (sum) of a []byte in 4 KiB pages
//	               (the allreduce baseline)
//	allreduce      AllReduce (sum) of a TensorDict whose leaves have storages
//	               of their own, as a model's gradients (in buckets below 256 KiB)
//	allreduce-cons AllReduce (sum) of a consolidated TensorDict (one call)
//
// The TensorDicts hold -leaves uint8 leaves (up to 1Mi; send-leaves takes
// at most 28672) sharing the size's bytes, in one storage but for
// allreduce's and initremote-set's. The
// methods of one size are timed in interleaved rounds, so that noise hits a
// method and its baseline alike. Each figure is the median of a method's
// repetitions (at least -iters, for at least -time per method and size),
// reported with its bandwidth and its ratio to the raw baseline of the same
// size and pattern. Bench prints a table, writes it as
// CSV to <out>.csv (tools/benchplot, a module of its own, plots bandwidth
// against size from it), and reports progress on standard error from rank 0.
//
// # Env
//
//	mpirun -np 2 tdmpi env
//
// Env starts MPI and prints, one block per rank in rank order, what each
// rank sees: the launcher and the rank and size it promised, the rank and
// size MPI reports, the Slurm job, step and node list, the thread level MPI
// provides, the MPI library, the host, the scratch directory and GOMAXPROCS.
// When the launcher started several ranks but MPI sees one (a PMI mismatch),
// each rank prints its block with a warning. It is the first thing to run
// when a job misbehaves.
//
// # Version
//
//	tdmpi version
//
// Version prints tdmpi's module version and VCS revision, the Go version it
// was built with and the MPI library version. It does not start MPI.
//
// # Files
//
//	main.go            the command table, flag parsing, exit statuses
//	inspect.go         the inspect command: loading a saved TensorDict; the
//	                   tree is tensordict's WriteTree
//	report.go          the JSON of inspect -json (tdmpi.inspect/v1)
//	values.go          tensor elements as JSON values
//	bench.go           the bench command: sizes, rounds, outputs
//	bench_methods.go   the methods bench times, each with its baseline
//	bench_timing.go    timing in interleaved rounds, medians
//	bench_report.go    the table and CSV of bench, ratios to the baselines
//	size.go            byteSize, the flag type of sizes such as 64KiB
//	env.go             the env command
//	version.go         the version command
package main
