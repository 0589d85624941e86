"""The conditioned compute prior (advisor.scaling.priors.MFUModel), learned from the corpus and scored
leave-one-testbed-out.

    python benchmarks/mfu_prior.py [--json]

For every corpus series with a transformer shape on a catalog GPU (benchmarks/corpus.py), the
evidence its rows put on ln(1/MFU) (benchmarks/accuracy.py `evidence`: the fit under the vague prior,
the prior divided out); `priors.learn_mfu` regresses it on `priors.MFU_FEATURES`. Printed: the learned
model (pasted into priors.LEARNED.mfu), and per series the held-out residual of the model learned
without its testbed, beside the unconditioned prior's (the learned scalar log_inv_mfu): what a new
testbed meets with and without the conditioning.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import accuracy
import corpus


def points() -> list[tuple]:
    out = []
    series = corpus.load()
    size: dict[str, int] = {}
    evid = {}
    for s in series:
        ev = accuracy.evidence(s)
        if ev.get("mfu_features") is not None:
            evid[s.name] = ev
            size[corpus.cluster_of(s.name)] = size.get(corpus.cluster_of(s.name), 0) + 1
    for name, ev in evid.items():
        bed = corpus.cluster_of(name)
        out.append((name, (tuple(ev["mfu_features"]), *ev["log_inv_mfu"], 1.0 / size[bed], bed)))
    return out


def main(argv=None) -> int:
    from advisor.scaling.priors import LEARNED, learn_mfu

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    pts = points()
    model = learn_mfu([p for _, p in pts])
    rows = []
    for name, p in pts:
        held = learn_mfu([q for _, q in pts if q[4] != p[4]])
        mean = held.intercept + float(np.dot(held.coef, p[0]))
        rows.append({"series": name, "testbed": p[4], "features": p[0], "ln_inv_mfu": p[1], "weight": p[3],
                     "conditioned_residual": p[1] - mean, "scalar_residual": p[1] - LEARNED.log_inv_mfu})
    w = np.array([r["weight"] for r in rows])

    def rms(key, keep):
        x = np.array([r[key] for r in rows])[keep]
        return float(np.sqrt(np.sum(w[keep] * x**2) / np.sum(w[keep])))

    llm = np.array([r["features"][-1] > 0 for r in rows])
    every = np.ones(len(rows), bool)
    summary = {k: {"conditioned": rms("conditioned_residual", c), "scalar": rms("scalar_residual", c)}
               for k, c in (("all", every), ("llm", llm), ("other", ~llm))}
    if args.json:
        print(json.dumps({"model": model.__dict__, "rows": rows, "summary": summary}, indent=2))
        return 0
    for r in rows:
        print(f"{r['series']:40} {r['ln_inv_mfu']:6.2f}  held-out residual {r['conditioned_residual']:+.2f} "
              f"(scalar prior {r['scalar_residual']:+.2f})")
    for k, v in summary.items():
        print(f"{k:6} held-out rms of ln(1/MFU): conditioned {v['conditioned']:.3f}, scalar {v['scalar']:.3f}")
    print("learned:", model)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
