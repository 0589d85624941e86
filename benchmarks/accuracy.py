"""Accuracy of the scaling model on real series it has never seen: leave-one-series-out.

For every series of the corpus (benchmarks/corpus.py: Pollux traces from ../shared, published
series checked in with citations, our CPU calibration), the priors are re-learned from the OTHER
series only (advisor.scaling.priors.learn, empirical Bayes), then the model is fitted on the
series' fit rows (<= 16 GPUs; Pollux: placements.csv, <= 4 nodes) and scored on its test rows
(> 16 GPUs; Pollux: scalability.csv, up to 64 GPUs on 16 nodes). Beside it, always, the naive
linear guess (per-GPU throughput of the largest fitted count held).

Printed: per series, MAPE of throughput (= of step time per sample), the linear guess's, and 90%
interval coverage, with all fit rows and with only the largest 0, 1, 2 and 3 fitted counts;
coverage per extrapolation distance (max(N / largest fitted count, nodes / largest fitted node
count)); per failure pattern of issue 11. `--learn` prints the priors learned from the whole corpus
(the values of advisor.scaling.priors.LEARNED).

Without ../shared (the Pollux traces are not part of the repository) everything else is still
reproduced: the published and measured series, the priors learned from them (which then differ from
LEARNED, learned with Pollux), and every number of docs/validation.md marked "published".

Run: python benchmarks/accuracy.py [--pollux DIR] [--json] [--learn]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import corpus  # noqa: E402
from corpus import pollux_measurements, pollux_workload  # noqa: E402,F401  (other benchmarks import them from here)

DEFAULT_DATA = corpus.POLLUX

COUNTS = (0, 1, 2, 3, None)  # None: every fitted count
DISTANCE_BINS = (1, 2, 4, 8, 16, np.inf)
#: An informed coefficient: its posterior log-sd under the vague prior is below this (the prior's
#: own spread is 2-3: a series that narrows it to 1.5 says something about it).
INFORMED_SD = 1.5
# Column -> Priors field learned from it.
LEARNABLE = {"compute": "log_inv_mfu", "intra_bandwidth": "log_intra_bw", "inter_bandwidth": "log_inter_bw"}


def combined(s):
    from advisor.measurements import Measurements

    runs = list(s.fit.runs) + (list(s.test.runs) if s.test is not None else [])
    return Measurements(runs, s.fit.probes, s.fit.source)


def informed_values(s) -> dict[str, float]:
    """The coefficients this series pins down when fitted on all its rows under the vague prior."""
    from advisor.scaling.model import ScalingModel
    from advisor.scaling.priors import VAGUE

    m = ScalingModel(s.workload, combined(s), n_bootstrap=0, priors=VAGUE)
    est = m.fitted.estimator
    pos = {int(j): i for i, j in enumerate(est.free_)}
    out = {}
    for j, col in enumerate(m.fitted.columns):
        key = LEARNABLE.get(col.name)
        if key is None or j not in pos or (key == "log_inv_mfu" and not s.workload.peak_flops):
            continue
        sd = np.sqrt(est.cov_[pos[j], pos[j]]) / est.coef_[j]
        if sd < INFORMED_SD:
            out[key] = float(np.log(est.coef_[j]))
    if est.cov_.shape[0] > est.free_.size and np.sqrt(est.cov_[-1, -1]) < 1.0:
        out["gamma"] = est.gamma_
    return out


def learn(samples: dict[str, dict], without: str | None = None):
    """Priors from every series but `without`. Series of one cluster (the six Pollux traces share one
    cluster and network) count as one: their values are averaged first, so one testbed does not
    outvote the others."""
    from advisor.scaling.priors import learn as learn_priors

    by_cluster: dict[str, dict[str, list]] = {}
    for name, values in samples.items():
        if name == without:
            continue
        cluster = corpus.cluster_of(name)
        for k, v in values.items():
            by_cluster.setdefault(cluster, {}).setdefault(k, []).append(v)
    pooled: dict[str, list] = {}
    for values in by_cluster.values():
        for k, v in values.items():
            pooled.setdefault(k, []).append(float(np.mean(v)))
    return learn_priors(pooled)


def largest_counts(m, k):
    """The runs at the k largest measured counts (all for None; None for 0)."""
    if k == 0:
        return None
    counts = np.unique(m.gpus)
    keep = counts if k is None else counts[-k:]
    return m.subset(np.isin(m.gpus, keep))


def score(s, priors, k) -> dict | None:
    from advisor.scaling.fitting import naive_step
    from advisor.scaling.model import ScalingModel

    fit = largest_counts(s.fit, k)
    if k is not None and k > 0 and np.unique(s.fit.gpus).size < k:
        return None
    t = s.test
    model = ScalingModel(s.workload, fit, n_bootstrap=64, priors=priors)
    med, lo, hi = model.step_time(t.gpus, t.nodes, t.global_batch)
    y = t.step
    naive = naive_step(model.data, t.gpus, t.global_batch) if fit is not None else None
    inside = (y >= lo) & (y <= hi)
    if fit is not None:
        dist = np.maximum(t.gpus / fit.gpus.max(), t.nodes / fit.nodes.max())
    else:
        dist = np.full(y.shape, np.inf)
    return {"mape": float(np.mean(np.abs(med - y) / y) * 100),
            "naive_mape": None if naive is None else float(np.mean(np.abs(naive - y) / y) * 100),
            "coverage": float(inside.mean() * 100), "inside": inside.tolist(), "distance": dist.tolist(),
            "width_4x": _width_at(model, fit, 4.0) if fit is not None else None,
            "errors": ((med - y) / y).tolist(), "gpus": t.gpus.astype(int).tolist()}


def _width_at(model, fit, factor) -> float:
    g = np.array([fit.gpus.max() * factor])
    _, lo, hi = model.step_time(g)
    return float(hi[0] / lo[0])


def evaluate(series, samples) -> list[dict]:
    out = []
    for s in series:
        if s.test is None:
            continue
        priors = learn(samples, without=s.name)
        row = {"series": s.name, "group": s.group, "fit_gpus": sorted({int(g) for g in s.fit.gpus}),
               "fit_nodes": int(s.fit.nodes.max()), "test_rows": len(s.test.runs)}
        for k in COUNTS:
            row[str(k if k is not None else "all")] = score(s, priors, k)
        out.append(row)
    return out


def _mean(rows, key, field):
    vals = [r[key][field] for r in rows if r.get(key) and r[key][field] is not None]
    return float(np.mean(vals)) if vals else None


def summary(rows) -> dict:
    out = {}
    for group in ("pollux", "published", "all"):
        sel = [r for r in rows if group == "all" or r["group"] == group]
        if not sel:
            continue
        out[group] = {}
        for k in ("0", "1", "2", "3", "all"):
            pts = [p for r in sel if r.get(k) for p in r[k]["inside"]]
            out[group][k] = {"mape": _mean(sel, k, "mape"), "naive_mape": _mean(sel, k, "naive_mape"),
                             "coverage_points": float(np.mean(pts) * 100) if pts else None,
                             "series": sum(1 for r in sel if r.get(k))}
    bins = []
    for lo, hi in zip(DISTANCE_BINS[:-1], DISTANCE_BINS[1:]):
        ins = [i for r in rows if r.get("all") for i, d in zip(r["all"]["inside"], r["all"]["distance"]) if lo <= d < hi]
        if ins:
            bins.append({"distance": f"{lo}-{hi:g}x", "points": len(ins), "coverage": float(np.mean(ins) * 100)})
    out["coverage_by_distance"] = bins
    return out


def _fmt(x, spec="6.1f"):
    return f"{x:{spec}}" if x is not None else " " * (int(spec.split(".")[0]) - 1) + "-"


def report(rows, summ, seconds):
    print("Leave-one-series-out: priors learned without the series, fit on its <= 16-GPU rows (Pollux: placements),")
    print("predict its larger rows. MAPE of throughput %, naive linear guess %, 90% coverage %, by fitted counts used.")
    head = f"{'series':28} {'fit GPUs':>16} " + " ".join(f"{k + ' counts':>20}" for k in ("0", "1", "2", "3", "all"))
    print(head)
    print(f"{'':28} {'':>16} " + " ".join(f"{'MAPE naive cover':>20}" for _ in range(5)))
    for r in rows:
        cells = []
        for k in ("0", "1", "2", "3", "all"):
            c = r.get(k)
            cells.append(f"{'-':>20}" if not c else f"{c['mape']:6.1f} {_fmt(c['naive_mape'])} {c['coverage']:6.0f}")
        fit = str(r["fit_gpus"]) if len(r["fit_gpus"]) <= 5 else f"{len(r['fit_gpus'])} counts"
        print(f"{r['series']:28} {fit:>16} " + " ".join(cells))
    for group, by_k in summ.items():
        if group == "coverage_by_distance":
            continue
        cells = [f"{_fmt(v['mape'])} {_fmt(v['naive_mape'])} {_fmt(v['coverage_points'], '6.0f')}" for v in by_k.values()]
        print(f"{'mean ' + group:28} {'':>16} " + " ".join(cells))
    print("coverage of the 90% interval by distance past the fitted data (all fitted counts):",
          ", ".join(f"{b['distance']}: {b['coverage']:.0f}% of {b['points']}" for b in summ["coverage_by_distance"]))
    print("(coverage columns of the mean rows: share of all points inside; 0 counts = the prior alone)")
    print(f"failure patterns: strong scaling fitted on one node = bert-large-dgxa100-strong; two fitted counts = "
          f"mpt-*-a100-roce and the '2 counts' column; links = llm7b-torchtitan (1 count) and the Pollux traces.")
    print(f"{seconds:.1f} s")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pollux", type=Path, default=corpus.POLLUX)
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    ap.add_argument("--learn", action="store_true", help="print the priors learned from the whole corpus")
    args = ap.parse_args(argv)
    from threadpoolctl import threadpool_limits

    t0 = time.perf_counter()
    with threadpool_limits(limits=1):
        series = corpus.load(args.pollux)
        if not args.pollux.is_dir():
            print(f"Pollux traces not found at {args.pollux} (they are not part of this repository): reproducing the "
                  f"published and measured series only ({len(series)} series); priors are learned from those.",
                  file=sys.stderr)
        samples = {s.name: informed_values(s) for s in series}
        if args.learn:
            print(json.dumps({"per_series": samples, "learned": learn(samples).as_dict()}, indent=2))
            return 0
        rows = evaluate(series, samples)
    summ = summary(rows)
    if args.json:
        print(json.dumps({"series": rows, "summary": summ}, indent=2))
    else:
        report(rows, summ, time.perf_counter() - t0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
