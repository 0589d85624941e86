"""The pure parts of calibration (no ranks launched): batch split, probe sizes, --gpus parsing,
emitted commands, proxy parameter counts, failure attribution."""

from __future__ import annotations

import shlex
import subprocess
import sys

import pytest

from advisor.calibrate.launchers.job import EmitJob, emit_placements
from advisor.calibrate.launchers.local import RankState, first_failure
from advisor.calibrate.launchers.slurm import slurm_script
from advisor.calibrate.launchers.torchrun import torchrun_commands
from advisor.calibrate.plan import MIB, batch_plan, probe_sizes, proxy_shape
from advisor.calibrate.session import local_counts
from advisor.errors import InputError
from advisor.spec import load_workload, workload_from_dict
from conftest import ROOT, WORKLOADS


def _spec(**batch) -> dict:
    import tomllib

    data = tomllib.loads((WORKLOADS / "tiny-cpu.toml").read_text())
    data["batch"] = batch
    return data


@pytest.mark.parametrize("gpus, per_gpu, micros, global_batch", [
    (1, 32, (4,) * 8, 32),
    (4, 8, (4, 4), 32),
    (8, 4, (4,), 32),
    (16, 2, (2,), 32),      # share below micro_samples: the micro-batch shrinks to the share
    (64, 1, (1,), 64),      # more GPUs than samples: one each, the global batch grows (recorded)
    (3, 10, (4, 4, 2), 30),  # 32 // 3 = 10 per GPU: two full micro-batches and a remainder
])
def test_batch_plan_fixed_global(gpus, per_gpu, micros, global_batch):
    w = workload_from_dict(_spec(policy="fixed-global", global_samples=32, micro_samples=4))
    plan = batch_plan(w, gpus)
    assert (plan.per_gpu, plan.micro_batches, plan.global_batch) == (per_gpu, micros, global_batch)
    assert sum(plan.micro_batches) == plan.per_gpu


def test_batch_plan_fixed_per_gpu_is_constant_per_gpu():
    w = workload_from_dict(_spec(policy="fixed-per-gpu", per_gpu_samples=6, micro_samples=2))
    for n in (1, 2, 16):
        plan = batch_plan(w, n)
        assert plan.micro_batches == (2, 2, 2) and plan.global_batch == 6 * n


@pytest.mark.parametrize("gradient_bytes, device, gpus",
                         [(13.75e6, "cpu", 2), (13.4e9, "cuda", 8), (1e5, "cpu", 4), (3e9, "cpu", 3)])
def test_probe_sizes_span_1mib_to_capped_gradient(gradient_bytes, device, gpus):
    sizes = probe_sizes(gradient_bytes, device, gpus)
    cap = {"cpu": 64 * MIB, "cuda": 1024 * MIB}[device]
    assert len(sizes) >= 4 and sizes == sorted(set(sizes))
    assert MIB - 4 * gpus <= sizes[0] <= MIB
    top = min(max(gradient_bytes, 8 * MIB), cap)
    assert top - 4 * gpus <= sizes[-1] <= top
    assert all(s % (4 * gpus) == 0 for s in sizes)


def test_local_counts_any_n_on_cpu_one_node_only():
    w = load_workload(WORKLOADS / "tiny-cpu.toml")  # 4 GPUs per node
    assert local_counts(w, "1,2,8", "cpu", None) == [1, 2, 8]  # 8 CPU ranks on this one host
    assert local_counts(w, None, "cpu", None) == [1, 2, 4]
    assert local_counts(w, None, "cuda", 2) == [1, 2]  # the spec's counts, capped by visible GPUs
    for bad, why in (("8@2", "spans nodes"), ("1,1", "unique"), ("0", ">= 1"), ("a", "whole numbers"), ("4", "has 2")):
        with pytest.raises(InputError, match=why):
            local_counts(w, bad, "cuda" if bad == "4" else "cpu", 2 if bad == "4" else None)


def test_proxy_parameter_count_matches_formula_and_tiny_cpu_spec():
    torch = pytest.importorskip("torch")
    from advisor.calibrate.proxy import build_proxy, params_of_transformer

    w = load_workload(WORKLOADS / "tiny-cpu.toml")
    shape = proxy_shape(w)
    built = sum(p.numel() for p in build_proxy(shape).parameters())
    assert built == params_of_transformer(shape.layers, shape.hidden, shape.seq_len, shape.vocab)
    assert built == w.model.params  # the spec declares what the proxy really has
    from calibrate_support import SMALL_PARAMS

    assert params_of_transformer(2, 256, 64, 1024) == SMALL_PARAMS
    del torch


def test_mlp_proxy_matches_declared_params_and_flops():
    pytest.importorskip("torch")
    from advisor.calibrate.proxy import build_proxy

    w = load_workload(WORKLOADS / "resnet50.toml")
    shape = proxy_shape(w)
    params = sum(p.numel() for p in build_proxy(shape).parameters())
    assert params == pytest.approx(w.model.params, rel=0.01)
    flops = 6 * params * shape.seq_len  # 2 forward + 4 backward FLOPs per weight per row
    assert flops == pytest.approx(w.model.training_flops_per_sample, rel=0.05)


def test_emitted_torchrun_lines_one_per_node(tmp_path):
    w = load_workload(WORKLOADS / "llm7b.toml")
    placements = emit_placements(w, None)  # default: counts needing more than one node
    assert placements == [(16, 2)]
    text = torchrun_commands(EmitJob(w, WORKLOADS / "llm7b.toml", emit_placements(w, "16,32@4"), tmp_path, "cuda",
                                     10, 3, rdzv_host="10.0.0.1", rdzv_port=29555))
    lines = [ln for ln in text.splitlines() if not ln.startswith("#")]
    assert len(lines) == 2 + 4
    words = shlex.split(lines[3])
    assert words[:3] == ["OMP_NUM_THREADS=8", "torchrun", "--nnodes"]
    opts = dict(zip(words[2::2], words[3::2], strict=False))
    assert opts["--nnodes"] == "4" and opts["--node-rank"] == "1" and opts["--nproc-per-node"] == "8"
    assert opts["--rdzv-endpoint"] == "10.0.0.1:29555" and opts["--rdzv-backend"] == "c10d"
    assert opts["--rdzv-conf"] == "is_host=0" and "is_host=1" in lines[2]  # node 0 hosts the store
    assert words[words.index("--results") + 1] == str(tmp_path.resolve() / "gpus32-nodes4")


def test_emit_refuses_uneven_nodes_and_single_node_specs():
    w = load_workload(WORKLOADS / "tiny-cpu.toml")  # 1,2,4 on 4 GPUs per node
    with pytest.raises(InputError, match="fits in one node"):
        emit_placements(w, None)
    with pytest.raises(InputError, match="same number of ranks"):
        emit_placements(w, "6@4")
    with pytest.raises(InputError, match="unique"):
        emit_placements(w, "8@2,8@2")


def test_slurm_script_is_valid_bash(tmp_path):
    w = load_workload(WORKLOADS / "llm7b.toml")
    text = slurm_script(EmitJob(w, WORKLOADS / "llm7b.toml", emit_placements(w, "16,32"), tmp_path, "cuda", 10, 3))
    assert "#SBATCH --nodes=4" in text and text.count("srun --nodes 2") + text.count("srun --nodes 4") == 2
    assert '--rdzv-endpoint "$head_ip:29500"' in text
    script = tmp_path / "job.sbatch"
    script.write_text(text)
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0


class _Done:
    def __init__(self, code):
        self.returncode = code


def test_first_failure_blames_the_cause_not_the_peer(tmp_path):
    (tmp_path / "rank0.error").write_text("DistBackendError: [gloo] Connection closed by peer [127.0.0.1]:1234\n")
    peer = RankState(0, _Done(1), tmp_path / "rank0.log", exited_at=1.0)
    killed = RankState(1, _Done(-9), tmp_path / "rank1.log", exited_at=1.01)
    rank, error = first_failure(tmp_path, [peer, killed])
    assert rank.rank == 1 and error == "killed by SIGKILL"
    (tmp_path / "rank1.error").write_text("OutOfMemoryError: CUDA out of memory\n")
    rank, error = first_failure(tmp_path, [killed, peer])
    assert rank.rank == 1 and error.startswith("OutOfMemoryError")


def test_cli_import_does_not_import_torch():
    code = "import advisor.cli, sys; assert 'torch' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0
