"""One grammar of quantities: options read money, time and fractions with the spec's unit parser
(advisor.units), spec integers take count letters, bad values are one line naming the option or
field, and tier and workload names complete in the shell."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.units import parse_fraction, parse_hours, parse_money
from cli_inprocess import invoke

ROOT = Path(__file__).resolve().parents[2]
LLM7B = ROOT / "workloads" / "llm7b.toml"


@pytest.mark.parametrize("text, usd", [("20000", 20000.0), ("20k", 20000.0), ("20K", 20000.0),
                                       ("$20,000", 20000.0), ("1.5M USD", 1.5e6), ("$ 2.5k", 2500.0),
                                       ("1,234,567", 1234567.0)])
def test_money(text, usd):
    assert parse_money(text) == usd


@pytest.mark.parametrize("text, hours", [("72", 72.0), ("3 days", 72.0), ("36 h", 36.0), ("90 min", 1.5),
                                         ("1 day", 24.0), (12, 12.0)])
def test_deadline_hours(text, hours):
    assert parse_hours(text) == pytest.approx(hours)


def test_fraction():
    assert parse_fraction("90%") == pytest.approx(0.9) and parse_fraction("0.8") == 0.8


@pytest.mark.parametrize("bad", ["20q", "twenty", "20,00", "$"])
def test_bad_money_is_refused(bad):
    with pytest.raises(ValueError, match="expected an amount in USD"):
        parse_money(bad)


def test_budget_20k_is_20000():
    """`--budget 20k` chooses exactly what `--budget 20000` does (the bar: exits 0)."""
    code, short, err = invoke("recommend", LLM7B, "--budget", "20k", "--json")
    assert code == 0, err
    _, long, _ = invoke("recommend", LLM7B, "--budget", "20000", "--json")
    assert json.loads(short)["recommendations"] == json.loads(long)["recommendations"]


def test_deadline_in_days_is_hours():
    code, days, err = invoke("recommend", LLM7B, "--deadline", "3 days", "--json")
    assert code in (0, 3), err
    _, hours, _ = invoke("recommend", LLM7B, "--deadline", "72", "--json")
    assert json.loads(days)["workloads"] == json.loads(hours)["workloads"]
    assert json.loads(days)["workloads"][0]["deadline_hours"] == 72.0


@pytest.mark.parametrize("flag, value, message", [
    ("--budget", "20q", "--budget: expected an amount in USD like '20000', '20k', '$20,000' or '1.5M USD' (got '20q')"),
    ("--deadline", "3 parsecs", "--deadline: unknown duration unit 'parsecs'; did you mean 'secs'? (got '3 parsecs')"),
    ("--confidence", "lots", "--confidence: expected a probability like '0.9' or '90%' (got 'lots')"),
])
def test_bad_option_is_one_line_exit_2(flag, value, message):
    code, out, err = invoke("recommend", LLM7B, flag, value)
    assert code == 2 and out == ""
    assert err.strip() == message


def _spec(tmp_path, seq_len: str) -> Path:
    text = LLM7B.read_text().replace("seq_len = 8192", f"seq_len = {seq_len}")
    assert f"seq_len = {seq_len}" in text
    path = tmp_path / "llm7b.toml"
    path.write_text(text)
    return path


def test_spec_integers_take_count_letters(tmp_path):
    from advisor.spec import load_workload

    assert load_workload(_spec(tmp_path, '"4k"')).model.seq_len == 4000
    assert load_workload(_spec(tmp_path, '"4Ki"')).model.seq_len == 4096
    assert load_workload(_spec(tmp_path, "8192.0")).model.seq_len == 8192


@pytest.mark.parametrize("value, says", [('"four"', "expected a count like"), ("4096.5", "must be a whole number")])
def test_bad_spec_integer_never_shows_pydantics_words(tmp_path, value, says):
    code, _, err = invoke("validate", _spec(tmp_path, value))
    assert code == 2
    assert "model.seq_len" in err and says in err
    assert "Input should be" not in err and "valid integer" not in err


def _complete(words: str) -> list[str]:
    env = dict(os.environ, _ADVISOR_COMPLETE="complete_bash", COMP_WORDS=words,
               COMP_CWORD=str(len(words.split()) - (0 if words.endswith(" ") else 1)))
    done = subprocess.run([sys.executable, "-m", "advisor"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)
    return done.stdout.split()


def test_tier_names_complete_from_the_workload():
    assert _complete("advisor recommend workloads/llm7b.toml --tier ") == ["on-demand", "spot", "reserved-1mo"]
    assert _complete("advisor recommend workloads/llm7b.toml --tier s") == ["spot"]


def test_workload_names_complete():
    assert _complete("advisor predict workloads/ll") == ["workloads/llm70b.toml", "workloads/llm7b.toml"]


def test_plan_calibration_budget_takes_the_same_grammar():
    code, short, err = invoke("plan-calibration", LLM7B, "--budget", "1.5k", "--json")
    assert code == 0, err
    _, long, _ = invoke("plan-calibration", LLM7B, "--budget", "1500", "--json")
    assert json.loads(short) == json.loads(long) and json.loads(short)["budget"] == 1500.0
