"""Calibrate -> fit -> predict across nodes on an emulated cluster, against a real 8-rank run.

Needs root and network namespaces (scripts/netcluster.py); prints why and exits 0 otherwise.

The experiment (issue 6), all through advisor's own multi-node path:

1. A 4-node emulated cluster, each node's link capped with tc tbf at --rate both ways, each rank
   given a --cpus-per-rank CPU budget (so compute grows with ranks as it does with GPUs).
   `advisor calibrate benchmarks/emulated-cluster.toml --emit torchrun --gpus 1@1,2@1,4@2` prints
   the per-node torchrun commands; each line runs inside its node (2 ranks per node, rendezvous at
   node 0's address); `--collect` merges what the ranks wrote into a calibration file.
2. `advisor predict ... --gpus 8@4 --json` from that calibration.
3. The same emitted path at 8@4, measured: predicted vs measured step time (bar: within 15%).
4. The bend: speedup from 2 ranks (one node) to 4 ranks (two nodes) on the capped link, and on an
   uncapped link (4 ranks on a second, 2-node cluster without tbf; the 2-rank baseline is the same
   one-node run, whose ranks never touch the link). Bar: capped < 1.3x, uncapped clearly more.

Usage: sudo python benchmarks/emulated_cluster.py [--rate 200mbit] [--steps 5] [--json]
Results to stdout; progress to stderr. The integration test (tests/calibration/test_emulated_cluster.py)
runs `experiment()` and checks the same bars.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from netcluster import EmulatedCluster, parse_rate, unavailable_reason  # noqa: E402

WORKLOAD = ROOT / "benchmarks" / "emulated-cluster.toml"

CPUS_PER_RANK = 0.2
"""Cores per rank: 8 ranks use 1.6 of this machine's 2 cores, leaving room for the launchers."""

RDZV_PORT = 29500
PLACEMENT_TIMEOUT = 240.0
"""Seconds one placement (all its nodes) may take before its processes are killed."""


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def advisor(*args: object, timeout: float = 120) -> str:
    """Run the real CLI (`python -m advisor ...`) on the host; its stdout, or RuntimeError."""
    proc = subprocess.run([sys.executable, "-m", "advisor", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"advisor {' '.join(map(str, args[:2]))} failed ({proc.returncode}): "
                           f"{proc.stderr.strip()[-2000:]}")
    return proc.stdout


def workload_at_rate(rate: str | None, folder: Path) -> Path:
    """The experiment's workload with inter_node_bandwidth set to the emulated link's tbf rate."""
    import tomllib

    import tomli_w

    spec = tomllib.loads(WORKLOAD.read_text())
    if rate is not None:
        spec["cluster"]["inter_node_bandwidth"] = f"{parse_rate(rate) / 1e6:g} Mbit/s"
    path = folder / WORKLOAD.name
    path.write_text(tomli_w.dumps(spec))
    return path


def emitted_runs(text: str) -> list[list[str]]:
    """Split `--emit torchrun` output into placements: one command per node, node 0 first."""
    runs: list[list[str]] = []
    for line in text.splitlines():
        if re.match(r"#\s*N=\d+ over \d+ node", line):
            runs.append([])
        elif line.strip() and not line.startswith("#"):
            if not runs:
                raise RuntimeError(f"emitted command outside a placement: {line}")
            runs[-1].append(line)
    return runs


def run_emitted(cluster: EmulatedCluster, workload: Path, placements: str, results: Path,
                steps: int, warmup: int) -> None:
    """Emit torchrun commands for `placements` (e.g. "1@1,2@1,4@2") and run each on its nodes."""
    text = advisor("calibrate", workload, "--emit", "torchrun", "--gpus", placements, "--device", "cpu",
                   "--results", results, "--rdzv-host", cluster.address(0), "--rdzv-port", RDZV_PORT,
                   "--steps", steps, "--warmup", warmup)
    path = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    for lines in emitted_runs(text):
        per_node = int(re.search(r"--nproc-per-node (\d+)", lines[0]).group(1))
        label = f"{per_node * len(lines)}@{len(lines)}"
        log(f"  running {label} ({per_node} rank(s) per node, {CPUS_PER_RANK} core each)")
        logs = results / f"logs-{label.replace('@', 'at')}"
        logs.mkdir(parents=True, exist_ok=True)
        procs = []
        for node, line in enumerate(lines):
            cluster.set_cpus(node, None)  # start-up (imports, rendezvous) is not measured: no cap
            with open(logs / f"node{node}.log", "w") as out:
                procs.append(cluster.run(node, ["sh", "-c", line], env={"PATH": path},
                                         stdout=out, stderr=subprocess.STDOUT))
        result = Path(re.search(r"--results (\S+)", lines[0]).group(1)) / "result.json"
        _cap_once_warm(cluster, procs, [logs / f"node{n}.log" for n in range(len(lines))], per_node, label, result)
        codes = [proc.returncode for proc in procs]
        if any(codes):
            errors = sorted(str(p.read_text().strip()) for p in results.rglob("rank*.error"))
            tail = (logs / "node0.log").read_text()[-1500:]
            raise RuntimeError(f"{label} failed (exit codes {codes}): {errors or tail}")


def _cap_once_warm(cluster: EmulatedCluster, procs: list, logs: list[Path], per_node: int, label: str,
                   result: Path) -> None:
    """Wait for the placement's processes; cap each node's CPU once every node has finished a
    warm-up step (the worker prints `@progress warmup i/n`), before any timed step starts, and lift
    the cap again once rank 0 has written `result` (its result.json: every step and probe is done).

    Start-up (importing torch, rendezvous) and shut-down (destroying the process group, the ranks'
    and torchrun's exit) run uncapped: neither is measured, and under a 0.2-core budget start-up
    took most of each placement's wall time and shut-down 10-13 s of each."""
    started = time.monotonic()
    deadline = started + PLACEMENT_TIMEOUT
    capped_at = uncapped = None
    while any(proc.poll() is None for proc in procs):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{label} did not finish within {PLACEMENT_TIMEOUT:.0f} s")
        if capped_at is None and all("@progress warmup" in path.read_text(errors="replace") for path in logs):
            for node in range(len(logs)):
                cluster.set_cpus(node, per_node * CPUS_PER_RANK)
            capped_at = time.monotonic()
            if any("@progress step" in path.read_text(errors="replace") for path in logs):
                raise RuntimeError(f"{label}: timed steps began before the CPU cap (use >= 2 warm-up steps)")
        if capped_at is not None and uncapped is None and result.exists():
            for node in range(len(logs)):
                cluster.set_cpus(node, None)
            uncapped = time.monotonic()
        time.sleep(0.02)
    log(f"    warm after {(capped_at or time.monotonic()) - started:.1f} s, "
        f"measured after {(uncapped or time.monotonic()) - started:.1f} s, "
        f"done after {time.monotonic() - started:.1f} s")


def median_step(calibration: Path, gpus: int, nodes: int) -> float:
    from advisor.calibration_data import load_calibration

    for run in load_calibration(calibration).runs:
        if (run.gpus, run.nodes) == (gpus, nodes):
            return statistics.median(run.step_seconds)
    raise KeyError(f"no run {gpus}@{nodes} in {calibration}")


def largest_all_reduce_busbw(calibration: Path, gpus: int, nodes: int) -> float:
    """busbw (GB/s) of the largest all_reduce probe calibration made at gpus@nodes."""
    from advisor.calibration_data import load_calibration

    probes = [c for c in load_calibration(calibration).collectives
              if (c.op, c.gpus, c.nodes) == ("all_reduce", gpus, nodes)]
    return max(probes, key=lambda c: c.bytes).busbw


def predicted_step(workload: Path, calibration: Path, placement: str, model: str) -> dict:
    """advisor predict's step seconds at `placement` with `--model model` (auto: advisor's choice),
    the family used, and the 90% interval; or the error when predict fails."""
    try:
        out = advisor("predict", workload, "--calibration", calibration, "--gpus", placement,
                      "--model", model, "--json")
    except RuntimeError as exc:
        return {"step_seconds": None, "error": str(exc)}
    doc = json.loads(out)
    row = doc["predictions"][0]
    return {"step_seconds": row["step_seconds"], "family": doc["model"]["name"],
            "low": row["step_seconds_low"], "high": row["step_seconds_high"]}


MODELS = ("auto", "topology", "topology-ring")
"""advisor's own choice, and the two node-aware families (the only ones that know of nodes)."""


CALIBRATE_AT = "1@1,2@1,4@2"
"""The placements calibrated on the capped cluster (step 1 of the module docstring)."""


def experiment(rate: str = "200mbit", steps: int = 5, warmup: int = 2, folder: Path | None = None,
               uncapped: bool = True, calibrate_at: str = CALIBRATE_AT) -> dict:
    """Run the whole experiment; a dict of what was measured and predicted (seconds, ratios).

    `uncapped=False` skips the second, uncapped cluster (step 4 of the module docstring): its
    comparison is between two runs made at different times, so it belongs to this benchmark's
    printout, not to a test (the integration test checks a bound that load cannot break instead).
    `calibrate_at` must hold 2@1 and 4@2 (the bend compares them); the integration test leaves out
    1@1, which nothing it checks reads (one placement, a torch start-up and ~25 s, fewer)."""
    placements = [tuple(map(int, p.split("@"))) for p in calibrate_at.split(",")]
    if not {(2, 1), (4, 2)} <= set(placements):
        raise ValueError(f"calibrate_at must hold 2@1 and 4@2 (the bend compares them): {calibrate_at}")
    own = folder is None
    folder = Path(tempfile.mkdtemp(prefix="advisor-emulated-")) if own else folder
    try:
        workload = workload_at_rate(rate, folder)
        capped, measured, free = (folder / f"{n}.toml" for n in ("calibration", "measured", "uncapped"))
        with EmulatedCluster(nodes=4, rate=rate, cpus_per_node=CPUS_PER_RANK) as cluster:
            log(f"capped cluster ({rate} per node link): calibrate {calibrate_at.replace(',', ', ')}")
            run_emitted(cluster, workload, calibrate_at, folder / "calibrate", steps, warmup)
            advisor("calibrate", workload, "--collect", folder / "calibrate", "--out", capped)
            log("capped cluster: measure 8@4")
            run_emitted(cluster, workload, "8@4", folder / "measure", steps, warmup)
            advisor("calibrate", workload, "--collect", folder / "measure", "--out", measured)
        if uncapped:
            with EmulatedCluster(nodes=2, rate=None, cpus_per_node=CPUS_PER_RANK) as cluster:
                log("uncapped cluster: 4@2")
                run_emitted(cluster, workload, "4@2", folder / "uncapped", steps, warmup)
                advisor("calibrate", workload, "--collect", folder / "uncapped", "--out", free)
        measured_8 = median_step(measured, 8, 4)
        predictions = {model: predicted_step(workload, capped, "8@4", model) for model in MODELS}
        for row in predictions.values():
            if row["step_seconds"] is not None:
                row["error"] = (row["step_seconds"] - measured_8) / measured_8
        result = {
            "rate": rate,
            "cpus_per_rank": CPUS_PER_RANK,
            "steps": steps,
            "step_seconds": {**{f"{g}@{n}": median_step(capped, g, n) for g, n in placements}, "8@4": measured_8},
            "predicted_8@4": predictions,
        }
        steps_ = result["step_seconds"]
        result["link_busbw_bits"] = largest_all_reduce_busbw(capped, 4, 2) * 8e9
        result["speedup_2_to_4_capped"] = steps_["2@1"] / steps_["4@2"]
        if uncapped:
            steps_["uncapped 4@2"] = median_step(free, 4, 2)
            # One baseline for both: 2 ranks in one node never touch the node's link.
            result["speedup_2_to_4_uncapped"] = steps_["2@1"] / steps_["uncapped 4@2"]
        return result
    finally:
        if own:
            shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", default="200mbit", help="tc rate of each node's link (default 200mbit)")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per placement")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps (>= 2: the CPU cap lands during warm-up)")
    parser.add_argument("--keep", type=Path, help="keep calibration files and logs in this folder")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    reason = unavailable_reason(cpu_budgets=True)
    if reason:
        print(f"skipped: {reason}")
        return 0
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    try:
        result = experiment(args.rate, args.steps, args.warmup, args.keep)
    except KeyboardInterrupt:
        print("interrupted: the emulated cluster and its processes were removed", file=sys.stderr)
        return 130
    result["wall_seconds"] = time.monotonic() - started
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"emulated cluster: {args.rate} per node link, 2 ranks per node, {CPUS_PER_RANK} core per rank")
    print(f"  all_reduce busbw across 2 nodes (calibration probe): {result['link_busbw_bits'] / 1e6:.0f} Mbit/s")
    for placement, seconds in result["step_seconds"].items():
        print(f"  median step {placement:>13}: {seconds:.3f} s")
    measured_8 = result["step_seconds"]["8@4"]
    for model, row in result["predicted_8@4"].items():
        if row["step_seconds"] is None:
            print(f"  predicted 8@4 --model {model}: unavailable ({row['error']})")
            continue
        print(f"  predicted 8@4 --model {model:<13}: {row['step_seconds']:.3f} s ({row['family']}, 90% "
              f"{row['low']:.3g}-{row['high']:.3g} s) vs measured {measured_8:.3f} s: {row['error']:+.1%} "
              "(bar: within 15%)")
    print(f"  speedup 2 -> 4 ranks across the node boundary: capped {result['speedup_2_to_4_capped']:.2f}x "
          f"(bar < 1.3x), uncapped {result['speedup_2_to_4_uncapped']:.2f}x")
    print(f"  wall time {result['wall_seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
