"""How the ranks of one calibration find each other, and what they exchange besides tensors.

Local runs (advisor.calibrate.launchers.local): the launcher binds rank 0's store socket to 127.0.0.1
itself and hands the listening socket to rank 0 (`ADVISOR_STORE_FD`), so the c10d TCPStore that
rendezvous runs through listens on loopback only (torch's default TCPStore listens on every
interface, `*:PORT`, even with MASTER_ADDR=127.0.0.1: a process on another machine could join or
feed the store), and no other process can take the port between choosing and binding it.
TCPStore's `master_listen_fd` (torch >= 2.0) serves an already-bound socket.

Multi-node runs (torchrun, advisor.calibrate.launchers): torchrun's c10d rendezvous must listen where
the other nodes reach it; the store has no authentication, so it must be on a trusted network
(README, Calibrate). Nothing here is pickled: hosts are exchanged as fixed-size UTF-8 byte
tensors, not `all_gather_object` pickles.
"""

from __future__ import annotations

import os
from datetime import timedelta

#: Environment variable holding rank 0's inherited, already-listening store socket (local runs).
STORE_FD_ENV = "ADVISOR_STORE_FD"

#: Bytes of one exchanged string: a host name is at most 255 (RFC 1035), and one length byte holds it.
STRING_BYTES = 255


def init_process_group(backend: str, timeout: timedelta, device_id=None) -> None:
    """torch.distributed.init_process_group from the env:// variables; under the local launcher
    through a TCPStore served on the loopback socket it handed to rank 0. `device_id` (the rank's
    CUDA device) binds the NCCL communicator to it at init (torch/distributed/distributed_c10d.py:
    eager communicator creation, and barriers know their device); None on CPU."""
    import torch.distributed as dist

    fd = os.environ.get(STORE_FD_ENV)
    if fd is None:
        dist.init_process_group(backend, timeout=timeout, device_id=device_id)
        return
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    if rank == 0:
        store = dist.TCPStore(host, port, world, True, timeout, master_listen_fd=int(fd))
    else:
        store = dist.TCPStore(host, port, world, False, timeout)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world, timeout=timeout, device_id=device_id)


def all_gather_strings(text: str, device) -> list[str]:
    """Every rank's `text` (at most STRING_BYTES of UTF-8), gathered as byte tensors."""
    import torch
    import torch.distributed as dist

    raw = text.encode("utf-8")[:STRING_BYTES]
    mine = torch.zeros(STRING_BYTES + 1, dtype=torch.uint8, device=device)
    mine[0] = len(raw)
    mine[1:1 + len(raw)] = torch.tensor(list(raw), dtype=torch.uint8, device=device) if raw else mine[1:1]
    parts = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, mine)
    out = []
    for part in parts:
        data = part.cpu().tolist()
        out.append(bytes(data[1:1 + data[0]]).decode("utf-8", errors="replace"))
    return out
