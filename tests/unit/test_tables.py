"""Tables and sentences that fit: at 80 and 120 columns no line is longer, no cell is elided (`…`),
the compact columns are the issue's, --wide adds the rest, and the cells read back to the JSON."""

from __future__ import annotations

import json
import re

import pytest

from advisor.cli.tables import wrap
from cli_inprocess import invoke

RECOMMEND = ("recommend", "workloads/llm7b.toml", "--budget", "20000")
PREDICT = ("predict", "workloads/llm7b.toml", "--gpus", "8,16,32")


def _lines(text: str) -> list[str]:
    return text.splitlines()


@pytest.fixture(scope="module")
def printed():
    """stdout and stderr of both bar commands at 80 and 120 columns, compact and wide."""
    out = {}
    mp = pytest.MonkeyPatch()
    for width in (80, 120):
        mp.setenv("COLUMNS", str(width))
        for args in (RECOMMEND, PREDICT):
            for wide in ((), ("--wide",)):
                code, stdout, stderr = invoke(*args, *wide)
                assert code == 0, stderr
                out[args[0], width, bool(wide)] = (stdout, stderr)
    mp.undo()
    return out


@pytest.mark.parametrize("command", ["recommend", "predict"])
@pytest.mark.parametrize("width", [80, 120])
def test_no_line_is_longer_than_the_terminal_and_nothing_is_elided(printed, command, width):
    stdout, stderr = printed[command, width, False]
    for line in _lines(stdout) + _lines(stderr):
        assert len(line) <= width, line
    assert "…" not in stdout + stderr


def _header(stdout: str) -> list[str]:
    line = next(line for line in _lines(stdout) if "GPUs" in line and "nodes" in line)
    return re.split(r"\s{2,}", line.strip())


def test_compact_columns_are_the_issues(printed):
    assert _header(printed["recommend", 80, False][0]) == ["GPUs", "nodes", "tier", "hours", "$", "efficiency",
                                                           "P(meet)"]
    assert _header(printed["predict", 80, False][0]) == ["GPUs", "nodes", "step s", "step 90%", "speedup",
                                                         "efficiency", "MFU"]


def test_wide_adds_the_other_columns(printed):
    head = _header(printed["recommend", 120, True][0])
    assert {"batch", "step s", "speedup"} <= set(head)
    head = _header(printed["predict", 120, True][0])
    assert {"samples/s", "samples/s 90%", "naive samples/s", "layout"} <= set(head)


def test_piped_width_defaults_to_100(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    code, stdout, _ = invoke(*RECOMMEND)
    assert code == 0
    assert max(len(line) for line in _lines(stdout)) == 100  # the sentences fill the default width
    code, stdout, _ = invoke(*PREDICT, "--wide")  # wider than 100: printed whole at its natural width
    assert code == 0 and "…" not in stdout and "dp_shard=16, dp_replicate=1, tp=1, pp=1" in stdout


def test_the_chosen_row_reads_back_to_the_json(monkeypatch):
    """The compact row of the chosen plan carries the JSON's numbers: GPUs, hours, dollars; and
    dollars = GPUs x hours x price (hand check, to the rounding of the printed hours)."""
    monkeypatch.setenv("COLUMNS", "80")
    _, stdout, _ = invoke(*RECOMMEND)
    _, doc, _ = invoke(*RECOMMEND, "--json")
    plan = json.loads(doc)["recommendations"][0]
    row = next(line for line in _lines(stdout) if line.rstrip().endswith("✔"))
    cells = re.split(r"\s{2,}", row.strip())
    assert cells[0] == f"{plan['gpus']:,}" and cells[2] == plan["tier"]
    assert cells[4] == f"${plan['cost_usd']:,.0f}"
    hours = float(cells[3].removesuffix(" h").replace(",", ""))
    assert hours == pytest.approx(plan["hours"], rel=5e-3)
    price = {"on-demand": 2.64, "spot": 1.20, "reserved-1mo": 1.90}[plan["tier"]]  # workloads/llm7b.toml
    assert plan["gpus"] * hours * price == pytest.approx(plan["cost_usd"], rel=5e-3)


def test_wrap_keeps_numbers_with_their_units():
    text = "to the cheapest, 8 GPUs (1 node) on spot: 1,029 h (42.9 days), $9,878, within 1,330–1,530 samples"
    for width in range(20, 80):
        wrapped = wrap(text, width, indent="  - ")
        assert "1,029 h" in wrapped.replace("\n", "\n ") or "1,029 h" in wrapped
        assert "1,330–1,530" in wrapped
        for line in wrapped.splitlines():
            assert not line.endswith("1,029") and not line.strip().startswith("h ")
        assert " ".join(wrapped.split()) == "- " + " ".join(text.split())


def test_a_table_wider_than_the_terminal_prints_whole(monkeypatch):
    """At 40 columns the backtest table cannot fit: it prints at its natural width, every number
    whole, rather than rich's shrunken `0.3…` cells."""
    monkeypatch.setenv("COLUMNS", "40")
    code, out, err = invoke("backtest", "workloads/tiny-cpu.toml", "--calibration",
                            "calibrations/tiny-cpu_cpu_2026-11-30.toml", "--fit-max-gpus", "2")
    assert code == 0, err
    assert "…" not in out
    row = next(line for line in _lines(out) if line.strip().startswith("4 "))
    cells = re.split(r"\s{2,}", row.strip())
    assert cells[:4] == ["4", "1", "32", "0.3455"] and cells[-1] == "yes"
