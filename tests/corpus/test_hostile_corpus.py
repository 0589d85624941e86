"""A hostile-input corpus, one class per issue-15 finding, written against the README's promise:
exit 2, one line per problem naming the file and field (or the option), nothing on stdout, no
traceback, an answer within seconds, and special files neither read nor replaced.

Cases that could hang (reading a FIFO or an endless device, writing onto a FIFO) run in a subprocess
with a timeout; the rest in-process."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import tomllib

import pytest
import tomli_w

from calibrate_support import cli_env, small_workload, valid_result, write_result
from cli_inprocess import invoke, run_in_process
from conftest import ROOT, WORKLOADS

LLM7B_SPEC = tomllib.loads((WORKLOADS / "llm7b.toml").read_text())
TORCHTITAN = tomllib.loads((ROOT / "calibrations" / "llm7b_published_torchtitan.toml").read_text())
TINY = WORKLOADS / "tiny-cpu.toml"
DEEP = 600  # tomllib and json raise RecursionError from ~500 levels


def _set(doc: dict, path: str, value) -> dict:
    doc = copy.deepcopy(doc)
    keys = [int(k) if k.isdigit() else k for k in path.split(".")]
    node = doc
    for k in keys[:-1]:
        node = node[k]
    node[keys[-1]] = value
    return doc


def _deep(depth: int = DEEP):
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


def assert_clean(code: int, out: str, err: str, prefix: str, expected: str | None = None) -> None:
    """The README's promise for bad input."""
    assert code == 2, (code, err)
    assert out == "", out
    assert "Traceback" not in err and err.strip(), err
    lines = err.strip().splitlines()
    assert all(line.startswith(prefix) for line in lines), err
    if expected is not None:
        assert expected in err, err


# -- huge, non-integer and overflowing values in a spec ------------------------------------------

SPEC_VALUES = {
    "per_gpu_samples 1e23": ("batch.per_gpu_samples", 10**23, "must be <= 16777216"),
    "gpus_per_node 1e30": ("cluster.gpus_per_node", 10**30, "must be <= 1024"),
    "gpus_per_node true": ("cluster.gpus_per_node", True,
                           "cluster.gpus_per_node: must be a whole number, not true/false"),
    "gpus_per_node 8.5": ("cluster.gpus_per_node", 8.5, "cluster.gpus_per_node: must be a whole number (got 8.5)"),
    "max_gpus true": ("cluster.max_gpus", True, "cluster.max_gpus: must be a whole number, not true/false"),
    "layers true": ("model.layers", True, "model.layers: must be a whole number, not true/false"),
    "micro_samples true": ("batch.micro_samples", True, "batch.micro_samples: must be a whole number, not true/false"),
    "params 1e300": ("model.params", 1e300, "must be <= 1e+15"),
    "params huge exponent": ("model.params", "1e1000000B", "is too large"),
    "samples 1e300": ("job.samples", 1e300, "must be <= 1e+14"),
    "bandwidth huge exponent": ("cluster.inter_node_bandwidth", "1e1000000 Gbit/s", "is too large"),
    "bandwidth 1e400": ("cluster.inter_node_bandwidth", "1e400 Gbit/s", "cluster.inter_node_bandwidth"),
    "bandwidth 1e300": ("cluster.inter_node_bandwidth", 1e300, "must be <= 100 TB/s"),
    "latency huge exponent": ("cluster.intra_node_latency", "1e1000000 h", "is too large"),
    "peak_flops 1e300": ("cluster.peak_flops", 1e300, "must be <= 1e+17"),
    "price 1e300": ("tiers.0.usd_per_gpu_hour", 1e300, "must be <= 10000"),
    "preemptions 1e300": ("tiers.1.preemptions_per_node_hour", 1e300, "must be <= 60"),
    "min_hours 1e300": ("tiers.2.min_hours", 1e300, "must be <= 100000"),
    "tier max_gpus 1e20": ("tiers.0.max_gpus", 10**20, "must be <= 1048576"),
    "calibration gpus true": ("calibration.gpus", [True, 2], "calibration.gpus[0]: must be a whole number"),
    "calibration gpus 1e20": ("calibration.gpus", [10**20], "must be <= 1048576"),
    "calibration steps 1e20": ("calibration.steps", 10**20, "must be <= 100000"),
    "warmup true": ("calibration.warmup_steps", True, "calibration.warmup_steps: must be a whole number"),
    "seq_len 1e20": ("model.seq_len", 10**20, "must be <= 67108864"),
    "flops 1e300": ("model.flops_per_sample", 1e300, "must be <= 1e+24"),
    "noise scale 1e300": ("batch.gradient_noise_scale", 1e300, "must be <= 1e+14"),
    "deep value": ("model.params", _deep(), "nested more than 32 levels deep"),
    # positive but so small the model would overflow to infinity
    "peak_flops 1e-300": ("cluster.peak_flops", 1e-300, "cluster.peak_flops: must be >= 1e+06"),
    "intra bandwidth 1e-300": ("cluster.intra_node_bandwidth", 1e-300, "must be >= 1 KB/s"),
    "inter bandwidth 1e-300": ("cluster.inter_node_bandwidth", "1e-300 Gbit/s", "must be >= 1 KB/s"),
    "params 1e-300": ("model.params", 1e-300, "model.params: must be >= 1"),
    "steps 1e-300": ("job.steps", 1e-300, "job.steps: must be >= 1"),
    "tier name with an ANSI escape": ("tiers.0.name", "spot\x1b[2J",
                                      "tiers[0].name: must not contain control characters"),
    "gpu with a carriage return": ("cluster.gpu", "H100\rA100", "cluster.gpu: must not contain control characters"),
    "description of 1 MB": ("description", "x" * 2**20, "description: must have at most 2,000 characters"),
    "model not a table": ("model", 5, "model"),
    "tiers not a list": ("tiers", "x", "tiers"),
}


@pytest.mark.parametrize("command", ["validate", "recommend"])
@pytest.mark.parametrize("case", sorted(SPEC_VALUES))
def test_hostile_spec_value(tmp_path, command, case):
    path, value, expected = SPEC_VALUES[case]
    spec = tmp_path / "llm7b.toml"
    data = _set(LLM7B_SPEC, path, value)
    if path.startswith("job."):
        data["job"] = {path.split(".")[1]: value}
    try:
        spec.write_text(tomli_w.dumps(data))
    except RecursionError:  # tomli_w cannot write it either: write the nesting by hand
        text = tomli_w.dumps(_set(LLM7B_SPEC, path, "DEEP-HERE"))
        spec.write_text(text.replace('"DEEP-HERE"', "[" * DEEP + "]" * DEEP))
    args = ["validate", spec] if command == "validate" else ["recommend", spec, "--budget", "1000"]
    assert_clean(*invoke(*args), f"{spec}: ", expected)


def test_steps_1e300_is_refused_not_priced(tmp_path):
    data = copy.deepcopy(LLM7B_SPEC)
    data["job"] = {"steps": 1e300}
    spec = tmp_path / "llm7b.toml"
    spec.write_text(tomli_w.dumps(data))
    assert_clean(*invoke("recommend", spec, "--budget", "1000"), f"{spec}: ", "job.steps: must be <= 1e+09")


SPEC_TEXTS = {
    "deep array": "a = " + "[" * DEEP + "]" * DEEP,
    "deep inline tables": "a = " + "{b = " * 200 + "1" + "}" * 200,
    "deep dotted key": "a" + ".b" * 3000 + " = 1",
    "NUL byte": 'name = "x\0"',
    "not UTF-8": b"name = \xff\xfe",
    "array of tables for a table": '[[model]]\nparams = 1\n',
}


@pytest.mark.parametrize("case", sorted(SPEC_TEXTS))
def test_hostile_spec_text(tmp_path, case):
    spec = tmp_path / "spec.toml"
    text = SPEC_TEXTS[case]
    spec.write_bytes(text if isinstance(text, bytes) else text.encode())
    assert_clean(*invoke("validate", spec), f"{spec}: ")


# -- calibration files checked as strictly as CSVs -------------------------------------------------

def _cal_case(name):
    cal = copy.deepcopy(TORCHTITAN)
    run0, probe0 = cal["runs"][0], cal["collectives"][0]
    if name == "more nodes than gpus":
        run0["nodes"] = run0["gpus"] + 1
        return cal, "runs[0].nodes: more nodes than GPUs"
    if name == "one count twice":
        cal["runs"].append(copy.deepcopy(run0))
        return cal, f"runs[{len(cal['runs']) - 1}]: repeats the placement of runs[0]"
    if name == "probe more nodes than gpus":
        probe0["nodes"] = probe0["gpus"] + 1
        return cal, "collectives[0].nodes: more nodes than GPUs"
    edits = {
        "gpus 1e20": ("runs.0.gpus", 10**20, "runs[0].gpus: must be <= 1048576"),
        "gpus true": ("runs.0.gpus", True, "runs[0].gpus: must be a whole number"),
        "nodes 1e20": ("runs.0.nodes", 10**20, "runs[0].nodes: must be <= 1048576"),
        "step 1e300": ("runs.0.step_seconds", [1e300], "runs[0].step_seconds[0]: must be <= 1e+06"),
        "step 1e-300": ("runs.0.step_seconds", [1e-300], "runs[0].step_seconds[0]: must be >= 1e-09"),
        "probe seconds 1e-300": ("collectives.0.seconds", 1e-300, "collectives[0].seconds: must be >= 1e-09"),
        "comm length": ("runs.0.comm_seconds", [0.1] * 9, "runs[0].comm_seconds: one value per step"),
        "probe op": ("collectives.0.op", "all_to_all", "collectives[0].op"),
        "probe busbw negative": ("collectives.0.busbw", -1.0, "collectives[0].busbw: must be >= 0"),
        "probe busbw 1e300": ("collectives.0.busbw", 1e300, "collectives[0].busbw: must be <= 100000"),
        "probe gpus 1e12": ("collectives.0.gpus", 10**12, "collectives[0].gpus: must be <= 1048576"),
        "probe bytes float": ("collectives.0.bytes", 1.5, "collectives[0].bytes"),
        "environment not a table": ("environment", "x", "environment"),
        "setup not scalars": ("setup", {"model.params": [1]}, "setup"),
        "runs not a list": ("runs", "x", "runs"),
        "created true": ("provenance.created", True, "provenance.created"),
        "schema true": ("schema", True, "schema: unsupported calibration schema"),
        "deep environment": ("environment", {"x": _deep(40)}, "nested more than 32 levels deep"),
    }
    path, value, expected = edits[name]
    return _set(cal, path, value), expected


CAL_NAMES = ["more nodes than gpus", "one count twice", "probe more nodes than gpus", "gpus 1e20", "gpus true",
             "nodes 1e20", "step 1e300", "step 1e-300", "probe seconds 1e-300", "comm length", "probe op",
             "probe busbw negative", "probe busbw 1e300",
             "probe gpus 1e12", "probe bytes float", "environment not a table", "setup not scalars",
             "runs not a list", "created true", "schema true", "deep environment"]


@pytest.mark.parametrize("case", CAL_NAMES)
def test_hostile_calibration_file(tmp_path, case):
    data, expected = _cal_case(case)
    path = tmp_path / "cal.toml"
    path.write_text(tomli_w.dumps(data))
    assert_clean(*invoke("predict", WORKLOADS / "llm7b.toml", "--calibration", path), f"{path}: ", expected)


# -- measurement CSVs --------------------------------------------------------------------------------

CSV_CASES = {
    "repeated column": ("gpus,gpus,step_seconds\n1,1,0.5\n2,2,0.3\n",
                        "line 1: column named twice; each column once (got 'gpus')"),
    "BOM and repeated column": ("\ufeffgpus,step_seconds,step_seconds\n1,1,1\n", "line 1: column named twice"),
    "throughput contradicts": ("gpus,step_seconds,throughput\n1,1.0,3200\n2,0.6,53\n",
                               "line 2.throughput: contradicts step_seconds: 32 samples / 1 s = 32 samples/s"),
    "gpus 1e20": ("gpus,step_seconds\n100000000000000000000,1\n2,1\n", "line 2.gpus: must be <= 1.049e+06"),
    "nodes 1e20": ("gpus,nodes,step_seconds\n1,1e20,1\n2,1,1\n", "line 2.nodes: must be <= 1.049e+06"),
    "batch 1e300": ("gpus,step_seconds,global_batch\n1,1,1e300\n2,1,4\n", "line 2.global_batch: must be <="),
    "step inf": ("gpus,step_seconds\n1,1e400\n2,1\n", "line 2.step_seconds: must be a positive number (got '1e400')"),
    "comm inf": ("gpus,step_seconds,comm_seconds\n1,1,inf\n2,1,0\n", "line 2.comm_seconds: must be >= 0 (got 'inf')"),
    "hex number": ("gpus,step_seconds\n0x10,1\n2,1\n", "line 2.gpus: must be a number (got '0x10')"),
    "empty gpus": ("gpus,step_seconds\n,1\n2,1\n", "line 2: needs a gpus value"),
    "NUL byte": ("gpus,step_seconds\n1,1\x00\n2,1\n", "line 2"),
    "not UTF-8": (b"gpus,step_seconds\n1,\xff\n", "not UTF-8 text"),
    "quoted ragged": ('gpus,step_seconds\n"1,2",1\n2\n', "line 2.gpus: must be a number"),
    "throughput zero": ("gpus,throughput\n1,0\n2,1\n", "line 2.throughput: must be a positive number"),
    "step 1e-300": ("gpus,step_seconds\n1,1e-300\n2,1\n",
                    "line 2.step_seconds: must be >= 1e-09 s (no step is shorter)"),
}


@pytest.mark.parametrize("case", sorted(CSV_CASES))
def test_hostile_csv(tmp_path, case):
    text, expected = CSV_CASES[case]
    path = tmp_path / "m.csv"
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    assert_clean(*invoke("fit", TINY, "--measurements", path), f"{path}: ", expected)


def test_csv_with_a_bom_is_read():
    pass  # positive case: see test_measurements.test_spreadsheet_csv_with_bom_is_read


# -- --collect: crafted rank results -----------------------------------------------------------------

RESULT_EDITS = {
    "gpus string": ("gpus", "2", "gpus"),
    "gpus true": ("gpus", True, "gpus"),
    "gpus 1e12": ("gpus", 10**12, "gpus: must be <= 1048576"),
    "gpus float": ("gpus", 2.5, "gpus"),
    "gpus negative": ("gpus", -1, "gpus: must be > 0"),
    "gpus null": ("gpus", None, "gpus"),
    "nodes more than gpus": ("nodes", 3, "nodes: more nodes than GPUs (2)"),
    "steps string": ("step_seconds", "x", "step_seconds"),
    "steps empty": ("step_seconds", [], "step_seconds"),
    "steps negative": ("step_seconds", [-1], "step_seconds[0]: must be >= 1e-09"),
    "steps null": ("step_seconds", [None], "step_seconds[0]"),
    "steps object": ("step_seconds", {"a": 1}, "step_seconds"),
    "unknown op": ("collectives.0.op", "all_to_all", "collectives[0].op"),
    "negative busbw": ("collectives.0.busbw", -1, "collectives[0].busbw: must be >= 0"),
    "huge busbw": ("collectives.0.busbw", 1e300, "collectives[0].busbw: must be <= 100000"),
    "bytes float": ("collectives.0.bytes", 1.5, "collectives[0].bytes"),
    "collectives string": ("collectives", "x", "collectives"),
    "collective not object": ("collectives", [1], "collectives[0]"),
    "environment list": ("environment", [], "environment"),
    "environment string": ("environment", "x", "environment"),
    "environment number": ("environment", 5, "environment"),
    "environment too deep": ("environment.hosts", {"a": {"b": {"c": 1}}}, "environment.hosts"),
    "deep nesting": ("environment.x", _deep(), "nested more than 32 levels deep"),
    "global batch mismatch": ("global_batch", 9, "global_batch: the spec's batch gives 8 samples per step"),
    "global batch true": ("global_batch", True, "global_batch"),
    "other workload": ("workload", "other", "workload: result is for another workload"),
    "workload number": ("workload", 5, "workload"),
    "micro true": ("micro_samples", True, "micro_samples"),
    "memory negative": ("peak_memory_bytes", -1, "peak_memory_bytes: must be >= 0"),
    "tokens string": ("tokens_per_second", "fast", "tokens_per_second"),
    "other strategy": ("environment.strategy", "fsdp", "environment.strategy: the spec now gives 'ddp'"),
    "other precision": ("environment.declared_precision", "bf16", "environment.declared_precision"),
}

RESULT_RAW = {
    "repeated key": ('{"gpus": 2, "gpus": 4}', "gpus: key repeated in one object"),
    "NaN": (json.dumps(valid_result()).replace('"step_seconds": [0.2', '"step_seconds": [NaN'), "NaN is not a number"),
    "a list": ("[]", "expected a JSON object"),
    "a string": ('"x"', "expected a JSON object"),
    "null": ("null", "expected a JSON object"),
    "truncated": (json.dumps(valid_result())[:50], "malformed JSON"),
    "empty": ("", "malformed JSON"),
    "not UTF-8": (b'{"gpus": "\xff"}', "not UTF-8"),
    "deep raw": ("[" * 5000 + "]" * 5000, "nested more than 32 levels deep"),
}


def _collect(tmp_path, spec):
    out = tmp_path / "cal.toml"
    return invoke("calibrate", spec, "--collect", tmp_path / "results", "--out", out), out


@pytest.mark.parametrize("case", sorted(RESULT_EDITS) + sorted(RESULT_RAW) + ["missing key", "missing rank file"])
def test_hostile_collect_result(tmp_path, case):
    spec = small_workload(tmp_path)
    folder = tmp_path / "results" / "gpus2-nodes2"
    prefix = str(folder / "result.json")
    if case in RESULT_EDITS:
        path, value, expected = RESULT_EDITS[case]
        write_result(folder, _set(valid_result(), path, value))
    elif case in RESULT_RAW:
        raw, expected = RESULT_RAW[case]
        write_result(folder, None, raw=raw)
    elif case == "missing key":
        result = valid_result()
        del result["step_seconds"]
        write_result(folder, result)
        expected = "step_seconds: required"
    else:
        write_result(folder, valid_result(), ranks=1)
        prefix, expected = str(folder), "incomplete run: no rank<R>.json from 1 rank [1]"
    (code, out, err), cal = _collect(tmp_path, spec)
    assert_clean(code, out, err, prefix, expected)
    assert not cal.exists()


def test_valid_collect_result_is_merged(tmp_path):
    """The corpus' base result is itself valid: each case above fails for its one edit."""
    spec = small_workload(tmp_path)
    write_result(tmp_path / "results" / "gpus2-nodes2", valid_result())
    (code, _out, err), cal = _collect(tmp_path, spec)
    assert code == 0, err
    from advisor.calibration_data import load_calibration

    loaded = load_calibration(cal, "tiny-test")
    assert [(r.gpus, r.nodes) for r in loaded.runs] == [(2, 2)] and len(loaded.collectives) == 3
    assert loaded.setup["parallelism.strategy"] == "ddp" and loaded.setup["device"] == "cpu"


# -- special files: never read, never replaced, never a hang -------------------------------------------

def _cli(*args, cwd, timeout=60):
    r = subprocess.run([sys.executable, "-m", "advisor", *map(str, args)], cwd=cwd, env=cli_env(),
                       capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr


#: The special files a regressed guard would block on (reading them never ends, opening a FIFO waits for
#: the other end): their cases run in a subprocess under a timeout; a directory, `/dev/null` or "" cannot.
COULD_HANG = {"fifo", "dev-zero", "dev-urandom", "link-to-dev-zero"}


def _run(kind, *args, cwd):
    """`_cli` where `kind` could hang, else in-process from `cwd`."""
    if kind in COULD_HANG:
        return _cli(*args, cwd=cwd)
    r = run_in_process(*args, cwd=cwd)
    return r.returncode, r.stdout, r.stderr


@pytest.fixture
def specials(tmp_path):
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    (tmp_path / "dir.toml").mkdir()
    (tmp_path / "zero.toml").symlink_to("/dev/zero")
    return {"fifo": fifo, "dev-zero": "/dev/zero", "dev-urandom": "/dev/urandom", "directory": tmp_path / "dir.toml",
            "link-to-dev-zero": tmp_path / "zero.toml"}


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "dev-urandom", "directory", "link-to-dev-zero"])
def test_special_file_inputs_are_refused_at_once(tmp_path, specials, kind):
    path = specials[kind]
    llm7b = WORKLOADS / "llm7b.toml"
    for args in (["validate", path], ["predict", llm7b, "--calibration", path], ["fit", TINY, "--measurements", path]):
        assert_clean(*_run(kind, *args, cwd=tmp_path), f"{path}: ", "not a regular file")


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory"])
def test_special_files_in_collect_and_resume(tmp_path, specials, kind):
    spec = small_workload(tmp_path)
    folder = tmp_path / "results" / "run"
    folder.mkdir(parents=True)
    target = specials[kind]
    if kind == "directory":
        (folder / "result.json").mkdir()
    else:
        (folder / "result.json").symlink_to(target)
    code, out, err = _run(kind, "calibrate", spec, "--collect", tmp_path / "results",
                          "--out", tmp_path / "c.toml", cwd=tmp_path)
    assert_clean(code, out, err, f"{folder / 'result.json'}: ", "not a regular file")
    code, out, err = _run(kind, "calibrate", spec, "--gpus", "1", "--device", "cpu", "--resume",
                          "--out", target, cwd=tmp_path)
    assert_clean(code, out, err, f"{target}: ")
    assert "not a regular file" in err or "is a directory" in err


@pytest.mark.parametrize("target", ["/dev/null", "fifo", "directory", ""])
def test_plot_onto_a_special_file_is_refused_and_the_file_survives(tmp_path, target):
    path = {"/dev/null": "/dev/null", "fifo": tmp_path / "p.png", "directory": tmp_path, "": ""}[target]
    if target == "fifo":
        os.mkfifo(path)
    before = os.stat(path or ".")
    code, _out, err = _run(target, "predict", WORKLOADS / "llm7b.toml", "--gpus", "8,16", "--plot", path, cwd=tmp_path)
    assert code == 2 and "Traceback" not in err, err
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"{path or '.'}: ") and ("not a regular file" in line or "is a directory" in line), err
    after = os.stat(path or ".")
    assert (after.st_ino, after.st_mode, after.st_rdev) == (before.st_ino, before.st_mode, before.st_rdev)


@pytest.mark.parametrize("target", ["/dev/null", "directory", ""])
def test_calibrate_out_onto_a_special_file_is_refused_before_measuring(tmp_path, target):
    spec = small_workload(tmp_path)
    path = {"/dev/null": "/dev/null", "directory": tmp_path, "": ""}[target]
    code, out, err = _run(target, "calibrate", spec, "--gpus", "1", "--device", "cpu", "--out", path, cwd=tmp_path)
    assert_clean(code, out, err, f"{path or '.'}: ")
    assert "N=1: starting" not in err and not os.path.exists("/dev/null.lock")


# -- options ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, option", [
    (["predict", WORKLOADS / "llm7b.toml", "--gpus", ""], "--gpus"),
    (["calibrate", TINY, "--gpus", "", "--device", "cpu"], "--gpus"),
    (["calibrate", TINY, "--emit", "torchrun", "--gpus", "8@2", "--rdzv-port", "0"], "--rdzv-port"),
    (["calibrate", TINY, "--emit", "torchrun", "--gpus", "8@2", "--rdzv-port", "99999"], "--rdzv-port"),
    (["calibrate", TINY, "--emit", "slurm", "--gpus", "8@2", "--rdzv-port", "-1"], "--rdzv-port"),
    (["calibrate", TINY, "--steps", "0", "--device", "cpu"], "--steps"),
    (["calibrate", TINY, "--timeout", "0", "--device", "cpu"], "--timeout"),
])
def test_bad_options_name_the_option(args, option):
    code, out, err = invoke(*args)
    assert code == 2 and out == "" and "Traceback" not in err and option in err, err


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory"])
def test_imported_logs_go_through_the_one_reader(tmp_path, specials, kind):
    path = specials[kind]
    rental = WORKLOADS / "rental-ethernet.toml"
    for args in (["import", "nccl-tests", rental, path], ["import", "torchtitan", rental, path, "--gpus", "8@1"]):
        code, out, err = _run(kind, *args, "--out", tmp_path / "c.toml", cwd=tmp_path)
        assert_clean(code, out, err, f"{path}: ", "not a regular file")


def test_init_writes_with_the_umask_and_never_onto_a_special_file(tmp_path):
    code = ("import os, sys; os.umask(0o002); from advisor.cli import main; "
            "main(['init', '--out', sys.argv[1]])")
    for target in ("/dev/null", str(tmp_path)):
        r = subprocess.run([sys.executable, "-c", code, target], cwd=tmp_path, env=cli_env(), capture_output=True,
                           text=True, timeout=60)
        assert_clean(r.returncode, r.stdout, r.stderr, f"{target}: ")
    r = subprocess.run([sys.executable, "-c", code, "job.toml"], cwd=tmp_path, env=cli_env(), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert oct(os.stat(tmp_path / "job.toml").st_mode & 0o777) == oct(0o664)  # mkstemp alone would give 0600
