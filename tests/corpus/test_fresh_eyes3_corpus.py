"""Fresh eyes, round 3: hostile and confused inputs, each a class of bug found and fixed at its root
(the module named above each test), and outputs that were physically impossible. Expectations are
worked from the inputs and the sources by hand, never from the model."""

from __future__ import annotations

import json
import tomllib

import pytest
import tomli_w
from spec_edit import edited_spec

from cli_inprocess import assert_refused, invoke
from conftest import ROOT, WORKLOADS

LLM7B = WORKLOADS / "llm7b.toml"          # FSDP, H100-SXM, 8 per node
MIXTRAL = ROOT / "tests" / "fixtures" / "moe" / "mixtral.toml"  # EP 8 over the data-parallel ranks


_spec = edited_spec


def _calibration(tmp_path, workload, runs, name="cal.toml", **extra):
    doc = {"schema": 1, "workload": workload,
           "provenance": {"source": "measured", "created": "2026-12-01T00:00:00Z"}, "runs": runs, **extra}
    path = tmp_path / name
    path.write_text(tomli_w.dumps(doc))
    return path


# -- one rule for which measured placements cannot be fitted ---------------------------------------------
# advisor.measurements.unrunnable: check_runs_split (a file the user names: refused) and from_calibration's
# left_out (the checked-in file: left out) computed over_node | unsplit each on its own. Now one function;
# both answers name the same runs.

def test_the_refused_and_the_left_out_runs_are_the_same_rule():
    from advisor.calibration_data import calibration_from_dict
    from advisor.measurements import from_calibration, unrunnable
    from advisor.spec import load_workload

    w = load_workload(_SIX_PER_NODE)
    runs = [{"gpus": 8, "nodes": 1, "step_seconds": [3.0]}, {"gpus": 12, "nodes": 2, "step_seconds": [3.1]},
            {"gpus": 6, "nodes": 1, "step_seconds": [2.9]}]
    cal = calibration_from_dict({"schema": 1, "workload": w.name, "provenance": {
        "source": "measured", "created": "2026-12-01T00:00:00Z"}, "runs": runs}, "<t>")
    assert unrunnable(w, None, [8, 12, 6], [1, 2, 1]).tolist() == [True, False, False]  # 8 on a 6-GPU node
    notes: list[str] = []
    kept = from_calibration(cal, w, left_out=notes)
    assert sorted(r.gpus for r in kept.runs) == [6, 12]
    (note,) = notes
    assert "left out 1 placement measured under a layout this spec's cannot run (8@1)" in note
    with pytest.raises(Exception, match=r"runs\[0\]\.nodes: 8 GPUs on 1 node exceed cluster.gpus_per_node \(6\)"):
        from_calibration(cal, w)


_SIX_PER_NODE = None


@pytest.fixture(autouse=True)
def _six_per_node(tmp_path):
    global _SIX_PER_NODE
    _SIX_PER_NODE = _spec(tmp_path, LLM7B, "six.toml", cluster={"gpus_per_node": 6},  # counts that split
                          calibration={"gpus": [1, 2, 4, 6, 12]})                       # over 6 a node


# -- a placement given twice -----------------------------------------------------------------------------
# advisor.placement.parse_placements: `--gpus 8,8` printed two identical rows (and calibrate would have
# measured 8 GPUs twice). A repeat is kept once, where it first appears; `16` and `16@2` at 8 per node
# are one placement.

def test_a_repeated_placement_is_predicted_once():
    code, out, err = invoke("predict", LLM7B, "--gpus", "8,16,8,16@2,8@1", "--json")
    assert code == 0, err
    assert [(p["gpus"], p["nodes"]) for p in json.loads(out)["predictions"]] == [(8, 1), (16, 2)]


def test_a_repeated_placement_is_one_node_count_apart_when_spelt_apart():
    code, out, err = invoke("predict", LLM7B, "--gpus", "16@2,16@4", "--json")
    assert code == 0, err
    assert [(p["gpus"], p["nodes"]) for p in json.loads(out)["predictions"]] == [(16, 2), (16, 4)]


# -- a typed option's range in pydantic's words -------------------------------------------------------------
# advisor.cli.app.usage_line: typer 0.2x validates option values with pydantic, and `--max-nodes 0` read
# "--max-nodes: Input should be greater than or equal to 1". The spec's own wording now, with the value.

@pytest.mark.parametrize("args, line", [
    (("plan-calibration", LLM7B, "--max-nodes", "0"), "--max-nodes: must be at least 1 (got '0')"),
    (("plan-calibration", LLM7B, "--max-nodes", "-3"), "--max-nodes: must be at least 1 (got '-3')"),
    (("plan-calibration", LLM7B, "--max-nodes", "x"), "--max-nodes: expected a whole number (got 'x')"),
    (("plan-calibration", LLM7B, "--max-nodes", "1.5"), "--max-nodes: expected a whole number (got '1.5')"),
    (("init", "--gpus-per-node", "0"), "--gpus-per-node: must be at least 1 (got '0')"),
])
def test_an_option_out_of_its_range_is_refused_in_plain_words(args, line):
    code, out, err = invoke(*args)
    assert_refused(code, out, err, line)
    assert "Input should be" not in err


# -- a link faster than its hardware -------------------------------------------------------------------------
# advisor.spec._gpu_problems: cluster.intra_node_bandwidth = "4500 GB/s" on an H100 (NVLink 4: 450 GB/s a
# direction) was accepted and every intra-node collective priced 10x too fast. Refused above the catalog's
# line rate plus advisor.spec.LINK_BUSBW_MARGIN (NVLS lifts nccl-tests' busbw to ~480 on 450); a PCIe card's
# NVLink bridge (catalog fastest_intra_node_bandwidth) is the card's ceiling. A node's NICs above 1.6 Tbit/s
# per GPU are refused too.

@pytest.mark.parametrize("gpu, bandwidth, ceiling", [
    ("H100-SXM", "4500 GB/s", "450 GB/s"),
    ("H100-SXM", "500 GB/s", "450 GB/s"),       # over 450 x 1.1 = 495
    ("A100-PCIe", "600 GB/s", "300 GB/s"),      # the NVLink bridge's 300 a direction, not PCIe's 32
    ("T4", "64 GB/s", "16 GB/s"),
])
def test_an_intra_node_link_above_the_gpus_hardware_is_refused(tmp_path, gpu, bandwidth, ceiling):
    spec = _spec(tmp_path, LLM7B, cluster={"gpu": gpu, "intra_node_bandwidth": bandwidth, "gpu_memory": None},
                 model={"precision": "fp16" if gpu == "T4" else "bf16"})
    code, out, err = invoke("validate", spec)
    assert_refused(code, out, err, f"{spec}: cluster.intra_node_bandwidth: above the catalog's {gpu} line rate "
                   f"({ceiling.replace(' GB/s', '')} GB/s per GPU", "a link cannot be faster than its hardware",
                   f"(got '{bandwidth}')")


@pytest.mark.parametrize("gpu, bandwidth", [
    ("H100-SXM", "480 GB/s"),    # NVLS busbw on 8 H100 (NVIDIA/nccl-tests#212)
    ("A100-PCIe", "300 GB/s"),   # bridged pair
    ("H100-SXM", "450 GB/s"),
])
def test_a_link_its_hardware_reaches_is_accepted(tmp_path, gpu, bandwidth):
    spec = _spec(tmp_path, LLM7B, cluster={"gpu": gpu, "intra_node_bandwidth": bandwidth, "gpu_memory": None})
    code, _, err = invoke("validate", spec)
    assert code == 0, err


@pytest.mark.parametrize("per_node, bandwidth, ok", [
    (8, "3200 GB/s", False),       # GB for Gbit: 3,200 Gbit/s per GPU
    (8, "12800 Gbit/s", True),     # 8 x 1.6 Tbit/s
    (8, "13000 Gbit/s", False),
    (1, "3200 Gbit/s", False),     # eight NICs' worth on one GPU
])
def test_a_nodes_nics_above_any_shipped_are_refused(tmp_path, per_node, bandwidth, ok):
    spec = _spec(tmp_path, LLM7B, cluster={"gpus_per_node": per_node, "inter_node_bandwidth": bandwidth},
                 parallelism={"data_parallel_shard_degree": None})
    code, out, err = invoke("validate", spec)
    if ok:
        assert code == 0, err
    else:
        assert_refused(code, out, err, f"{spec}: cluster.inter_node_bandwidth: ",
                       "above 1600 Gbit/s, twice the fastest NIC a GPU ships with")


# -- MI355X's fp32 -------------------------------------------------------------------------------------------
# advisor/data/gpus.toml: MI355X had no fp32 column, so an fp32 spec on it was refused as having no fp32
# peak; AMD's data sheet gives FP32 157.3 TFLOPS (CDNA 4 has no TF32). fp32 is TF32 where a GPU has it.

def test_fp32_is_tf32_where_the_gpu_has_it_and_plain_fp32_on_mi355x():
    from advisor.catalog import find_gpu

    assert find_gpu("MI355X").peak_flops("fp32") == pytest.approx(157.3e12)
    assert find_gpu("MI355X").peak_column("fp32") == "peak_fp32_flops"
    assert find_gpu("H100-SXM").peak_column("fp32") == "peak_tf32_flops"
    assert "TF32 tensor-core peak where the GPU has one" in (ROOT / "docs" / "formats.md").read_text()


# -- a measured peak of another model shape ------------------------------------------------------------------
# advisor.topology.memory.measured_peaks: see test_fresh_eyes2_corpus (seq_len); here the hidden size and the
# recomputation, and a spec unchanged keeps the measured level.

@pytest.mark.parametrize("section, fields, said", [
    ("model", {"layers": 64}, "model.layers is 64, measured at 32"),
    ("parallelism", {"activation_checkpoint": "none"}, "parallelism.activation_checkpoint is none, measured at "
                                                       "selective"),
])
def test_a_measured_peak_is_not_applied_to_another_shape(tmp_path, section, fields, said):
    spec = _spec(tmp_path, LLM7B, **{section: fields})
    code, out, err = invoke("predict", spec, "--gpus", "8", "--json")
    assert code == 0, err
    assert any("its measured memory peaks are not applied" in w and said in w for w in json.loads(out)["warnings"])


def test_an_unchanged_spec_keeps_its_measured_peak():
    code, out, err = invoke("predict", LLM7B, "--gpus", "8", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert not any("peaks are not applied" in w for w in doc["warnings"])
    assert doc["predictions"][0]["memory_bytes"] == pytest.approx(88476326298, rel=0.01)  # the published peak


# -- pp, cp and ep of a recorded layout ------------------------------------------------------------------------
# advisor.measurements.recorded_layout read "dp_shard=…, dp_replicate=…, tp=…" and nothing after: a run
# recorded at pp=3 was fitted as the spec's pp=1, and one at ep=4 refused under the spec's ep=8.

def test_a_recorded_pipeline_degree_is_read_back(tmp_path):
    cal = _calibration(tmp_path, "llm7b", [{"gpus": 8, "nodes": 1, "step_seconds": [3.0],
                                            "layout": "dp_shard=8, dp_replicate=1, tp=1, pp=3"}])
    code, out, err = invoke("predict", LLM7B, "--calibration", cal, "--gpus", "8")
    assert_refused(code, out, err, f"{cal}: runs[0].gpus: the parallel layout the file records cannot split "
                   "8 GPUs over 1 node (tensor x pipeline x context degrees 3", "(got 8)")


def test_a_recorded_expert_degree_is_read_back(tmp_path):
    from advisor.calibration_data import load_calibration
    from advisor.measurements import fitted_layout, recorded_layout
    from advisor.spec import load_workload

    cal = _calibration(tmp_path, "moe-mixtral", [{"gpus": 4, "nodes": 1, "step_seconds": [60.0],
                                              "layout": "dp_shard=4, dp_replicate=1, tp=1, pp=1, ep=4"}])
    w = fitted_layout(load_workload(MIXTRAL), recorded_layout(load_calibration(cal, "moe-mixtral")))
    assert w.parallelism.expert_parallel_degree == 4
    code, _, err = invoke("predict", MIXTRAL, "--calibration", cal, "--gpus", "8")  # refused when ep was dropped
    assert code == 0, err


@pytest.mark.parametrize("label, needle", [
    ("dp_shard=8, dp_replicate=1, tp=1, pp=1, vp=2", "'vp=2' is not one of them"),
    ("dp_shard=8, dp_replicate=1, tp=1, tp=2", "'tp=2' is not one of them"),
    ("dp_shard=8, pp=1", "needs dp_shard, dp_replicate and tp"),
    ("dp_shard=8, dp_replicate=1, tp=0", "every degree is at least 1"),
])
def test_a_layout_label_advisor_cannot_read_is_refused_by_name(tmp_path, label, needle):
    cal = _calibration(tmp_path, "llm7b", [{"gpus": 8, "nodes": 1, "step_seconds": [3.0], "layout": label}])
    code, out, err = invoke("predict", LLM7B, "--calibration", cal, "--gpus", "8")
    assert_refused(code, out, err, f"{cal}: runs[0].layout: ", needle)


def test_free_text_in_a_layout_is_no_layout():
    from advisor.measurements import _label_degrees

    assert _label_degrees(None, 0, "FSDP over 8 GPUs (torchtitan)") is None
    assert _label_degrees(None, 0, "dp_shard=8, dp_replicate=1, tp=1") == {"dp_shard": 8, "dp_replicate": 1, "tp": 1}


# -- measurements no run can have --------------------------------------------------------------------------
# advisor.calibration_data._run_problems / advisor.measurements.measured_columns (one rule, comm_over_step):
# a step's exposed communication longer than the step was fitted as a network term; a reserved peak below
# the allocated one. advisor.topology.memory._check_peaks_hold_the_weights: a peak below the weights alone
# (1 kB for an 8B model) moved every footprint to ~1 kB, and 8 x 80 GB "held" anything.

def _published(tmp_path, **run0):
    doc = tomllib.loads((ROOT / "calibrations" / "llm7b_published_torchtitan.toml").read_text())
    doc["runs"][0].update(run0)
    path = tmp_path / "cal.toml"
    path.write_text(tomli_w.dumps(doc))
    return path


@pytest.mark.parametrize("run0, field, needle", [
    ({"comm_seconds": [5.0]}, "runs[0].comm_seconds[0]", "longer than its step (2.84346 s)"),
    ({"peak_reserved_bytes": 5}, "runs[0].peak_reserved_bytes", "below peak_memory_bytes (88476326298)"),
    ({"peak_memory_bytes": 1000}, "runs[0].peak_memory_bytes",
     "below the model's weights alone over 8 GPUs (2e+09 bytes: 8B parameters x 2 bytes / 8)"),
])
def test_a_calibration_run_no_hardware_produces_is_refused(tmp_path, run0, field, needle):
    cal = _published(tmp_path, **run0)
    code, out, err = invoke("predict", LLM7B, "--calibration", cal, "--gpus", "8")
    assert_refused(code, out, err, f"{cal}: {field}: ", needle)


def test_a_csv_row_whose_comm_outlasts_its_step_is_refused(tmp_path):
    csv = tmp_path / "m.csv"
    csv.write_text("gpus,step_seconds,comm_seconds\n8,3.0,1\n16,3.1,4\n")
    code, out, err = invoke("fit", LLM7B, "--measurements", csv)
    assert_refused(code, out, err, f"{csv}: line 3.comm_seconds: longer than its step (3.1 s)", "(got '4')")


# -- a tier name that is blank or padded ---------------------------------------------------------------------
# advisor.spec.Name: `name = " "` printed an empty row label and matched no --tier; " spot" beside "spot"
# passed as two tiers that read the same.

@pytest.mark.parametrize("name, needle", [(" ", "must not be blank"), (" spot", "must not start or end with a space"),
                                          ("spot ", "must not start or end with a space")])
def test_a_blank_or_padded_tier_name_is_refused(tmp_path, name, needle):
    doc = tomllib.loads(LLM7B.read_text())
    doc["tiers"][0]["name"] = name
    spec = tmp_path / "spec.toml"
    spec.write_text(tomli_w.dumps(doc))
    code, out, err = invoke("validate", spec)
    assert_refused(code, out, err, f"{spec}: tiers[0].name: {needle}", f"(got {name!r})")


# -- pydantic's type words in a spec --------------------------------------------------------------------------
# advisor.validation._TYPE_WORDS: "tiers[0].usd_per_gpu_hour: Input should be a finite number".

@pytest.mark.parametrize("section, key, value, words", [
    ("tiers", "usd_per_gpu_hour", float("inf"), "must be a finite number"),
    ("tiers", "usd_per_gpu_hour", "x", "must be a number"),
    ("cluster", "gpu", 5, "must be text (in quotes)"),
])
def test_a_wrong_type_is_said_in_advisors_words(tmp_path, section, key, value, words):
    doc = tomllib.loads(LLM7B.read_text())
    (doc["tiers"][0] if section == "tiers" else doc[section])[key] = value
    spec = tmp_path / "spec.toml"
    spec.write_text(tomli_w.dumps(doc))
    code, out, err = invoke("validate", spec)
    where = f"tiers[0].{key}" if section == "tiers" else f"{section}.{key}"
    assert_refused(code, out, err, f"{spec}: {where}: {words}")
    assert "Input should be" not in err


# -- more memory than any build of the GPU -------------------------------------------------------------------
# advisor.spec.MEMORY_VARIANT_FACTOR: gpu_memory = "1 TB" on an H100 fitted plans no H100 holds; a name
# covers builds up to 2x its catalog entry (llm7b's 96 GB "H100-SXM" passes).

def test_more_memory_than_any_build_of_the_gpu_is_refused(tmp_path):
    spec = _spec(tmp_path, LLM7B, cluster={"gpu_memory": "1 TB"})
    code, out, err = invoke("validate", spec)
    assert_refused(code, out, err, f"{spec}: cluster.gpu_memory: more than 2x the catalog's H100-SXM (80 GB)",
                   "(got '1000 GB')")
    assert invoke("validate", _spec(tmp_path, LLM7B, "ok.toml", cluster={"gpu_memory": "160 GB"}))[0] == 0


# -- an nccl-tests log faster than any node ----------------------------------------------------------------------
# advisor.imports.common.check_hardware_reaches: the 2-node H100 log with every time cut by 100
# (33,880 GB/s busbw) was imported with a warning and fitted as a link 45x the declared one.

def _cut_times(src, dst, factor=100.0):
    out = []
    for line in src.read_text().splitlines():
        f = line.split()
        if len(f) == 13 and f[0].isdigit() and int(f[0]) >= 100_000_000:
            f[5], f[9] = f"{float(f[5]) / factor:.2f}", f"{float(f[9]) / factor:.2f}"
            for k in (6, 7, 10, 11):
                f[k] = f"{float(f[k]) * factor:.2f}"
            line = " ".join(f)
        elif len(f) == 13 and f[0].isdigit():
            continue
        out.append(line)
    dst.write_text("\n".join(out) + "\n")
    return dst


def test_an_nccl_tests_log_faster_than_any_node_is_refused(tmp_path):
    log = ROOT / "tests" / "fixtures" / "nccl-tests" / "h100_2node_gcp_a3mega_all_reduce.log"
    fast = _cut_times(log, tmp_path / "fast.log")
    out_file = tmp_path / "n.toml"
    code, out, err = invoke("import", "nccl-tests", LLM7B, fast, "--out", out_file)
    assert_refused(code, out, err, f"{fast}: line ", ".busbw: 3.388e+04 GB/s is above what tree reaches on the "
                   "fastest links a node of 8 H100-SXM GPUs has (928.1 GB/s busbw")
    assert not out_file.exists()
    assert invoke("import", "nccl-tests", LLM7B, log, "--out", out_file)[0] == 0  # the real log: 338.8 GB/s


# -- a spec given where a calibration goes ------------------------------------------------------------------
# advisor.calibration_data.calibration_from_dict: `--calibration workloads/llm7b.toml` read
# "schema: unsupported calibration schema; this advisor reads schema 1 (got None)".

def test_a_workload_spec_given_as_a_calibration_is_named_so():
    code, out, err = invoke("predict", LLM7B, "--calibration", LLM7B)
    assert_refused(code, out, err, f"{LLM7B}: a workload spec, not a calibration file", "WORKLOAD argument")


# -- an output that is an input -------------------------------------------------------------------------------
# advisor.cli.app.check_output_paths: `predict spec.toml --plot spec.toml` replaced the spec with a PNG,
# `--calibration cal.toml --html cal.toml` the calibration with HTML, `--plot r.png --html r.png` kept one.

def test_an_output_naming_an_input_or_another_output_is_refused_before_writing(tmp_path):
    spec = tmp_path / "llm7b.toml"
    spec.write_text(LLM7B.read_text())
    before = spec.read_bytes()
    code, out, err = invoke("predict", spec, "--plot", spec)
    assert_refused(code, out, err, "--plot: writes PNG only")  # round 6: a .toml is not a PNG's name
    bare = tmp_path / "llm7b"  # without a suffix the output check below is what refuses it
    bare.write_text(LLM7B.read_text())
    code, out, err = invoke("predict", bare, "--plot", bare)
    assert_refused(code, out, err, "--plot: the file WORKLOAD reads", "writing it would overwrite the input")
    cal = tmp_path / "cal"
    cal.write_text((ROOT / "calibrations" / "llm7b_published_torchtitan.toml").read_text())
    code, out, err = invoke("predict", spec, "--calibration", cal, "--html", tmp_path / "." / "cal")
    assert_refused(code, out, err, "--html: the file --calibration reads")
    link = tmp_path / "link.toml"
    link.symlink_to(spec)
    code, out, err = invoke("import", "torchtitan", spec, ROOT / "tests" / "fixtures" / "torchtitan" /
                            "debug_model_pr1437.log", "--gpus", "8", "--out", link)
    assert_refused(code, out, err, "--out: the file WORKLOAD reads")
    code, out, err = invoke("recommend", spec, "--plot", tmp_path / "r", "--html", tmp_path / "r")
    assert_refused(code, out, err, "--html: the same file as --plot")
    assert spec.read_bytes() == before and bare.read_text() == LLM7B.read_text() and not (tmp_path / "r").exists()


# -- peaks of merged calibrations, each by its own file --------------------------------------------------------
# advisor.measurements.combine_measurements: `--calibration full.toml --calibration proxy.toml` merged the
# files under the first's [environment], so a 4-of-32-layer proxy's peak was read as the full model's.

def test_a_proxys_peak_stays_out_when_merged_after_a_full_model_file(tmp_path):
    published = ROOT / "calibrations" / "llm7b_published_torchtitan.toml"
    proxy = _calibration(tmp_path, "llm7b", [{"gpus": 16, "nodes": 2, "step_seconds": [3.0],
                                              "peak_memory_bytes": 5_000_000_000}], name="proxy.toml",
                         environment={"proxy_layers": 4, "model_layers": 32})

    def memory(*cals):
        args = [a for c in cals for a in ("--calibration", c)]
        code, out, err = invoke("predict", LLM7B, *args, "--gpus", "16@2", "--json")
        assert code == 0, err
        return json.loads(out)["predictions"][0]["memory_bytes"]

    assert memory(published, proxy) == pytest.approx(memory(published), rel=1e-9)
