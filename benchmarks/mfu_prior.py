"""The conditioned compute prior (advisor.scaling.priors.MFUModel), learned from the corpus and scored
leave-one-testbed-out, beside the candidate conditionings tried.

    python benchmarks/mfu_prior.py [--json]

For every corpus series on a catalog GPU with a known peak (benchmarks/corpus.py; `priors.mfu_applies`),
and every published one-row run of benchmarks/data/runs/mfu_published_runs.csv (`corpus.published_runs`:
BLOOM-176B, MT-NLG 530B, torchtitan's Float8 Llama 3.1 8B/70B; each testbed weighs 1 with its series),
the evidence its rows put on ln(1/MFU) (benchmarks/accuracy.py `evidence`: the fit under the vague
prior, the prior divided out; the small-batch penalty is a column of that fit, so the evidence is the
large-micro-batch MFU: the one candidate with tokens per micro-batch asks whether the penalty leaves
any of their effect, and is no feature of the chosen set); `priors.learn_mfu`
regresses it on a set of features. Printed: per candidate set, the weighted rms of the held-out residual
(each series predicted by the model learned without its testbed: what a new testbed meets) per class
(priors.MFU_CLASSES) and overall, the scalar prior's (one mean for all, learned the same way) beside
it; per series, the chosen set's held-out residual; and the model learned on every series with the
chosen set (`priors.MFU_FEATURES`, pasted into priors.LEARNED.mfu).
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


def _catalog(w):
    from advisor.catalog import find_gpu

    return find_gpu(w.cluster.gpu)


def _flag(name):
    from advisor.scaling import priors

    i = priors.MFU_FEATURES.index(name)
    return lambda w: priors.mfu_features(w)[i]


def _older_any(w):  # before: Volta or older, whatever the peak's kind
    from advisor.scaling.priors import _OLDER

    return float(_catalog(w).name.startswith(_OLDER))


def _fp32(w):  # before: fp32, TF32 or CUDA-core alike
    return float(w.model.precision == "fp32")


def _tf32(w):
    g = _catalog(w)
    return float(w.model.precision == "fp32" and g.peak_column("fp32") == "peak_tf32_flops")


def _log_flops(w):  # FLOPs per sample, centred on 1 TFLOP (ln): bigger models, bigger GEMMs
    return float(np.log(w.model.training_flops_per_sample / 1e12))


def _log_params(w):  # parameters, centred on 1B (ln)
    return float(np.log(w.model.params / 1e9))


def _log_tokens(w):  # ln(tokens per micro-batch / 4096) of a transformer (0 without a shape): beyond the penalty
    b = w.batch
    samples = b.micro_samples or b.per_gpu_samples  # every series here declares one of them
    return float(np.log(samples * w.model.seq_len / 4096)) if w.model.is_transformer and samples else 0.0


def _fp8(w):  # FP8 matmuls (its evidence: torchtitan's two Float8 runs, one testbed: not chosen)
    return float(w.model.precision == "fp8")


def _log_hidden(w):  # ln(hidden / 4096) of a transformer (0 without a shape): wider GEMMs
    return float(np.log(w.model.hidden / 4096)) if w.model.is_transformer else 0.0


def _log_params_llm(w):  # ln(parameters / 1B) of an LLM, capped at ln 100 (0 otherwise)
    return float(min(np.log(w.model.params / 1e9), np.log(100.0))) if _flag("llm")(w) else 0.0


def _big_llm(w):  # an LLM of >= 100B parameters (pipeline- and tensor-parallel recipes)
    return float(_flag("llm")(w) and w.model.params >= 100e9)


def _declared_cuda(w):  # interaction: declared FLOPs on CUDA cores (every Pollux trace)
    return _flag("declared_flops")(w) * _flag("cuda_core")(w)


#: Candidate feature sets: name -> feature functions of a workload. "chosen" is priors.MFU_FEATURES.
CANDIDATES = {
    "intercept only": (),
    "before (gen, fp32, llm)": ((_flag("hopper_or_newer"), _older_any, _fp32, _flag("llm"))),
    "peak kind + llm": (_flag("hopper_or_newer"), _flag("volta_or_turing"), _flag("cuda_core"), _flag("llm")),
    "peak kind + declared": (_flag("hopper_or_newer"), _flag("volta_or_turing"), _flag("cuda_core"),
                             _flag("declared_flops")),
    "gen (any peak) + llm + declared": (_flag("hopper_or_newer"), _older_any, _flag("llm"), _flag("declared_flops")),
    "chosen": None,
    "chosen + fp8 (one testbed)": "fp8",
    "chosen + tf32": "tf32",
    "chosen + ln FLOPs/sample": "log_flops",
    "chosen + ln params": "log_params",
    "chosen + declared x cuda": "declared_cuda",
    "chosen + ln tokens/micro-batch": "log_tokens",
    "chosen + ln hidden": "log_hidden",
    "chosen + ln params (LLM, capped)": "log_params_llm",
    "chosen + LLM >= 100B": "big_llm",
}
_EXTRA = {"fp8": _fp8, "tf32": _tf32, "log_flops": _log_flops, "log_params": _log_params, "log_tokens": _log_tokens,
          "declared_cuda": _declared_cuda, "log_hidden": _log_hidden, "log_params_llm": _log_params_llm,
          "big_llm": _big_llm}


def series_evidence() -> list[tuple]:
    """(series name, workload, testbed, weight, ln(1/MFU), its variance, class) for every series the
    conditioned prior speaks for, each testbed weighing 1 in all."""
    from advisor.scaling.priors import mfu_applies, mfu_class

    rows = []
    for s in corpus.load() + corpus.published_runs():  # the series, then the published one-row runs
        if not mfu_applies(s.workload):
            continue
        ev = accuracy.evidence(s)
        if "log_inv_mfu" in ev:
            rows.append((s.name, s.workload, corpus.cluster_of(s.name), *ev["log_inv_mfu"], mfu_class(s.workload)))
    size: dict[str, int] = {}
    for r in rows:
        size[r[2]] = size.get(r[2], 0) + 1
    return [(n, w, bed, 1.0 / size[bed], y, v, c) for n, w, bed, y, v, c in rows]


def functions(name):
    from advisor.scaling.priors import MFU_FEATURES

    spec = CANDIDATES[name]
    chosen = tuple(_flag(f) for f in MFU_FEATURES)
    if spec is None:
        return chosen
    if isinstance(spec, str):
        return (*chosen, _EXTRA[spec])
    return spec


def score(rows, fns) -> dict:
    """The held-out residuals and their weighted rms per class and overall, of features `fns`."""
    from advisor.scaling.priors import MFU_CLASSES, learn_mfu

    pts = [(tuple(f(w) for f in fns), y, v, wt, bed, c) for _, w, bed, wt, y, v, c in rows]
    held = []
    for p in pts:
        m = learn_mfu([q for q in pts if q[4] != p[4]])
        held.append(p[1] - (m.intercept + float(np.dot(m.coef, p[0]))))
    held = np.array(held)
    wt = np.array([p[3] for p in pts])
    cls = np.array([p[5] for p in pts])

    def rms(keep):
        return float(np.sqrt(np.sum(wt[keep] * held[keep] ** 2) / np.sum(wt[keep])))

    out = {c: rms(cls == c) for c in MFU_CLASSES if (cls == c).any()}
    out["all"] = rms(np.ones(len(pts), bool))
    return {"rms": out, "held": held.tolist(), "model": learn_mfu(pts)}


def main(argv=None) -> int:
    from advisor.scaling.priors import MFU_CLASSES, MFU_FEATURES

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = series_evidence()
    results = {name: score(rows, functions(name)) for name in CANDIDATES}
    chosen = results["chosen"]
    if args.json:
        print(json.dumps({"features": MFU_FEATURES, "model": chosen["model"].__dict__,
                          "candidates": {k: r["rms"] for k, r in results.items()},
                          "rows": [{"series": r[0], "testbed": r[2], "class": r[6], "ln_inv_mfu": r[4],
                                    "held_out_residual": h} for r, h in zip(rows, chosen["held"], strict=True)]},
                         indent=2))
        return 0
    print(f"held-out rms of ln(1/MFU), leave-one-testbed-out ({len(rows)} series, "
          f"{len({r[2] for r in rows})} testbeds, each weighted once)")
    print(f"{'candidate':32}" + "".join(f"{c:>16}" for c in (*MFU_CLASSES, "all")))
    for name, r in results.items():
        print(f"{name:32}" + "".join(f"{r['rms'].get(c, float('nan')):16.3f}" for c in (*MFU_CLASSES, "all")))
    print(f"\nchosen: {', '.join(MFU_FEATURES)}; per series, held-out residual (intercept only beside it)")
    for r, h, h0 in zip(rows, chosen["held"], results["intercept only"]["held"], strict=True):
        print(f"  {r[0]:40} {r[6]:15} {r[4]:6.2f}  {h:+.2f}  ({h0:+.2f})")
    print("learned:", chosen["model"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
