"""`--collect` corpus (issue 24): a probe in a rank result is checked as an nccl-tests row is, by
the same checker (advisor.imports.common.check_collective): a group that fits its run, spread by
the one placement rule, one time per rank, and a busbw that size / time and nccl-tests' factor
give. Each case edits one value of the corpus' valid result (which merges cleanly: the hostile
corpus' test_valid_collect_result_is_merged) and must exit 2 naming that value, writing nothing."""

from __future__ import annotations

import copy

import pytest
from test_hostile_corpus import assert_clean, valid_result, write_result

from calibrate_support import small_workload
from cli_inprocess import invoke

# probe 0 is an all-reduce of 1048576 bytes in 0.01 s on the run's 2 ranks over 2 nodes
PROBE_EDITS = {
    "4 GPUs in a 2-rank result": ({"gpus": 4}, "collectives[0].gpus"),
    "1-GPU group": ({"gpus": 1}, "collectives[0].gpus"),
    "3 nodes in a 2-node run": ({"nodes": 3}, "collectives[0].nodes"),
    "more nodes than the group": ({"gpus": 2, "nodes": 3}, "collectives[0].nodes"),
    "busbw 1.0 for 8 bytes in 1 s": ({"bytes": 8, "seconds": 1.0, "busbw": 1.0}, "collectives[0].busbw"),
    "busbw of another collective": ({"op": "reduce_scatter"}, "collectives[0].busbw"),
    "busbw 10x": ({"busbw": 1.049}, "collectives[0].busbw"),
    "busbw 5% low": ({"bytes": 104857600, "busbw": 9.96}, "collectives[0].busbw"),  # 10.49 GB/s
    "busbw zero": ({"busbw": 0.0}, "collectives[0].busbw"),
    "time 1000x": ({"seconds": 10.0}, "collectives[0].busbw"),
    "bytes 1000x": ({"bytes": 1048576000}, "collectives[0].busbw"),
    "rank_seconds too few": ({"rank_seconds": [0.01]}, "collectives[0].rank_seconds"),
    "rank_seconds too many": ({"rank_seconds": [0.01, 0.01, 0.01]}, "collectives[0].rank_seconds"),
}


def _run(tmp_path, edit: dict, index: int = 0):
    spec = small_workload(tmp_path)
    result = copy.deepcopy(valid_result())
    result["collectives"][index].update(edit)
    folder = tmp_path / "results" / "gpus2-nodes2"
    write_result(folder, result)
    out = tmp_path / "cal.toml"
    return invoke("calibrate", spec, "--collect", tmp_path / "results", "--out", out), folder, out


@pytest.mark.parametrize("case", sorted(PROBE_EDITS))
def test_impossible_probe_is_refused(tmp_path, case):
    edit, where = PROBE_EDITS[case]
    (code, out, err), folder, cal = _run(tmp_path, edit)
    assert_clean(code, out, err, str(folder / "result.json"), f"result.json: {where}")
    assert not cal.exists()


@pytest.mark.parametrize("index, edit", [
    (0, {"gpus": 2, "nodes": 2, "rank_seconds": [0.01, 0.0099]}),
    (0, {"busbw": 0.1030}),  # within 2%
    (1, {"bytes": 8, "seconds": 1e-5, "busbw": 0.0004}),  # tiny messages: print rounding
])
def test_consistent_probes_are_merged(tmp_path, index, edit):
    (code, _, err), _, cal = _run(tmp_path, edit, index)
    assert code == 0, err
    assert cal.exists()


def test_a_rank_file_beyond_the_results_ranks_is_refused(tmp_path):
    spec = small_workload(tmp_path)
    folder = tmp_path / "results" / "gpus2-nodes2"
    write_result(folder, valid_result(), ranks=4)  # ranks 2 and 3 of another run
    code, out, err = invoke("calibrate", spec, "--collect", tmp_path / "results", "--out", tmp_path / "cal.toml")
    assert_clean(code, out, err, str(folder / "rank2.json"), "a rank beyond the 2 ranks")
    assert not (tmp_path / "cal.toml").exists()


@pytest.mark.parametrize("name", ["gpus4-nodes2", "gpus2-nodes1"])
def test_a_folder_named_for_another_placement_is_refused(tmp_path, name):
    spec = small_workload(tmp_path)
    folder = tmp_path / "results" / name
    write_result(folder, valid_result())
    code, out, err = invoke("calibrate", spec, "--collect", tmp_path / "results", "--out", tmp_path / "cal.toml")
    assert_clean(code, out, err, str(folder / "result.json"), "the folder is named for")
