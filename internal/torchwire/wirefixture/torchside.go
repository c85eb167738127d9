// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package wirefixture

import (
	"encoding/binary"

	"github.com/tdmpi/tdmpi/internal/torchwire"
	"github.com/tdmpi/tdmpi/mpi"
)

// SendAsTorch sends the recorded messages of md as torch's ProcessGroupMPI
// sent them: MPI_Isend + MPI_Wait of each to world rank dst on tag 0, or,
// with bcast, MPI_Bcast from this rank.
func SendAsTorch(md *Mode, bcast bool, dst int) error {
	w := mpi.World()
	n := []int64{int64(binary.LittleEndian.Uint64(md.Payload[0]))}
	if bcast {
		if err := mpi.Bcast(w, n, w.Rank()); err != nil {
			return err
		}
		if err := mpi.Bcast(w, md.Payload[1], w.Rank()); err != nil {
			return err
		}
		return mpi.Bcast(w, md.Payload[2], w.Rank())
	}
	for _, send := range []func() (*mpi.Request, error){
		func() (*mpi.Request, error) { return mpi.Isend(w, n, dst, torchwire.Tag) },
		func() (*mpi.Request, error) { return mpi.Isend(w, md.Payload[1], dst, torchwire.Tag) },
		func() (*mpi.Request, error) { return mpi.Isend(w, md.Payload[2], dst, torchwire.Tag) },
	} {
		r, err := send()
		if err != nil {
			return err
		}
		if _, err := r.Wait(); err != nil {
			return err
		}
	}
	return nil
}

// RecvAsTorch receives a transfer from world rank src as Python's
// from_remote_init does: MPI_Irecv + MPI_Wait with exact counts (the
// pickle's from message 0, the storage's from the pickle's _total_bytes),
// or, with bcast, three MPI_Bcast from src. It returns the three payloads.
func RecvAsTorch(src int, bcast bool) ([3][]byte, error) {
	w := mpi.World()
	var out [3][]byte
	get := func(b any) error {
		if bcast {
			switch x := b.(type) {
			case []int64:
				return mpi.Bcast(w, x, src)
			case []byte:
				return mpi.Bcast(w, x, src)
			}
		}
		var r *mpi.Request
		var err error
		switch x := b.(type) {
		case []int64:
			r, err = mpi.Irecv(w, x, src, torchwire.Tag)
		case []byte:
			r, err = mpi.Irecv(w, x, src, torchwire.Tag)
		}
		if err != nil {
			return err
		}
		_, err = r.Wait()
		return err
	}
	n := []int64{0}
	if err := get(n); err != nil {
		return out, err
	}
	out[0] = binary.LittleEndian.AppendUint64(nil, uint64(n[0]))
	out[1] = make([]byte, n[0])
	if err := get(out[1]); err != nil {
		return out, err
	}
	m, err := torchwire.ParseMeta(out[1], bcast, torchwire.Limits{})
	if err != nil {
		return out, err
	}
	out[2] = make([]byte, m.TotalBytes)
	return out, get(out[2])
}

// PlainMeta decodes a metadata pickle to plain values with every node's
// dimension names set to None, as tdmpi, which has no names, sends them:
// what a pickle Go sends back must equal, for the one Python sent.
func PlainMeta(p []byte) (any, error) {
	v, err := torchwire.Decode(p, torchwire.Limits{})
	if err != nil {
		return nil, err
	}
	plain, err := torchwire.Plain(v)
	if err != nil {
		return nil, err
	}
	var clear func(v any)
	clear = func(v any) {
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		if cm, ok := m["cls_metadata"].(map[string]any); ok {
			if bs, ok := cm["batch_size"].([]any); ok {
				cm["names"] = make([]any, len(bs))
			}
		}
		for _, e := range m {
			clear(e)
		}
	}
	clear(plain)
	return plain, nil
}
