"""The corpus of real scaling series the model's priors are learned from and scored on.

Each `Series` is one job measured at several GPU counts by somebody else (or by us, for tiny-cpu):
a workload spec declaring the published (or the system's standard) interconnect, the rows the
model may fit (`fit`: <= 16 GPUs, or Pollux's placements.csv) and the rows it must predict
(`test`: > 16 GPUs, or Pollux's scalability.csv). Sources:

- Pollux traces (Qiao et al., OSDI'21; petuum/adaptdl `osdi21-artifact`, simulator/traces,
  Apache-2.0): read in place from ../shared/data/pollux-osdi21, never copied; skipped when absent.
  Spec "roughly declared", as a user would write it: FLOPs per sample from the papers (within ~3x),
  T4 over PCIe at 8 GB/s, 50 Gbit/s between g4dn.12xlarge nodes (AWS instance page).
- Published series checked in with a citation per row: benchmarks/data/*.csv with
  benchmarks/workloads/*.toml, and the workloads' published calibrations (calibrations/*).
- Measured here: calibrations/tiny-cpu_* (1-4 CPU ranks; fit rows only, nothing to predict).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
POLLUX = ROOT.parent / "shared" / "data" / "pollux-osdi21"
POLLUX_MODELS = ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3")
FIT_MAX_GPUS = 16

#: Published one-row runs (large models, FP8): MFU evidence only (`published_runs`), not series.
RUNS = ROOT / "benchmarks" / "data" / "runs" / "mfu_published_runs.csv"
#: Published CSV series: name -> (spec, CSV) under benchmarks/.
CSV_SERIES = {p.stem: (ROOT / "benchmarks" / "workloads" / f"{p.stem}.toml", p)
              for p in sorted((ROOT / "benchmarks" / "data").glob("*.csv"))}
#: Workloads' checked-in calibrations used as series: name -> (spec, calibration file).
CALIBRATION_SERIES = {
    "bert-large-dgxa100-strong": ("workloads/bert-large.toml", "calibrations/bert-large_published_nvidia_dle.toml"),
    "llm7b-torchtitan": ("workloads/llm7b.toml", "calibrations/llm7b_published_torchtitan.toml"),
    "tiny-cpu": ("workloads/tiny-cpu.toml", "calibrations/tiny-cpu_cpu_2026-11-30.toml"),
}

# Parameters and training FLOPs per sample (forward x3), as a user would declare them: BERT-base on
# SQuAD (110M, seq 384: 6·P·T), ResNet-18 on CIFAR-10 (11.2M, 0.56 GFLOPs forward), DeepSpeech2
# (~40M, rough), ResNet-50 (25.6M, 4.1 GFLOPs forward, He et al. 2016), NeuMF (~5M, rough), YOLOv3
# (62M, 66 GFLOPs forward at 416 px, Redmon & Farhadi 2018).
POLLUX_SIZES = {
    "bert": (110e6, 6 * 110e6 * 384),
    "cifar10": (11.2e6, 3 * 0.56e9),
    "deepspeech2": (40e6, 3 * 20e9),
    "imagenet": (25.6e6, 3 * 4.1e9),
    "ncf": (5e6, 3 * 10e6),
    "yolov3": (62e6, 3 * 66e9),
}


@dataclass
class Series:
    name: str
    group: str  # "pollux", "published" or "measured"
    workload: object
    fit: object  # Measurements
    test: object | None  # Measurements or None (nothing past 16 GPUs)


#: Series of one testbed (name prefix, suffix) -> the testbed: one cluster and one benchmark sweep
#: (benchmarks/data/CORPUS_ADDITIONS.md, "Grouping note").
TESTBEDS = (("pollux-", "", "pollux-aws-t4"), ("mpt-", "-a100-roce", "llm-foundry-a100-roce"),
            ("mpt-", "-h100", "llm-foundry-h100"), ("transformerxl-large-pyt-dgx2h", "", "dle-transformerxl-dgx2h"),
            ("gpt3-5b-nemo-dgxa100", "", "nemo-superpod-a100"), ("bert-4b-nemo-dgxa100", "", "nemo-superpod-a100"),
            # the published runs (RUNS): torchtitan's Float8 runs ran on llm7b-torchtitan's Grand Teton hosts
            ("llm7b-torchtitan", "", "torchtitan-grand-teton"), ("torchtitan-", "", "torchtitan-grand-teton"),
            ("mtnlg-530b-", "", "selene-mtnlg"), ("bloom-176b-", "", "bloom-jeanzay"),
            # NVIDIA DeepLearningExamples CNN runs (runs/cnn_dle_runs_not_adopted.csv, not RUNS: see its header):
            # one README (the PyTorch ConvNets READMEs share one launcher, container and configs.yml) on one DGX
            # system is one testbed, as for the series
            ("dle-pyt-convnets-dgxa100-", "", "dle-pyt-convnets-dgxa100"),
            ("dle-pyt-convnets-dgx1-", "", "dle-pyt-convnets-dgx1"),
            ("dle-tf1-rn50-dgxa100-", "", "dle-tf1-rn50-dgxa100"), ("dle-tf1-rn50-dgx1-", "", "dle-tf1-rn50-dgx1"),
            ("dle-mxnet-rn50-dgxa100-", "", "dle-mxnet-rn50-dgxa100"),
            ("dle-mxnet-rn50-dgx1-", "", "dle-mxnet-rn50-dgx1"))


def cluster_of(name: str) -> str:
    """Series measured on one testbed share a cluster (learning counts each cluster once)."""
    for prefix, suffix, testbed in TESTBEDS:
        if name.startswith(prefix) and name.endswith(suffix):
            return testbed
    return name.split("-seq")[0]  # one README's sequence-length (and precision) variants ran on one system


def pollux_workload(model: str):
    from advisor.spec import workload_from_dict

    params, flops = POLLUX_SIZES[model]
    return workload_from_dict({
        "name": f"pollux-{model}",
        "model": {"params": params, "flops_per_sample": flops, "precision": "fp32"},
        "batch": {"policy": "fixed-per-gpu", "per_gpu_samples": 1},
        "parallelism": {"strategy": "ddp"},
        "cluster": {"gpu": "T4", "gpus_per_node": 4, "max_gpus": 64, "intra_node_bandwidth": "8 GB/s",
                    "inter_node_bandwidth": "50 Gbit/s"},
        "job": {"steps": 1000},
        "tiers": [{"name": "on-demand", "usd_per_gpu_hour": 1.0}],
    }, f"<pollux {model}>")


def _read(path: Path) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f))


def pollux_measurements(folder: Path, test: bool = False):
    """placements.csv ('1344' = 12 GPUs over 4 nodes) or scalability.csv as runs; sync_time is exposed comm."""
    from advisor.measurements import MeasuredRun, Measurements

    runs = []
    if test:
        for r in _read(folder / "scalability.csv"):
            g = int(r["num_replicas"])
            runs.append(MeasuredRun(g, int(r["num_nodes"]), float(r["local_bsz"]) * g,
                                    np.array([float(r["step_time"])]), np.array([float(r["sync_time"])])))
        return Measurements(runs, [], str(folder / "scalability.csv"))
    for r in _read(folder / "placements.csv"):
        g = sum(int(c) for c in r["placement"])
        runs.append(MeasuredRun(g, len(r["placement"]), float(r["local_bsz"]) * g, np.array([float(r["step_time"])]),
                                np.array([float(r["sync_time"])])))
    return Measurements(runs, [], str(folder / "placements.csv"))


def _split(name: str, group: str, workload, m) -> Series:
    fit = m.gpus <= FIT_MAX_GPUS
    test = m.subset(~fit) if (~fit).any() else None
    return Series(name, group, workload, m.subset(fit), test)


def load(pollux: Path = POLLUX) -> list[Series]:
    """Every series of the corpus that is present (Pollux only when ../shared is)."""
    from advisor.scaling.model import load_measurements
    from advisor.spec import load_workload

    out = []
    if pollux.is_dir():
        for model in POLLUX_MODELS:
            w = pollux_workload(model)
            out.append(Series(f"pollux-{model}", "pollux", w, pollux_measurements(pollux / model),
                              pollux_measurements(pollux / model, test=True)))
    for name, (spec, data) in CSV_SERIES.items():
        w = load_workload(spec)
        out.append(_split(name, "published", w, load_measurements(w, measurements=data)))
    for name, (spec, cal) in CALIBRATION_SERIES.items():
        w = load_workload(ROOT / spec)
        group = "measured" if name == "tiny-cpu" else "published"
        out.append(_split(name, group, w, load_measurements(w, calibration=ROOT / cal)))
    return out


def _run_spec(r: dict) -> dict:
    """The advisor spec a RUNS row declares (blank cells: the spec default)."""
    def put(d, key, conv=str):
        if r.get(key, "") != "":  # a column a file does not have (flops_per_sample): the spec default
            d[key] = conv(r[key])

    def flag(v):
        return v == "true"

    model = {"params": float(r["params"]), "precision": r["precision"]}
    for k in ("layers", "hidden", "heads", "kv_heads", "seq_len", "vocab"):
        put(model, k, int)
    put(model, "flops_per_sample", float)  # declared training FLOPs (a CNN, no shape: runs/cnn_dle_runs_*.csv)
    par = {"strategy": r["strategy"], "activation_checkpoint": r["activation_checkpoint"]}
    for k in ("tensor_parallel_degree", "pipeline_parallel_degree"):
        put(par, k, int)
    for k in ("distributed_optimizer", "overlap_grad_reduce", "sequence_parallel"):
        put(par, k, flag)
    gpus = int(r["gpus"])
    cluster = {"gpu": r["gpu"], "gpu_memory": r["gpu_memory"], "gpus_per_node": int(r["gpus_per_node"]),
               "max_gpus": gpus, "intra_node_bandwidth": r["intra_node_bandwidth"],
               "inter_node_bandwidth": r["inter_node_bandwidth"]}
    return {"name": r["name"], "model": model,
            "batch": {"policy": "fixed-global", "global_samples": int(r["global_samples"]),
                      "micro_samples": int(r["micro_samples"])},
            "parallelism": par, "cluster": cluster, "job": {"steps": 1000},
            "tiers": [{"name": "on-demand", "usd_per_gpu_hour": 2.0}], "calibration": {"gpus": [gpus]}}


def published_runs(path: Path = RUNS) -> list[Series]:
    """The RUNS rows as one-run Series (group "run", nothing to predict): the conditioned compute prior
    learns from their ln(1/MFU) evidence (benchmarks/accuracy.py `evidence`), nothing else does."""
    from advisor.measurements import MeasuredRun, Measurements
    from advisor.spec import workload_from_dict

    out = []
    with path.open() as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    for r in rows:
        assert cluster_of(r["name"]) == r["testbed"], (r["name"], r["testbed"])
        w = workload_from_dict(_run_spec(r), f"<{path.name} {r['name']}>")
        run = MeasuredRun(int(r["gpus"]), int(r["nodes"]), float(r["global_samples"]),
                          np.array([float(r["step_seconds"])]))
        out.append(Series(r["name"], "run", w, Measurements([run], [], f"{path}:{r['name']}"), None))
    return out
