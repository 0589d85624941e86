"""GPU placements: `N` or `N@M` (N GPUs spread over M nodes), as typed after `--gpus`.

A bare `N` fills nodes: M = ceil(N / gpus_per_node) (`Workload.nodes`). One place parses the
syntax so every command (predict, recommend, backtest) reads it the same way.
"""

from __future__ import annotations

from advisor.errors import InputError


def parse_placements(text: str, gpus_per_node: int, where: str = "--gpus") -> list[tuple[int, int]]:
    """'16,64,64@16' -> [(16, 2), (64, 8), (64, 16)] for 8 GPUs per node.

    Raises InputError (`--gpus: ...`) on anything that is not a positive count, or on a
    placement that cannot exist (more nodes than GPUs, more GPUs on a node than it holds).
    """
    out: list[tuple[int, int]] = []
    items = [t.strip() for t in text.split(",")]
    if not text.strip() or any(not t for t in items):
        raise InputError.at(where, "", "expected comma-separated GPU counts like 16,64,64@16", text)
    from advisor.spec import MAX_GPUS_LIMIT

    for item in items:
        gpus_text, at, nodes_text = item.partition("@")
        try:
            if at and not nodes_text.strip():
                raise ValueError(item)
            gpus = int(gpus_text)
            nodes = int(nodes_text) if nodes_text else -(-gpus // gpus_per_node)
        except ValueError:
            raise InputError.at(where, "", "expected N or N@M with whole numbers", item) from None
        if gpus < 1 or nodes < 1:
            raise InputError.at(where, "", "GPU and node counts must be >= 1", item)
        if gpus > MAX_GPUS_LIMIT:
            raise InputError.at(where, "", f"at most {MAX_GPUS_LIMIT} GPUs (2^20, the largest count a spec may ask "
                                "about: cluster.max_gpus)", item)
        if nodes > gpus:
            raise InputError.at(where, "", "more nodes than GPUs", item)
        if -(-gpus // nodes) > gpus_per_node:
            raise InputError.at(
                where, "", f"needs more than {gpus_per_node} GPUs on a node (cluster.gpus_per_node)", item
            )
        out.append((gpus, nodes))
    return out

