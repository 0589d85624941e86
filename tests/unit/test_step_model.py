"""The model contract (advisor.step_model): its defaults, who implements it, and that the decision
layer reads a model only through it and opens no file."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import advisor.planning
from advisor.errors import InputError
from advisor.step_model import NO_CALIBRATION, Z90, StepTimeModel
from recommend_inputs import Amdahl, workload

PLANNING = Path(advisor.planning.__file__).parent

#: Modules of the decision layer that may write a file: the cost-time plot is output, not a decision.
WRITES_OUTPUT = {"plot.py"}

#: Imports that would let planning read calibration data itself instead of taking it from the model.
FILE_READERS = ("advisor.calibration_data", "advisor.fileio", "advisor.measurements")


def _probes_of_a_model(tree: ast.AST) -> list[str]:
    """Every getattr/hasattr whose object names a model, and every use of `inspect`, as 'line: code'."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
            if node.args and "model" in ast.unparse(node.args[0]).lower():
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
            if "inspect" in names:
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "inspect":
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def _file_access(tree: ast.AST) -> list[str]:
    """Every open() call and every import of a module that reads calibration or measurement files."""
    found = []
    for node in ast.walk(tree):
        opens = isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open"
        reads = (isinstance(node, ast.ImportFrom) and node.module in FILE_READERS) or (
            isinstance(node, ast.Import) and any(a.name in FILE_READERS for a in node.names))
        if opens or reads:
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def _planning_sources():
    paths = sorted(PLANNING.rglob("*.py"))
    assert paths, PLANNING
    return [(p, ast.parse(p.read_text(), str(p))) for p in paths]


def test_the_scans_catch_what_they_look_for():
    probes = ast.parse("import inspect\nx = getattr(model, 'peaks', ())\ny = hasattr(self.model, 'a')\n"
                       "z = inspect.signature(f)\nok = getattr(tier, 'name')\n")
    assert [line.split(":")[0] for line in _probes_of_a_model(probes)] == ["1", "2", "3", "4"]
    files = ast.parse("from advisor.calibration_data import load_workload_calibration\nopen('x')\n")
    assert len(_file_access(files)) == 2


def test_planning_reads_a_model_only_through_the_contract():
    found = {p.name: _probes_of_a_model(tree) for p, tree in _planning_sources()}
    assert {name: lines for name, lines in found.items() if lines} == {}


def test_the_decision_layer_opens_no_file():
    found = {p.name: _file_access(tree) for p, tree in _planning_sources() if p.name not in WRITES_OUTPUT}
    assert {name: lines for name, lines in found.items() if lines} == {}


class OnlyStepTime(StepTimeModel):
    def step_time(self, gpus, nodes, global_batch=None):
        t = np.ones(np.shape(gpus))
        return t, t, t


def test_a_model_states_only_step_time_and_gets_the_documented_defaults():
    m = OnlyStepTime()
    assert (m.baseline_gpus, m.baseline_nodes, m.calibrated, tuple(m.peaks), m.measured_batch) == (
        None, None, True, (), None)
    assert m.warnings() == [] and m.warnings(np.array([8]), np.array([1])) == []
    with pytest.raises(InputError, match="choosing a layout needs a scaling model"):
        m.for_workload(workload())


def test_step_time_is_the_one_required_method():
    class Nothing(StepTimeModel):
        pass

    with pytest.raises(TypeError, match="step_time"):
        Nothing()


def test_an_uncalibrated_model_says_so_by_default():
    class Prior(OnlyStepTime):
        calibrated = False

    assert Prior().warnings() == [NO_CALIBRATION]


def test_the_scaling_model_and_the_stand_ins_implement_the_contract():
    from advisor.scaling.model import ScalingModel

    assert issubclass(ScalingModel, StepTimeModel) and isinstance(Amdahl(), StepTimeModel)


def test_z90_is_the_95th_percentile_of_the_standard_normal():
    from statistics import NormalDist

    assert abs(Z90 - NormalDist().inv_cdf(0.95)) < 1e-12
