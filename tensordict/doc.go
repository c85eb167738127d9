// Package tensordict provides TensorDict, an ordered tree of named tensors
// that share leading batch dimensions: the Go port of Python tensordict's
// TensorDict, with its consolidated format, tensorclasses, memory-mapped
// saving and distributed communication over MPI.
//
// # Keys and entries
//
// An entry is a tensor leaf (*tensor.Tensor), a nested TensorDict or a
// non-tensor value (a JSON-able Go value, Python's NonTensorData, or a
// *NonTensorStack of one value per batch element, Python's NonTensorStack,
// which Stack and Cat make of values that differ). A Key
// names an entry; K("a", "b") is the nested key ("a", "b") of Python. Set
// creates missing nested levels, and checks that each leaf's leading
// dimensions equal the batch size of the TensorDict that holds it. Entries
// keep insertion order; Keys lists them depth first, a nested TensorDict
// before its entries, like Python's keys(include_nested=True).
//
//	td := tensordict.New(2)
//	td.Set(tensordict.K("a", "b"), tensor.Ones(tensor.Float32, 2))
//	td.Set(tensordict.K("c"), tensor.Ones(tensor.Float32, 2))
//	td.Keys() // a, c
//
// Operations that transform a whole TensorDict (Expand, Contiguous, Clone,
// To, Apply, Index, Slice, Mask, IndexSelect, Stack, Unbind, Eq, EqScalar,
// and the algebra below) return a new TensorDict; leaves are views where
// torch makes views.
//
// # Algebra
//
// Joining and splitting: Cat, Stack, Split, SplitSizes, Chunk, Unbind, Pad
// and PadSequence. Shape of the batch: Reshape, View, Flatten, Unflatten,
// Squeeze, Unsqueeze, Permute, Transpose, Expand and ExpandAs; these act
// on every leaf's leading (batch) dimensions and return views wherever
// torch does, so a write through the result reaches the original and the
// cost is O(leaves), not O(bytes).
//
// Arithmetic pairs the leaves of two TensorDicts of the same structure key
// by key (an error names the first key that differs), or applies a scalar
// to every leaf: Add, Sub, Mul, Div, Pow and their InPlace and Scalar
// forms; Neg, Abs, Clamp, Lerp; Zero, Fill and CopyFrom; comparisons Lt,
// Le, Gt, Ge beside Eq and Ne; Where and MaskedFill with a batch-shaped
// mask; IsClose and AllClose. In-place forms write into the existing
// leaves, so a consolidated receive buffer or a memory-mapped TensorDict
// keeps its storage: after AllReduce, grads.DivScalarInPlace(n) averages
// without allocating.
//
// Reductions Sum, Mean, Prod, Max, Min, Std and Var reduce batch
// dimensions (with none: every element of every leaf, and an empty batch
// size, as Python does); MaxDim and MinDim also return the positions, as
// Python's max(dim) does; AllDim and AnyDim reduce one.
//
// Indexed writes: SetAt(ix, src) is Python's td[ix] = src for an Index
// made by IndexAt, IndexRange, IndexList or IndexMask, and SetAtKey is
// set_at_; Update takes WriteInPlace, UpdateKeys and UpdateClone, and
// UpdateInPlace is update_. These write through views into the leaves'
// storage, so they reach the files of a TensorDict from LoadMemmap.
// ApplyWith maps several TensorDicts at once (in place with ApplyInto, to
// a new batch size with ApplyBatchSize), ApplyInPlace is apply_, and
// FromMap and ToMap convert from and to nested maps.
//
// # Locking
//
// Lock forbids adding and removing entries (Set of a new key, Del) at every
// level; SetInPlace still writes into existing leaves. A locked TensorDict
// is what a receiver keeps when it reuses a consolidated buffer.
//
// # Consolidation
//
// Consolidate packs every leaf, depth first in insertion order, into one
// byte storage, each leaf's little-endian bytes padded with zeros to a
// multiple of 8 (and complex128 leaves placed at multiples of 16, which
// torch needs to view them; readers accept either), and describes them with Python tensordict's consolidated
// metadata tree (ConsolidatedMetadata), as JSON. Layout computes that
// metadata and the storage size without copying, ConsolidateInto packs into
// a caller's buffer (ConsolidateIntoStorage into a caller's Storage, whose
// Release the result then sees), and FromConsolidated rebuilds a TensorDict of views over
// a storage. SaveConsolidated and LoadConsolidated use the single-file format
// of Python's consolidate(filename=...): [storage][metadata JSON][int64 LE
// length]. Files and peers are untrusted: FromConsolidated and
// LoadConsolidated check every field before use and bound what they
// allocate. Signature, StructureHash and DiffStructure compare structures,
// so that peers can detect a mismatch instead of reinterpreting bytes.
//
// Entry order: the consolidated metadata records the insertion order of
// tensor leaves, and of nested TensorDicts that hold one, only through
// the leaves' storage offsets, and its readers (FromConsolidated,
// LoadConsolidated, FromRemoteInit, the TensorDicts Broadcast and
// AllGather receive) rebuild that order from them. What
// the storage does not place comes where Python's reader puts it:
// non-tensor values first, and nested TensorDicts without tensor leaves
// and NonTensorStacks among the nested entries in the metadata's order
// (just before the next nested TensorDict that holds a leaf, or last).
// Memmap directories record every entry in order, and LoadMemmap keeps it.
//
// # Memory-mapped directories
//
// Memmap writes a TensorDict as Python tensordict's memmap directory and
// LoadMemmap maps one back (InMemory reads it instead). Saves into one
// directory take turns and a load sees one save whole (a directory lock;
// ErrRewritten when a writer that does not take it changes the directory
// under a load). Set on a leaf of a loaded, locked TensorDict writes into
// its file. The library's own accesses to a file that another process
// truncated return errors wrapping memmap.ErrFault instead of ending the
// process with SIGBUS; LoadMemmap says which accesses are covered.
//
// # Errors
//
// Errors wrap sentinels for errors.Is: ErrNotFound, ErrLocked, ErrKind,
// ErrNil (a method called on a nil *TensorDict), ErrNoMemory (a peer's
// storage, or a result such as a Contiguous copy of a large Expand,
// larger than the memory available; tensor.ErrNoMemory is the same
// value), ErrRewritten,
// tensor.ErrReleased (a released storage), memmap.ErrFault and
// memmap.ErrHardLink; in communication, ErrMismatch (a peer's structure,
// transfer mode, reduce op or root differs from this rank's, for Recv and
// for the collectives' *StructureError alike), ErrLimit (a size from a
// peer or a file over a limit), ErrConcurrent (collectives on one group
// from several goroutines) and group.ErrFreed. The methods whose fixed
// signatures have no error result (Clone, Contiguous, To, the Scalar forms
// such as MulScalar and EqScalar) panic instead with such an error value
// (wrapping memmap.ErrFault or ErrNoMemory, naming the key), which recover
// returns; ContiguousChecked, and Apply with the tensor operations, return
// it as an error.
//
// # Tensorclasses
//
// A Go struct whose exported fields are *tensor.Tensor, nested structs (or
// pointers to them), *TensorDict or non-tensor values is a tensorclass:
// FromStruct turns it into a TensorDict, ToStruct and As turn a TensorDict
// back into it. Entries are named after the fields or by the tag
// `td:"name"`; `td:"-"` skips a field; a []int field tagged `td:",batch"`
// holds the batch size (else WithBatchSize, else empty; nested structs
// without one take their parent's). An embedded struct is a nested entry
// named after its type, not a set of promoted fields. RegisterClass names a struct type, and a
// TensorDict built from it remembers that name (ClassName), which travels
// with it (as Python's _tensorclass_type), so that a receiver can rebuild the
// right type with Lookup or Instantiate.
//
// # Communication over MPI
//
// Every rank starts MPI with group.Init. InitRemote and FromRemoteInit copy
// a whole TensorDict to another rank (or, WithBroadcast, to every rank of a
// group): one header message with the metadata, then the consolidated
// storage, which the receiver allocates once and builds its result over.
// Send and Recv then move new values into that result: per leaf with
// tensordict's tags, or WithConsolidated as one message into the
// receiver's existing storage, which allocates nothing. ISend and IRecv are
// their nonblocking forms; Broadcast, AllReduce, Reduce, AllGather, Scatter
// and GatherAndStack are the collectives, and IAllReduce, IReduce,
// IBroadcast and IAllGather the nonblocking forms of four of them. Options
// select the group
// (WithGroup), bound a wait (WithContext) and what a peer may make the
// receiver allocate (WithMaxBytes). Options come in families, one
// interface per family of methods (RemoteOption, SendOption, RecvOption,
// CollectiveOption), so that passing an option to a method that has no
// use for it does not compile; within a family, an option only the other
// side of a transfer uses is an error. WithTorch makes InitRemote and
// FromRemoteInit speak Python tensordict's own wire format over torch's MPI
// backend, with a PyTorch rank in the same job.
//
// A receiver that serves several senders (a learner and its actors) takes
// whichever is ready: FromRemoteInit, Recv and IRecv accept AnySource as
// their source, receive the whole transfer from the one rank whose header
// they match first, and say which with Source (on the TensorDict, or on an
// IRecv's Pending). WaitAny waits for the first of several Pendings to
// complete, as MPI_Waitany does: with one IRecv per actor, a slow actor
// no longer holds up the others.
//
// MPI pairs collectives by their order on each rank. Collectives on one
// group must therefore be called in the same order on every rank, from one
// goroutine at a time; calls from several goroutines at once are detected
// (on the rank that has them, and passed to the others at the agreement
// step that starts every collective and the small allreduce that ends it;
// an AllReduce in its steady state passes them with its signature, and a
// call another goroutine enters while it runs is reported by the next), and
// every rank's call fails with ErrConcurrent instead of combining data
// from different calls. Use a group per goroutine (group.Group.New) for
// concurrent collectives.
//
// Every message carries a versioned header with a hash of the sender's
// structure. A receiver whose keys, dtypes or shapes differ gets an error
// naming the first difference, not reinterpreted bytes, and the sender is
// not left blocked.
//
// Small transfers send the metadata once. Send's first transfer of a
// structure to a rank on a tag carries it, the later ones the header and
// the storage. InitRemote's first frame of a structure to a rank asks the
// receiver to keep its class name and metadata under a number, and the
// later frames with the same metadata carry that number instead
// (internal/xfer/kept.go); a receiver that refused such a frame keeps it all the
// same, so nothing depends on every receive succeeding. The storage of
// an InitRemote travels inside the header message up to about 4000 bytes
// (Open MPI's eager size), else as a message of its own, sent from the
// TensorDict's storage and received straight into the result's. A
// TensorDict that is not consolidated is not packed into one buffer
// first when it has leaves of 16 KiB or more: MPI reads those where they
// lie, the smaller leaves between them packed into buffers (wire.Runs),
// all in one message up to 512 KiB (a datatype of their blocks), which
// the receiver takes as any storage; past that, each run is a message of
// its own, which the receiver, knowing the layout from the metadata,
// takes into its place in the result's storage; a TensorDict sent again
// is not laid out or encoded again (its Send/Recv state). Past the
// eager size, a header message with a storage after it (a consolidated
// Send's of up to 16 KiB, 128 KiB to a rank on another node, where each
// message costs a network latency; an InitRemote's of up to 64 KiB) is
// sent without
// copying the storage into it: MPI reads the two parts where they lie, as
// one message in two blocks, which Open MPI moves faster than a
// contiguous one on the machine tdmpi is developed on. The receiver of
// such an InitRemote, once it has seen one of that layout from the
// sender, takes a storage of 16 KiB or more apart from the rest, straight
// into the result's memory.
//
// A TensorDict also remembers what the calls work out of it while none of
// its nodes is edited: Send and Recv their layout and messages, the
// collectives its leaves in key order, its structure hash, a reduction's
// buckets and, for one whose non-tensor values are all scalars, its
// layout and metadata as a block (from its second AllGather,
// GatherAndStack or Scatter). A loop that reduces or gathers the same
// TensorDict pays for them once: an AllReduce of 256 leaves of 64 bytes
// took 87-95 us when it sorted, hashed and checked the leaves on every
// call, 14-15 after, where raw MPI takes 12-13 for the bytes (np 2).
// AllReduce and Reduce hand MPI at most 16 MiB at a time: a larger
// reduction's temporary buffer is mapped afresh on every call by the C
// library's allocator, and ran 3.5-4.5x slower. What a TensorDict
// remembers keeps the tensors it describes reachable: a leaf replaced by
// Set stays in memory until the TensorDict's next call that looks at it
// again, or until the TensorDict is dropped.
//
// # Communication and memory
//
// Memory decides the speed of large transfers. Consolidate takes its
// storage from the receive pool described below, as a receive does: from
// 4 MiB up it is transparent huge pages from end to end, which Open MPI
// reads up to twice as fast as heap memory in 4 KiB pages, and Release
// gives it back. (A new heap object merely advised to use huge pages keeps
// the 4 KiB pages of the memory it reuses: a consolidated 256 MiB storage
// so made had none at all in some runs, and an InitRemote of it took
// 1.15-1.3x the time.) A receive whose storage the machine's available
// memory cannot hold fails with ErrNoMemory before it allocates, instead
// of the Go runtime's fatal "out of memory". FromRemoteInit (both modes, and from
// a PyTorch rank), Broadcast, AllGather, GatherAndStack and Scatter need a
// storage for every new result, and new memory is slow to fault in, on
// virtual machines especially. They take it from a receive pool
// (internal/mem, "Receive pool"): memory of results the program dropped
// or released (from 4 KiB; huge pages from 4 MiB), already faulted in,
// which comes back only when
// nothing can reach it any more (no tensor, view, slice from Bytes or
// Data, or pending request), so a result never changes under a slice a
// user still holds. Release on a received TensorDict hands its memory back
// without waiting for the TensorDict itself to become unreachable: at once
// when no user code ever had the result's bytes (no Bytes, Data or Dense;
// passing the result on with InitRemote does not count), else at the next
// collection. A loop that releases its results then runs without
// collections. The
// pool keeps at most an eighth of the machine's memory (TDMPI_RECV_POOL,
// SetRecvPoolLimit), runs the collector when many bytes are out and none
// came back, and gives memory back to the runtime after 10 s unused. A
// loop can also Recv into the previous result, or hand FromRemoteInit a
// storage with WithAllocator. With WithMemmap the storage is received
// straight into a memory-mapped file.
//
// # Concurrency
//
// A TensorDict is not safe for concurrent use if any goroutine mutates it
// (Set, Del, Lock, SetInPlace ...), exactly like a Go map; concurrent reads
// are safe.
//
// # Files
//
// The data structure: tensordict.go (TensorDict, Set, Get, the entries of
// a node), keys.go (Key, Keys), ops.go (Apply, Update, Clone, To),
// index.go (Index, Slice, Mask, Stack, Unbind), compare.go (equality,
// DiffStructure, the structure descriptor), nontensor.go (non-tensor
// values, NonTensorStack), tensorclass.go, format.go (String, WriteTree,
// PythonRepr), errors.go (the errors every part returns, and faults of
// mapped leaves turned into errors). The algebra: algebra.go (arithmetic,
// reductions and the walk over several TensorDicts), algebra_shape.go
// (Cat, Split, Reshape and the other views), algebra_index.go (SetAt,
// GetAt). Formats: consolidate.go (the consolidated layout, its metadata,
// Consolidate), fromconsolidated.go (trees built from decoded metadata,
// and the templates a receive copies; internal/codec holds the metadata
// codec and the structure hash), file.go (SaveConsolidated,
// LoadConsolidated), memmap.go and memmap_load.go (tensordict's memmap
// directories and their options).
//
// Communication, as adapters over internal/xfer (the transfer protocol:
// links, probes and receives bounded by a context, chunks, drains, tag
// plans and tag locks, background receives, collective steps, logging)
// and internal/wire (the frames): comm_options.go (the option families,
// AnySource, Source), remote.go (InitRemote and FromRemoteInit point to
// point, receive storage), remote_kept.go (the structures kept between
// InitRemote's two sides), p2p.go (Send, Recv), p2p_state.go (a
// TensorDict's transfer state, the one cache every method shares, and
// the storages a transfer holds), p2p_async.go (ISend, IRecv, Pending),
// p2p_values.go (the non-tensor values a Recv takes), and the
// collectives, as adapters over internal/coll (their runner, agreements,
// reduce kernels, steps and blocks): collective.go (the leaf plan the
// collectives share, AllReduce, Reduce, AllGather, GatherAndStack,
// Scatter and their asynchronous forms), collective_broadcast.go
// (Broadcast, IBroadcast, and InitRemote's broadcast mode), torch.go
// (WithTorch, over internal/torchwire).
package tensordict
