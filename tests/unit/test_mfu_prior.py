"""The conditioned compute prior: which peak an MFU is measured against, the features a workload gets,
and what learn_mfu recovers and how wide it keeps each class."""

import numpy as np
import pytest

from advisor.catalog import find_gpu
from advisor.scaling import priors
from advisor.scaling.priors import LEARNED, MFU_CLASSES, MFU_FEATURES, MFU_SD_FLOOR, MFUModel, learn_mfu
from advisor.spec import workload_from_dict


def _w(gpu, precision, transformer=True, seq=512, peak=None):
    model = ({"params": "340M", "layers": 24, "hidden": 1024, "heads": 16, "seq_len": seq} if transformer
             else {"params": "25M", "flops_per_sample": 12.3e9})
    cluster = {"gpu": gpu, "gpus_per_node": 8, "max_gpus": 64, "intra_node_bandwidth": "150 GB/s",
               "inter_node_bandwidth": "100 Gbit/s"}
    if peak:
        cluster["peak_flops"] = peak
    if find_gpu(gpu) is not None:  # the catalog's link: 150 GB/s is more than a T4's PCIe (advisor.spec)
        cluster.pop("intra_node_bandwidth")
    return workload_from_dict({
        "name": "t", "model": {**model, "precision": precision},
        "batch": {"policy": "fixed-per-gpu", "per_gpu_samples": 8}, "parallelism": {"strategy": "ddp"},
        "cluster": cluster, "job": {"steps": 10}, "tiers": [{"name": "on-demand", "usd_per_gpu_hour": 1.0}],
    }, "<test>")


def _features(w):
    return dict(zip(MFU_FEATURES, priors.mfu_features(w), strict=True))


def test_fp32_before_ampere_is_a_cuda_core_peak_and_tf32_is_a_tensor_core_one():
    """The class bug: fp32 on a V100 is priced at its 15.7 TFLOP/s CUDA cores, fp32 on an A100 at TF32's 156
    tensor-core TFLOP/s; one "fp32" flag for both put the TF32 BERT 2.4x off held out."""
    v100, a100 = _w("V100-SXM2", "fp32"), _w("A100-SXM", "fp32")
    assert v100.peak_flops == pytest.approx(15.7e12) and a100.peak_flops == pytest.approx(156e12)
    assert _features(v100) == {"hopper_or_newer": 0, "volta_or_turing": 0, "cuda_core": 1, "llm": 0,
                               "declared_flops": 0}
    assert not any(_features(a100).values())  # Ampere tensor cores, a BERT: the intercept's class
    assert _features(_w("V100-SXM2", "fp16"))["volta_or_turing"] == 1
    assert _features(_w("T4", "fp32", transformer=False))["cuda_core"] == 1
    assert _features(_w("P100", "fp16"))["cuda_core"] == 1  # Pascal: no tensor cores at any precision


def test_model_class_from_what_the_spec_shows():
    assert priors.mfu_class(_w("H100-SXM", "bf16", seq=2048)) == "llm"
    assert priors.mfu_class(_w("H100-SXM", "bf16", seq=512)) == "transformer"
    assert priors.mfu_class(_w("T4", "fp32", transformer=False)) == "declared_flops"
    f = _features(_w("H100-SXM", "bf16", seq=4096))
    assert f["hopper_or_newer"] == 1 and f["llm"] == 1 and f["declared_flops"] == 0


def test_every_catalog_gpu_with_a_peak_is_conditioned_non_transformers_too():
    """Before, only transformers were: a CNN on T4s kept the corpus-wide scalar prior."""
    cnn = _w("T4", "fp32", transformer=False)
    assert priors.mfu_applies(cnn) and not priors.mfu_applies(_w("cpu-rank", "fp32", peak=1e11))
    p = LEARNED.for_workload(cnn)
    assert p.log_inv_mfu == pytest.approx(LEARNED.mfu.mean(cnn)) != LEARNED.log_inv_mfu
    assert p.log_inv_mfu_sd == LEARNED.mfu.sds[MFU_CLASSES.index("declared_flops")]


def test_learned_model_matches_its_features_and_classes():
    m = LEARNED.mfu
    assert len(m.coef) == len(MFU_FEATURES) and len(m.sds) == len(MFU_CLASSES)
    assert min(m.sds) >= MFU_SD_FLOOR
    # a CUDA-core peak is the easier one to approach; Volta's tensor cores the hardest to feed
    coef = dict(zip(MFU_FEATURES, m.coef, strict=True))
    assert coef["cuda_core"] < 0 < coef["hopper_or_newer"] < coef["volta_or_turing"]


def _synthetic(rng, beta, n_beds=8, per_bed=3, noise=0.0):
    pts = []
    for b in range(n_beds):
        for _ in range(per_bed):
            x = tuple(float(v) for v in rng.integers(0, 2, len(beta) - 1))
            y = beta[0] + float(np.dot(beta[1:], x)) + noise * rng.standard_normal()
            pts.append((x, y, 1e-4, 1.0 / per_bed, f"bed{b}", MFU_CLASSES[b % 3]))
    return pts


def test_learn_mfu_recovers_a_law_and_the_ridge_only_shrinks_it():
    rng = np.random.default_rng(0)
    beta = np.array([0.8, 0.3, -0.6])
    m = learn_mfu(_synthetic(rng, beta), ridge=0.0)
    assert m.intercept == pytest.approx(0.8, abs=1e-6) and np.allclose(m.coef, beta[1:], atol=1e-6)
    assert m.sds == (MFU_SD_FLOOR,) * 3  # an exact law: held out, nothing but the floor
    shrunk = learn_mfu(_synthetic(np.random.default_rng(0), beta), ridge=5.0)
    assert all(abs(s) < abs(b) for s, b in zip(shrunk.coef, beta[1:], strict=True))


def test_learn_mfu_sd_is_the_held_out_spread_per_class():
    rng = np.random.default_rng(1)
    pts = _synthetic(rng, np.array([1.0, 0.2]), n_beds=9)
    # one class's testbeds scatter by ~0.8 around the law: its sd, not the others', grows
    pts = [(x, y + (0.8 * rng.choice([-1, 1]) if c == "declared_flops" else 0.0), v, w, b, c)
           for x, y, v, w, b, c in pts]
    m = learn_mfu(pts)
    sd = dict(zip(MFU_CLASSES, m.sds, strict=True))
    assert sd["declared_flops"] > 0.6 and sd["llm"] < sd["declared_flops"] and sd["transformer"] < sd["declared_flops"]


def test_learn_mfu_needs_four_testbeds_and_gives_an_absent_class_the_widest_sd():
    rng = np.random.default_rng(2)
    pts = [p for p in _synthetic(rng, np.array([1.0, 0.5]), n_beds=6, noise=0.3) if p[5] != "llm"]
    m = learn_mfu(pts)
    assert isinstance(m, MFUModel) and m.sds[0] == max(m.sds)
    assert learn_mfu([p for p in pts if p[4] in ("bed1", "bed2", "bed4")]) is None


@pytest.fixture(scope="module")
def corpus_rows():
    """The corpus's per-series ln(1/MFU) evidence (benchmarks/mfu_prior.py; fits every series, ~15 s)."""
    import sys

    from conftest import ROOT, SHARED_DATA

    if not (SHARED_DATA / "pollux-osdi21").is_dir():
        pytest.skip("LEARNED was learned with the Pollux traces of ../shared")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import mfu_prior

    return mfu_prior, mfu_prior.series_evidence()


def test_learned_mfu_is_what_the_corpus_gives(corpus_rows):
    """LEARNED.mfu is the pasted output of benchmarks/mfu_prior.py: a feature or evidence change that is not
    re-learned fails here."""
    mfu_prior, rows = corpus_rows
    m = mfu_prior.score(rows, mfu_prior.functions("chosen"))["model"]
    assert m.intercept == pytest.approx(LEARNED.mfu.intercept, abs=2e-3)
    assert np.allclose(m.coef, LEARNED.mfu.coef, atol=2e-3) and np.allclose(m.sds, LEARNED.mfu.sds, atol=2e-3)


def test_the_chosen_features_beat_one_mean_and_the_old_flags_held_out(corpus_rows):
    mfu_prior, rows = corpus_rows
    rms = {name: mfu_prior.score(rows, mfu_prior.functions(name))["rms"]
           for name in ("intercept only", "before (gen, fp32, llm)", "chosen")}
    assert rms["chosen"]["all"] < rms["before (gen, fp32, llm)"]["all"] < rms["intercept only"]["all"]
    assert rms["chosen"]["transformer"] < rms["before (gen, fp32, llm)"]["transformer"]
    assert rms["chosen"]["llm"] < 0.5 * rms["intercept only"]["llm"]


def test_published_runs_are_mfu_evidence_of_their_own_testbeds_and_no_peer_case():
    """benchmarks/data/runs/mfu_published_runs.csv: one spec per run, its testbed shared with the series of its
    cluster (torchtitan's Float8 runs with llm7b-torchtitan), none of peers.py's sources."""
    import sys

    from conftest import ROOT

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import corpus

    runs = corpus.published_runs()
    assert len(runs) >= 5 and all(s.test is None and len(s.fit.runs) == 1 for s in runs)
    assert corpus.cluster_of("llm7b-torchtitan") == corpus.cluster_of("torchtitan-llama3-70b-float8-256")
    assert corpus.RUNS not in {p for _, p in corpus.CSV_SERIES.values()}
    import csv

    with corpus.RUNS.open() as f:
        sources = [r["source"].lower() for r in csv.DictReader(x for x in f if not x.startswith("#"))]
    assert len(sources) == len(runs) and all("mlperf" not in t and "narayanan" not in t for t in sources)
    assert {s.workload.model.precision for s in runs} >= {"fp8", "bf16"}


def test_band_sd_is_the_gaussian_sd_of_a_gaussian_sample():
    """On normal residuals the 90% quantile of |r| is Z90·sigma, so band_sd recovers sigma (synthetic:
    recovery of a known parameter)."""
    from advisor.scaling.priors import band_sd

    r = np.random.default_rng(0).normal(0.0, 0.3, 20000)
    assert band_sd(r, np.ones_like(r)) == pytest.approx(0.3, rel=0.03)


def test_band_sd_holds_ninety_percent_of_the_weight_not_the_tail():
    """Ten equally weighted residuals 0.1..1.0: by the midpoint rule |r| = 0.9 sits at 85% and 1.0 at
    95%, so the 90% point is 0.95 (by hand); one far outlier moves the rms, barely the band."""
    from advisor.scaling.priors import band_sd
    from advisor.step_model import Z90

    r = np.arange(1, 11) / 10.0
    assert band_sd(-r, np.ones(10)) == pytest.approx(0.95 / Z90)
    tail = np.r_[np.full(19, 0.2), 3.0]
    assert band_sd(tail, np.ones(20)) == pytest.approx(0.2 / Z90)
    assert np.sqrt(np.mean(tail**2)) > 3 * band_sd(tail, np.ones(20))
    # weight: the heavy point (weight 9 of 10) sets the band
    assert band_sd(np.array([0.1, 0.5]), np.array([1.0, 9.0])) == pytest.approx(0.5 / Z90)


def test_cnn_runs_reproduce_their_quoted_throughput_and_declare_flops_as_the_efficientnet_spec():
    """benchmarks/data/runs/cnn_dle_runs_not_adopted.csv (NVIDIA DeepLearningExamples CNNs, MFU evidence held back:
    its header says why): each step is global batch / the images per second its source quotes from the README
    row, each declares training FLOPs = 3 x 2 x the forward multiply-adds its source cites (the convention of
    benchmarks/workloads/efficientnet-b4-tf2-dgx1.toml: 25.2e9 = 3 x 2 x 4.2e9), one whole DGX node each, each is
    a declared-FLOPs workload priced at the catalog peak of its precision (TF32 on an A100, CUDA cores for fp32
    on a V100, tensor cores for fp16); and the compute prior's own file (corpus.RUNS) does not carry them."""
    import csv
    import re
    import sys

    from advisor.spec import load_workload
    from conftest import ROOT

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import corpus

    path = ROOT / "benchmarks" / "data" / "runs" / "cnn_dle_runs_not_adopted.csv"
    with path.open() as f:
        rows = {r["name"]: r for r in csv.DictReader(x for x in f if not x.startswith("#"))}
    runs = {s.name: s for s in corpus.published_runs(path)}
    assert len(runs) == len(rows) >= 12 and len({corpus.cluster_of(n) for n in runs}) >= 4
    assert not any(s.name.startswith("dle-") for s in corpus.published_runs())  # not adopted: LEARNED lacks them
    effnet = load_workload(ROOT / "benchmarks" / "workloads" / "efficientnet-b4-tf2-dgx1.toml")
    assert effnet.model.training_flops_per_sample == pytest.approx(3 * 2 * 4.2e9)  # the convention followed
    peaks = {("A100-SXM", "fp32"): 156e12, ("A100-SXM-40GB", "fp32"): 156e12, ("A100-SXM", "fp16"): 312e12,
             ("A100-SXM-40GB", "fp16"): 312e12, ("V100-SXM2-16GB", "fp32"): 15.7e12, ("V100-SXM2-16GB", "fp16"): 125e12}
    for name, s in runs.items():
        r, w = rows[name], s.workload
        assert COMMIT_729963DD in r["source"], name
        thr = float(re.search(r"column '[^']+': ([\d.]+) img/s", r["source"]).group(1))
        assert float(r["step_seconds"]) == pytest.approx(int(r["global_samples"]) / thr, rel=1e-5), name
        macs = float(re.search(r"GMACs ([\d.]+)", r["source"]).group(1)) * 1e9
        assert w.model.training_flops_per_sample == pytest.approx(3 * 2 * macs), name
        assert int(r["gpus"]) == int(r["gpus_per_node"]) == 8 and int(r["nodes"]) == 1
        assert int(r["global_samples"]) % (8 * int(r["micro_samples"])) == 0
        assert priors.mfu_class(w) == "declared_flops" and priors.mfu_applies(w)
        assert w.peak_flops == pytest.approx(peaks[(w.cluster.gpu, w.model.precision)]), name


#: NVIDIA/DeepLearningExamples commit of every CNN row (the one the EfficientNet series cites)
COMMIT_729963DD = "729963dd47e7c8bd462ad10bfac7a7b0b604e6dd"
