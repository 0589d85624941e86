"""Accuracy of the scaling model on real series it has never seen: leave-one-series-out.

For every series of the corpus (benchmarks/corpus.py: Pollux traces from ../shared, published
series checked in with citations, our CPU calibration), the priors are re-learned from the OTHER
series only (advisor.scaling.priors.learn, empirical Bayes on the coefficients each series pins;
the inter-node link's prior mean, which one-node fits cannot pin, by the accuracy on the other
series' held-out rows over `GRID`, then the drift past the data, `DRIFTS`, the same way), then the
model is fitted on the series' fit rows (<= 16 GPUs; Pollux: placements.csv, <= 4 nodes) and scored on its test rows
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
import itertools
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import corpus
from corpus import pollux_measurements, pollux_workload  # noqa: F401  (other benchmarks import them from here)

DEFAULT_DATA = corpus.POLLUX

COUNTS = (0, 1, 2, 3, None)  # None: every fitted count
DISTANCE_BINS = (1, 2, 4, 8, 16, np.inf)
#: Evidence counts when the data alone pin a coefficient to within this sd (log space; 1 = a factor
#: e). Weaker evidence is the vague prior echoed back: its Gaussian approximation says nothing reliable.
MAX_EVIDENCE_SD = 1.0
# Column -> Priors field learned from it.
LEARNABLE = {"compute": "log_inv_mfu", "intra_bandwidth": "log_intra_bw", "inter_bandwidth": "log_inter_bw"}


def combined(s):
    from advisor.measurements import Measurements

    runs = list(s.fit.runs) + (list(s.test.runs) if s.test is not None else [])
    return Measurements(runs, s.fit.probes, s.fit.source)


def evidence(s) -> dict:
    """What this series' rows (all of them) say about each learnable coefficient: the Gaussian
    likelihood (value, variance) in the prior's space, from the Laplace posterior of a fit under the
    vague prior with the vague prior divided out; and its in-sample residual spread ("noise")."""
    from advisor.scaling.model import ScalingModel
    from advisor.scaling.priors import VAGUE

    m = ScalingModel(s.workload, combined(s), n_bootstrap=0, priors=VAGUE)
    est = m.record.fitted.estimator
    pos = {int(j): i for i, j in enumerate(est.free_)}
    vague = {p[0]: (p[2], p[3]) for p in est.prior}
    out: dict = {}
    entries = [(j, LEARNABLE.get(c.name)) for j, c in enumerate(m.record.fitted.columns)]
    if est.cov_.shape[0] > est.free_.size:
        entries.append(("gamma", "gamma"))
    for j, key in entries:
        if key is None or (j != "gamma" and j not in pos) or (key == "log_inv_mfu" and not s.workload.peak_flops):
            continue
        i = est.cov_.shape[0] - 1 if j == "gamma" else pos[j]
        value = est.gamma_ if j == "gamma" else est.coef_[j]
        log = key != "gamma"
        post_m = np.log(value) if log else value
        post_v = est.cov_[i, i] / (value**2 if log else 1.0)
        prior_m, prior_sd = vague[j]
        lik_prec = 1.0 / post_v - 1.0 / prior_sd**2
        if lik_prec * MAX_EVIDENCE_SD**2 < 1:  # too little to say anything
            continue
        if value <= est.bounds_[0][i] * 1.0001:  # pinned at a physical bound: the bound is the evidence
            out[key] = (float(post_m), float(MAX_EVIDENCE_SD**2 / 4))
            continue
        lik_m = (post_m / post_v - prior_m / prior_sd**2) / lik_prec
        out[key] = (float(lik_m), float(1.0 / lik_prec))
    from advisor.scaling.priors import mfu_applies, mfu_class, mfu_features

    w = s.workload
    out["mfu_features"] = mfu_features(w) if mfu_applies(w) and "log_inv_mfu" in out else None
    out["mfu_class"] = mfu_class(w)
    r = np.array([x["error"] for x in m.residuals()])
    out["noise"] = float(np.sqrt(np.mean(np.log1p(r) ** 2))) if r.size > 2 else None
    return out


def run_samples(runs=None) -> dict[str, dict]:
    """The ln(1/MFU) evidence of the published one-row runs (corpus.published_runs: large models, FP8), by
    `evidence` as for a series, kept for the conditioned compute prior alone (`mfu_only`): one row cannot
    pin a link or the overlap, and its in-sample residual is no noise."""
    out = {}
    for s in corpus.published_runs() if runs is None else runs:
        ev = evidence(s)
        if ev.get("mfu_features") is not None:
            out[s.name] = {"log_inv_mfu": ev["log_inv_mfu"], "mfu_features": ev["mfu_features"],
                           "mfu_class": ev["mfu_class"], "mfu_only": True}
    return out


def learn(samples: dict[str, dict], without: str | None = None):
    """Priors from every series but `without`, each testbed weighted once (the six Pollux traces
    share one cluster and network: each weighs 1/6). Entries marked `mfu_only` (`run_samples`) count
    for the conditioned compute prior only, where they share their testbed's weight with its series."""
    from advisor.scaling.priors import learn as learn_priors

    names = [n for n in samples if n != without]
    size: dict[str, int] = {}
    mfu_size: dict[str, int] = {}
    for n in names:
        bed = corpus.cluster_of(n)
        mfu_size[bed] = mfu_size.get(bed, 0) + 1
        if not samples[n].get("mfu_only"):
            size[bed] = size.get(bed, 0) + 1
    pooled: dict[str, list] = {}
    noise: dict[str, list] = {}
    mfu = []
    for n in names:
        feats = samples[n].get("mfu_features")
        if feats is not None:  # the conditioned compute prior (priors.learn_mfu) learns from these
            value, var = samples[n]["log_inv_mfu"]
            mfu.append((tuple(feats), value, var, 1.0 / mfu_size[corpus.cluster_of(n)], corpus.cluster_of(n),
                        samples[n]["mfu_class"]))
        if samples[n].get("mfu_only"):
            continue
        for k, v in samples[n].items():
            if k in ("mfu_features", "mfu_class"):
                continue
            if k == "noise":
                if v is not None:
                    noise.setdefault(corpus.cluster_of(n), []).append(v)
            elif v is not None:
                pooled.setdefault(k, []).append((v[0], v[1], 1.0 / size[corpus.cluster_of(n)]))
    from dataclasses import replace

    from advisor.scaling.priors import learn_mfu

    priors = learn_priors(pooled, {c: float(np.median(v)) for c, v in noise.items()})
    return replace(priors, mfu=learn_mfu(mfu))


#: Prior fields the data cannot pin one testbed at a time (how fast an unmeasured inter-node link
#: runs is seen only where the fit rows cross nodes), tuned instead by the predictive density of
#: the OTHER series' held-out rows (type-II maximum likelihood over this grid).
#: The drift past the data (`Priors.drift`, ln(step) per doubling of distance) is tuned on the same
#: densities, jointly: the fitted model's bias when it extrapolates is seen only on held-out rows.
DRIFTS = (0.0, 0.005, 0.01, 0.015, 0.02, 0.03)
GRID = [{"log_inter_bw": m, "drift": b} for m in (0.0, 0.5, 1.0, 1.5, 2.0, 2.5) for b in DRIFTS]
GRID_COUNTS = (1, 2, None)  # with measurements: where the inter-node prior is what a one-node fit extrapolates with
#: A testbed informs the grid when its score (mean absolute log error) varies by more than this across it.
SENSITIVE = 0.01


def log_density(s, priors, drifts=(None,)) -> list[float]:
    """Minus the mean absolute log error of the median on the test rows, over the GRID_COUNTS
    scenarios: how close a prior puts the prediction on a series it did not see, one value per drift
    of `drifts` (None: the priors' own; the drift moves only the median past the data, so one fit
    serves them all). (The predictive density was tried first: with wide bands it barely told a link
    2.7x slower than declared from one as declared, and chose the latter, 16-28% off on DGX-1 BERT
    where the former is 5-7% off.)"""
    from dataclasses import replace

    from advisor.scaling.model import ScalingModel

    out = []
    for k in GRID_COUNTS:
        fit = largest_counts(s.fit, k)
        if k and np.unique(s.fit.gpus).size < k:
            continue
        model = ScalingModel(s.workload, fit, n_bootstrap=0, priors=priors)
        row = []
        for b in drifts:
            if b is not None:
                model.record = replace(model.record, noise=replace(model.record.noise, drift=b))
            med, _, _ = model.step_time(s.test.gpus, s.test.nodes, s.test.global_batch)
            row.append(-float(np.mean(np.abs(np.log(s.test.step / med)))))
        out.append(row)
    return np.mean(out, axis=0).tolist()


def density_table(series, samples) -> dict[str, list[float]]:
    """log_density of each series (priors learned without it) at every GRID point."""
    from dataclasses import replace

    table = {}
    for s in series:
        if s.test is None:
            continue
        # the grid tunes the prior of a link whose class is not declared: scored with every series' link
        # as if undeclared, so a series that declares its class still has its say (a declared class
        # fixes the mean, priors.LINK_CLASS_LOG_BW, and the grid would not move its predictions)
        base = replace(learn(samples, without=s.name), by_link_class=False)
        links = sorted({g["log_inter_bw"] for g in GRID})
        by_link = {m: log_density(s, replace(base, log_inter_bw=m), DRIFTS) for m in links}
        table[s.name] = [by_link[g["log_inter_bw"]][DRIFTS.index(g["drift"])] for g in GRID]
    return table


def tuned(samples, table, without: str | None = None):
    """Priors learned without `without`, its GRID fields chosen by the other series' densities (each
    testbed counts once, minimax regret over the testbeds the grid matters to)."""
    from dataclasses import replace

    clusters: dict[str, list] = {}
    for name, row in table.items():
        if name != without:
            clusters.setdefault(corpus.cluster_of(name), []).append(row)
    rows = [np.mean(r, axis=0) for r in clusters.values()]
    base = learn(samples, without)
    # As for the coefficients (priors.learn), one sensitive testbed is not enough to tune on: with only
    # the Pollux cloud left, the tuned link was 12x slower than declared and DGX-1's error went to 90%.
    # Each testbed one vote, and none sacrificed to another: the grid point of least worst regret
    # (best density of a testbed minus its density there), not of the largest total, which let
    # the Pollux cloud's strong preference for a slow link override the others'.
    # In two stages: the link on the drift-free points (a link the fit rows cannot see moves every
    # prediction, the prior's alone too), then the drift at that link (it moves only the median past
    # the data, so it must not pull the link's choice, which the prior-only predictions also read).
    link = _least_worst_regret(rows, [i for i, g in enumerate(GRID) if g["drift"] == 0.0])
    if link is None:
        return base
    m = GRID[link]["log_inter_bw"]
    drift = _least_worst_regret(rows, [i for i, g in enumerate(GRID) if g["log_inter_bw"] == m])
    return replace(base, **GRID[link if drift is None else drift])


def _least_worst_regret(rows, points) -> int | None:
    """The GRID index among `points` of least worst regret over the testbeds (`rows`: each testbed's
    mean density per GRID point) whose density varies over `points` by more than SENSITIVE; None with
    fewer than two such testbeds."""
    sub = [np.asarray(r)[points] for r in rows]
    sensitive = [r for r in sub if np.ptp(r) > SENSITIVE]
    if len(sensitive) < 2:
        return None
    regret = np.max([r.max() - r for r in sensitive], axis=0)
    return points[int(np.argmin(regret))]


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
    naive = naive_step(model.record.problem.data, t.gpus, t.global_batch) if fit is not None else None
    inside = (y >= lo) & (y <= hi)
    if fit is not None:
        dist = np.maximum(t.gpus / fit.gpus.max(), t.nodes / fit.nodes.max())
    else:
        dist = np.full(y.shape, np.inf)
    return {"mape": float(np.mean(np.abs(med - y) / y) * 100),
            "naive_mape": None if naive is None else float(np.mean(np.abs(naive - y) / y) * 100),
            "coverage": float(inside.mean() * 100), "inside": inside.tolist(), "distance": dist.tolist(),
            "width_4x": _width_at(model, fit, 4.0) if fit is not None else None,
            "errors": ((med - y) / y).tolist(), "gpus": t.gpus.astype(int).tolist(),
            "hi_lo": (hi / lo).tolist()}


def _width_at(model, fit, factor) -> float:
    g = np.array([fit.gpus.max() * factor])
    _, lo, hi = model.step_time(g)
    return float(hi[0] / lo[0])


def evaluate(series, samples, table) -> list[dict]:
    out = []
    for s in series:
        if s.test is None:
            continue
        priors = tuned(samples, table, without=s.name)
        row = {"series": s.name, "group": s.group, "fit_gpus": sorted({int(g) for g in s.fit.gpus}),
               "fit_nodes": int(s.fit.nodes.max()), "test_rows": len(s.test.runs),
               "tuned": {"log_inter_bw": priors.log_inter_bw, "drift": priors.drift}}
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
                             "median_hi_lo": float(np.median([x for r in sel if r.get(k) for x in r[k]["hi_lo"]]))
                             if pts else None,
                             "series": sum(1 for r in sel if r.get(k))}
    bins = []
    for lo, hi in itertools.pairwise(DISTANCE_BINS):
        ins = [i for r in rows if r.get("all")
               for i, d in zip(r["all"]["inside"], r["all"]["distance"], strict=True) if lo <= d < hi]
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
        cells = [f"{_fmt(v['mape'])} {_fmt(v['naive_mape'])} {_fmt(v['coverage_points'], '6.0f')}"
                 for v in by_k.values()]
        print(f"{'mean ' + group:28} {'':>16} " + " ".join(cells))
    print("coverage of the 90% interval by distance past the fitted data (all fitted counts):",
          ", ".join(f"{b['distance']}: {b['coverage']:.0f}% of {b['points']}" for b in summ["coverage_by_distance"]))
    print("(coverage columns of the mean rows: share of all points inside; 0 counts = the prior alone)")
    print("median interval high/low over the predicted points:", "; ".join(
        f"{group} " + ", ".join(f"{k} counts {v['median_hi_lo']:.2f}" for k, v in by_k.items() if v["median_hi_lo"])
        for group, by_k in summ.items() if group != "coverage_by_distance"))
    tuned_drifts = sorted({r["tuned"]["drift"] for r in rows})
    print("drift past the data tuned per fold (ln step per doubling, Priors.drift): "
          + ", ".join(f"{d:g} ({sum(r['tuned']['drift'] == d for r in rows)} series)" for d in tuned_drifts))
    print("failure patterns: strong scaling fitted on one node = bert-large-dgxa100-strong; two fitted counts = "
          "mpt-*-a100-roce and the '2 counts' column; links = llm7b-torchtitan (1 count) and the Pollux traces.")
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
        samples = {s.name: evidence(s) for s in series}
        samples.update(run_samples())  # the published one-row runs: MFU evidence only
        table = density_table(series, samples)
        if args.learn:
            print(json.dumps({"per_series": samples, "grid": GRID, "log_density": table,
                              "learned": tuned(samples, table).as_dict()}, indent=2))
            return 0
        rows = evaluate(series, samples, table)
    summ = summary(rows)
    if args.json:
        print(json.dumps({"series": rows, "summary": summ}, indent=2))
    else:
        report(rows, summ, time.perf_counter() - t0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
