"""What one calibration step does, counted on CPU with gloo (tests/support/worker_harness.py runs the
worker's own Rank under torch's elastic launcher): the dtype the first Linear computes in when bf16
is forced, parameters with a gradient at the optimizer step, gradient elements reduced across
ranks, unsharded gradients left behind, and forward calls of a block under activation
checkpointing. Counts, not times: they do not depend on the machine's load. One launch per world
size runs every case of it, across tests (a torch import per rank costs more than the steps)."""

from __future__ import annotations

import pytest

from calibrate_support import SMALL_PARAMS, small_workload
from worker_harness import run_ranks

pytestmark = pytest.mark.slow


#: Tokens per sample of these specs (small_workload's is 64). Nothing here counts tokens: dtypes,
#: parameters with a gradient, gradient elements reduced (the parameters'), block forwards and the
#: layout are the same at any sequence length, while a CPU step's time (bf16 above all, emulated on
#: most CPUs) grows with it. Only the positional embedding's parameters change with it.
SEQ_LEN = 16


def _spec(folder, strategy: str, ranks: int, *lines: str):
    folder.mkdir(parents=True, exist_ok=True)
    path = small_workload(folder, strategy, name=f"tiny-{strategy}")
    text = path.read_text().replace(f'strategy = "{strategy}"', "\n".join([f'strategy = "{strategy}"', *lines]))
    for old, new in (("gpus = [1, 2, 4]", f"gpus = [{ranks}]"), ("seq_len = 64", f"seq_len = {SEQ_LEN}"),
                     (f"params = {SMALL_PARAMS}", f"params = {SMALL_PARAMS - (64 - SEQ_LEN) * 256}")):
        assert old in text
        text = text.replace(old, new)
    path.write_text(text)
    return path


def _check_step_counts(name: str, case: dict, reduces: bool) -> None:
    for kind in ("full", "compute", "after"):
        step = case[kind]
        assert step["dtypes"] == ["bfloat16"], (name, kind)
        # the optimizer steps on every parameter in both kinds of step, and no unsharded gradient
        # outlives a step
        assert step["with_grad"] == [step["params"]] and step["leftover"] == 0, (name, kind, step)
    assert case["compute"]["reduced"] == 0, name
    if reduces:
        assert case["full"]["reduced"] > 0 and case["after"]["reduced"] == case["full"]["reduced"], name


#: name: (strategy, extra parallelism lines, ranks per node, gradients reduced across ranks at 2)
LAYOUTS = {
    "ddp": ("ddp", [], 4, False),  # DDP reduces in C++: not counted here, only its gradients
    "fsdp": ("fsdp", [], 4, True),
    "hsdp": ("hsdp", [], 1, True),  # one rank per node: 2 replicas at 2 ranks
    "tp": ("fsdp", ["tensor_parallel_degree = 2"], 4, False),  # TP alone: no data parallelism
}


def _bf16_cases(folder, ranks: int) -> tuple[list[str], list[tuple]]:
    names = [n for n in LAYOUTS if not (n == "tp" and ranks == 1)]  # tp = 2 needs 2 ranks
    return names, [(_spec(folder / n, LAYOUTS[n][0], ranks, *LAYOUTS[n][1]), "bf16", LAYOUTS[n][2]) for n in names]


CHECKPOINTING = [(strategy, mode) for strategy in ("ddp", "fsdp") for mode in ("none", "full", "selective")]


@pytest.fixture(scope="module")
def one_rank(tmp_path_factory):
    """Every 1-rank case of this file in one launch (a torch import and rendezvous for all): the bf16
    layouts and the activation-checkpointing modes. {"bf16": (layout names, {rank: [counts per layout]}),
    "checkpointing": {rank: {(strategy, mode): counts}}}."""
    folder = tmp_path_factory.mktemp("one-rank")
    names, bf16 = _bf16_cases(folder / "bf16", 1)
    checkpointing = [(_spec(folder / f"{strategy}-{mode}", strategy, 1, f'activation_checkpoint = "{mode}"'), "fp32", 4)
                     for strategy, mode in CHECKPOINTING]
    counts = run_ranks(bf16 + checkpointing, 1)
    return {"bf16": (names, {rank: per_case[:len(bf16)] for rank, per_case in counts.items()}),
            "checkpointing": {rank: dict(zip(CHECKPOINTING, per_case[len(bf16):], strict=True))
                              for rank, per_case in counts.items()}}


@pytest.mark.parametrize("ranks", [1, 2])
def test_bf16_is_computed_and_compute_only_steps_leave_nothing_behind(tmp_path, ranks, request):
    if ranks == 1:
        names, counts = request.getfixturevalue("one_rank")["bf16"]
    else:
        names, cases = _bf16_cases(tmp_path, ranks)
        counts = run_ranks(cases, ranks)
    assert sorted(counts) == list(range(ranks))
    for per_case in counts.values():
        for name, case in zip(names, per_case, strict=True):
            _check_step_counts(name, case, LAYOUTS[name][3] and ranks > 1)


def test_pipeline_compute_only_step_reduces_no_gradient(tmp_path):
    spec = _spec(tmp_path, "fsdp", 4, "pipeline_parallel_degree = 2", "pipeline_microbatches = 2")
    counts = run_ranks([(spec, "fp32", 4)], 4)
    for (case,) in counts.values():
        assert case["layout"] == "dp_shard=2, dp_replicate=1, tp=1, pp=2"
        assert case["full"]["reduced"] > 0 and case["compute"]["reduced"] == 0
        for kind in ("full", "compute"):
            assert case[kind]["with_grad"] == [case[kind]["params"]] and case[kind]["leftover"] == 0


def test_activation_checkpointing_recomputes_the_blocks_it_declares(one_rank):
    (seen,) = one_rank["checkpointing"].values()
    for strategy in ("ddp", "fsdp"):
        plain, full, selective = (seen[strategy, mode] for mode in ("none", "full", "selective"))
        assert plain["checkpointed"] == 0 and full["checkpointed"] == selective["checkpointed"] == 2
        # every checkpointed block runs its forward once more, in the backward
        assert plain["full"]["forwards"] == 2  # one per micro-batch
        assert full["full"]["forwards"] == selective["full"]["forwards"] == 4


def test_hsdp_by_tp_at_world_8_on_the_fake_backend_shards_computes_bf16_and_reduces(tmp_path):
    """What one process can check of an 8-rank layout (the device check runs this on its one GPU)."""
    from worker_harness import fake_world_case

    spec = _spec(tmp_path, "hsdp", 8, "tensor_parallel_degree = 2")
    case = fake_world_case(spec, 8, "bf16")
    assert case["layout"] == "dp_shard=2, dp_replicate=2, tp=2, pp=1"
    _check_step_counts("hsdp x tp", case, reduces=True)


def test_mlp_proxy_under_fsdp_at_one_rank_computes_bf16(tmp_path):
    """The MLP proxy (specs without a transformer shape) under FSDP2 at N=1 in bf16: it used to run
    fp32 parameters against bf16 inputs (`mat1 and mat2 must have the same dtype`)."""
    from conftest import WORKLOADS
    from worker_harness import single_case

    text = (WORKLOADS / "resnet50.toml").read_text()
    for old, new in (('name = "resnet50"', 'name = "mlp-test"'), ('params = "25.6M"', 'params = "1M"'),
                     ("flops_per_sample = 2.3e10", "flops_per_sample = 2.4e8"),
                     ('precision = "fp16"', 'precision = "bf16"'), ('strategy = "ddp"', 'strategy = "fsdp"'),
                     ("per_gpu_samples = 32", "per_gpu_samples = 4")):
        assert old in text
        text = text.replace(old, new)
    (tmp_path / "mlp.toml").write_text(text)
    case = single_case(tmp_path / "mlp.toml", "bf16")
    _check_step_counts("mlp fsdp", case, reduces=False)
