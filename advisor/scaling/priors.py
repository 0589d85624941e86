"""What the coefficients of the topology model look like across real jobs: the priors of the fit.

Each prior is a Gaussian on one coefficient of `advisor.scaling.families` (in log space for the
factors on declared speeds, whose spread is multiplicative; in linear space, centred on zero, for
the per-step constants, which the physics does not ask for). The values are learned from the
published corpus of benchmarks/corpus.py by empirical Bayes (`learn`): every series is fitted on
all its rows with the wide `VAGUE` priors, and the mean and spread of the coefficients its data
pin down (MFU from every series, intra-node link from series with several GPUs on a node,
inter-node link from series that cross nodes, overlap from series with exposed communication)
become the prior. benchmarks/accuracy.py re-learns them without the series it scores
(leave-one-series-out), so the accuracy it reports is on data the priors never saw.

`LEARNED` is the output of `python benchmarks/accuracy.py --learn` on the whole corpus (values
printed there, pasted here); docs/model.md lists them with their meaning.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np

#: A fitted link may be at most this much faster than declared (coefficient >= 1 / (1 + tolerance)).
#: NCCL's bus bandwidth stays below the link's rate (nccl-tests doc/PERFORMANCE.md); in-network
#: reduction (NVLink SHARP) lifts all-reduce busbw to ~480 GB/s on 450 GB/s NVLink 4 (nccl-tests
#: issue #212), 7% above: 15% leaves room for that and for rounding in declared figures.
LINK_TOLERANCE = 0.15

#: MFU floor for the compute coefficient when the peak is known: 1/MFU >= 1 (MFU <= 100%).
MAX_MFU = 1.0


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
    """Per-micro-batch host contention per extra GPU on a node, as a share of compute (mean 0)."""
    step_share_sd: float
    """Per-step constants (overhead, sync), as a share of the shortest measured step (mean 0)."""
    noise: float
    """Relative run-to-run noise of one step time (one sigma): the data's weight against the prior."""
    widening: float
    """Model error growth per doubling of distance past the data (log sigma), for intervals."""

    def as_dict(self) -> dict:
        return asdict(self)


#: Learned on the corpus (benchmarks/accuracy.py --learn): see the module docstring.
LEARNED = Priors(log_inv_mfu=0.98, log_inv_mfu_sd=0.4, log_intra_bw=0.46, log_intra_bw_sd=0.69, log_inter_bw=1.49,
                 log_inter_bw_sd=0.6, log_latency_sd=1.0, gamma=1.22, gamma_sd=1.0, contention_sd=0.02,
                 step_share_sd=0.02, noise=0.05, widening=0.05)

#: Priors for learning (empirical Bayes): wide on what is learned, so the data decide wherever they
#: can, and as in use on the per-step constants: in a data-parallel ring the bus volume 2(N-1)/N is
#: nearly constant past a few GPUs, so a free sync constant and the link factor are collinear, and
#: only holding the constant small lets the link factor carry the communication it explains.
VAGUE = replace(LEARNED, log_inv_mfu_sd=3.0, log_intra_bw_sd=2.0, log_inter_bw_sd=2.0, gamma_sd=5.0)

#: Floors on learned spreads: a handful of series never justifies a prior narrower than these.
SD_FLOOR = {"log_inv_mfu_sd": 0.4, "log_intra_bw_sd": 0.4, "log_inter_bw_sd": 0.6, "gamma_sd": 1.0}


def learn(samples: dict[str, list[float]], base: Priors = LEARNED) -> Priors:
    """Empirical-Bayes priors from per-series fitted values: `samples` maps a Priors mean field
    (log_inv_mfu, log_intra_bw, log_inter_bw, gamma) to the values the series pinned down.
    Fields without at least two values keep `base`'s."""
    out = {}
    for key, values in samples.items():
        v = np.asarray(values, float)
        v = v[np.isfinite(v)]
        if v.size < 2:
            continue
        out[key] = float(np.mean(v))
        sd_key = f"{key}_sd"
        out[sd_key] = max(float(np.std(v, ddof=1)), SD_FLOOR.get(sd_key, 0.0))
    return replace(base, **out)
