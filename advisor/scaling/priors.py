"""What the coefficients of the topology model look like across real jobs: the priors of the fit.

Each prior is a Gaussian on one coefficient of `advisor.scaling.families` (in log space for the
factors on declared speeds, whose spread is multiplicative; in linear space, centred on zero, for
the per-step constants, which the physics does not ask for). The values are learned from the
published corpus of benchmarks/corpus.py by empirical Bayes: every series is fitted on all its
rows with the wide `VAGUE` priors; the likelihood its data put on each coefficient (MFU from every
series, the intra-node link from series with several GPUs on a node, overlap from series with
exposed communication) enters a hierarchical normal model (`learn`), each testbed weighted once.
The inter-node link, which the corpus's one-node fits cannot pin one series at a time, is chosen on
a grid by the predictive density of held-out rows (benchmarks/accuracy.py `tuned`, minimax regret
over the testbeds it matters to). benchmarks/accuracy.py re-learns all of it without the series
it scores (leave-one-series-out), so the accuracy it reports is on data the priors never saw.

`LEARNED` is the output of `python benchmarks/accuracy.py --learn` on the whole corpus (values
printed there, pasted here); docs/model.md lists them with their meaning.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np

from advisor.step_model import LEVEL, Z90

#: A fitted link may be at most this much faster than declared (coefficient >= 1 / (1 + tolerance)).
#: NCCL's bus bandwidth stays below the link's rate (nccl-tests doc/PERFORMANCE.md); in-network
#: reduction (NVLink SHARP) lifts all-reduce busbw to ~480 GB/s on 450 GB/s NVLink 4 (nccl-tests
#: issue #212), 7% above: 15% leaves room for that and for rounding in declared figures.
LINK_TOLERANCE = 0.15

#: MFU floor for the compute coefficient when the peak is known: 1/MFU >= 1 (MFU <= 100%).
MAX_MFU = 1.0


#: What the compute prior is conditioned on (`mfu_features`), besides its intercept (Ampere's tensor
#: cores, a transformer shorter than an LLM's): the kind of peak MFU is measured against, which the
#: catalog fixes per GPU and precision (`advisor.catalog.GPU.tensor_cores`): tensor cores of Hopper or
#: newer (a higher peak is harder to feed: NVIDIA's MLPerf and torchtitan runs reach ~40% of an H100's
#: bf16 peak where A100 runs reach ~50%), tensor cores of Volta or Turing, or CUDA cores (plain FP32
#: before Ampere, any precision on Pascal and Kepler: an 8x lower peak that a GEMM approaches far
#: more closely). TF32 on Ampere and newer is a tensor-core peak like bf16's (the same BERT-Large on one
#: DGX A100 reaches 48% of 156 TF32 TFLOP/s and 41% of 312 fp16 ones: benchmarks/data/bert-large-tf2-*),
#: not a class of its own: a flag on fp32 put the TF32 series 2.4x off held out. And the model class the
#: spec lets us see: an LLM (a transformer shape at >= 2048 tokens per sample: large, regular matmuls),
#: or declared FLOPs without a shape (a CNN, a recommender, a speech model: the Pollux traces, EfficientNet).
#: Not FP8 (yet): a flag enters only when the evidence behind it spans two testbeds or more, as the
#: ridge in `learn_mfu` keeps a feature a few series share from swinging on them; the one FP8 testbed
#: is torchtitan's Float8 Llama 3.1 8B and 70B runs on H100 (benchmarks/data/runs/mfu_published_runs.csv,
#: nn.Linear only), and its flag moved the held-out LLM rms from 0.105 to 0.100 (all 0.569 to 0.568).
#: FP8 is priced by its peak alone: the catalog's FP8 peak for the linear layers, attention at bf16's
#: (`advisor.scaling.features`). Model size (ln hidden, ln parameters capped at 100B, a >= 100B flag)
#: and tokens per micro-batch did not lower the held-out error: BLOOM-176B and MT-NLG 530B sit at the
#: MPT series' MFU once the fit prices their recipes' bubble, recomputation and TP traffic.
#: benchmarks/mfu_prior.py prints the candidates tried and their held-out errors.
MFU_FEATURES = ("hopper_or_newer", "volta_or_turing", "cuda_core", "llm", "declared_flops")

#: The classes the compute prior's spread is kept for (`MFUModel.sd`, `mfu_class`).
MFU_CLASSES = ("llm", "transformer", "declared_flops")

#: Catalog names by generation (advisor/data/gpus.toml): newer than Ampere, older than Ampere.
_NEWER = ("H100", "H200", "GH200", "B200", "B300", "GB200", "GB300", "MI300X", "MI325X", "MI355X", "L40S", "L4")
_OLDER = ("V100", "P100", "K80", "T4")

#: Least spread of the conditioned compute prior: the held-out spread of a handful of LLM testbeds
#: (0.10 in ln(1/MFU), benchmarks/mfu_prior.py) is not evidence of a tighter law than ~25% (one sd) for a new job.
MFU_SD_FLOOR = 0.25


def mfu_applies(w) -> bool:
    """Whether the conditioned compute prior speaks for `w`: a catalog GPU (its peak's kind known) and a peak."""
    from advisor.catalog import find_gpu

    return bool(w.peak_flops) and find_gpu(w.cluster.gpu) is not None


def mfu_class(w) -> str:
    """The MFU_CLASSES entry of a workload: an LLM, another transformer shape, or declared FLOPs only."""
    m = w.model
    if not m.is_transformer:
        return "declared_flops"
    return "llm" if m.seq_len >= 2048 else "transformer"


def mfu_features(w) -> tuple[float, ...]:
    """The MFU_FEATURES of a workload (0/1 each); all 0 off the catalog."""
    from advisor.catalog import find_gpu

    gpu = find_gpu(w.cluster.gpu)
    tensor = gpu is not None and gpu.tensor_cores(w.model.precision)
    cls = mfu_class(w)
    return (float(tensor and gpu.name.startswith(_NEWER)), float(tensor and gpu.name.startswith(_OLDER)),
            float(gpu is not None and not tensor), float(cls == "llm"), float(cls == "declared_flops"))


@dataclass(frozen=True)
class MFUModel:
    """ln(1/MFU) = intercept + coef · mfu_features, with the held-out spread of each of MFU_CLASSES as
    its sd (`sds`, in that order): learned by `learn_mfu` from the corpus."""

    intercept: float
    coef: tuple[float, ...]
    sds: tuple[float, ...]

    def mean(self, w) -> float:
        return float(self.intercept + np.dot(self.coef, mfu_features(w)))

    def sd(self, w) -> float:
        return self.sds[MFU_CLASSES.index(mfu_class(w))]


def band_sd(held: np.ndarray, weight: np.ndarray) -> float:
    """The sd whose Gaussian 90% band (±Z90·sd) holds the weighted 90% of the held-out residuals `held`:
    their weighted 90% quantile of |residual| over Z90. Not their root mean square: held-out MFU residuals
    are heavy-tailed (one fp32 Transformer-XL on CUDA cores, 0.86 in ln, sets the transformer class's rms
    to 0.37 where 90% of the weight lies within 0.45, an sd of 0.27), and a band from the rms holds
    more than 90% of a new testbed's jobs. The quantile is the weighted midpoint rule (each residual at
    the middle of its weight's share), interpolated."""
    a = np.abs(np.asarray(held, float))
    order = np.argsort(a)
    w = np.asarray(weight, float)[order]
    at = (np.cumsum(w) - w / 2) / np.sum(w)
    return float(np.interp(LEVEL, at, a[order]) / Z90)


def learn_mfu(points: list[tuple[tuple[float, ...], float, float, float, str, str]], tau: float = 0.3,
              ridge: float = 0.5) -> MFUModel | None:
    """The MFUModel from per-series evidence (features, value of ln(1/MFU), its variance, weight, testbed,
    class of MFU_CLASSES): weighted least squares (weight / (tau² + variance), tau the between-series
    spread `learn` finds for MFU's scale), a ridge of `ridge` on the coefficients (not the intercept) so
    a feature a few series share does not swing on them; its sd per class is `band_sd` of the
    leave-one-testbed-out residuals (what a new testbed meets), floored at MFU_SD_FLOOR; a class no series
    has gets the largest. None with fewer than 4 testbeds."""
    if len({p[4] for p in points}) < 4:
        return None
    X = np.array([(1.0, *p[0]) for p in points])
    y, v, wt = (np.array([p[i] for p in points], float) for i in (1, 2, 3))
    beds = [p[4] for p in points]
    classes = np.array([p[5] for p in points])

    def fit(keep):
        W = wt[keep] / (tau**2 + v[keep])
        R = ridge * np.eye(X.shape[1])
        R[0, 0] = 0.0
        return np.linalg.solve(X[keep].T @ (W[:, None] * X[keep]) + R, X[keep].T @ (W * y[keep]))

    held = np.array([y[i] - X[i] @ fit(np.array([b != beds[i] for b in beds])) for i in range(len(y))])
    sds = {c: max(band_sd(held[k], wt[k]), MFU_SD_FLOOR) for c in MFU_CLASSES if (k := classes == c).any()}
    widest = max(sds.values())
    beta = fit(np.ones(len(y), bool))
    return MFUModel(float(beta[0]), tuple(float(b) for b in beta[1:]), tuple(sds.get(c, widest) for c in MFU_CLASSES))


#: ln(declared / achieved bus bandwidth) by declared link class (`cluster.intra_node_link`,
#: `cluster.inter_node_link`): what NCCL reaches of the hardware's rate in nccl-tests all-reduce at
#: large messages (8-17 GB), achieved = busbw / (ceiling x declared rate), the ceiling the algorithm's
#: highest busbw in units of the declared rate (`advisor.imports.algorithm.busbw_ceiling_factor`: 1 for
#: a ring, 1.875 for the 2-node tree NCCL runs by default on 16 GPUs). The mean over the measured
#: systems, each once; `tests/unit/test_link_priors.py` recomputes every value from the published rows.
#: A step-time fit reads the link slower than NCCL alone (framework overhead, kernels sharing SMs with
#: compute): the corpus's fits put NVLink at ~54% and the network at ~37% of declared (`LEARNED`), so
#: these means are where a declared class moves the prior, with `LEARNED`'s spread around them. A class
#: with no published measurement (PCIe) keeps the corpus-learned prior.
#: - nvlink (5 systems): 8x A100 NVLink 3 (300 GB/s) 234.89 GB/s and 232.20 GB/s (stas00/ml-engineering
#:   network/README.md, A100 table, via ../shared/data/published/allreduce_busbw_vs_message_size.csv;
#:   oracle-japan/ocitutorials run-nccltests-ubuntu §3-1, tests/fixtures/nccl-tests); 8x H100 NVLink 4
#:   (450 GB/s) ~370 GB/s ring / non-all-reduce (NVIDIA/nccl-tests #212); 8x H200 482.26 GB/s with NVLS
#:   and 8x B200 NVLink 5 (900 GB/s) 845.67 GB/s (stas00/ml-engineering, H200 and P6-B200 tables):
#:   ln 0.245, 0.256, 0.196, -0.069, 0.062, mean 0.138 (87% of declared).
#: - infiniband (2): NDR 400 Gbit/s, 46-48 GB/s per NIC of 50 with NCCL_ALGO=RING (NVIDIA/nccl-tests
#:   #290), ln(50/47) = 0.062; DGX A100 8x HDR 200 Gbit/s, 192 GB/s multi-node all-reduce busbw of 200
#:   (NVIDIA/nccl #812, quoted in #1576), a ring (busbw below the line rate), ln 0.041: mean 0.051 (95%).
#: - roce (1): 16x A100 on 2 OCI BM.GPU4.8 hosts, RoCEv2 16x100 Gbit/s (200 GB/s) per node, 191.76 GB/s
#:   (ocitutorials §3-2, tests/fixtures/nccl-tests), 2-node tree ceiling 375 GB/s: ln 0.671 (51%).
#: - ethernet (2, both GPU-direct fabrics; plain TCP sockets are slower): 16x H100 on 2 GCP a3-mega
#:   hosts, GPUDirect-TCPXO 8x200 Gbit/s, 338.82 GB/s (tests/fixtures/nccl-tests) of a 375 GB/s tree
#:   ceiling, ln 0.101; 32x B200 on 4 AWS P6-B200 nodes, 8x 50 GB/s EFA v4, 381.8 GB/s of 400 (ring;
#:   stas00/ml-engineering, 1 vs 4 nodes table), ln 0.047: mean 0.074 (93%).
LINK_CLASS_LOG_BW = {"nvlink": 0.138, "infiniband": 0.051, "roce": 0.671, "ethernet": 0.074}


@dataclass(frozen=True)
class Priors:
    """Gaussian priors on the topology coefficients (see docs/model.md, "The prior")."""

    log_inv_mfu: float
    """Mean of ln(1/MFU): the compute coefficient at the catalog peak."""
    log_inv_mfu_sd: float
    log_intra_bw: float
    """Mean of ln(declared / achieved intra-node bus bandwidth)."""
    log_intra_bw_sd: float
    log_inter_bw: float
    """Mean of ln(declared / achieved inter-node bus bandwidth)."""
    log_inter_bw_sd: float
    log_latency_sd: float
    """Spread of ln(achieved / declared latency), centred on 1."""
    gamma: float
    """Overlap exponent γ (1: none, 10: full)."""
    gamma_sd: float
    contention_sd: float
    """Per-micro-batch host contention per extra GPU on a node, as a share of compute (mean 0). 5%: the
    corpus's one-node losses run from ~0.2% per extra GPU (BERT on DGX A100) through 3.6% (EfficientNet-B4,
    DGX-1) to ~10% (YOLOv3 on a 4-GPU T4 host, Pollux)."""
    step_share_sd: float
    """Per-step constants (overhead, sync), as a share of the shortest measured step (mean 0)."""
    noise: float
    """Relative run-to-run noise of one step time (one sigma) that the intervals pool measured residuals with."""
    widening: float
    """Relative growth of the noise per doubling of distance past the data, for intervals. Set on the
    corpus's leave-one-series-out coverage (benchmarks/accuracy.py): with the drift past the data
    (`drift`), 0.35 puts published series at 97% and the Pollux traces at 97% with every fitted count
    (0.5: 99% / 98%, above issue 21's 85-97%; 0.25: 97% / 96%, the 4-8x bin at 90%, the Pollux fits
    of 1-3 counts at 75-80%)."""

    mfu: MFUModel | None = None
    """The compute prior conditioned on the workload (`for_workload`); None: the scalar above for all."""
    drift: float = 0.0
    """ln(step) added per doubling of distance past the data (`intervals.NoiseModel.drift_factor`): the
    fitted model, extrapolated, runs optimistic by about this much per doubling on the corpus's held-out
    rows (benchmarks/accuracy.py tunes it leave-one-series-out over `DRIFTS`). 0 before any learning."""
    by_link_class: bool = False
    """Centre each link's prior on LINK_CLASS_LOG_BW where the spec declares its class (`for_workload`)."""

    def as_dict(self) -> dict:
        return asdict(self)

    def for_workload(self, w) -> "Priors":
        """These priors with the compute prior conditioned on `w` (a catalog GPU with a known peak), else as is."""
        out = {}
        if self.by_link_class:
            for key, link in (("intra", w.cluster.intra_node_link), ("inter", w.cluster.inter_node_link)):
                if link in LINK_CLASS_LOG_BW:
                    out[f"log_{key}_bw"] = LINK_CLASS_LOG_BW[link]
        if self.mfu is not None and mfu_applies(w):
            out.update(log_inv_mfu=self.mfu.mean(w), log_inv_mfu_sd=self.mfu.sd(w))
        return replace(self, **out) if out else self


#: Before learning, and for any field fewer than two testbeds inform: MFU ~37% (ln 1/MFU = 1.0; PaLM
#: reports 46% for itself and 21-30% for GPT-3/Gopher/MT-NLG, Chowdhery et al. 2022 Table 3),
#: links at ~75% (intra) and ~37% (inter) of declared, latencies as declared, partial overlap. The
#: inter-node spread is wide on purpose: NCCL alone reaches 46-48 of 50 GB/s per NDR NIC (nccl-tests
#: #290), while the corpus's jobs that a slow link would show (TensorFlow + Horovod on DGX-1, the
#: Pollux cloud over TCP) achieved 1/4 to 1/10 of the declared rate.
DEFAULTS = Priors(log_inv_mfu=1.0, log_inv_mfu_sd=0.6, log_intra_bw=0.3, log_intra_bw_sd=0.6, log_inter_bw=1.0,
                  log_inter_bw_sd=1.0, log_latency_sd=1.0, gamma=2.0, gamma_sd=1.5, contention_sd=0.05,
                  step_share_sd=0.02, noise=0.05, widening=0.35, by_link_class=True)

#: Learned on the corpus (benchmarks/accuracy.py --learn): see the module docstring. Every field is the
#: value `python benchmarks/accuracy.py --learn` printed on 2026-12-02 (branch learn: TP under tp_comm_overlap
#: and ring attention hidden by decomposition, `layouts.Traffic.decomposed`; the estimator's start fixed),
#: rounded to 3 decimals: γ 1.116 ± 1.0 (floored) from bert-large-dgx1-weak (γ = 1, weight 1) and the
#: DGX-2H Transformer-XL pair (fp32 γ = 1, fp16 2.48, weight 1/2 each); inter-node mean 1.0 (`tuned`'s grid
#: point; the spread learned, 1.320); intra 0.630 ± 0.946; noise 0.038; the scalar MFU prior (GPUs off the
#: catalog) 1.100 ± 0.678, as --learn printed it on 2026-12-02 15:50 UTC after the padding-aware FLOPs and the
#: published large-model runs moved the per-series evidence (it was 1.051 ± 0.717). `mfu=`, the
#: conditioned compute prior, is `python benchmarks/mfu_prior.py`'s "learned" of 2026-12-02 (branch mfubig:
#: the corpus's series plus the six published large-model and FP8 runs of benchmarks/data/runs/mfu_published_runs.csv,
#: MFU_FEATURES without fp8; branch recipes: Megatron's distributed-optimizer buckets; branch padding:
#: NVIDIA's length-binned BERT phase-2 tables priced at the tokens they computed, `model.mean_seq_len`),
#: rounded to 3 decimals: held-out, leave-one-testbed-out rms of ln(1/MFU) 0.106 on
#: LLMs (floored to 0.25), 0.37 other transformers (0.47 with the binned tables at 512 tokens), 1.26
#: declared FLOPs: the Pollux traces on T4 CUDA cores and EfficientNet-B4 on V100s disagree. The sds are
#: `band_sd` of those residuals (2026-12-02 22:00 UTC, --learn): 0.25 (floor), 0.274, 1.026; the rms
#: gave 0.25, 0.367, 1.260.
LEARNED = Priors(log_inv_mfu=1.100, log_inv_mfu_sd=0.678, log_intra_bw=0.630, log_intra_bw_sd=0.946, log_inter_bw=1.0,
                 log_inter_bw_sd=1.320, log_latency_sd=1.0, gamma=1.116, gamma_sd=1.0, contention_sd=0.05,
                 step_share_sd=0.02, noise=0.038, widening=0.35, by_link_class=True, drift=0.01,
                 mfu=MFUModel(intercept=0.896, coef=(0.255, 0.864, -0.764, -0.244, 1.120), sds=(0.25, 0.274, 1.026)))

#: Priors for learning (empirical Bayes): wide and neutral (declared speeds, γ = 2) on what is
#: learned, so the data decide wherever they can; as in use on the per-step constants: in a
#: data-parallel ring the bus volume 2(N-1)/N is nearly constant past a few GPUs, so a free sync
#: constant and the link factor are collinear, and only holding the constant small lets the link
#: factor carry the communication it explains.
VAGUE = replace(DEFAULTS, log_inv_mfu=1.0, log_inv_mfu_sd=3.0, log_intra_bw=0.0, log_intra_bw_sd=2.0, log_inter_bw=0.0,
                log_inter_bw_sd=2.0, gamma=2.0, gamma_sd=5.0, by_link_class=False)

#: Floors on learned spreads: a handful of series never justifies a prior narrower than these.
SD_FLOOR = {"log_inv_mfu_sd": 0.4, "log_intra_bw_sd": 0.4, "log_inter_bw_sd": 0.7, "gamma_sd": 1.0}


def learn(samples: dict[str, list[tuple[float, float, float]]], noise: dict[str, float] | None = None,
          base: Priors = DEFAULTS) -> Priors:
    """Empirical-Bayes priors from per-series evidence.

    `samples` maps a Priors mean field (log_inv_mfu, log_intra_bw, log_inter_bw, gamma) to one
    (value, variance, weight) per series: the Gaussian likelihood its data put on that coefficient
    (the vague prior removed), weighted so that each testbed counts once (1 / its series). The prior
    is the normal-normal hierarchical model's fit, x_i ~ N(mu, tau² + v_i): mu and tau by weighted
    maximum marginal likelihood (tau on a grid), tau floored by SD_FLOOR (a handful of testbeds
    never justifies a narrower prior). Series of one testbed still differ (Pollux's six models range
    over a factor 3.5 in MFU), and that spread is what a new job on a known testbed meets, so tau is
    fitted on series, not on testbed means. A series whose data barely constrain a coefficient
    (large v_i) barely moves it. Fields informed by fewer than two testbeds keep `base`'s. `noise`
    maps testbeds to the in-sample residual spread of their series (published tables read 0.8-4%,
    the Pollux cloud 9-24%): the median testbed's, floored at 1%, is the noise measured residuals
    are pooled with (a cloud's own residuals then widen its intervals, a DGX table's narrow them)."""
    out = {}
    taus = np.geomspace(0.02, 5.0, 200)
    for key, triples in samples.items():
        if sum(t[2] for t in triples) < 2 - 1e-9:
            continue
        x, v, wt = (np.array([t[i] for t in triples], float) for i in range(3))
        best = None
        for tau in taus:
            w = wt / (tau**2 + v)
            mu = float(np.sum(w * x) / np.sum(w))
            ll = float(np.sum(wt * (-0.5 * np.log(tau**2 + v) - 0.5 * (x - mu) ** 2 / (tau**2 + v))))
            if best is None or ll > best[0]:
                best = (ll, mu, tau)
        out[key] = best[1]
        sd_key = f"{key}_sd"
        out[sd_key] = max(float(best[2]), SD_FLOOR.get(sd_key, 0.0))
    if noise and len(noise) >= 2:
        out["noise"] = max(float(np.median(list(noise.values()))), 0.01)
    return replace(base, **out)
