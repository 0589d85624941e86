"""DDP vs FSDP vs HSDP across capped links on the emulated cluster: measured, beside advisor.topology.layouts.

Needs root and network namespaces (scripts/netcluster.py); prints why and exits 0 otherwise.

The experiment: benchmarks/emulated-cluster.toml (a communication-heavy tiny transformer, 2 gloo
ranks per emulated node, each node's link capped with tc tbf at --rate both ways, 0.2 core per
rank) calibrated at 4 ranks over 2 nodes in each layout through advisor's own `--emit torchrun`
path (the same runner as benchmarks/emulated_cluster.py): DDP (one all-reduce over 4 ranks), FSDP
(4-way shards: two all-gathers and a reduce-scatter across the link) and HSDP (shard in the node,
replicate across: only the all-reduce of each rank's half crosses the link). Printed per layout:
the measured median step, the bytes advisor.topology.layouts says go through each node's link per step, and
those bytes' seconds at the declared (tbf) rate. The question is whether the measured order and
gaps follow the per-link volumes: HSDP should send the fewest bytes over the link (2(r-1)/r·G per
node against FSDP's 3(N-1)/N·G and DDP's 2(N-1)/N·G).

Usage: sudo python benchmarks/emulated_layouts.py [--rate 200mbit] [--steps 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "scripts"))

from emulated_cluster import (  # noqa: E402 (after the path set-up)
    CPUS_PER_RANK,
    advisor,
    log,
    median_step,
    run_emitted,
    workload_at_rate,
)
from netcluster import EmulatedCluster, unavailable_reason  # noqa: E402

LAYOUTS = ("ddp", "fsdp", "hsdp")


def spec_with(strategy: str, base: Path, folder: Path) -> Path:
    import tomllib

    import tomli_w

    spec = tomllib.loads(base.read_text())
    spec["parallelism"]["strategy"] = strategy
    spec["calibration"]["gpus"] = [4]
    path = folder / f"{strategy}.toml"
    path.write_text(tomli_w.dumps(spec))
    return path


def declared(path: Path) -> dict:
    """advisor.topology.layouts at 4 ranks over 2 nodes: layout, link bytes and seconds at the declared speeds."""
    from advisor.spec import load_workload
    from advisor.topology.layouts import build

    w = load_workload(path)
    lay = build(w, np.array([4]), np.array([2]))
    links = lay.link_seconds(w)
    return {
        "layout": lay.label(),
        "inter_bytes_per_node": float(links.inter_bytes[0]),
        "intra_bytes_per_gpu": float(links.intra_bytes[0]),
        "comm_seconds_at_declared": float(
            links.intra_bandwidth[0] + links.inter_bandwidth[0] + links.intra_latency[0] + links.inter_latency[0]
        ),
    }


def experiment(rate: str, steps: int, warmup: int) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="advisor-layouts-"))
    try:
        base = workload_at_rate(rate, folder)
        out = {"rate": rate, "cpus_per_rank": CPUS_PER_RANK, "layouts": {}}
        with EmulatedCluster(nodes=2, rate=rate, cpus_per_node=CPUS_PER_RANK) as cluster:
            for strategy in LAYOUTS:
                spec = spec_with(strategy, base, folder)
                log(f"{strategy}: 4 ranks over 2 nodes at {rate} per node link")
                results = folder / f"results-{strategy}"
                run_emitted(cluster, spec, "4@2", results, steps, warmup)
                cal = folder / f"{strategy}-cal.toml"
                advisor("calibrate", spec, "--collect", results, "--out", cal)
                out["layouts"][strategy] = {"measured_step_seconds": median_step(cal, 4, 2), **declared(spec)}
        return out
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", default="200mbit")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    reason = unavailable_reason(cpu_budgets=True)
    if reason:
        print(f"skipped: {reason}")
        return 0
    started = time.monotonic()
    result = experiment(args.rate, args.steps, args.warmup)
    result["wall_seconds"] = time.monotonic() - started
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"emulated cluster: 4 ranks over 2 nodes, {args.rate} per node link, {CPUS_PER_RANK} core per rank")
    print(f"{'layout':6} {'measured step s':>16} {'link MB/node':>13} {'declared comm s':>16}  degrees")
    for name, r in result["layouts"].items():
        print(
            f"{name:6} {r['measured_step_seconds']:16.3f} {r['inter_bytes_per_node'] / 1e6:13.2f} "
            f"{r['comm_seconds_at_declared']:16.3f}  {r['layout']}"
        )
    print(f"wall {result['wall_seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
