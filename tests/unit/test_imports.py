"""`advisor import nccl-tests|torchtitan`: real logs in, [[collectives]] / [[runs]] out.

Expected values are transcribed by hand from the published logs (tests/fixtures/nccl-tests/README.md),
not produced by the code under test.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from advisor.calibration_data import load_calibration
from advisor.fileio import exclusive_lock
from advisor.topology.collectives import bus_bandwidth_gbps
from cli_inprocess import invoke

ROOT = Path(__file__).resolve().parents[2]
NCCL = ROOT / "tests" / "fixtures" / "nccl-tests"
TITAN = ROOT / "tests" / "fixtures" / "torchtitan"
RENTAL = ROOT / "workloads" / "rental-ethernet.toml"
RENTAL_CAL = ROOT / "calibrations" / "rental-ethernet_published_torchtitan.toml"

#: file -> (op, ranks, nodes, rows, largest size in bytes, its printed out-of-place busbw, time in us)
PUBLISHED = {
    "h100_2node_gcp_a3mega_all_reduce.log": ("all_reduce", 16, 2, 31, 8589934592, 338.82, 47535),
    "a100_1node_oci_all_reduce.log": ("all_reduce", 8, 1, 1, 10737418240, 232.20, 80922),
    "a100_2node_oci_all_reduce.log": ("all_reduce", 16, 2, 1, 10737418240, 191.76, 104989),
}


def _import(tmp_path, *logs, extra=()):
    out = tmp_path / "cal.toml"
    code, _, err = invoke("import", "nccl-tests", RENTAL, *logs, "--out", out, *extra)
    return code, err, out


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_logs_import_with_printed_busbw_ranks_and_nodes(tmp_path, name):
    op, ranks, nodes, rows, size, busbw, time_us = PUBLISHED[name]
    code, err, out = _import(tmp_path, NCCL / name)
    assert code == 0, err
    coll = load_calibration(out, "rental-ethernet").collectives
    assert len(coll) == rows
    assert {(c.op, c.gpus, c.nodes) for c in coll} == {(op, ranks, nodes)}
    largest = max(coll, key=lambda c: c.bytes)
    assert largest.bytes == size
    assert largest.busbw == pytest.approx(busbw, rel=0.02)
    assert largest.seconds == pytest.approx(time_us * 1e-6, rel=1e-9)
    # busbw from size and time with nccl-tests' factor for these ranks: the rank count is right.
    assert bus_bandwidth_gbps(op, ranks, size, time_us * 1e-6) == pytest.approx(busbw, rel=0.02)
    assert name in largest.source and "nThread" in largest.source


def test_collective_inferred_from_busbw_factor_without_name_or_header(tmp_path):
    neutral = tmp_path / "run.txt"
    shutil.copy(NCCL / "h100_2node_gcp_a3mega_all_reduce.log", neutral)
    code, err, out = _import(tmp_path, neutral)
    assert code == 0, err
    assert {c.op for c in load_calibration(out).collectives} == {"all_reduce"}


def test_wrong_collective_or_rank_count_is_refused_by_the_busbw_check(tmp_path):
    neutral = tmp_path / "run.txt"
    shutil.copy(NCCL / "h100_2node_gcp_a3mega_all_reduce.log", neutral)
    code, err, out = _import(tmp_path, neutral, extra=("--op", "reduce_scatter"))
    assert code == 2 and "busbw" in err and not out.exists()
    # Drop ranks 8-15: the printed busbw no longer fits 8 ranks.
    lines = (NCCL / "h100_2node_gcp_a3mega_all_reduce.log").read_text().splitlines()
    kept = [ln for ln in lines if not any(f"Rank {r:2d} " in ln for r in range(8, 16))]
    neutral.write_text("\n".join(kept) + "\n")
    code, err, _ = _import(tmp_path, neutral)
    assert code == 2 and "busbw" in err


def test_not_nccl_tests_output_exits_2_with_file_and_line(tmp_path):
    bogus = tmp_path / "notes.txt"
    bogus.write_text("\nhello world\nsize 1 2 3\n")
    code, err, out = _import(tmp_path, bogus)
    assert code == 2 and err.startswith(f"{bogus}: line 2: not nccl-tests output") and "hello world" in err
    assert not out.exists()


def test_truncated_row_is_an_error_with_its_line(tmp_path):
    text = (NCCL / "a100_2node_oci_all_reduce.log").read_text().replace(
        "   104989  102.27  191.76      0   104997  102.26  191.75      0", "   104989  102.27")
    broken = tmp_path / "cut.log"
    broken.write_text(text)
    code, err, _ = _import(tmp_path, broken)
    assert code == 2 and f"{broken}: line 26: truncated" in err


def test_two_rank_zero_lines_are_separate_jobs_not_one(tmp_path):
    # The device lines of NVIDIA/nccl-tests#107: nccl-tests built without MPI under mpirun starts
    # one 1-rank job per host, each listing itself as rank 0.
    log = tmp_path / "all_reduce.log"
    log.write_text("# nThread 1 nGpus 1 minBytes 1310720000 maxBytes 1310720000 step: 1048576(bytes) warmup iters: 5 "
                   "iters: 20 validation: 1\n#\n# Using devices\n"
                   "#   Rank  0 Pid   1320 on ip-172-31-20-228 device  0 [0x00] Tesla V100-SXM2-16GB\n"
                   "#   Rank  0 Pid   2066 on ip-172-31-22-230 device  0 [0x00] Tesla V100-SXM2-16GB\n")
    code, err, _ = _import(tmp_path, log)
    assert code == 2 and "rank 0 is listed twice" in err and "line 5" in err


def test_pre_2019_format_without_group_root_or_wrong_columns(tmp_path):
    """SYNTHETIC rows in the layout of nccl-tests 2.0 (src/common.cu at cbe7f65: no Group, no root
    column, `error` = max deviation); values are consistent with 8 ranks of all-reduce."""
    log = tmp_path / "old.log"
    log.write_text(
        "# nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n"
        "#\n# Using devices\n"
        + "".join(f"#   Rank {r:2d} Pid    746 on hostA device {r:2d} [0x4f] Tesla V100-SXM2-16GB\n" for r in range(8))
        + "#\n#                                                     out-of-place                       in-place\n"
        "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n"
        "#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n"
        "   134217728      33554432   float     sum   1818.8   73.80  129.14  2e-07   1821.9   73.67  128.92  2e-07\n"
        "# Out of bounds values : 0 OK\n")
    code, err, out = _import(tmp_path, log, extra=("--op", "all_reduce"))
    assert code == 0, err
    (c,) = load_calibration(out).collectives
    assert (c.gpus, c.nodes, c.bytes, c.busbw) == (8, 1, 134217728, 129.14)


def test_merges_into_a_copy_of_rentals_calibration_atomically_and_without_repeats(tmp_path):
    out = tmp_path / "rental.toml"
    shutil.copy(RENTAL_CAL, out)
    before = load_calibration(out)
    log = NCCL / "a100_2node_oci_all_reduce.log"
    for _ in range(2):
        code, err = invoke("import", "nccl-tests", RENTAL, log, "--out", out)[0::2]
        assert code == 0, err
    after = load_calibration(out, "rental-ethernet")
    assert after.runs == before.runs
    assert len(after.collectives) == len(before.collectives) + 1
    assert "already in the file" in err
    with exclusive_lock(out):
        code, _, err = invoke("import", "nccl-tests", RENTAL, log, "--out", out)
    assert code == 2 and "another advisor process" in err


def test_two_node_log_makes_rentals_inter_node_term_measured(tmp_path):
    from advisor.scaling import build_model
    from advisor.spec import load_workload

    out = tmp_path / "rental.toml"
    shutil.copy(RENTAL_CAL, out)
    w = load_workload(RENTAL)
    before = build_model(w, calibration=out, n_bootstrap=5)
    assert any("no measurement crossed nodes" in x for x in before.predict([16], [2]).warnings)
    assert invoke("import", "nccl-tests", RENTAL, NCCL / "h100_2node_gcp_a3mega_all_reduce.log", "--out", out)[0] == 0
    after = build_model(w, calibration=out, n_bootstrap=5)
    assert not any("no measurement crossed nodes" in x for x in after.predict([16], [2]).warnings)
    inter = {k["name"]: k for k in after.describe()["coefficients"]}["inter_bandwidth"]
    assert not inter["fixed"]
    code, _, err = invoke("predict", RENTAL, "--calibration", out, "--gpus", "16@2")
    assert code == 0 and "no measurement crossed nodes" not in err


def test_torchtitan_lines_become_a_run_with_declared_batch(tmp_path):
    from advisor.spec import load_workload

    w = load_workload(RENTAL)
    out = tmp_path / "titan.toml"
    code, _, err = invoke("import", "torchtitan", RENTAL, TITAN / "debug_model_pr1437.log", "--gpus", "8@1",
                          "--out", out)
    assert code == 0, err
    (run,) = load_calibration(out).runs
    tps = [30768, 35051, 34824, 34852, 34692, 34879, 33464, 34574]  # steps 3..10 as printed
    warm = w.calibration.warmup_steps
    kept = tps[max(0, warm - 2):]
    tokens = w.global_batch(8) * w.model.seq_len
    assert run.step_seconds == pytest.approx([tokens / (t * 8) for t in kept])
    assert (run.gpus, run.nodes) == (8, 1)


def test_torchtitan_every_rank_printing_a_step_counts_it_once(tmp_path):
    from advisor.imports.torchtitan import GIB, read_torchtitan

    rows = read_torchtitan(TITAN / "moe_gate_pr2389_all_ranks.log")
    assert [(s, t) for s, t, _, _ in rows] == [(4, 10050.0), (5, 10007.0)]
    assert rows[0][2] == int(66.91 * GIB)


def test_torchtitan_rejects_other_logs(tmp_path):
    code, _, err = invoke("import", "torchtitan", RENTAL, NCCL / "a100_1node_oci_all_reduce.log", "--gpus", "8@1",
                          "--out", tmp_path / "x.toml")
    assert code == 2 and "not a torchtitan training log" in err and "line 1" in err


def test_several_runs_in_one_log_and_nodes_override(tmp_path):
    both = tmp_path / "both.log"
    both.write_text((NCCL / "a100_1node_oci_all_reduce.log").read_text()
                    + (NCCL / "a100_2node_oci_all_reduce.log").read_text())
    code, err, out = _import(tmp_path, both)
    assert code == 0, err
    assert sorted((c.gpus, c.nodes) for c in load_calibration(out).collectives) == [(8, 1), (16, 2)]
    out2 = tmp_path / "nodes.toml"
    code, _, err = invoke("import", "nccl-tests", RENTAL, NCCL / "a100_2node_oci_all_reduce.log", "--out", out2,
                          "--nodes", "4")
    assert code == 0, err
    assert {(c.gpus, c.nodes) for c in load_calibration(out2).collectives} == {(16, 4)}


def test_per_iteration_columns_and_timestamps_of_newer_releases(tmp_path):
    """SYNTHETIC row in the per-iteration layout of nccl-tests src/util.cu writeResultHeader (i_min
    ... i_cv% after each side, then a timestamp); values consistent with 8 ranks of all-reduce."""
    log = tmp_path / "new.log"
    log.write_text(
        "# Collective test starting: all_reduce_perf\n"
        "# nThread 1 nGpus 1 minBytes 134217728 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 "
        "agg iters: 1 validation: 1 graph: 0 unalign: 0\n#\n# Using devices\n"
        + "".join(f"#  Rank {r:2d} Group  0 Pid {100 + r:6d} on       box device {r:2d} [0000:04:00] NVIDIA H100\n"
                  for r in range(8))
        + "#\n#       size         count      type   redop    root     time   algbw   busbw  #wrong    i_min    i_max"
        "    i_p99    i_cv%     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv% timestamp\n"
        "   134217728      33554432     float     sum      -1   1000.0  134.22  234.88       0    990.0   1010.0"
        "   1009.0     0.50    999.0  134.35  235.12       0    990.0   1010.0   1009.0     0.50 2026-01-02 03:04:05\n")
    code, err, out = _import(tmp_path, log)
    assert code == 0, err
    (c,) = load_calibration(out).collectives
    assert (c.seconds, c.busbw) == (1000.0e-6, 234.88)


def test_mpi_noise_between_rows_is_skipped(tmp_path):
    lines = (NCCL / "h100_2node_gcp_a3mega_all_reduce.log").read_text().splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.strip().startswith("1048576"))
    lines.insert(at, "8 more processes have sent help message help-mtl-ofi.txt / OFI call fail")
    lines.insert(at, "ztan-mig-235z:6899:6950 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC")
    noisy = tmp_path / "noisy_all_reduce.log"
    noisy.write_text("\n".join(lines) + "\n")
    code, err, out = _import(tmp_path, noisy)
    assert code == 0, err
    assert len(load_calibration(out).collectives) == 31


def test_torchtitan_logs_of_one_placement_make_one_run_and_a_taken_placement_is_refused(tmp_path):
    out = tmp_path / "titan.toml"
    logs = [TITAN / "debug_model_pr1437.log", TITAN / "moe_gate_pr2389_all_ranks.log"]
    code, _, err = invoke("import", "torchtitan", RENTAL, *logs, "--gpus", "8@1", "--out", out)
    assert code == 0, err
    (run,) = load_calibration(out).runs
    assert len(run.step_seconds) == 7 + 2  # steps after warm-up (3): 4..10 and 4, 5
    code, _, err = invoke("import", "torchtitan", RENTAL, logs[0], "--gpus", "8@1", "--out", out)
    assert code == 2 and "already holds a run at 8 GPUs" in err
    assert len(load_calibration(out).runs) == 1


@pytest.mark.parametrize("tag", ["[1,0]<stdout>:", "0: "])
def test_mpirun_and_srun_output_tags_are_removed(tmp_path, tag):
    text = (NCCL / "h100_2node_gcp_a3mega_all_reduce.log").read_text()
    tagged = tmp_path / "tagged_all_reduce.log"
    tagged.write_text("".join(tag + ln + "\n" for ln in text.splitlines()))
    code, err, out = _import(tmp_path, tagged)
    assert code == 0, err
    coll = load_calibration(out).collectives
    assert len(coll) == 31 and {(c.gpus, c.nodes) for c in coll} == {(16, 2)}


@pytest.mark.parametrize("old, new, where", [
    ("   104989  102.27  191.76", "      inf  102.27  191.76", "line 26.time"),
    ("   104989  102.27  191.76", "      nan  102.27  191.76", "line 26.time"),
    ("   104989  102.27  191.76", "  1e-300  102.27  191.76", "line 26"),
])
def test_impossible_values_are_one_line_errors(tmp_path, old, new, where):
    text = (NCCL / "a100_2node_oci_all_reduce.log").read_text().replace(old, new)
    bad = tmp_path / "bad_all_reduce.log"
    bad.write_text(text)
    code, err, out = _import(tmp_path, bad)
    assert code == 2 and f"{bad}: {where}" in err and "Traceback" not in err and not out.exists()


def test_unreadable_and_binary_inputs_exit_2(tmp_path):
    blob = tmp_path / "blob.bin"
    blob.write_bytes(bytes(range(256)) * 8)
    for path in (blob, tmp_path, tmp_path / "missing.log"):
        code, err, _ = _import(tmp_path, path)
        assert code == 2 and err.startswith(str(path)) and err.count("\n") == 1
