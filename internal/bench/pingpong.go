// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

//go:build cgo && !nompi

package bench

// #cgo pkg-config: ompi-c
// #include <mpi.h>
//
// // recv receives n bytes with MPI_Recv, or with MPI_Mprobe and MPI_Mrecv.
// static int recv(void *buf, int n, int peer, int tag, int mprobe) {
// 	if (!mprobe) return MPI_Recv(buf, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
// 	MPI_Message m;
// 	MPI_Status st;
// 	int rc = MPI_Mprobe(peer, tag, MPI_COMM_WORLD, &m, &st);
// 	return rc != MPI_SUCCESS ? rc : MPI_Mrecv(buf, n, MPI_BYTE, &m, &st);
// }
//
// // pingpong runs iters round trips of n bytes at buf with World rank peer;
// // the initiator sends first. It returns an MPI error code and stores the
// // elapsed seconds.
// static int pingpong(void *buf, int n, int peer, int initiator, int iters, int tag, int mprobe, double *secs) {
// 	int rc = MPI_SUCCESS;
// 	double t0 = MPI_Wtime();
// 	for (int i = 0; i < iters && rc == MPI_SUCCESS; i++) {
// 		if (initiator) {
// 			rc = MPI_Send(buf, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD);
// 			if (rc == MPI_SUCCESS)
// 				rc = recv(buf, n, peer, tag, mprobe);
// 		} else {
// 			rc = recv(buf, n, peer, tag, mprobe);
// 			if (rc == MPI_SUCCESS)
// 				rc = MPI_Send(buf, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD);
// 		}
// 	}
// 	*secs = MPI_Wtime() - t0;
// 	return rc;
// }
import "C"

import (
	"fmt"
	"math"
	"unsafe"
)

// PingPong runs iters round trips of buf between the calling process and
// World rank peer, entirely in C with MPI_Send and MPI_Recv of MPI_BYTE, and
// returns the elapsed seconds. The initiator sends first; the peer must
// call PingPong with the same length, iters and tag and initiator false.
func PingPong(buf []byte, peer int, initiator bool, iters, tag int) (float64, error) {
	return pingPong(buf, peer, initiator, iters, tag, false)
}

// PingPongMprobe is PingPong receiving with MPI_Mprobe and MPI_Mrecv, as
// package mpi's Recv does: it measures what the matched probe costs in C.
func PingPongMprobe(buf []byte, peer int, initiator bool, iters, tag int) (float64, error) {
	return pingPong(buf, peer, initiator, iters, tag, true)
}

func pingPong(buf []byte, peer int, initiator bool, iters, tag int, mprobe bool) (float64, error) {
	if len(buf) > math.MaxInt32 {
		return 0, fmt.Errorf("bench: PingPong: buffer of %d bytes exceeds a C int count", len(buf))
	}
	var p unsafe.Pointer
	if len(buf) > 0 {
		p = unsafe.Pointer(unsafe.SliceData(buf))
	}
	init := C.int(0)
	if initiator {
		init = 1
	}
	mp := C.int(0)
	if mprobe {
		mp = 1
	}
	var secs C.double
	if rc := C.pingpong(p, C.int(len(buf)), C.int(peer), init, C.int(iters), C.int(tag), mp, &secs); rc != C.MPI_SUCCESS {
		return 0, fmt.Errorf("bench: PingPong: MPI error code %d", int(rc))
	}
	return float64(secs), nil
}
