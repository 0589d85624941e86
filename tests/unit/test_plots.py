"""The plots a reader understands without the table: labelled ticks on every axis, GPU counts on the
frontier, measured points on top, limits that do not squash the plans. Built from the checked-in
tiny-cpu calibration (a real CPU run) and the llm7b published one."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import WORKLOADS

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")


@settings(max_examples=300, deadline=None)
@given(low=st.floats(1e-6, 1e9), ratio=st.floats(1.05, 1e6))
def test_log_ticks_label_any_range(low, ratio):
    from advisor.plot_axes import log_ticks

    high = low * ratio
    ticks = log_ticks(low, high)
    assert 2 <= len(ticks) <= 8
    assert all(low * 0.999 <= t <= high * 1.001 for t in ticks)
    assert ticks == sorted(set(ticks))


def _labels(axis) -> list[str]:
    lo, hi = axis.get_view_interval()
    return [t.get_text() for t in axis.get_majorticklabels() if t.get_text() and lo <= t.get_position()[
        0 if axis.axis_name == "x" else 1] <= hi]


def _rec(name, **limits):
    from advisor.planning.recommend import recommend
    from advisor.scaling.model import build_model
    from advisor.spec import load_workload

    w = load_workload(WORKLOADS / f"{name}.toml")
    return recommend(w, build_model(w), **limits)


@pytest.mark.parametrize("name, limits", [("tiny-cpu", {}), ("tiny-cpu", {"budget": 20000}),
                                          ("rental-ethernet", {"budget": 20000}), ("llm7b", {"budget": 20000})])
def test_frontier_panel_is_readable(name, limits):
    import matplotlib.pyplot as plt

    from advisor.planning.plot import _panel

    rec = _rec(name, **limits)
    fig, ax = plt.subplots()
    measured = [8, 128] if name == "llm7b" else [8] if name == "rental-ethernet" else [1, 2, 4]
    _panel(ax, rec, measured)
    fig.canvas.draw()
    layers = {c.get_label(): c for c in ax.collections}
    tiers = [layers[t.name] for t in rec.sweep.tiers if t.name in layers]
    assert layers["measured GPU count"].get_zorder() > max(c.get_zorder() for c in tiers)  # on top
    for axis in (ax.xaxis, ax.yaxis):  # before: tiny-cpu's hours had no label, rental-ethernet's $ one
        assert len(_labels(axis)) >= 3, (name, [t.get_text() for t in axis.get_majorticklabels()])
        assert not any("e+" in text for text in _labels(axis))
    sw = rec.sweep
    costs = sw.cost_usd[0][sw.available]
    low, high = ax.get_ylim()
    assert high < costs.max() * 2 and low > costs.min() / 2  # a far-off budget does not stretch the axis
    labelled = {a.get_text() for a in ax.texts}
    frontier_counts = {f"{int(sw.gpus[c]):,}" for _, c in rec.frontier}
    assert labelled and labelled <= frontier_counts | {f"{int(sw.gpus[rec.chosen[1]]):,}"}
    assert f"{int(sw.gpus[rec.chosen[1]]):,}" in labelled
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    if "budget" in limits:
        assert any(t.startswith("budget $20,000") for t in legend)
    assert not any(re.search(r"(?<![\d,.])1 (GPUs|nodes)", t) for t in legend)  # "41 nodes" is fine
    plt.close(fig)


def test_budget_far_above_every_plan_is_named_not_drawn():
    import matplotlib.pyplot as plt

    from advisor.planning.plot import _panel

    rec = _rec("tiny-cpu", budget=20000)  # tiny-cpu's plans cost cents
    fig, ax = plt.subplots()
    _panel(ax, rec)
    assert not [line for line in ax.lines if list(line.get_ydata()) == [20000, 20000]]
    assert any("above every plan" in t.get_text() for t in ax.get_legend().get_texts())
    plt.close(fig)


@pytest.mark.parametrize("name", ["tiny-cpu", "llm7b"])
def test_scaling_plot_measured_on_top_and_every_axis_labelled(name, tmp_path):
    import matplotlib.pyplot as plt

    from advisor.scaling import plot
    from advisor.scaling.model import build_model
    from advisor.spec import load_workload

    w = load_workload(WORKLOADS / f"{name}.toml")
    m = build_model(w)
    requested = m.predict([1, 2, 4, 8, 16, 32, 64] if name == "tiny-cpu" else [8, 16, 128, 1024])
    fig, (ax, ax2) = plt.subplots(1, 2)
    top = float(max(requested.gpus.max(), m.record.extent.max_gpus))
    import numpy as np

    grid = np.unique(np.round(np.geomspace(m.baseline_gpus, top, 50)))
    curve = m.predict(grid)
    plot._throughput_panel(ax, m, requested, grid, curve)
    plot._efficiency_panel(ax2, m, grid, curve)
    fig.canvas.draw()
    for a in (ax, ax2):
        for axis in (a.xaxis, a.yaxis):
            assert len(_labels(axis)) >= 3
    assert "%" in _labels(ax2.yaxis)[-1]  # percent, as the tables print efficiency and MFU
    assert _labels(ax.xaxis)[0] in ("1", "8") and "^" not in "".join(_labels(ax.xaxis))
    collections = {c.get_label(): c for c in ax.collections}
    assert collections["measured"].get_zorder() > collections["predicted (requested)"].get_zorder()
    plt.close(fig)
    png = tmp_path / "curve.png"
    plot.plot_scaling(m, requested, png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not math.isnan(png.stat().st_size)


def test_a_workload_with_no_possible_plan_gets_a_panel_that_says_so(tmp_path):
    from advisor.planning.plot import plot_frontier

    rec = _rec("llm70b", budget=20000)  # 70B on 80 GB H100s: every count is ruled out by memory
    if rec.sweep.available.any():
        pytest.skip("llm70b has possible plans in this version")
    png = tmp_path / "f.png"
    plot_frontier([rec, _rec("tiny-cpu")], png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_scaling_plot_stacks_where_the_step_goes_at_each_requested_count():
    """The third panel: one bar per requested count, its stacked parts summing to the median step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from advisor.scaling import plot
    from advisor.scaling.model import build_model
    from advisor.spec import load_workload

    m = build_model(load_workload(WORKLOADS / "rental-ethernet.toml"))
    requested = m.predict([8, 16, 64])
    parts = plot._parts(requested)
    assert "inter_node_comm" in parts and "compute" in parts
    fig, ax = plt.subplots()
    plot._breakdown_panel(ax, m, requested, parts)
    heights = np.zeros(3)
    for bar in ax.patches:
        heights[round(bar.get_x() + bar.get_width() / 2)] += bar.get_height()
    assert heights == pytest.approx(requested.step_seconds, rel=0.01)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["8", "16", "64"]
    plt.close(fig)
