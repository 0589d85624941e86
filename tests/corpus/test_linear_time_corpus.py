"""Linear time on user text (issue 24): every pattern applied to a spec, an option or a log answers
a megabyte-long value in seconds. Quadratic backtracking (a `\\s*` at both ends of the quantity
pattern, `.*?` between two log fields) took seconds for 20 KB and minutes for 1 MB; the bounds
asserted here are generous (10 s) so load on the machine cannot fail them, and the design is
asserted too: quantity strings are bounded before any pattern runs."""

from __future__ import annotations

import copy
import time
import tomllib

import pytest
import tomli_w

from cli_inprocess import invoke
from conftest import WORKLOADS

SPEC = tomllib.loads((WORKLOADS / "llm7b.toml").read_text())
MB = 2**20
VALUES = {
    "spaces then junk": "1" + " " * MB + "!",
    "digits then junk": "1" * MB + "!",
    "spaces around": " " * MB + "1 GB/s" + " " * MB,
    "multipliers": "1x" * (MB // 2) + "1 Gbit/s",
    "dots": "1." * (MB // 2),
    "exponents": "1e" * (MB // 2),
    "unit letters": "1 " + "G" * MB + "!",
}
FIELDS = ("cluster.inter_node_bandwidth", "model.params")


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("name", sorted(VALUES))
def test_a_megabyte_quantity_in_a_spec_is_refused_in_seconds(tmp_path, field, name):
    doc = copy.deepcopy(SPEC)
    table, key = field.split(".")
    doc[table][key] = VALUES[name]
    spec = tmp_path / "spec.toml"
    spec.write_text(tomli_w.dumps(doc))
    start = time.monotonic()
    code, out, err = invoke("validate", spec)
    assert time.monotonic() - start < 10
    assert code == 2 and out == "" and "Traceback" not in err and field in err, err


@pytest.mark.parametrize("name", sorted(VALUES))
def test_a_megabyte_option_value_is_refused_in_seconds(tmp_path, name):
    start = time.monotonic()
    code, _, err = invoke("plan-calibration", WORKLOADS / "llm7b.toml", "--startup", VALUES[name])
    assert time.monotonic() - start < 10
    assert code == 2 and "--startup" in err and "Traceback" not in err, err


def test_quantity_strings_are_bounded_before_the_pattern_runs():
    from advisor import units

    assert units.MAX_QUANTITY_CHARS <= 1000
    with pytest.raises(ValueError):
        units.parse_bandwidth("1" * (units.MAX_QUANTITY_CHARS + 1))
    assert units.parse_bandwidth(" " * 40 + "8 x 400 Gbit/s" + " " * 40) == 4e11  # padding within the bound
    pattern = units._QUANTITY.pattern
    assert not pattern.startswith(("^\\s*", "\\s*")) and not pattern.endswith(("\\s*$", "\\s*")), pattern
