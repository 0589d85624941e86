"""Which NCCL algorithm a collective probe ran, and the bus bandwidth it can reach on a declared link.

nccl-tests prints busbw = algbw x 2(n-1)/n for an all-reduce (NVIDIA/nccl-tests doc/PERFORMANCE.md):
the bytes a *ring* moves per rank. Other algorithms move fewer bytes through the bottleneck link for
the same buffer, so their printed busbw can exceed the link's rate (NVIDIA/nccl-tests#196,
NVIDIA/nccl#946: a 2-node all-reduce reports more bus bandwidth than the NICs carry). Per node and
direction, for a buffer of S bytes on N ranks over n nodes (docs/formats.md, "Collective algorithms"):

- ring (and PAT): 2(N-1)/N·S per rank and per node, the busbw definition itself: ceiling factor 1;
- tree (NCCL's double binary tree across nodes, a chain inside each): each node is an inner vertex of
  one tree and a leaf of the other, 2·S per node (NCCL's tuning model, src/graph/tuning.cc: tree
  algbw = link bandwidth / 2), ceiling factor (N-1)/N; on 2 nodes each node is the root of one tree
  and the only child of the other, S per node, ceiling factor 2(N-1)/N (1.875 on 16 ranks);
- NVLS (NVLink SHARP, one node): each GPU sends S to the switch and receives S reduced, 2(N-1)/N;
  NVLS tree across nodes as tree;
- CollNet (SHARP in the network switch): each node sends S and receives S, 2(N-1)/N.

Reduce-scatter and all-gather are counted as rings (factor 1) whatever the algorithm. The algorithm
comes from `NCCL_ALGO` in the log (an environment dump, `-x NCCL_ALGO=Tree`, or NCCL's INFO line
`NCCL_ALGO set by environment to Tree`) when it names exactly one, else the one NCCL picks for large
all-reduces at that node count: tree on 2 nodes, ring otherwise (`expected_algorithm`).
"""

from __future__ import annotations

import re

#: Algorithm names as stored in a calibration file's [[collectives]] `algorithm`.
ALGORITHMS = ("ring", "tree", "nvls", "nvls_tree", "collnet_direct", "collnet_chain", "pat")

#: NCCL_ALGO spellings (case-insensitive) -> stored name.
_SPELLINGS = {"ring": "ring", "tree": "tree", "nvls": "nvls", "nvlstree": "nvls_tree",
              "collnet": "collnet_direct", "collnetdirect": "collnet_direct", "collnetchain": "collnet_chain",
              "pat": "pat"}

_ALGO = re.compile(r"NCCL_ALGO\s*(?:=|\s+set by environment to\s+)\s*([\^A-Za-z_,;]+)")


def algorithm_from_text(text: str) -> str | None:
    """The one algorithm `NCCL_ALGO` names in `text` (last setting wins), or None: unset, a list
    (`Tree,Ring`: NCCL still chooses), an exclusion (`^NVLS`) or an unknown name."""
    found = _ALGO.findall(text)
    if not found:
        return None
    value = found[-1].strip().lower()
    if value.startswith("^") or "," in value or ";" in value:
        return None
    return _SPELLINGS.get(value.replace("_", ""))


def expected_algorithm(op: str, nodes: int) -> str:
    """The algorithm NCCL runs for a large `op` when none was forced: tree for an all-reduce on 2
    nodes (both trees of height 1 carry half the bytes of a ring), ring otherwise."""
    return "tree" if op == "all_reduce" and nodes == 2 else "ring"


def busbw_ceiling_factor(algorithm: str | None, op: str, gpus: int, nodes: int) -> float:
    """Highest nccl-tests busbw `algorithm` reaches, in units of the declared bottleneck bus bandwidth
    (module docstring): 1 for a ring; None means `expected_algorithm(op, nodes)`."""
    algo = algorithm or expected_algorithm(op, nodes)
    if op != "all_reduce" or algo in ("ring", "pat"):
        return 1.0
    ring = 2.0 * (gpus - 1) / gpus
    if algo in ("tree", "nvls_tree"):
        return ring if nodes == 2 else ring / 2
    return ring  # nvls, collnet_direct, collnet_chain: each GPU (node) sends S and receives S
