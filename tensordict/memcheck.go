package tensordict

import (
	"github.com/tdmpi/tdmpi/internal/mem"
	"github.com/tdmpi/tdmpi/tensor"
)

// newRecvStorage returns the heap storage of total bytes that a receive
// builds its TensorDict in, from the receive pool (see "Communication and
// memory" in the package documentation), not cleared (the receive
// overwrites every byte, or the storage is dropped), with a finish
// function that does nothing. A storage the machine cannot hold is an
// error wrapping ErrNoMemory, before anything is allocated, instead of the
// Go runtime's fatal "out of memory" (see internal/mem.CheckAvailable).
func newRecvStorage(total int64) (*tensor.Storage, func(ok bool) error, error) {
	b, err := mem.Recv(int(total))
	if err != nil {
		return nil, nil, err
	}
	return tensor.ReusableStorageOf(b), func(bool) error { return nil }, nil
}

// SetRecvPoolLimit sets the most bytes of memory the receive pool keeps
// for the next receives (memory of dropped or released results, waiting
// to be reused; memory in use is not counted), gives back what it holds
// beyond, and returns the previous limit. 0 turns reuse off. The default
// is the size in the environment variable TDMPI_RECV_POOL ("2GiB") or an
// eighth of the machine's memory. See "Communication and memory" in the
// package documentation.
func SetRecvPoolLimit(n int64) int64 { return mem.SetPoolLimit(n) }

// checkRoomFor returns an error wrapping ErrNoMemory if a receive of total
// bytes into td would need a new storage that the machine cannot hold. A
// consolidated td whose storage has total bytes may be received into
// (consolidated is WithConsolidated), so it needs none.
func checkRoomFor(td *TensorDict, consolidated bool, total int64) error {
	if consolidated && td != nil {
		if st := td.ConsolidatedStorage(); st != nil && int64(st.Len()) == total {
			return nil
		}
	}
	return mem.CheckAvailable(total)
}

// ErrNoMemory is wrapped by the error of a receive (FromRemoteInit,
// Broadcast, AllGather, Scatter) whose peer announces a storage larger than
// the memory this process can still allocate: MemAvailable of
// /proc/meminfo, lowered to the room under the process's cgroup memory
// limit. The receive fails before allocating, and the sender is released
// as for any refused transfer. The check is not a reservation: memory
// other processes take afterwards can still run the machine out.
var ErrNoMemory = mem.ErrNoMemory
