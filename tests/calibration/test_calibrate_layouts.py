"""Real calibrations of parallel layouts on CPU with gloo: HSDP on a 2x2 mesh (4 ranks, a spec with
gpus_per_node = 2), tensor parallelism and a 2-stage 1F1B pipeline over 2 ranks; each file holds
positive step times, the layout of its run and probes of every mesh group."""

from __future__ import annotations

import pytest

from advisor.calibration_data import load_calibration
from calibrate_support import needs_torch, small_workload
from conftest import run_cli

pytestmark = [pytest.mark.slow, needs_torch]


def _layout_spec(tmp_path, name, replace):
    path = small_workload(tmp_path, name=name)
    text = path.read_text()
    for old, new in replace:
        assert old in text
        text = text.replace(old, new)
    path.write_text(text)
    return path


@pytest.mark.parametrize("name, count, replace, layout, groups", [
    ("tiny-hsdp", 4, [('strategy = "ddp"', 'strategy = "hsdp"'), ("gpus_per_node = 4", "gpus_per_node = 2")],
     "dp_shard=2, dp_replicate=2, tp=1, pp=1", {"world": 4, "dp_shard": 2, "dp_replicate": 2}),
    ("tiny-tp", 2, [('strategy = "ddp"', 'strategy = "fsdp"\ntensor_parallel_degree = 2'),
                    ("gpus = [1, 2, 4]", "gpus = [2, 4]")],
     "dp_shard=1, dp_replicate=1, tp=2, pp=1", {"world": 2}),
    ("tiny-pp", 2, [('strategy = "ddp"', 'strategy = "fsdp"\npipeline_parallel_degree = 2'),
                    ("gpus = [1, 2, 4]", "gpus = [2, 4]")],
     "dp_shard=1, dp_replicate=1, tp=1, pp=2", {"world": 2}),
])
def test_calibrate_runs_the_layout(tmp_path, name, count, replace, layout, groups):
    spec = _layout_spec(tmp_path, name, replace)
    out = tmp_path / "cal.toml"
    r = run_cli("calibrate", spec, "--gpus", str(count), "--device", "cpu", "--steps", "2", "--warmup", "1",
                "--out", out, timeout=300)
    assert r.returncode == 0, r.stderr
    cal = load_calibration(out, name)
    (run,) = cal.runs
    assert run.gpus == count and run.layout == layout
    assert len(run.step_seconds) == 2 and all(s > 0 for s in run.step_seconds)
    # every rank took part; the global batch of 8 is split over the data-parallel ranks only
    assert run.global_batch in (None, 8)
    seen = {c.group: c.gpus for c in cal.collectives}
    assert seen == groups
    for c in cal.collectives:
        assert len(c.rank_seconds) == c.gpus and all(s > 0 for s in c.rank_seconds)
