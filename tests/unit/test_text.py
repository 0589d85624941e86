"""Numbers and nouns in sentences: "1 run", "over 1 point", intervals in plain notation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.text import above, count, gigabytes, hours, interval, number, percent, plural, span, times, usd


@pytest.mark.parametrize("n, noun, text", [(1, "run", "1 run"), (2, "run", "2 runs"), (0, "node", "0 nodes"),
                                           (1, "GPU", "1 GPU"), (1024, "GPU", "1,024 GPUs"), (1.0, "point", "1 point"),
                                           (2, "process", "2 processes")])
def test_plural(n, noun, text):
    assert plural(n, noun, "processes" if noun == "process" else None) == text


@pytest.mark.parametrize("x, text", [(1330.2, "1,330"), (1534, "1,530"), (0.0123, "0.0123"), (2.5, "2.5"),
                                     (0, "0"), (-42.42, "-42.4"), (999.96, "1,000"), (1e-7, "1e-07")])
def test_number(x, text):
    assert number(x) == text


def test_interval_is_plain():
    assert interval(1.33e3, 1.53e3) == "1,330–1,530"  # before: 1.33e+03–1.53e+03
    assert interval(0.231, 0.541) == "0.231–0.541"


@settings(max_examples=500, deadline=None)
@given(x=st.floats(min_value=1e-4, max_value=9.99e14) | st.floats(min_value=-9.99e14, max_value=-1e-4))
def test_number_is_plain_and_keeps_three_digits(x):
    text = number(x)
    assert "e" not in text
    assert float(text.replace(",", "")) == pytest.approx(x, rel=5e-3)


def test_count_is_whole_with_separators():
    assert count(65536) == "65,536" and count(2.5) == "2.5"


def _string_tokens(path):
    """(line, text) of every string literal (f-strings included) in a Python file."""
    import tokenize

    kinds = {tokenize.STRING} | {getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}
    with open(path, encoding="utf-8") as handle:
        for token in tokenize.generate_tokens(handle.readline):
            if token.type in kinds:
                yield token.start[0], token.string


def test_no_printed_sentence_hedges_a_plural_or_prints_an_interval_in_e_notation():
    """Source scan of every string literal: "node(s)" is `plural(n, "node")`; "{low:.3g}–{high:.3g}"
    (1.33e+03–1.53e+03) is `interval(low, high)`. Catches a merge that brings an old spelling back."""
    import re

    from conftest import ROOT

    hedge = re.compile(r"[A-Za-z]\(s\)")
    e_interval = re.compile(r"g\}\s*[–-]\s*\{[^}]*:\.\d+g\}")
    found = [f"{path.relative_to(ROOT)}:{lineno}: {text}"
             for path in sorted((ROOT / "advisor").rglob("*.py")) for lineno, text in _string_tokens(path)
             if hedge.search(text) or e_interval.search(text)]
    assert not found, "\n".join(found)


def test_json_output_is_strict():
    import io
    import json
    import math
    from contextlib import redirect_stdout

    from advisor.cli.output import Output

    buffer = io.StringIO()
    with redirect_stdout(buffer):
        Output(json=True).result({"a": math.nan, "b": [1.5, math.inf, {"c": -math.inf}], "d": "x"})
    assert json.loads(buffer.getvalue(), parse_constant=lambda c: 1 / 0) == {"a": None, "b": [1.5, None, {"c": None}],
                                                                              "d": "x"}


def test_equal_range_ends_collapse_to_one_value():
    """ "1.9-1.9x the cost" read as a range of one value: equal ends print once."""
    assert interval(1.91, 1.94, 2, "x") == "1.9x"
    assert interval(1.8, 2.2, 2, "x") == "1.8–2.2x"
    assert span("$12,019", "$12,019") == "$12,019" and span("5%", "94%") == "5%–94%"


@pytest.mark.parametrize("h, text", [(29062.0, "29,062 h (1,210.9 days)"), (963.4, "963 h (40.1 days)"),
                                     (61.83, "61.8 h"), (0.05, "3 min")])
def test_hours_have_thousands_separators_in_days(h, text):
    assert hours(h) == text


def test_hours_in_a_table_cell_are_hours_only():
    assert hours(1029.4, days=False) == "1,029 h" and hours(24.12, days=False) == "24.1 h"


@pytest.mark.parametrize("x, decimals, text", [(13196.78, 2, "13,197x"), (1.194, 2, "1.19x"), (19.1, None, "19.1x"),
                                               (0.9362, None, "0.936x"), (2420.4, None, "2,420x")])
def test_multipliers_are_whole_with_separators_from_a_thousand(x, decimals, text):
    assert times(x, decimals) == text


def test_money_percent_and_bytes():
    assert usd(20331.4) == "$20,331" and usd(9.876) == "$9.88"
    assert percent(0.471) == "47%" and percent(0.3551, 1) == "35.5%"
    assert gigabytes(1.045e11) == "104.5 GB"


def test_a_value_above_its_limit_reads_above_it():
    assert above(8.004e10, 8e10) == ("80.04 GB", "80.00 GB")
    assert above(1.045e11, 9.6e10) == ("104.5 GB", "96.0 GB")
