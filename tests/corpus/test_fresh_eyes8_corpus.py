"""Fresh eyes, round 8: a careless or hostile user's command lines, each a class of bug found and fixed at
its root (the module named above each test). Expectations are worked from the inputs by hand; each case's
comment says what it did before the fix."""

from __future__ import annotations

import shlex
import tomllib

import pytest

from cli_inprocess import assert_refused, invoke
from conftest import ROOT, WORKLOADS

LLM7B = WORKLOADS / "llm7b.toml"          # FSDP, H100-SXM, 8 per node, tiers on-demand, spot, reserved-1mo
LLM7B_CAL = ROOT / "calibrations" / "llm7b_published_torchtitan.toml"
TITAN_LOG = ROOT / "tests" / "fixtures" / "torchtitan" / "debug_model_pr1437.log"


# -- an option that takes one value, given twice (advisor.cli.app.OnceCommand) -------------------------------
# click keeps the last value and drops the others without a word: `recommend --tier spot --tier on-demand`
# recommended on-demand only, `--budget 20k --budget 2k` priced the second budget, `predict --gpus 8 --gpus 16`
# predicted 16 alone (each exit 0).

ONCE = {
    "tier": (["recommend", LLM7B, "--tier", "spot", "--tier", "on-demand"], "--tier"),
    "budget, = form": (["recommend", LLM7B, "--budget", "20k", "--budget=2k"], "--budget"),
    "gpus": (["predict", LLM7B, "--gpus", "8", "--gpus", "16"], "--gpus"),
    "deadline": (["recommend", LLM7B, "--deadline", "72", "--deadline", "3 days"], "--deadline"),
    "import gpus": (["import", "torchtitan", LLM7B, TITAN_LOG, "--gpus", "8", "--gpus", "16@2"], "--gpus"),
    "plan target": (["plan-calibration", LLM7B, "--target", "64", "--target", "128"], "--target"),
}


@pytest.mark.parametrize("case", ONCE, ids=list(ONCE))
def test_an_option_taking_one_value_given_twice_is_refused(tmp_path, case):
    args, flag = ONCE[case]
    out = ["--out", tmp_path / "cal.toml"] if args[0] == "import" else []  # main wrote calibrations/ otherwise
    assert_refused(*invoke(*args, *out), f"{flag}: given more than once: it takes one value")
    assert not (tmp_path / "cal.toml").exists()


def test_init_given_one_option_twice_writes_nothing(tmp_path):
    out = tmp_path / "x.toml"
    assert_refused(*invoke("init", "--gpu", "A100-SXM", "--gpu", "H100-SXM", "--out", out),
                   "--gpu: given more than once")
    assert not out.exists()


def test_list_options_and_flags_may_still_repeat():
    code, out, err = invoke("predict", LLM7B, "--gpus", "8", "--calibration", LLM7B_CAL, "--calibration", LLM7B_CAL,
                            "--json", "--json", "-q", "-q")
    assert code == 0 and out.startswith("{"), err


# -- init for a GPU without bf16 (advisor.cli.init._precision) -----------------------------------------------
# `advisor init --gpu T4` wrote precision = "bf16", which the spec refuses on a T4 (no bf16 peak): exit 2
# naming a file that was never written, and no option of init could change it. Seven catalog GPUs (T4, the
# V100s, the P100s, K80) had no spec init would write.

@pytest.mark.parametrize(("gpu", "precision"), [("T4", "fp16"), ("V100-SXM2", "fp16"), ("P100", "fp16"),
                                                ("K80", "fp32"), ("A100-SXM", "bf16")])
def test_init_writes_a_precision_the_gpu_computes(tmp_path, gpu, precision):
    out = tmp_path / "spec.toml"
    code, _, err = invoke("init", "--gpu", gpu, "--out", out)
    assert code == 0, err
    assert tomllib.loads(out.read_text())["model"]["precision"] == precision
    assert invoke("validate", out)[0] == 0


# -- --rdzv-host that names no host (advisor.calibrate.launchers.job.emit_job) --------------------------------
# torchrun reads --rdzv-endpoint as HOST:PORT. `--rdzv-host "a b"`, `h:1234` (a port inside),
# `fe80::1` (an IPv6 address without brackets) and `$MASTER_ADDR` (quoted: never expanded) were emitted as
# one quoted word (exit 0), and every node of the rented cluster would have failed to rendezvous.

@pytest.mark.parametrize("host", ["a b", "h:1234", "fe80::1", "$MASTER_ADDR", "-x", "a/b", "h;id"])
def test_a_rendezvous_host_that_is_no_host_name_is_refused(host):
    assert_refused(*invoke("calibrate", LLM7B, "--gpus", "16@2", "--emit", "torchrun", "--rdzv-host", host),
                   "--rdzv-host: expected node 0's host name or address", f"(got {host!r})")


@pytest.mark.parametrize("host", ["node-0", "n_1.cluster.local", "10.0.0.1", "[fe80::1]"])
def test_host_names_and_bracketed_addresses_are_emitted(host):
    code, out, err = invoke("calibrate", LLM7B, "--gpus", "16@2", "--emit", "torchrun", "--rdzv-host", host)
    assert code == 0, err
    run = next(ln for ln in out.splitlines() if ln.startswith("OMP_NUM_THREADS="))
    words = shlex.split(run)
    assert words[words.index("--rdzv-endpoint") + 1] == f"{host}:29500"


# -- the coverage note of one-node runs (advisor.calibrate.launchers.job.coverage_note) -----------------------
# `--gpus 4@1 --emit torchrun` printed "# note: these runs cross nodes at 0 node counts []".

def test_one_node_runs_are_said_to_stay_in_one_node():
    code, out, err = invoke("calibrate", LLM7B, "--gpus", "4@1", "--emit", "torchrun", "--rdzv-host", "n0")
    assert code == 0, err
    assert "0 node counts" not in out and "[]" not in out, out
    assert "# note: these runs stay within one node: none crosses nodes; measuring how the inter-node cost" in out


# -- plan-calibration's interval sentence counts (advisor.cli.plan_calibration) ------------------------------
# `--target 1` read "90% interval of the step at 1 GPUs (1 nodes)", and the default target "1024 GPUs".

@pytest.mark.parametrize(("spec", "target", "said"), [
    (WORKLOADS / "bert-large.toml", "1", "step at 1 GPU (1 node), as predict"),  # llm7b's 1 GPU does not fit: refused
    (LLM7B, "1024@128", "step at 1,024 GPUs (128 nodes), as predict")])
def test_the_plans_target_reads_as_a_count(spec, target, said):
    code, out, err = invoke("plan-calibration", spec, "--target", target)
    assert code == 0, err
    assert said in " ".join(out.split()), out


# -- --json on every command that prints a result (advisor.cli.spec.schema) ----------------------------------
# usage.md: "--json (every command that prints a result) prints one JSON document". `advisor schema --json`
# exited 2, "No such option: --json": a script passing --json to each command broke on the one that always
# prints JSON.

def test_schema_takes_json_and_prints_the_same_document():
    import json

    code, out, err = invoke("schema", "--json")
    assert code == 0, err
    assert out == invoke("schema")[1] and json.loads(out)["properties"]["model"], out[:200]


# -- one variable given twice through --env (advisor.calibrate.launchers.job.parse_env) -----------------------
# `--env NCCL_DEBUG=INFO --env NCCL_DEBUG=WARN` emitted WARN alone, the first dropped without a word (exit 0).

def test_an_env_variable_given_twice_is_refused():
    assert_refused(*invoke("calibrate", LLM7B, "--gpus", "16@2", "--emit", "slurm", "--env", "NCCL_DEBUG=INFO",
                           "--env", "NCCL_DEBUG=WARN"),
                   "--env: NCCL_DEBUG given more than once: the last value would silently win",
                   "(got 'NCCL_DEBUG=WARN')")
    code, out, err = invoke("calibrate", LLM7B, "--gpus", "16@2", "--emit", "slurm", "--env", "A=1", "--env", "B=2")
    assert code == 0 and "A=1" in out and "B=2" in out, err


# -- calibration.gpus that do not split over their nodes (advisor.spec._uneven_calibration_counts) ------------
# At 3 GPUs per node, calibration.gpus = [1, 2, 4, 8, 16] validated (exit 0), `advisor init --gpus-per-node 3`
# wrote exactly that, and `advisor calibrate --emit` then refused 8 (3 nodes: 8/3 ranks each).

def test_calibration_counts_that_do_not_split_over_their_nodes_are_refused(tmp_path):
    from spec_edit import edited_spec

    spec = edited_spec(tmp_path, LLM7B, cluster={"gpus_per_node": 3}, calibration={"gpus": [1, 2, 8]})
    assert_refused(*invoke("validate", spec), f"{spec}: calibration.gpus[2]: 8 GPUs do not split evenly over 3 "
                   "nodes: every node must run the same number of ranks (got 8)")


@pytest.mark.parametrize(("per_node", "counts"), [(3, [1, 2, 3, 4, 6]), (6, [1, 2, 4, 6, 8, 12]),
                                                  (8, [1, 2, 4, 8, 16])])
def test_init_writes_calibration_counts_that_split(tmp_path, per_node, counts):
    out = tmp_path / "spec.toml"
    code, _, err = invoke("init", "--gpus-per-node", per_node, "--out", out)
    assert code == 0, err
    assert tomllib.loads(out.read_text())["calibration"]["gpus"] == counts
    code, _, err = invoke("calibrate", out, "--emit", "torchrun", "--rdzv-host", "n0")
    assert code == 0, err
