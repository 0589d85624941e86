"""The conventions every command shares: --version, completion, -q, --json, NO_COLOR.

`--version`, completion, `validate` (exit 0 and 2) and `calibrate` run as a user runs them (a process);
the rest in-process."""

from __future__ import annotations

import json
import os
import re
import tomllib

import pytest

from cli_inprocess import invoke, run_in_process
from conftest import ROOT, WORKLOADS, run_cli

FIXTURE = ROOT / "tests" / "fixtures" / "spec_fixed_global.toml"
ANSI_COLOUR = re.compile(r"\x1b\[[0-9;]*(3[0-9]|9[0-7])m")  # a foreground colour, not bold/italic


def _env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    env.update(extra)
    return env


def test_version_as_a_user_runs_it_prints_the_package_version():
    import advisor

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    # One source: pyproject reads the version from advisor.__version__.
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "advisor.__version__"}
    result = run_cli("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"advisor {advisor.__version__}"
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*", advisor.__version__)


def test_shell_completion_script_is_available():
    result = run_cli("--show-completion", "bash", env=_env(_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION="1"))
    assert result.returncode == 0, result.stderr
    assert "complete" in result.stdout and "_ADVISOR_COMPLETE" in result.stdout


def _commands(group=None, prefix=""):
    """Every leaf command by its full name ('import nccl-tests'), groups walked."""
    import typer.main

    from advisor.cli import app

    group = group or typer.main.get_command(app)
    out = {}
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            out.update(_commands(command, f"{prefix}{name} "))
        else:
            out[prefix + name] = command
    return out


#: Commands whose result is not printed: import writes a file (notes on stderr). (schema prints JSON always,
#: and takes --json too, so a script may pass it to every command.)
NO_JSON = {"import nccl-tests", "import torchtitan"}


def test_every_command_takes_quiet_and_json():
    commands = _commands()
    expected = {"validate", "schema", "gpus", "calibrate", "fit", "predict", "backtest", "recommend", "init"}
    assert expected <= set(commands)
    for name, command in commands.items():
        options = {opt for p in command.params for opt in getattr(p, "opts", [])}
        assert {"-q", "--quiet"} <= options, name
        if name not in NO_JSON:
            assert "--json" in options, name


def test_validate_json_as_a_user_runs_it_is_one_document_in_base_units():
    result = run_cli("validate", FIXTURE, "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)  # one document: json.loads refuses trailing text
    assert doc["valid"] is True
    # The fixture declares inter_node_bandwidth = "3200 Gbit/s" and params = "6.7B".
    assert doc["workload"]["cluster"]["inter_node_bandwidth"] == pytest.approx(3200e9 / 8)
    assert doc["workload"]["model"]["params"] == pytest.approx(6.7e9)


@pytest.mark.parametrize("path", sorted(WORKLOADS.glob("*.toml")), ids=lambda p: p.name)
def test_validate_json_for_every_example(path):
    result = run_in_process("validate", path, "--json")
    assert result.returncode == 0
    assert json.loads(result.stdout)["workload"]["name"] == path.stem


def test_validate_json_of_a_bad_spec_as_a_user_runs_it_lists_the_problems_and_exits_2(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(FIXTURE.read_text().replace("hidden = 4096", "hiden = 4096"))
    result = run_cli("validate", spec, "--json")
    assert result.returncode == 2
    doc = json.loads(result.stdout)
    assert doc["valid"] is False
    assert [p["line"] for p in doc["problems"]] == result.stderr.splitlines()
    assert doc["problems"][0]["path"] == "model.hiden" and doc["problems"][0]["got"] == 4096


def test_quiet_silences_warnings_but_not_the_result():
    loud = run_in_process("recommend", WORKLOADS / "llm7b.toml", "--budget", "20000")
    quiet = run_in_process("recommend", WORKLOADS / "llm7b.toml", "--budget", "20000", "-q")
    assert loud.returncode == quiet.returncode == 0
    assert "warning:" in loud.stderr  # llm7b extrapolates past its 128 measured GPUs
    assert quiet.stderr == ""
    assert quiet.stdout == loud.stdout


def test_quiet_keeps_errors(tmp_path):
    result = run_in_process("validate", "nope.toml", "-q", cwd=tmp_path)
    assert (result.returncode, result.stderr.strip()) == (2, "nope.toml: no such file")


def test_no_color_is_honoured(monkeypatch):
    args = ("fit", WORKLOADS / "llm7b.toml")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("FORCE_COLOR", "1")  # read when a command makes its console, not at import
    forced = run_in_process(*args)
    monkeypatch.setenv("NO_COLOR", "1")
    plain = run_in_process(*args)
    assert ANSI_COLOUR.search(forced.stdout), "the check needs colour to be possible"
    assert not ANSI_COLOUR.search(plain.stdout)
    assert plain.returncode == 0


@pytest.mark.slow
def test_calibrate_json_quiet_is_one_document_and_a_silent_stderr(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "cal.toml"
    result = run_cli("calibrate", WORKLOADS / "tiny-cpu.toml", "--gpus", "1,2", "--device", "cpu", "--steps", "2",
                     "--warmup", "1", "--out", out, "--json", "-q", timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    doc = json.loads(result.stdout)
    assert doc["file"] == str(out) and out.is_file()
    assert [r["gpus"] for r in doc["runs"]] == [1, 2]
    ops = {c["op"] for c in doc["collectives"]}
    assert ops == {"all_reduce", "reduce_scatter", "all_gather"}
    for c in doc["collectives"]:  # nccl-tests: algbw = size / time; busbw = algbw x factor
        assert c["algbw"] == pytest.approx(c["size"] / (c["time_us"] * 1e-6) / 1e9, rel=1e-6)


def test_help_lists_commands_in_workflow_order():
    result = run_in_process("--help")
    names = [line.split()[0] for line in result.stdout.split("Commands:")[1].splitlines() if line.strip()]
    # typer lists command groups (import) after the commands.
    assert names == ["init", "validate", "schema", "gpus", "plan-calibration", "calibrate", "fit", "predict",
                     "backtest", "recommend", "import"]


JSON_COMMANDS = {
    "gpus": ("gpus",),
    "schema": ("schema",),
    "validate": ("validate", WORKLOADS / "llm7b.toml"),
    "fit": ("fit", WORKLOADS / "tiny-cpu.toml"),
    "predict": ("predict", WORKLOADS / "tiny-cpu.toml", "--gpus", "1,8"),
    "backtest": ("backtest", WORKLOADS / "tiny-cpu.toml", "--calibration",
                 ROOT / "calibrations" / "tiny-cpu_cpu_2026-11-30.toml", "--fit-max-gpus", "2"),
    "recommend": ("recommend", WORKLOADS / "tiny-cpu.toml"),
}


@pytest.mark.parametrize("name", sorted(JSON_COMMANDS))
def test_json_is_one_document_and_quiet_leaves_stderr_empty(name):
    args = JSON_COMMANDS[name] + (() if name == "schema" else ("--json",))
    code, out, err = invoke(*args, "-q")
    assert code == 0, err
    json.loads(out)  # exactly one document: trailing text would fail here
    assert err == ""
    code, out, err = invoke(*args)
    assert code == 0
    json.loads(out)


def test_init_json_in_process(tmp_path):
    code, out, err = invoke("init", "--json", "--out", tmp_path / "x.toml")
    assert code == 0 and json.loads(out)["file"] == str(tmp_path / "x.toml")
    assert "placeholder" in err


@pytest.mark.parametrize("command, fields", [
    ("validate", ["file", "valid", "summary", "workload", "derived", "problems"]),
    ("calibrate", ["environment", "runs", "collectives", "time_us", "algbw", "busbw"]),
    ("init", ["file", "workload"]),
    ("gpus", ["gpus", "memory_gb", "intra_node_gbps"]),
])
def test_json_fields_are_documented(command, fields):
    doc = (ROOT / "docs" / "formats.md").read_text(encoding="utf-8")
    section = doc.split(f"`advisor {command} --json`", 1)[1].split("\n\n", 1)[0]
    for field in fields:
        assert f"`{field}`" in section, (command, field)


def test_validate_json_fields_match_the_documentation():
    code, out, _ = invoke("validate", WORKLOADS / "llm7b.toml", "--json")
    assert code == 0
    doc = json.loads(out)
    assert set(doc) == {"file", "valid", "summary", "workload", "derived"}
    assert set(doc["derived"]) == {"training_flops_per_sample", "gradient_bytes", "intra_node_bandwidth", "peak_flops"}


def test_no_install_hint_names_the_unrelated_pypi_package():
    """PyPI's `advisor` is another project: hints use the checkout's path form (pip install -e '.[calibrate]')."""
    bad = re.compile(r"pip install (-U )?['\"]?advisor\b")
    paths = [ROOT / "README.md", ROOT / "pyproject.toml", ROOT / ".ci" / "run"]
    for folder in ("advisor", "docs", "scripts", "benchmarks"):
        paths += [p for p in (ROOT / folder).rglob("*") if p.suffix in (".py", ".md", ".sh", ".toml")]
    found = [f"{p.relative_to(ROOT)}: {line.strip()}" for p in paths if p.is_file()
             for line in p.read_text(encoding="utf-8").splitlines() if bad.search(line)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("value", ["nan", "inf", "1979-05-27", "{ a = 1 }"])
def test_validate_json_of_a_bad_value_is_strict_json(tmp_path, value):
    spec = tmp_path / "spec.toml"
    spec.write_text(FIXTURE.read_text().replace('params = "6.7B"', f"params = {value}"))
    result = run_in_process("validate", spec, "--json")
    assert result.returncode == 2
    doc = json.loads(result.stdout, parse_constant=lambda c: pytest.fail(f"not JSON: {c}"))
    assert doc["problems"][0]["path"] == "model.params"


def _documented(section: str, key: str) -> bool:
    """`key` or "key" in the section; `x_low`/`x_high` count as documented with `x` (`cost_usd` (+))."""
    stem = re.sub(r"_(low|high)$", "", key)
    return any(f"{q}{k}{q}" in section for k in (key, stem) for q in ('`', '"'))


@pytest.mark.parametrize("args, rows", [
    (("predict", WORKLOADS / "tiny-cpu.toml", "--gpus", "2"), ["predictions"]),
    (("fit", WORKLOADS / "tiny-cpu.toml"), ["residuals"]),
    (("backtest", WORKLOADS / "tiny-cpu.toml", "--calibration", ROOT / "calibrations" / "tiny-cpu_cpu_2026-11-30.toml",
      "--fit-max-gpus", "2"), ["points"]),
    (("recommend", WORKLOADS / "tiny-cpu.toml"), ["candidates", "workloads"]),
], ids=lambda v: v[0] if isinstance(v, tuple) else None)
def test_every_json_field_printed_is_documented(args, rows):
    """docs/formats.md's section of each command names every key it prints, and those of its rows."""
    doc = (ROOT / "docs" / "formats.md").read_text(encoding="utf-8")
    section = doc.split(f"`advisor {args[0]} --json`", 1)[1].split("\n`advisor ", 1)[0]
    code, out, err = invoke(*args, "--json")
    assert code == 0, err
    printed = json.loads(out)
    keys = set(printed) | {k for row in rows for k in printed[row][0]}
    assert {k for k in keys if not _documented(section, k)} == set(), args[0]
