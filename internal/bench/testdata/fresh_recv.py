#!/usr/bin/env python3
# fresh_recv.py: the mpi4py + numpy baseline of issue 17. Under `mpirun -np 2`,
# rank 0 sends SIZE bytes to rank 1 ROUNDS times per mode, interleaved; rank 1
# receives with comm.Recv into a fresh np.empty each time ("fresh") or into one
# reused buffer ("reused"). Prints the one-way bandwidth of each round and the
# median per mode, in GB/s, on rank 1.
#
# Usage: mpirun -np 2 python3 fresh_recv.py [SIZE_MIB] [ROUNDS]
import statistics
import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
if comm.Get_size() != 2:
    sys.exit("fresh_recv.py: run with mpirun -np 2")
n = int(sys.argv[1] if len(sys.argv) > 1 else 256) << 20
rounds = int(sys.argv[2] if len(sys.argv) > 2 else 10)
rank = comm.Get_rank()
send = np.arange(n, dtype=np.uint8) if rank == 0 else None
reused = np.empty(n, dtype=np.uint8) if rank == 1 else None
if rank == 1:
    reused[:] = 1  # fault it in once, as a buffer in use would be
times = {"fresh": [], "reused": []}
for r in range(rounds):
    for mode in ("fresh", "reused"):
        comm.Barrier()
        t0 = MPI.Wtime()
        if rank == 0:
            comm.Send([send, MPI.BYTE], dest=1, tag=7)
            comm.Recv([np.empty(1, np.uint8), MPI.BYTE], source=1, tag=8)
        else:
            buf = np.empty(n, dtype=np.uint8) if mode == "fresh" else reused
            comm.Recv([buf, MPI.BYTE], source=0, tag=7)
            dt = MPI.Wtime() - t0
            comm.Send([np.empty(1, np.uint8), MPI.BYTE], dest=0, tag=8)
            times[mode].append(dt)
            del buf
if rank == 1:
    for mode, ts in times.items():
        gbs = [n / t / 1e9 for t in ts]
        print(f"mpi4py {mode:6s} {n >> 20} MiB one-way: median {statistics.median(gbs):.2f} GB/s, "
              f"rounds {' '.join(f'{g:.2f}' for g in gbs)}")
