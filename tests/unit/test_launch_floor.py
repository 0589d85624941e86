"""The host's kernel launches bound the step (advisor.topology.launch): a 1,000-parameter model on an
H100 was predicted at a 23 ns step, below what launching its kernels alone takes."""

import numpy as np
import pytest
from spec_edit import edited_spec

from advisor.scaling.model import build_model
from advisor.spec import load_workload
from advisor.topology import launch
from conftest import WORKLOADS

COUNTS = np.array([1, 2, 4, 8, 16, 64, 512.0])


@pytest.fixture
def tiny(tmp_path):
    """The issue's spec: tiny-cpu shrunk to 1,000 parameters (1 layer, 8 wide, 8 tokens) on H100s in bf16,
    8 per node; renamed, so no checked-in calibration applies (the prior alone)."""
    path = edited_spec(tmp_path, WORKLOADS / "tiny-cpu.toml", name="tiny1k.toml",
                       model={"params": 1000, "layers": 1, "hidden": 8, "heads": 1, "seq_len": 8, "vocab": 16,
                              "precision": "bf16"},
                       cluster={"gpu": "H100", "gpus_per_node": 8, "peak_flops": None})
    text = path.read_text().replace('name = "tiny-cpu"', 'name = "tiny1k"')
    path.write_text(text)
    return load_workload(path)


def test_the_cited_launch_times():
    # Holistic Trace Analysis: "the launch time on the CPU side is between 5-20 microseconds";
    # pytorch/pytorch#41383: ~2 us (x*x, no grad) to ~7 us (2*x with requires_grad) per eager CPU op.
    assert launch.LAUNCH_SECONDS == (5e-6, 20e-6)
    assert launch.CPU_DISPATCH_SECONDS == (2e-6, 7e-6)


def test_kernel_count_by_hand(tiny):
    # 32 samples per step, 4 per micro-batch: 8 micro-batches at 1 GPU, each through 1 layer, forward
    # (10 kernels) and backward (14), then the fused optimizer's 1; one rank sends nothing.
    assert launch.kernels_per_step(tiny, np.array([1]))[0] == 8 * 1 * (10 + 14) + 1
    # 8 GPUs: 4 samples per rank, one micro-batch, and DDP's one all-reduce (1,000 fp32 gradients: one bucket)
    assert launch.kernels_per_step(tiny, np.array([8]))[0] == 1 * (10 + 14) + 1 + 1


def test_kernel_count_of_a_real_layout_by_hand():
    w = load_workload(WORKLOADS / "llm7b.toml")  # 32 layers, FSDP, selective recomputation, no accumulation
    # per layer: forward 10 + backward 14 + the attention core's forward again (selective) 1; the optimizer 1;
    # FSDP2 at 8 GPUs: per wrapped block (32 layers + the root) 2 all-gathers (forward, backward) + 1 reduce-scatter
    assert launch.kernels_per_step(w, np.array([8]))[0] == 32 * (10 + 14 + 1) + 1 + (32 + 1) * 3
    assert launch.kernels_per_step(w, np.array([1]))[0] == 32 * (10 + 14 + 1) + 1


def test_cpu_ranks_dispatch_at_the_cpu_op_cost(tiny):
    assert launch.launch_seconds(load_workload(WORKLOADS / "tiny-cpu.toml")) == launch.CPU_DISPATCH_SECONDS
    assert launch.launch_seconds(tiny) == launch.LAUNCH_SECONDS


def test_tiny_model_step_at_or_above_the_floor_at_every_count(tiny):
    model = build_model(tiny, n_bootstrap=8)
    median, low, high = model.step_time(COUNTS)
    floor = launch.kernels_per_step(tiny, COUNTS, tiny.nodes(COUNTS)) * 5e-6
    assert (median >= floor).all() and (low >= floor).all()
    assert (low <= median).all() and (median <= high).all()
    assert median[0] >= 193 * 5e-6  # 1 GPU: 193 launches, not the 23 ns of the device alone
    assert (median > 1e-5).all()  # no training step is below tens of microseconds


def test_launch_bound_time_is_overhead_in_the_breakdown(tiny):
    p = build_model(tiny, n_bootstrap=8).predict(COUNTS)
    total = sum(p.breakdown.values())
    assert np.allclose(total, p.step_seconds, rtol=0.01)
    assert all((v >= 0).all() for v in p.breakdown.values())
    host, _, _ = launch.host_seconds(tiny, COUNTS[:1])
    assert p.step_seconds[0] == pytest.approx(host[0])  # launch-bound at 1 GPU ...
    assert p.breakdown["overhead"][0] >= 0.99 * p.step_seconds[0]  # ... and the host's launches are overhead


@pytest.mark.parametrize("name", ["llm7b.toml", "tiny-cpu.toml"])
def test_real_and_calibrated_models_unchanged(name, monkeypatch):
    """A real model's step is far above its launches: without them (launch time 0) nothing moves, median,
    band or breakdown; tiny-cpu's calibrated fit (0.6 s steps on CPU ranks) likewise."""
    w = load_workload(WORKLOADS / name)
    model = build_model(w, n_bootstrap=8)
    with_floor = model.predict(COUNTS)
    monkeypatch.setattr(launch, "LAUNCH_SECONDS", (0.0, 0.0))
    monkeypatch.setattr(launch, "CPU_DISPATCH_SECONDS", (0.0, 0.0))
    without = model.predict(COUNTS)
    for a, b in ((with_floor.step_seconds, without.step_seconds), (with_floor.step_low, without.step_low),
                 (with_floor.step_high, without.step_high)):
        assert np.array_equal(a, b)
    for part in with_floor.breakdown:
        assert np.allclose(with_floor.breakdown[part], without.breakdown[part], rtol=1e-12, atol=0)
