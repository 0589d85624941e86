"""Fresh eyes, round 6: hostile inputs, each a class of bug found and fixed at its root (the module
named above each test). Expectations are worked from the inputs and the sources by hand, never from
the model; each case's comment says what it did before the fix."""

from __future__ import annotations

import re
import tomllib

import pytest
import tomli_w
from spec_edit import edited_spec, edited_toml

from cli_inprocess import assert_refused, invoke
from conftest import ROOT, WORKLOADS

LLM7B = WORKLOADS / "llm7b.toml"          # FSDP, H100-SXM, 8 per node, seq_len 8192, 16 samples at 8 GPUs
RENTAL = WORKLOADS / "rental-ethernet.toml"   # fixed-per-gpu, 2 samples a GPU, seq_len 8192
TORCHTITAN_CAL = ROOT / "calibrations" / "llm7b_published_torchtitan.toml"   # runs 8@1 and 128@16
TITAN_LOG = ROOT / "tests" / "fixtures" / "torchtitan" / "debug_model_pr1437.log"  # ~0.47 s a step by its stamps


def _calibration(tmp_path, edit, base=TORCHTITAN_CAL):
    return edited_toml(base, edit, tmp_path / "cal.toml")


def _fit(path):
    return invoke("fit", LLM7B, "--calibration", path)


# -- a number written as a string in a calibration file (advisor.calibration_data._Strict: strict=True) ----
# pydantic's lax mode read step_seconds = ["2.8"] as 2.8, `true` as 1.0 and memory_bound = "yes" as true:
# every field of the file was typed only loosely. A calibration file is written by advisor; numbers in it
# are TOML numbers (the spec keeps its unit grammar; a CSV has no types, its quoted cells stay numbers).

@pytest.mark.parametrize("field, value, where, said", [
    ("step_seconds", ["2.84"], "runs[0].step_seconds[0]", "must be a number"),
    ("step_seconds", [True], "runs[0].step_seconds[0]", "must be a number"),
    ("global_batch", "16", "runs[0].global_batch", "must be a whole number"),
    ("tokens_per_second", "46100", "runs[0].tokens_per_second", "must be a number"),
    ("memory_bound", "yes", "runs[0].memory_bound", ""),
])
def test_a_number_in_a_calibration_file_is_a_toml_number(tmp_path, field, value, where, said):
    path = _calibration(tmp_path, lambda d: d["runs"][0].__setitem__(field, value))
    assert_refused(*_fit(path), f"{path}: {where}: ", said)


def test_a_collective_seconds_as_a_string_is_refused(tmp_path):
    base = ROOT / "calibrations" / "rental-ethernet_published_torchtitan.toml"
    doc = tomllib.loads(base.read_text())
    if not doc.get("collectives"):
        pytest.skip("no collectives in the checked-in file")
    path = _calibration(tmp_path, lambda d: d["collectives"][0].__setitem__("seconds", "0.001"), base)
    assert_refused(*invoke("fit", RENTAL, "--calibration", path), f"{path}: collectives[0].seconds: ")


# -- provenance.created (advisor.calibration_data._provenance_problems) --------------------------------------
# Free text: "yesterday", a month 13 or a date without a time read as provenance nobody could date.

@pytest.mark.parametrize("created", ["yesterday", "2026-13-01T00:00:00Z", "2026-11-30", "2026-11-30T05:15:17",
                                     "", "30/11/2026 05:15"])
def test_a_created_that_is_not_an_iso_timestamp_is_refused(tmp_path, created):
    path = _calibration(tmp_path, lambda d: d["provenance"].__setitem__("created", created))
    assert_refused(*_fit(path), f"{path}: provenance.created: must be an ISO 8601 date and time with its UTC offset",
                   f"(got {created!r})")


@pytest.mark.parametrize("created", ["2026-11-30T05:15:17Z", "2026-11-30T05:15:17+01:00", "2026-11-30 05:15:17Z",
                                     "2026-11-30T05:15:17.123456+00:00"])
def test_an_iso_timestamp_is_read(tmp_path, created):
    path = _calibration(tmp_path, lambda d: d["provenance"].__setitem__("created", created))
    code, _, err = _fit(path)
    assert code == 0, err


def test_every_checked_in_calibration_and_an_import_still_load(tmp_path):
    from advisor.calibration_data import load_calibration

    for path in sorted((ROOT / "calibrations").rglob("*.toml")):
        load_calibration(path)
    out = tmp_path / "imported.toml"
    code, _, err = invoke("import", "torchtitan", RENTAL, TITAN_LOG, "--gpus", "8@1", "--out", out)
    assert code == 0, err
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", load_calibration(out).provenance.created)


# -- environment.gpus_per_node against the placements (advisor.calibration_data._gpus_per_node_problems) -----
# The published file's one number and advisor calibrate's table keyed by GPU count were never compared with
# the runs: gpus_per_node = 4 beside 8 GPUs on one node, or {"8" = 2} beside 8@1, loaded without a word.

def _set_env(value):
    return lambda d: d.setdefault("environment", {}).__setitem__("gpus_per_node", value)


@pytest.mark.parametrize("value, where, said", [
    (4, "environment.gpus_per_node", "fewer than the 8 GPUs per node of runs[0] (8 GPUs over 1 node)"),
    (0, "environment.gpus_per_node", "must be a whole number of GPUs from 1 to 1024"),
    ("8", "environment.gpus_per_node", "must be a whole number of GPUs"),
    (8.5, "environment.gpus_per_node", "must be a whole number of GPUs"),
    ({"8": 2}, "environment.gpus_per_node.8", "contradicts the runs' placement (8@1)"),
    ({"8": 8, "128": 16}, "environment.gpus_per_node.128", "contradicts the runs' placement (128@16)"),
    ({"8": 8, "64": 8}, "environment.gpus_per_node.64", "keyed by a GPU count no run has"),
])
def test_gpus_per_node_contradicting_the_runs_is_refused(tmp_path, value, where, said):
    path = _calibration(tmp_path, _set_env(value))
    assert_refused(*_fit(path), f"{path}: {where}: ", said)


@pytest.mark.parametrize("value", [8, 16, {"8": 8, "128": 8}])
def test_gpus_per_node_agreeing_with_the_runs_is_read(tmp_path, value):
    code, _, err = _fit(_calibration(tmp_path, _set_env(value)))
    assert code == 0, err


# -- tokens_per_second against step_seconds (advisor.measurements._check_tokens_per_second) ------------------
# The file's 8@1 run: 16 samples x 8192 tokens over a median step of 2.843 s = 4.61e4 tokens/s. A
# tokens_per_second of 1e12 (or of 8 GPUs' share only) was kept beside it.

@pytest.mark.parametrize("tps", [1e12, 46100 / 8, 46100 * 1.2])
def test_tokens_per_second_contradicting_the_steps_is_refused(tmp_path, tps):
    path = _calibration(tmp_path, lambda d: d["runs"][0].__setitem__("tokens_per_second", tps))
    assert_refused(*_fit(path), f"{path}: runs[0].tokens_per_second: contradicts step_seconds: 16 samples x 8192 "
                   "tokens / 2.843 s (median step) = 4.61e+04 tokens/s")


def test_tokens_per_second_within_the_tolerance_is_read(tmp_path):
    code, _, err = _fit(_calibration(tmp_path, lambda d: d["runs"][0].__setitem__("tokens_per_second", 46100 * 1.05)))
    assert code == 0, err


def test_two_torchtitan_logs_of_one_placement_write_a_consistent_rate(tmp_path):
    """Two logs of one placement at different speeds: the run's tokens_per_second was the upper of the two
    logs' median rates, not the merged steps' (what a calibrate run writes and the files are checked by)."""
    slow = tmp_path / "slow.log"
    text = TITAN_LOG.read_text()
    text = re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ", "", text)  # stamps would refuse the halved rate
    fast = tmp_path / "fast.log"
    fast.write_text(text)
    slow.write_text(re.sub(r"tps: ([\d,]+)", lambda m: f"tps: {int(m.group(1).replace(',', '')) * 2 // 3:,}", text))
    out = tmp_path / "two.toml"
    code, _, err = invoke("import", "torchtitan", RENTAL, fast, slow, "--gpus", "8@1", "--out", out)
    assert code == 0, err
    import statistics

    from advisor.calibration_data import load_calibration

    run = load_calibration(out).runs[0]  # 16 samples x 8192 tokens a step at 8 GPUs (2 a GPU)
    assert run.tokens_per_second == pytest.approx(16 * 8192 / statistics.median(run.step_seconds))
    code, _, err = invoke("fit", RENTAL, "--calibration", out)
    assert code == 0, err


# -- a torchtitan log of another batch than the spec's (advisor.imports.torchtitan._check_logged_time) -------
# The log's timestamps time each step (~0.47 s); at its tps, the spec's batch gives step_seconds = batch x
# seq_len / (tps x N). A spec of 8 samples a GPU (4x the log's) made every step 1.88 s without a word.

def test_a_torchtitan_log_of_another_batch_is_refused(tmp_path):
    spec = edited_spec(tmp_path, RENTAL, batch={"per_gpu_samples": 8, "micro_samples": 8})
    out = tmp_path / "cal.toml"
    assert_refused(*invoke("import", "torchtitan", spec, TITAN_LOG, "--gpus", "8@1", "--out", out),
                   f"{TITAN_LOG}: line 2.tps: at this rate a step of 64 samples x 8192 tokens over 8 GPUs takes "
                   "1.882 s",
                   "the log's timestamps put one step at 0.472 s")
    assert not out.exists()


def test_a_torchtitan_log_without_timestamps_is_still_read(tmp_path):
    log = tmp_path / "plain.log"
    log.write_text(re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ", "", TITAN_LOG.read_text()))
    spec = edited_spec(tmp_path, RENTAL, batch={"per_gpu_samples": 8, "micro_samples": 8})
    code, _, err = invoke("import", "torchtitan", spec, log, "--gpus", "8@1", "--out", tmp_path / "cal.toml")
    assert code == 0, err


# -- --plot and --html name their format (advisor.cli.options.output_path suffixes) ---------------------------
# --plot x.html wrote a PNG named x.html; --html x.png an HTML page named x.png.

PLOT_ARGS = [("predict", LLM7B, "--gpus", "8,16", "--plot"), ("recommend", LLM7B, "--budget", "20k", "--plot")]
HTML_ARGS = [("predict", LLM7B, "--gpus", "8,16", "--html"), ("recommend", LLM7B, "--budget", "20k", "--html")]


@pytest.mark.parametrize("args, name, said", [
    *[(a, n, "--plot: writes PNG only: give a path ending in .png") for a in PLOT_ARGS
      for n in ("x.html", "x.svg", "x.pdf", "x.png.txt")],
    *[(a, n, "--html: writes HTML only: give a path ending in .html or .htm") for a in HTML_ARGS
      for n in ("x.png", "x.pdf", "x.html.txt")],
])
def test_an_output_named_for_another_format_is_refused(tmp_path, args, name, said):
    target = tmp_path / name
    assert_refused(*invoke(*args, target), said, "(got '")
    assert not target.exists()


def test_a_png_in_capitals_is_written(tmp_path):
    target = tmp_path / "plot.PNG"
    code, _, err = invoke("predict", LLM7B, "--gpus", "8,16", "--plot", target)
    assert code == 0 and target.read_bytes()[:4] == b"\x89PNG", err


# -- Slurm --time (advisor.calibrate.launchers.slurm.slurm_minutes) --------------------------------------------
# The pattern took any two digits in a field: 12:99:99, 1-99 and 99:99 went into #SBATCH --time as given
# (sbatch refuses them on the cluster, after the queue); 0 is sbatch's "no limit", and a limit shorter
# than one job step's own (--timeout, 30 min by default) ends the allocation before its first step may.

@pytest.mark.parametrize("value, said", [
    ("12:99:99", "a field out of range"), ("1-99", "a field out of range"), ("99:99", "a field out of range"),
    ("1-23:60", "a field out of range"), ("0", "shorter than one job step's limit (30 min"),
    ("00:00:00", "shorter than one job step's limit"), ("5", "shorter than one job step's limit"),
    ("1-", "expected a Slurm time"), ("١٢٠", "expected a Slurm time"),
])
def test_a_malformed_slurm_time_is_refused(value, said):
    assert_refused(*invoke("calibrate", LLM7B, "--emit", "slurm", "--gpus", "16@2", "--time", value),
                   f"--time: {said}", f"(got {value!r})")


@pytest.mark.parametrize("value", ["90", "30:00", "01:30:00", "1-00:00:00", "1-12", "1-12:30"])
def test_a_slurm_time_is_written_as_given(value):
    code, out, err = invoke("calibrate", LLM7B, "--emit", "slurm", "--gpus", "16@2", "--time", value)
    assert code == 0 and f"#SBATCH --time={value}\n" in out, err


# -- a launcher option the run does not read (advisor.cli.calibrate._check_launcher_options) ------------------
# `--time 5 --emit torchrun`, `--partition gpu` on a local run or --bucket beside --emit slurm were ignored.

@pytest.mark.parametrize("args, option, said", [
    (("--emit", "torchrun", "--rdzv-host", "n0", "--time", "90"), "--time", "only with --emit slurm: --emit torchrun"),
    (("--emit", "slurm", "--bucket", "s3://b"), "--bucket", "only with --emit skypilot: --emit slurm"),
    (("--emit", "skypilot", "--out-dir", "sky", "--partition", "gpu"), "--partition", "only with --emit slurm"),
    (("--emit", "slurm", "--rdzv-host", "n0"), "--rdzv-host", "only with --emit torchrun"),
    (("--partition", "gpu",), "--partition", "only with --emit slurm: a local run or --collect does not read it"),
    (("--out-dir", "d",), "--out-dir", "only with --emit"),
])
def test_a_launcher_option_the_run_ignores_is_refused(tmp_path, args, option, said):
    assert_refused(*invoke("calibrate", LLM7B, "--gpus", "16@2", *args), f"{option}: {said}")


# -- tier names differing only in case (advisor.spec.tier_key) --------------------------------------------------
# `spot` and `SPOT` were two tiers, printed as two rows nobody could tell apart by name; --tier SPOT did
# not find `spot`.

@pytest.mark.parametrize("second", ["SPOT", "Spot", "\uff53\uff50\uff4f\uff54"])
def test_tier_names_differing_in_case_are_one_name(tmp_path, second):
    doc = tomllib.loads(LLM7B.read_text())
    doc["tiers"] = [{"name": "spot", "usd_per_gpu_hour": 1.2}, {"name": second, "usd_per_gpu_hour": 2.0}]
    spec = tmp_path / "w.toml"
    spec.write_text(tomli_w.dumps(doc))
    assert_refused(*invoke("validate", spec), f"{spec}: tiers[1].name: duplicate tier name ('spot': names differing "
                   "only in case are one tier)", f"(got {second!r})")


def test_tier_is_found_whatever_its_case(tmp_path):
    code, out, err = invoke("recommend", LLM7B, "--budget", "20k", "--tier", "SPOT", "--json")
    assert code in (0, 3), err
    import json

    assert {p["tier"] for p in json.loads(out)["candidates"]} == {"spot"}


# -- --env on torchrun lines (advisor.calibrate.launchers.torchrun._node_line) --------------------------------
# launch.md lists --env among the options every launcher shares; the torchrun lines dropped it.

def test_torchrun_lines_carry_env(monkeypatch):
    for name in ("NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_DEBUG", "GLOO_SOCKET_IFNAME"):
        monkeypatch.delenv(name, raising=False)
    code, out, err = invoke("calibrate", LLM7B, "--emit", "torchrun", "--rdzv-host", "n0", "--gpus", "16@2",
                            "--env", "NCCL_DEBUG=INFO", "--env", "X=a b")
    assert code == 0, err
    lines = [line for line in out.splitlines() if "torchrun " in line and not line.startswith("#")]
    assert len(lines) == 2 and all(line.startswith("NCCL_DEBUG=INFO X='a b' OMP_NUM_THREADS=8 torchrun ")
                                   for line in lines), lines


# -- true/false in a plain-number spec field (advisor.spec.Real) ------------------------------------------------
# pydantic read `usd_per_gpu_hour = true` as $1.00 an hour and `preemptions_per_node_hour = true` as one an
# hour; whole-number fields already refused true/false (advisor.spec._whole), plain-number ones did not.

@pytest.mark.parametrize("section, field, index", [
    ("tiers", "usd_per_gpu_hour", 0), ("tiers", "preemptions_per_node_hour", 1), ("tiers", "min_hours", 2),
    ("batch", "gradient_noise_scale", None), ("model", "flops_per_sample", None), ("model", "mean_seq_len", None),
    ("cluster", "peak_flops", None),
])
def test_true_is_not_a_number_in_the_spec(tmp_path, section, field, index):
    doc = tomllib.loads(LLM7B.read_text())
    (doc[section][index] if index is not None else doc[section])[field] = True
    spec = tmp_path / "w.toml"
    spec.write_text(tomli_w.dumps(doc))
    where = f"{section}[{index}].{field}" if index is not None else f"{section}.{field}"
    assert_refused(*invoke("validate", spec), f"{spec}: {where}: must be a number, not true/false", "(got True)")


def test_a_price_in_the_count_grammar_is_read(tmp_path):
    doc = tomllib.loads(LLM7B.read_text())
    doc["tiers"][0]["usd_per_gpu_hour"] = "2.64"
    doc["batch"]["gradient_noise_scale"] = "2k"
    spec = tmp_path / "w.toml"
    spec.write_text(tomli_w.dumps(doc))
    code, out, err = invoke("validate", spec, "--json")
    import json

    assert code == 0, err
    w = json.loads(out)["workload"]
    assert w["tiers"][0]["usd_per_gpu_hour"] == 2.64 and w["batch"]["gradient_noise_scale"] == 2000


# -- a calibration file's busbw against its bytes and seconds (advisor.measurements._check_probes) -------------
# An imported nccl-tests row and a --collect probe were checked (advisor.imports.common.check_collective); a
# [[collectives]] row edited by hand was not: busbw 0 or 1e-300 beside a real size and time was printed and
# warned about ("reached 0 GB/s ... likely a misconfiguration") as if measured.

@pytest.mark.parametrize("busbw", [0.0, 1e-300, 1e5])
def test_a_busbw_contradicting_its_size_and_time_is_refused(tmp_path, busbw):
    path = _calibration(tmp_path, lambda d: d["collectives"][0].__setitem__("busbw", busbw))
    assert_refused(*_fit(path), f"{path}: collectives[0].busbw: busbw disagrees with size / time x ")


# -- one problem for a value no member of a union takes (advisor.validation.validation_error) -------------------
# [setup] values are true/false, a number or text: nan or a list printed four lines, one per member.

@pytest.mark.parametrize("value", [float("nan"), [], {"a": 1}])
def test_a_setup_value_of_no_kind_is_one_line(tmp_path, value):
    path = _calibration(tmp_path, lambda d: d["setup"].__setitem__("model.precision", value))
    assert_refused(*_fit(path), f'{path}: setup."model.precision": must be true or false; or must be a whole number')
