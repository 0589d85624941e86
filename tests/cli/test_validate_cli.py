"""`advisor validate` through the real CLI: every rule, good and bad specs, exact error lines."""

from __future__ import annotations

import json
import re
import sys

import pytest

from cli_inprocess import run_in_process
from conftest import ROOT, WORKLOADS, run_cli

# The exact-error-line cases mutate a fixed fixture (a fixed-global 6.7B FSDP spec, the first llm7b
# example), not workloads/llm7b.toml: the examples follow the published setups they are calibrated
# from and may change; these expectations must not.
FIXTURE = ROOT / "tests" / "fixtures" / "spec_fixed_global.toml"
LLM7B = FIXTURE.read_text()


def mutate(old: str, new: str, text: str = LLM7B) -> str:
    assert old in text, f"fixture drifted: {old!r} not in {FIXTURE.name}"
    return text.replace(old, new, 1)


@pytest.mark.parametrize("path", sorted(WORKLOADS.glob("*.toml")), ids=lambda p: p.name)
def test_every_example_workload_is_valid(path):
    result = run_in_process("validate", path)
    assert result.returncode == 0, result.stderr
    assert "valid" in result.stdout


BAD = {
    "unknown key with suggestion": (
        mutate("hidden = 4096", "hiden = 4096"),
        ["model.hiden: unknown key; did you mean 'hidden'? (got 4096)"],
    ),
    "unknown section": (
        mutate("[job]", "[jobs]"),
        ["job: required", "jobs: unknown key; did you mean 'job'? (got {'samples': '250M'})"],
    ),
    "negative price": (
        mutate("usd_per_gpu_hour = 1.20", "usd_per_gpu_hour = -1.20"),
        ["tiers[1].usd_per_gpu_hour: must be >= 0 (got -1.2)"],
    ),
    "malformed toml": (
        mutate("layers = 32", "layers = 32 ="),
        ["line 12, column 13: malformed TOML: Expected newline or end of document after a statement"],
    ),
    "missing global batch under fixed-global": (
        mutate("global_samples = 1024", ""),
        ["batch.global_samples: required when batch.policy is 'fixed-global'"],
    ),
    "per-gpu batch missing under fixed-per-gpu": (
        mutate('policy = "fixed-global"', 'policy = "fixed-per-gpu"'),
        ["batch.per_gpu_samples: required when batch.policy is 'fixed-per-gpu'",
         "batch.global_samples: only used when batch.policy is 'fixed-global' (got 1024)"],
    ),
    "micro batch does not divide global": (
        mutate("micro_samples = 2", "micro_samples = 3"),
        ["batch.micro_samples: must divide batch.global_samples (1024) (got 3)"],
    ),
    "bad bandwidth unit": (
        mutate('"3200 Gbit/s"', '"400 Gbps/s"'),
        ["cluster.inter_node_bandwidth: unknown bandwidth unit 'Gbps/s'; did you mean 'Gbps'? (got '400 Gbps/s')"],
    ),
    "bad count": (
        mutate('params = "6.7B"', 'params = "lots"'),
        ["model.params: expected a count like '6.7B', '13 billion', '250M', '32K' or a number (got 'lots')"],
    ),
    "nan": (
        mutate('params = "6.7B"', "params = nan"),
        ["model.params: count must be a finite number (got nan)"],
    ),
    "zero params": (
        mutate('params = "6.7B"', "params = 0"),
        ["model.params: must be > 0 (got 0)"],
    ),
    "huge max_gpus": (
        mutate("max_gpus = 1024", "max_gpus = 100000000"),
        ["cluster.max_gpus: must be <= 1048576 (got 100000000)"],
    ),
    "duplicate tier names": (
        mutate('name = "spot"', 'name = "on-demand"'),
        ["tiers[1].name: duplicate tier name (got 'on-demand')"],
    ),
    "calibration count above max_gpus": (
        mutate("max_gpus = 1024", "max_gpus = 8"),
        ["calibration.gpus[4]: exceeds cluster.max_gpus (8) (got 16)"],
    ),
    "zero calibration count": (
        mutate("gpus = [1, 2, 4, 8, 16]", "gpus = [0, 2]"),
        ["calibration.gpus[0]: must be > 0 (got 0)"],
    ),
    "heads do not divide hidden": (
        mutate("heads = 32", "heads = 33"),
        ["model.heads: must divide model.hidden (4096) (got 33)"],
    ),
    "partial transformer shape": (
        mutate("heads = 32\n", ""),
        ["model.heads: required with layers, hidden, seq_len "
         "(a transformer shape needs layers, hidden, heads and seq_len)"],
    ),
    "no shape and no flops": (
        mutate("layers = 32\nhidden = 4096\nheads = 32\nseq_len = 4096\n", ""),
        ["model.flops_per_sample: required when no transformer shape (layers, hidden, heads, seq_len) is given"],
    ),
    "both samples and steps": (
        mutate('samples = "250M"', 'samples = "250M"\nsteps = 1000'),
        ["job: give exactly one of job.samples, job.steps or job.tokens"],
    ),
    "tokens and samples": (
        mutate('samples = "250M"', 'samples = "250M"\ntokens = "1T"'),
        ["job: give exactly one of job.samples, job.steps or job.tokens"],
    ),
    "tokens without seq_len": (
        mutate('samples = "250M"', 'tokens = "1T"').replace("seq_len = 4096\n", "").replace(
            "layers = 32\nhidden = 4096\nheads = 32\n", "flops_per_sample = 1e12\n"),
        ["job.tokens: needs model.seq_len (tokens per sample) to count samples (got 1000000000000.0)"],
    ),
    "bad name": (
        mutate('name = "llm7b"', 'name = "../evil"'),
        ["name: must be lower-case letters, digits, '-' or '_', starting with a letter or digit (got '../evil')"],
    ),
    "bad strategy": (
        mutate('strategy = "fsdp"', 'strategy = "zero9"'),
        ["parallelism.strategy: Input should be 'ddp', 'fsdp', 'hsdp' or 'auto' (got 'zero9')"],
    ),
    "wrong type": (
        mutate("layers = 32", 'layers = "many"'),
        # the spec's count grammar, never pydantic's "Input should be a valid integer" (issue 22)
        ["model.layers: expected a count like '6.7B', '13 billion', '250M', '32K' or a number (got 'many')"],
    ),
    "unknown gpu without bandwidth": (
        mutate('gpu = "H100-SXM"', 'gpu = "Z9000"').replace('intra_node_bandwidth = "450 GB/s"\n', ""),
        ["cluster.gpu: not in the catalog (advisor gpus): for another GPU declare cluster.peak_flops "
         "(dense FLOP/s at model.precision) and cluster.intra_node_bandwidth (got 'Z9000')"],
    ),
    "gpu typo, did you mean": (
        mutate('gpu = "H100-SXM"', 'gpu = "H10O-SXM"').replace('intra_node_bandwidth = "450 GB/s"\n', ""),
        ["cluster.gpu: not in the catalog (advisor gpus): did you mean 'H100-SXM', 'H200' or 'A100-SXM'? "
         "For another GPU declare cluster.peak_flops (dense FLOP/s at model.precision) and "
         "cluster.intra_node_bandwidth (got 'H10O-SXM')"],
    ),
    "unknown gpu with its peak but no bandwidth": (
        mutate('gpu = "H100-SXM"', 'gpu = "Z9000"\npeak_flops = 1e15').replace(
            'intra_node_bandwidth = "450 GB/s"\n', ""),
        ["cluster.intra_node_bandwidth: required: GPU 'Z9000' is not in the catalog (advisor gpus)"],
    ),
    "sequence parallel without tp": (
        mutate('strategy = "fsdp"', 'strategy = "fsdp"\nsequence_parallel = true'),
        ["parallelism.sequence_parallel: needs parallelism.tensor_parallel_degree > 1 (got True)"],
    ),
    "distributed optimizer under fsdp": (
        mutate('strategy = "fsdp"', 'strategy = "fsdp"\ndistributed_optimizer = true'),
        ["parallelism.distributed_optimizer: fsdp already shards the optimizer state (and more): leave it out, "
         "or use strategy = 'ddp' for ZeRO-1 (got True)"],
    ),
    "reshard under ddp": (
        mutate('strategy = "fsdp"', 'strategy = "ddp"\nreshard_after_forward = false'),
        ["parallelism.reshard_after_forward: only used with strategy 'fsdp' or 'hsdp' (ddp keeps the weights "
         "whole) (got False)"],
    ),
    "bad reduce dtype": (
        mutate('strategy = "fsdp"', 'strategy = "fsdp"\nreduce_dtype = "fp8"'),
        ["parallelism.reduce_dtype: Input should be 'fp32', 'bf16' or 'fp16' (got 'fp8')"],
    ),
    "fp8 on a GPU without fp8": (
        mutate('gpu = "H100-SXM"', 'gpu = "A100-SXM4-40GB"').replace('precision = "bf16"', 'precision = "fp8"')
        .replace('intra_node_bandwidth = "450 GB/s"', 'intra_node_bandwidth = "300 GB/s"'),  # NVLink 3
        ["model.precision: the catalog's A100-SXM-40GB has no fp8 tensor-core peak (it has bf16, fp16, fp32): "
         "choose one of those or declare cluster.peak_flops (got 'fp8')"],
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_spec_exits_2_with_exact_lines(tmp_path, case):
    text, expected = BAD[case]
    spec = tmp_path / "spec.toml"
    spec.write_text(text)
    result = run_in_process("validate", "spec.toml", cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    assert result.stderr.splitlines() == [f"spec.toml: {line}" for line in expected]


def test_job_tokens_count_samples_by_seq_len(tmp_path):
    from advisor.spec import load_workload

    spec = tmp_path / "spec.toml"
    spec.write_text(mutate('samples = "250M"', 'tokens = "1.024T"'))  # seq_len 4096 in the fixture
    w = load_workload(spec)
    assert w.job.samples == pytest.approx(1.024e12 / 4096)
    assert w.job.tokens == pytest.approx(1.024e12)


def test_missing_file(tmp_path):
    result = run_in_process("validate", "nope.toml", cwd=tmp_path)
    assert (result.returncode, result.stderr.strip()) == (2, "nope.toml: no such file")


def test_units_parse_to_base_units():
    from advisor.units import parse_bandwidth, parse_count, parse_duration

    assert parse_bandwidth("400 Gbit/s") == 50e9
    assert parse_bandwidth("900 GB/s") == 900e9
    assert parse_bandwidth("100 Gb/s") == 12.5e9
    assert parse_count("6.7B") == 6.7e9 and parse_count("250M") == 250e6 and parse_count(12) == 12
    assert parse_duration("10 us") == 1e-5 and parse_duration("2 min") == 120 and parse_duration("1.5 h") == 5400


def test_schema_as_a_user_runs_it_lists_every_field_with_a_description():
    result = run_cli("schema")
    assert result.returncode == 0
    schema = json.loads(result.stdout)
    defs = schema["$defs"]
    for section in ("ModelSpec", "BatchSpec", "ClusterSpec", "Tier", "CalibrationSpec", "JobSpec"):
        for name, prop in defs[section]["properties"].items():
            assert prop.get("description"), f"{section}.{name} has no description"


def test_gpus_as_a_user_runs_it_lists_required_models_with_sources():
    result = run_cli("gpus", "--json")
    assert result.returncode == 0
    rows = {r["name"]: r for r in json.loads(result.stdout)["gpus"]}
    for name in ("A100-SXM", "H100-SXM", "H200", "B200", "L40S", "T4", "V100-SXM2"):
        assert name in rows and rows[name]["source"]
    # Independent check against the H100 datasheet: 1,979 TFLOPS bf16 with sparsity, half dense.
    assert rows["H100-SXM"]["peak_bf16_tflops"] == pytest.approx(1979 / 2, rel=1e-3)
    assert rows["T4"]["peak_bf16_tflops"] is None


def test_core_cli_does_not_import_torch_or_sklearn():
    import subprocess

    code = ("import advisor.cli, sys; bad = [m for m in ('torch', 'sklearn', 'matplotlib') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_flops_estimate_matches_palm_formula():
    from advisor.spec import load_workload

    w = load_workload(FIXTURE)
    # PaLM App. B: 6N + 12·L·H·T FLOPs per token, times T tokens per sample.
    expected = (6 * 6.7e9 + 12 * 32 * 4096 * 4096) * 4096
    assert w.model.training_flops_per_sample == pytest.approx(expected)
    assert re.fullmatch(r"[a-z0-9][a-z0-9_-]*", w.name)
