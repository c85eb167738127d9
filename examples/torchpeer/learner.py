# learner.py: the PyTorch side of examples/torchpeer (see main.go for the command line).
#
# World rank 0 runs this script; the Go program runs on world ranks 1..N. Python sends a
# TensorDict with tensordict's init_remote (every dtype, nesting, a non-tensor value,
# locked), the first Go rank echoes it back with InitRemote(WithTorch()) plus a reply
# leaf, and Python checks every byte. TORCHPEER_MODE=bcast uses use_broadcast=True in
# both directions (every rank takes part).
import os
import sys

import torch
import torch.distributed as dist
from tensordict import TensorDict

MODE = os.environ.get("TORCHPEER_MODE", "p2p")
BCAST = MODE == "bcast"
GO = 1  # world rank of the first Go rank


def make_td():
    n = 3
    leaves = {
        # complex128 first here and after the 48 bytes of obs: 16-aligned, as torch requires
        "complex128": torch.tensor([0, 1 + 2j, -2.5 - 4j], dtype=torch.complex128),
        "bool": torch.tensor([True, False, True]),
        "uint8": torch.tensor([0, 127, 255], dtype=torch.uint8),
        "int8": torch.tensor([-128, 0, 127], dtype=torch.int8),
        "int16": torch.tensor([-32768, 1, 32767], dtype=torch.int16),
        "int32": torch.tensor([-(2**31), 2, 2**31 - 1], dtype=torch.int32),
        "int64": torch.tensor([-(2**63), 3, 2**63 - 1], dtype=torch.int64),
        "float16": torch.tensor([-0.0, 1.5, 65504.0], dtype=torch.float16),
        "bfloat16": torch.tensor([1.0, -2.0, 3.0e38], dtype=torch.bfloat16),
        "float32": torch.tensor([float("inf"), -1.25, 1e-45], dtype=torch.float32),
        "float64": torch.tensor([0.1, -0.0, 2.0**-1074], dtype=torch.float64),
        "complex64": torch.tensor([3 - 1j, 0, 1e30j], dtype=torch.complex64),
    }
    td = TensorDict({"obs": torch.arange(12, dtype=torch.float32).reshape(n, 4)}, batch_size=[n])
    td["dtypes"] = TensorDict(leaves, batch_size=[n])
    td["nested", "deeper", "x"] = torch.ones(n, 2, 2, dtype=torch.float64)
    td["note"] = "from python"
    return td.lock_()


def bytes_of(t):
    return t.contiguous().view(-1).view(torch.uint8) if t.numel() else t.new_empty(0, dtype=torch.uint8)


def main():
    dist.init_process_group("mpi")
    rank, size = dist.get_rank(), dist.get_world_size()
    if rank != 0 or size < 2:
        sys.exit(f"learner.py: run as world rank 0 of at least 2 (got rank {rank} of {size})")
    td = make_td()
    if BCAST:
        td.init_remote(use_broadcast=True)
    else:
        td.init_remote(dst=GO)
    back = TensorDict.from_remote_init(src=GO, use_broadcast=BCAST)

    bad = []
    for key in td.keys(include_nested=True, leaves_only=True):
        want = td.get(key)
        if not isinstance(want, torch.Tensor):
            continue
        got = back.get(key)
        if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(bytes_of(got), bytes_of(want)):
            bad.append(key)
    if back["note"] != "from python":
        bad.append("note")
    if not torch.equal(back["reply"], td["obs"].sum(-1) * 2):
        bad.append("reply")
    if back.batch_size != td.batch_size or not back.is_locked:
        bad.append("batch size or lock")
    if back["from"] != "go":
        bad.append("from")
    if bad:
        sys.exit(f"FAIL: learner.py ({MODE}): wrong entries back from Go: {bad}")
    # One write for the line and its newline: print writes them apart, and
    # unbuffered (PYTHONUNBUFFERED), mpirun --tag-output then tagged the
    # newline alone and the line ended in "OK[1,0]<stdout>:".
    sys.stdout.write(f"python: {MODE}: {len(list(back.keys(True, True)))} entries back from Go, every byte as sent: OK\n")
    sys.stdout.flush()
    dist.destroy_process_group()  # joins torch's MPI worker thread before exit


if __name__ == "__main__":
    main()
