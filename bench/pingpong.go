// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package bench

// #cgo pkg-config: ompi-c
// #include <mpi.h>
//
// // pingpong runs iters round trips of n bytes at buf with World rank peer;
// // the initiator sends first. It returns an MPI error code and stores the
// // elapsed seconds.
// static int pingpong(void *buf, int n, int peer, int initiator, int iters, int tag, double *secs) {
// 	int rc = MPI_SUCCESS;
// 	double t0 = MPI_Wtime();
// 	for (int i = 0; i < iters && rc == MPI_SUCCESS; i++) {
// 		if (initiator) {
// 			rc = MPI_Send(buf, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD);
// 			if (rc == MPI_SUCCESS)
// 				rc = MPI_Recv(buf, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
// 		} else {
// 			rc = MPI_Recv(buf, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
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
	var secs C.double
	if rc := C.pingpong(p, C.int(len(buf)), C.int(peer), init, C.int(iters), C.int(tag), &secs); rc != C.MPI_SUCCESS {
		return 0, fmt.Errorf("bench: PingPong: MPI error code %d", int(rc))
	}
	return float64(secs), nil
}
