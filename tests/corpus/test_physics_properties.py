"""Property-based: over random valid specs, prior-only and calibrated, the physics holds.

- a faster declared link (inter- or intra-node) never predicts a slower step;
- a one-node step never depends on the inter-node declaration.

Prior-only specs vary the layout and the recipe (strategy, TP, PP, sequence parallelism, the
distributed optimizer, reshard_after_forward, reduce dtype, precision, recomputation, batch); calibrated
ones are the workloads with checked-in published calibrations (llm7b, bert-large) re-declared with
random links, fitted on their real measurements each time.
"""

from __future__ import annotations

import tomllib

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import WORKLOADS

BASE = tomllib.loads((WORKLOADS / "llm7b.toml").read_text())
COUNTS = np.array([1.0, 4.0, 8.0, 16.0, 64.0, 512.0])
BANDWIDTH = st.floats(min_value=10.0, max_value=6400.0)  # Gbit/s per node


def _workload(data: dict):
    from advisor.spec import workload_from_dict

    return workload_from_dict(data)


@st.composite
def prior_specs(draw):
    import copy

    d = copy.deepcopy(BASE)
    d["name"] = "property-prior"  # no checked-in calibration: the prior alone
    strategy = draw(st.sampled_from(["ddp", "fsdp", "hsdp"]))
    tp = draw(st.sampled_from([1, 2, 4, 8]))
    par = {"strategy": strategy, "tensor_parallel_degree": tp,
           "activation_checkpoint": draw(st.sampled_from(["none", "selective", "full"])),
           "reduce_dtype": draw(st.sampled_from(["fp32", "bf16"])),
           "overlap_grad_reduce": draw(st.booleans())}
    if tp > 1:
        par["sequence_parallel"] = draw(st.booleans())
        par["tp_comm_overlap"] = draw(st.booleans())
    if strategy == "ddp":
        par["distributed_optimizer"] = draw(st.booleans())
    else:
        par["reshard_after_forward"] = draw(st.booleans())
    d["parallelism"] = par
    d["model"] = {**d["model"], "precision": draw(st.sampled_from(["bf16", "fp8"]))}
    d["batch"] = {"policy": "fixed-per-gpu", "per_gpu_samples": draw(st.sampled_from([1, 2, 4, 8])) * tp}
    d["cluster"] = {**d["cluster"], "inter_node_bandwidth": f"{draw(BANDWIDTH):.3f} Gbit/s", "max_gpus": 512}
    d.pop("calibration", None)
    d["calibration"] = {"gpus": [tp * 8]}
    return d


def _steps(data: dict, counts=COUNTS):
    from advisor.scaling.model import build_model

    w = _workload(data)
    g = counts[counts % (w.parallelism.tensor_parallel_degree or 1) == 0]
    model = build_model(w, n_bootstrap=0)
    return g, model.step_time(g, w.nodes(g))[0]


def _with_link(data: dict, key: str, value: str) -> dict:
    return {**data, "cluster": {**data["cluster"], key: value}}


def _faster_inter(data: dict, inter: float, factor: float) -> str:
    """`inter` x `factor` Gbit/s per node, at most the NICs a node can have (advisor.spec.MAX_NIC_BANDWIDTH_PER_GPU
    per GPU; the draws stay below it, so the capped link is still faster)."""
    from advisor.spec import MAX_NIC_BANDWIDTH_PER_GPU

    cap = MAX_NIC_BANDWIDTH_PER_GPU * 8 / 1e9 * data["cluster"].get("gpus_per_node", 8)
    return f"{min(inter * factor, cap):.3f} Gbit/s"


def _fastest_intra(data: dict) -> str:
    """The fastest intra-node link the spec's GPU accepts: its catalog line rate and the NVLS margin."""
    from advisor.catalog import find_gpu
    from advisor.spec import LINK_BUSBW_MARGIN

    return f"{find_gpu(data['cluster']['gpu']).link_ceiling * (1 + LINK_BUSBW_MARGIN) / 1e9:.3f} GB/s"


def _check(data: dict, factor: float):
    inter = float(data["cluster"]["inter_node_bandwidth"].split()[0])
    g, base = _steps(data)
    _, faster = _steps(_with_link(data, "inter_node_bandwidth", _faster_inter(data, inter, factor)))
    assert np.all(faster <= base * (1 + 1e-9)), (g, base, faster)
    one = g <= data["cluster"].get("gpus_per_node", 8)
    assert np.allclose(faster[one], base[one], rtol=1e-12), (g[one], base[one], faster[one])
    _, nvlink = _steps(_with_link(data, "intra_node_bandwidth", _fastest_intra(data)))
    assert np.all(nvlink <= base * (1 + 1e-9)), (g, base, nvlink)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=prior_specs(), factor=st.floats(min_value=1.01, max_value=16.0))
def test_prior_a_faster_link_never_predicts_a_slower_step(data, factor):
    _check(data, factor)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(["llm7b", "bert-large"]), inter=BANDWIDTH, factor=st.floats(min_value=1.01, max_value=16))
def test_calibrated_a_faster_link_never_predicts_a_slower_step(name, inter, factor):
    data = tomllib.loads((WORKLOADS / f"{name}.toml").read_text())
    data = _with_link(data, "inter_node_bandwidth", f"{inter:.3f} Gbit/s")
    from advisor.spec import load_workload

    source = load_workload(WORKLOADS / f"{name}.toml")

    def steps(d):
        from advisor.scaling.model import build_model

        w = _workload(d).model_copy(update={"source": source.source})
        g = COUNTS[w.cluster.max_gpus >= COUNTS]
        return g, build_model(w, n_bootstrap=0).step_time(g, w.nodes(g))[0]

    g, base = steps(data)
    _, faster = steps(_with_link(data, "inter_node_bandwidth", _faster_inter(data, inter, factor)))
    assert np.all(faster <= base * (1 + 1e-6)), (g, base, faster)
    one = g <= data["cluster"].get("gpus_per_node", 8)
    assert np.allclose(faster[one], base[one], rtol=1e-6), (g[one], base[one], faster[one])
