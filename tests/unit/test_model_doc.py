"""docs/model.md names every column the code fits, and no column the code does not have."""

from __future__ import annotations

import re

from advisor.scaling.families import FAMILIES, Coverage
from advisor.scaling.fitting import STEP_CONSTANTS
from conftest import ROOT, WORKLOADS


def test_column_table_matches_the_topology_family():
    import numpy as np

    from advisor.scaling.features import MemoryPressure
    from advisor.spec import load_workload

    w = load_workload(WORKLOADS / "llm7b.toml")
    code = set()
    pressed = MemoryPressure(placements=np.array([[1.0, 1.0, 2.0]]), flags=np.array([True]), peaks=(), measured=w,
                             capacity=96e9, near=0.9)  # a memory-bound 1-GPU row adds the memory-pressure column
    for cov in (Coverage(False, False), Coverage(True, False), Coverage(True, False, pressure=pressed)):
        d = FAMILIES["topology"].design(w, [1.0, 16.0], [1.0, 2.0], [2.0, 32.0], cov)
        code |= {c.name for c in d.columns}
    code.add("gamma")
    text = (ROOT / "docs" / "model.md").read_text()
    table = text.split("### Columns", 1)[1].split("\n\n", 2)[1]
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", table, flags=re.M))
    assert documented == code
    assert set(STEP_CONSTANTS) <= code  # the per-step priors name real columns
