"""Collective probes in nccl-tests' own columns, so users can put them beside their nccl-tests runs.

nccl-tests (NVIDIA/nccl-tests, doc/PERFORMANCE.md) prints, per message size, `size` (bytes of the
full buffer), `count` (elements), `type`, `redop`, `root`, `time` (us), `algbw` = size / time and
`busbw` = algbw x 2(n-1)/n for all-reduce, x (n-1)/n for reduce-scatter and all-gather, in GB/s of
1e9 bytes. One block per op and placement, headed like `all_reduce_perf`'s output. advisor's
worker probes float32 buffers (`type float`); a probe whose file does not say is shown as `-`.
nccl-tests prints an out-of-place and an in-place timing per size; advisor times one (all_reduce
in place, reduce_scatter and all_gather out of place), so there is one time/algbw/busbw triple.

Also the calibration's `--json` document and the run summary whose busbw columns name their op.
"""

from __future__ import annotations

from advisor.topology.collectives import busbw_factor

#: nccl-tests' names of the ops and their reduction (`redop`); all-gather reduces nothing.
PERF_NAME = {"all_reduce": "all_reduce_perf", "reduce_scatter": "reduce_scatter_perf", "all_gather": "all_gather_perf"}
REDOP = {"all_reduce": "sum", "reduce_scatter": "sum", "all_gather": "none"}
OPS = tuple(PERF_NAME)
#: Bytes per element of nccl-tests' type names (advisor's probes: float32, `float`).
TYPE_BYTES = {"float": 4, "half": 2, "bfloat16": 2, "double": 8, "int8": 1, "int32": 4}


def _type(cal, probe) -> str | None:
    declared = getattr(probe, "dtype", None)
    if declared:
        return declared
    return "float" if cal.provenance.source == "measured" and probe.source is None else None


def probe_rows(cal) -> list[dict]:
    """One dict per probe, in nccl-tests' columns (time in us, bandwidths in GB/s), sorted by
    op, placement and size."""
    rows = []
    for p in sorted(cal.collectives, key=lambda c: (OPS.index(c.op), c.gpus, c.nodes, c.bytes)):
        dtype = _type(cal, p)
        algbw = p.busbw / busbw_factor(p.op, p.gpus)  # the file's busbw, as published or measured
        rows.append({
            "op": p.op, "gpus": p.gpus, "nodes": p.nodes, "size": p.bytes,
            "count": p.bytes // TYPE_BYTES[dtype] if dtype in TYPE_BYTES else None, "type": dtype,
            "redop": REDOP[p.op], "root": -1, "time_us": p.seconds * 1e6, "algbw": algbw,
            "busbw": p.busbw,
        })
    return rows


_HEADER = (
    "#       size         count      type   redop    root     time   algbw   busbw",
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)",
)


def probe_text(cal) -> str:
    """The probes as nccl-tests prints them: a `# OP_perf: N GPUs over M nodes` line, its two header
    lines, then one line per size. Empty when the calibration holds no probes."""
    from advisor.text import plural

    blocks, current = [], None
    for r in probe_rows(cal):
        key = (r["op"], r["gpus"], r["nodes"])
        if key != current:
            current = key
            blocks.append(f"# {PERF_NAME[r['op']]} equivalent: {plural(r['gpus'], 'GPU')} over "
                          f"{plural(r['nodes'], 'node')} (busbw = algbw x {_factor(r['op'], r['gpus'])})")
            blocks.extend(_HEADER)
        count = "-" if r["count"] is None else str(r["count"])
        blocks.append(f"{r['size']:>12} {count:>13} {r['type'] or '-':>9} {r['redop']:>7} {r['root']:>7} "
                      f"{r['time_us']:>8.1f} {r['algbw']:>7.2f} {r['busbw']:>7.2f}")
    return "\n".join(blocks) + ("\n" if blocks else "")


def _factor(op: str, gpus: int) -> str:
    return f"{'2' if op == 'all_reduce' else ''}({gpus}-1)/{gpus}"


def busbw_columns(cal, gpus: int, nodes: int) -> dict[str, tuple[float, int] | None]:
    """Per op: (busbw GB/s, message bytes) of the largest message probed at this placement, or None."""
    out = {}
    for op in OPS:
        probes = [c for c in cal.collectives if c.op == op and c.gpus == gpus and c.nodes == nodes]
        largest = max(probes, key=lambda c: c.bytes) if probes else None
        out[op] = None if largest is None else (largest.busbw, largest.bytes)
    return out


def calibration_document(workload, cal, path, rows) -> dict:
    """`advisor calibrate --json`: the file written, the per-run summary and the probes."""
    runs = []
    for r in rows:
        doc = dict(r.__dict__)
        doc.pop("busbw", None)
        doc["busbw"] = {op: None if v is None else {"busbw": v[0], "size": v[1]}
                        for op, v in busbw_columns(cal, r.gpus, r.nodes).items()}
        runs.append(doc)
    return {"workload": workload.name, "file": str(path), "environment": cal.environment,
            "runs": runs, "collectives": probe_rows(cal)}


def print_calibration(workload, cal, path, rows) -> None:
    """The run summary (busbw per op, at the largest message, naming the op and the size) and the
    probes in nccl-tests' columns; with --json one document instead."""
    from advisor.cli.output import current
    from advisor.cli.tables import Column, build, show
    from advisor.text import number

    out = current()
    if out.json:
        out.result(calibration_document(workload, cal, path, rows))
        return
    env = cal.environment
    columns = [Column(name) for name in ("GPUs", "nodes", "median step s", "samples/s", "speedup", "efficiency",
                                         "exposed comm", *(f"{op} busbw GB/s" for op in OPS))]
    cells = []
    for r in rows:
        bw = busbw_columns(cal, r.gpus, r.nodes)
        cells.append([
            str(r.gpus), str(r.nodes), number(r.step_seconds, 4), number(r.throughput, 4), f"{r.speedup:.2f}x",
            f"{r.efficiency:.0%}", "-" if r.exposed_comm is None else f"{r.exposed_comm:.0%}",
            *("-" if bw[op] is None else f"{number(bw[op][0])} ({_size(bw[op][1])})" for op in OPS),
        ])
    table = build(f"{workload.name}: calibration ({env.get('backend', '?')}, {env.get('device', '?')})", columns,
                  cells)
    console = out.console()
    show(console, table, "busbw: nccl-tests bus bandwidth of the largest message probed (size in brackets)")
    text = probe_text(cal)
    if text:
        console.print(text, markup=False, highlight=False, soft_wrap=True, end="")


def _size(nbytes: int) -> str:
    """Message size the way nccl-tests' -b/-e flags take it: 1M, 64M, 1G (powers of 1024)."""
    for scale, letter in ((2**30, "G"), (2**20, "M"), (2**10, "K")):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g}{letter}"
    return f"{nbytes}B"
