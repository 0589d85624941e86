"""GPU placements: `N` or `N@M` (N GPUs spread over M nodes), as typed after `--gpus`.

A bare `N` fills nodes: M = ceil(N / gpus_per_node) (advisor.spec.nodes_filled, as `Workload.nodes`).
One place parses the syntax so every command (predict, recommend, backtest) reads it the same way, and one rule
(`check_placement`) says which placements exist, for typed placements and imported logs alike:
at least one GPU and node, no more nodes than GPUs, no node over `cluster.gpus_per_node`, and
every node running the same number of ranks (`8@3` is refused: torchrun, Slurm and SkyPilot
start the same number of processes on each node, and the model assumes symmetric nodes).
Measurement CSVs are records of other systems and keep the placements they report (Pollux's
traces hold 3 GPUs over 2 nodes): the rule is for what advisor is asked to run or import.
"""

from __future__ import annotations

import re

from advisor.errors import InputError

_COUNT = re.compile(r"[+-]?[0-9]{1,12}", re.ASCII)


def check_placement(gpus: int, nodes: int, gpus_per_node: int, where: str, item: object) -> None:
    """InputError (`WHERE: ... (got ITEM)`) unless N GPUs over M nodes can exist (module docstring)."""
    from advisor.spec import MAX_GPUS_LIMIT, splits_evenly, uneven_message

    if gpus < 1 or nodes < 1:
        raise InputError.at(where, "", "GPU and node counts must be >= 1", item)
    if gpus > MAX_GPUS_LIMIT:
        raise InputError.at(where, "", f"at most {MAX_GPUS_LIMIT} GPUs (2^20, the largest count a spec may ask "
                            "about: cluster.max_gpus)", item)
    if nodes > gpus:
        raise InputError.at(where, "", "more nodes than GPUs", item)
    if -(-gpus // nodes) > gpus_per_node:
        raise InputError.at(where, "", f"needs more than {gpus_per_node} GPUs on a node (cluster.gpus_per_node)", item)
    if not splits_evenly(gpus, nodes):
        raise InputError.at(where, "", uneven_message(gpus, nodes), item)


def parse_placements(text: str, gpus_per_node: int, where: str = "--gpus", *,
                     keep_repeats: bool = False) -> list[tuple[int, int]]:
    """'16,64,64@16' -> [(16, 2), (64, 8), (64, 16)] for 8 GPUs per node.

    Raises InputError (`--gpus: ...`) on anything that is not a positive count, or on a
    placement that cannot exist (more nodes than GPUs, more GPUs on a node than it holds).
    A placement given twice (`8,8`, or `16,16@2` at 8 per node) is kept once, where it first
    appears: a user listing counts to predict or price asks for one row per placement (predict printed
    two identical rows). `keep_repeats` returns them for a caller that refuses a repeat (calibrate:
    each placement writes its own result folder, and measuring one twice is a typo to say).
    """
    from advisor.spec import nodes_filled

    out: list[tuple[int, int]] = []
    items = [t.strip() for t in text.split(",")]
    if not text.strip() or any(not t for t in items):
        raise InputError.at(where, "", "expected comma-separated GPU counts like 16,64,64@16", text)
    for item in items:
        gpus_text, at, nodes_text = item.partition("@")
        if not _COUNT.fullmatch(gpus_text.strip()) or (at and not _COUNT.fullmatch(nodes_text.strip())):
            # ASCII digits, bounded before int(): not '٨', '8²', '8_0' or 5,000 digits
            raise InputError.at(where, "", "expected N or N@M with whole numbers", item)
        gpus = int(gpus_text)
        nodes = int(nodes_text) if at else nodes_filled(gpus, gpus_per_node)
        check_placement(gpus, nodes, gpus_per_node, where, item)
        if keep_repeats or (gpus, nodes) not in out:
            out.append((gpus, nodes))
    return out


def check_layout_splits(w, placements: list[tuple[int, int]], where: str, item: object) -> None:
    """Refuse (InputError at `where`) the first placement the spec's parallel layout cannot split, by the
    layout's own rule (advisor.topology.layouts.split_rule): the worker would refuse it only after every
    rank had started, on rented nodes for an emitted job."""
    from advisor.text import plural
    from advisor.topology.layouts import build, split_rule

    valid = build(w, [n for n, _ in placements], [m for _, m in placements]).valid
    for (n, m), ok in zip(placements, valid.tolist(), strict=True):
        if not ok:
            raise InputError.at(where, "", f"the parallel layout cannot split {plural(n, 'GPU')} over "
                                f"{plural(m, 'node')}: {split_rule(w)}", item)
