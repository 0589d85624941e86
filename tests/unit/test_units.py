"""Unit spellings users type (vendor pages, ibstat, model cards) parse to the right base units.

Expected values are written from the definitions (1 Gbit/s = 1e9/8 bytes/s; 1 GbE port = 1 Gbit/s;
B = billion), not from the parser; the property tests check the laws the parser must keep for any
number: case of the prefix, the links multiplier, and format_count/parse_count round trips.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.units import format_count, parse_bandwidth, parse_count, parse_duration

GBIT = 1e9 / 8

BANDWIDTHS = {
    "400 Gbit/s": 400 * GBIT,
    "4x200 Gbit/s": 800 * GBIT,
    "8 x 400 Gb/s": 3200 * GBIT,
    "2×100 Gbps": 200 * GBIT,
    "2x 100GbE": 200 * GBIT,
    "1.6 Tbit/s": 1600 * GBIT,
    "100 GbE": 100 * GBIT,
    "25GbE": 25 * GBIT,
    "400 gbe": 400 * GBIT,
    "800 gbit/s": 800 * GBIT,
    "800 GBIT/s": None,  # 'BIT' is not a unit: the bit/byte letter keeps its case
    "100 Mb/s": 100e6 / 8,
    "100 mb/s": 100e6 / 8,
    "900 GB/s": 900e9,
    "900 gB/s": 900e9,
    "12.5 GBps": 12.5e9,
    "1 GiB/s": 2**30,
    "5e10": 5e10,
    50e9: 50e9,
}

COUNTS = {
    "13b": 13e9, "13B": 13e9, "13 billion": 13e9, "13 Billion": 13e9, "6.7B": 6.7e9, "250m": 250e6,
    "250 million": 250e6, "7bn": 7e9, "32k": 32e3, "32K": 32e3, "1.5 trillion": 1.5e12, "2T": 2e12, "7G": 7e9, 12: 12,
}


@pytest.mark.parametrize("text", sorted(BANDWIDTHS, key=str))
def test_bandwidth_spellings(text):
    expected = BANDWIDTHS[text]
    if expected is None:
        with pytest.raises(ValueError):
            parse_bandwidth(text)
    else:
        assert parse_bandwidth(text) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("text", sorted(COUNTS, key=str))
def test_count_spellings(text):
    assert parse_count(text) == pytest.approx(COUNTS[text], rel=1e-12)


def test_lower_case_prefix_is_not_answered_with_a_unit_a_billion_times_smaller():
    # Before: "400 gbit/s" -> "did you mean 'bit/s'?" (1e9 times smaller).
    assert parse_bandwidth("400 gbit/s") == parse_bandwidth("400 Gbit/s")
    with pytest.raises(ValueError, match="did you mean 'Gbps'"):
        parse_bandwidth("400 gbps/s")


@pytest.mark.parametrize("text", ["1e1000000 Gbit/s", "1e400 Gbit/s", "1e999999999 GB/s"])
def test_huge_exponent_is_a_clean_error(text):
    with pytest.raises(ValueError, match="bandwidth is too large"):
        parse_bandwidth(text)


def test_integer_too_large_for_a_float_is_a_clean_error():
    with pytest.raises(ValueError, match="count is too large"):
        parse_count(10**400)


def test_multiplier_is_only_for_bandwidth():
    with pytest.raises(ValueError, match="multiplies a bandwidth"):
        parse_count("8x7B")


@pytest.mark.parametrize("text, seconds", [("10 us", 1e-5), ("10 µs", 1e-5), ("10 μs", 1e-5), ("2 min", 120),
                                           ("2 mins", 120), ("30 seconds", 30), ("1 hour", 3600), ("1.5 h", 5400),
                                           ("3 days", 3 * 86400)])
def test_duration_spellings(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds, rel=1e-12)


def test_duration_case_still_matters():
    assert parse_duration("10 ms") == pytest.approx(0.01)
    with pytest.raises(ValueError):
        parse_duration("10 Ms")


def test_the_spec_accepts_the_spellings_end_to_end(tmp_path):
    from advisor.spec import load_workload
    from conftest import ROOT

    text = (ROOT / "tests" / "fixtures" / "spec_fixed_global.toml").read_text()
    text = text.replace('"3200 Gbit/s"', '"8 x 400 gbit/s"').replace('params = "6.7B"', 'params = "6.7 billion"')
    (tmp_path / "spec.toml").write_text(text)
    w = load_workload(tmp_path / "spec.toml")
    assert w.cluster.inter_node_bandwidth == pytest.approx(3200 * GBIT)
    assert w.model.params == pytest.approx(6.7e9)


NUMBERS = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=200, deadline=None)
@given(x=NUMBERS, links=st.integers(1, 64), prefix=st.sampled_from(["K", "M", "G", "T"]),
       suffix=st.sampled_from(["bit/s", "b/s", "bps", "B/s"]), lower=st.booleans())
def test_bandwidth_laws(x, links, prefix, suffix, lower):
    number = f"{x!r}"
    p = prefix.lower() if lower else prefix
    one = parse_bandwidth(f"{number} {p}{suffix}")
    expected = x * {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}[prefix] / (1 if suffix == "B/s" else 8)
    assert one == pytest.approx(expected, rel=1e-12)
    assert parse_bandwidth(f"{links}x{number} {prefix}{suffix}") == pytest.approx(links * one, rel=1e-12)
    assert parse_bandwidth(f"{links} x {number}{p}{suffix}") == pytest.approx(links * one, rel=1e-12)


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet="0123456789.eE+-x× GgMmKkTtbBitps/E", max_size=24))
def test_any_text_parses_or_raises_value_error(text):
    for parse in (parse_bandwidth, parse_count):
        try:
            value = parse(text)
        except ValueError:
            continue
        assert math.isfinite(value)


@settings(max_examples=300, deadline=None)
@given(x=st.floats(min_value=1, max_value=1e14, allow_nan=False))
def test_format_count_round_trips_to_three_digits(x):
    text = format_count(x)
    assert "e" not in text and "0." not in text[:2]  # "25.6M", never "0.0256B" or "2.56e+07"
    assert parse_count(text) == pytest.approx(x, rel=5e-3)


@pytest.mark.parametrize("value, text", [(25.6e6, "25.6M"), (6.7e9, "6.7B"), (70.6e9, "70.6B"), (950, "950"),
                                         (1.5e12, "1.5T"), (999.96e6, "1B"), (124e3, "124K")])
def test_format_count_examples(value, text):
    assert format_count(value) == text


LINK = 'inter_node_bandwidth = "3200 Gbit/s"'
BW = ("cluster", "inter_node_bandwidth")
ISSUE_SPELLINGS = [  # issue 16's list, each through `advisor validate --json` (in-process)
    (LINK, 'inter_node_bandwidth = "4x200 Gbit/s"', BW, 100e9),
    (LINK, 'inter_node_bandwidth = "8 x 400 Gb/s"', BW, 400e9),
    (LINK, 'inter_node_bandwidth = "100 GbE"', BW, 12.5e9),
    (LINK, 'inter_node_bandwidth = "800 gbit/s"', BW, 100e9),
    ('params = "6.7B"', 'params = "13b"', ("model", "params"), 13e9),
    ('params = "6.7B"', 'params = "13 billion"', ("model", "params"), 13e9),
    ('samples = "250M"', 'tokens = "1T"', ("job", "samples"), 1e12 / 4096),
]


@pytest.mark.parametrize("old, new, where, expected", ISSUE_SPELLINGS, ids=[s[1] for s in ISSUE_SPELLINGS])
def test_issue_spellings_validate_to_the_right_values(tmp_path, old, new, where, expected):
    import json

    from cli_inprocess import invoke
    from conftest import ROOT

    text = (ROOT / "tests" / "fixtures" / "spec_fixed_global.toml").read_text()
    assert old in text
    (tmp_path / "spec.toml").write_text(text.replace(old, new, 1))
    code, out, err = invoke("validate", tmp_path / "spec.toml", "--json")
    assert code == 0, err
    section, key = where
    assert json.loads(out)["workload"][section][key] == pytest.approx(expected, rel=1e-12)


def test_huge_exponent_in_a_spec_is_one_line(tmp_path):
    from cli_inprocess import invoke
    from conftest import ROOT

    text = (ROOT / "tests" / "fixtures" / "spec_fixed_global.toml").read_text()
    (tmp_path / "spec.toml").write_text(text.replace('"3200 Gbit/s"', '"1e1000000 Gbit/s"', 1))
    code, out, err = invoke("validate", tmp_path / "spec.toml")
    assert (code, out) == (2, "")
    assert err.strip().endswith("cluster.inter_node_bandwidth: bandwidth is too large (a 64-bit float ends at 1.8e308) "
                                "(got '1e1000000 Gbit/s')")


@pytest.mark.parametrize("text, nbytes", [("80 GB", 80e9), ("80 gb", 80e9), ("96 GiB", 96 * 2**30),
                                          ("96 gib", 96 * 2**30), ("141GB", 141e9), ("8e10", 8e10), (80e9, 80e9)])
def test_size_spellings(text, nbytes):
    from advisor.units import parse_size

    assert parse_size(text) == pytest.approx(nbytes, rel=1e-12)


@pytest.mark.parametrize("text", ["80 GB/s", "lots", "1e1000000 GB"])
def test_bad_size_is_a_value_error(text):
    from advisor.units import parse_size

    with pytest.raises(ValueError):
        parse_size(text)
