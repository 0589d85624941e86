"""Collective probes timed as nccl-tests times them, and the small-message latency fitted from them.

nccl-tests (NVIDIA/nccl-tests `src/common.cu`, `BenchTime`) runs warm-up calls untimed, then a
loop of `iters` calls between two CUDA events and reports elapsed / iters, so the host's launch
and synchronisation overhead (tens of microseconds) is paid once per loop, not per call. Here:
`warm` untimed calls, then `batches` loops of `calls` calls, each loop after a barrier (every rank
starts together) and timed between CUDA events on the current stream (on CPU, where gloo runs
synchronously, between host clocks around the loop); a loop's time / calls is one sample, the
slowest rank's sample is the pace (max over ranks), and the median over loops is recorded. busbw
by the nccl-tests definitions (doc/PERFORMANCE.md). Pure Python at import: the worker passes its
Rank (torch, device, barrier, max_over_ranks) in.
"""

from __future__ import annotations

import statistics
import time

#: (untimed calls, timed loops, calls per loop): nccl-tests' defaults are 5 warm-up and 20 timed
#: iterations; on CPU fewer, since one 64 MiB gloo all-reduce takes ~0.1 s.
PROBE_REPEATS = {"cpu": (1, 3, 2), "cuda": (5, 5, 20)}


#: Small messages probed for the latency fit only (below plan.PROBE_MIN_BYTES, where the latency
#: is most of a collective's time; not written as [[collectives]] rows, which start at 1 MiB).
LATENCY_BYTES = (8 << 10, 64 << 10)


def latency_sizes(ranks: int) -> list[int]:
    """LATENCY_BYTES rounded down to whole fp32 elements per rank (reduce_scatter and all_gather split evenly)."""
    unit = 4 * ranks
    return sorted({max(unit, b // unit * unit) for b in LATENCY_BYTES})


def _collective(dist, op: str, full, part, group):
    # torch >= 2.10 names them *_single (the *_tensor names are deprecated aliases).
    reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    if op == "all_reduce":
        return lambda: dist.all_reduce(full, group=group)
    if op == "reduce_scatter":
        return lambda: reduce_scatter(part, full, group=group)
    return lambda: all_gather(full, part, group=group)


def time_loop(rank, run, calls: int) -> float:
    """Seconds per call of `calls` back-to-back calls of `run` on this rank, after a barrier."""
    torch = rank.torch
    rank.barrier()  # every group runs at once, as in a step where all groups communicate
    rank.sync()
    if rank.cuda:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            run()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / calls  # elapsed_time is in milliseconds
    begin = time.perf_counter()
    for _ in range(calls):
        run()
    return (time.perf_counter() - begin) / calls


def probe_one(rank, op: str, size: int, group, ranks: list[int], name: str) -> dict:
    """One probe row: `seconds` is the median over loops of the slowest rank's seconds per call,
    `rank_seconds` every rank's own median (what the collective cost each rank)."""
    from advisor.topology.collectives import bus_bandwidth_gbps

    torch = rank.torch
    warm, batches, calls = PROBE_REPEATS["cuda" if rank.cuda else "cpu"]
    n = len(ranks)
    full = torch.ones(size // 4, dtype=torch.float32, device=rank.device)
    part = torch.ones(size // 4 // n, dtype=torch.float32, device=rank.device)
    run = _collective(rank.dist, op, full, part, group)
    for _ in range(warm):
        run()
    times = [time_loop(rank, run, calls) for _ in range(batches)]
    seconds = statistics.median(rank.max_over_ranks(times))
    mine = [0.0] * rank.world
    mine[rank.rank] = statistics.median(times)
    per_rank = rank.max_over_ranks(mine)  # each slot is written by one rank only
    nodes = len({r // rank.local_world for r in ranks})
    return {"op": op, "gpus": n, "nodes": nodes, "bytes": size, "seconds": seconds,
            "busbw": bus_bandwidth_gbps(op, n, size, seconds), "group": name,
            "rank_seconds": [per_rank[r] for r in ranks]}


def fit_latency(points: list[tuple[int, float]]) -> float | None:
    """The intercept `a` of seconds = a + bytes / bw fitted to (bytes, seconds) by least squares in
    relative error (each point weighted by 1/seconds², so the small messages, where the latency
    shows, are not drowned by the large ones): the small-message latency of the alpha-beta model.
    None with fewer than 2 sizes, or when the fit gives no positive latency (no latency is
    measurable from these sizes: recording 0 would claim a free collective)."""
    if len({b for b, _ in points}) < 2:
        return None
    w = [1.0 / (s * s) for _, s in points]
    sw = sum(w)
    mb = sum(wi * b for wi, (b, _) in zip(w, points, strict=True)) / sw
    ms = sum(wi * s for wi, (_, s) in zip(w, points, strict=True)) / sw
    sbb = sum(wi * (b - mb) ** 2 for wi, (b, _) in zip(w, points, strict=True))
    sbs = sum(wi * (b - mb) * (s - ms) for wi, (b, s) in zip(w, points, strict=True))
    slope = sbs / sbb
    latency = ms - slope * mb
    return latency if latency > 0 and slope > 0 else None


def fit_latencies(collectives: list[dict]) -> dict[str, float]:
    """{"<op>/<group>": latency seconds} for every probed (op, group) whose fit gives one."""
    series: dict[str, list[tuple[int, float]]] = {}
    for c in collectives:
        series.setdefault(f"{c['op']}/{c.get('group', 'world')}", []).append((int(c["bytes"]), float(c["seconds"])))
    fits = {key: fit_latency(points) for key, points in sorted(series.items())}
    return {key: value for key, value in fits.items() if value is not None}
