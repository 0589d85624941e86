"""The README and docs/usage.md say what the code does: their code lines run here.

Each check reads the document, not a copy of it, so a stale statement fails a test: the Python
lines of the README execute, its spec validates, every option its command table names is in that
command's `--help`, its links resolve, and the plain `advisor` lines of docs/usage.md that need
no GPU exit as a user would expect (0, or 3 where no plan meets the limits).
"""

from __future__ import annotations

import re
import shlex

import pytest

from cli_inprocess import invoke
from conftest import ROOT

README = ROOT / "README.md"
USAGE = ROOT / "docs" / "usage.md"


def blocks(path, language: str) -> list[str]:
    """The fenced code blocks of one language ("" for a bare fence) in a Markdown file, in order."""
    found, current, fence = [], [], None
    for line in path.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if fence is None and stripped.startswith("```"):
            fence, current = stripped[3:].strip(), []
        elif fence is not None and stripped == "```":
            if fence == language:
                found.append("\n".join(current) + "\n")
            fence = None
        elif fence is not None:
            current.append(line)
    return found


def test_readme_is_a_door_not_a_manual():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 220


def test_readme_test_command_is_the_one_ci_runs():
    setup = [b for b in blocks(README, "bash") if "pytest" in b]
    assert len(setup) == 1
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    install = re.search(r"pip install (.*?) &&", setup[0]).group(1)
    assert f"pip install -q {install}" in ci
    tests = re.findall(r"python -m pytest [^&\n]*[^&\n ]", setup[0])
    assert tests and [line for line in ci.splitlines() if line.startswith("python -m pytest")] == tests
    # together they run every test folder
    folders = {p.name for p in (ROOT / "tests").iterdir() if p.is_dir() and any(p.glob("test_*.py"))}
    assert folders == {w.removeprefix("tests/") for t in tests for w in t.split() if w.startswith("tests/")}


def test_readme_python_lines_run(monkeypatch):
    monkeypatch.chdir(ROOT)
    (code,) = blocks(README, "python")
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    assert len(scope["prediction"].step_seconds) == 3


def test_readme_spec_validates(tmp_path):
    (spec,) = blocks(README, "toml")
    path = tmp_path / "my-job.toml"
    path.write_text(spec, encoding="utf-8")
    code, _, err = invoke("validate", path)
    assert code == 0, err


def command_table() -> list[tuple[str, list[str]]]:
    """(command, options) per row of the README's command table."""
    rows = []
    for line in README.read_text(encoding="utf-8").splitlines():
        m = re.match(r"\| `advisor ([a-z-]+)(.*?)` \|", line)
        if m:
            rows.append((m.group(1), re.findall(r"--[a-z][a-z-]*", m.group(2))))
    return rows


def test_readme_command_table_lists_every_command():
    names = {name for name, _ in command_table()}
    assert names >= {"init", "validate", "schema", "gpus", "plan-calibration", "calibrate", "import", "fit",
                     "predict", "backtest", "recommend"}


@pytest.mark.parametrize(("command", "options"), command_table(), ids=[c for c, _ in command_table()])
def test_readme_options_exist(command, options, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    args = [command, "nccl-tests", "--help"] if command == "import" else [command, "--help"]
    code, out, err = invoke(*args)
    assert code == 0, err
    missing = [o for o in options if o not in out]
    assert not missing, f"advisor {command} --help lacks {missing}"


def test_readme_links_resolve():
    for target, anchor in re.findall(r"\]\(((?:docs/)?[A-Za-z_./-]+\.md)(?:#([a-z0-9-]+))?\)",
                                     README.read_text(encoding="utf-8")):
        page = ROOT / target
        assert page.is_file(), target
        if anchor:
            headings = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-")
                        for h in re.findall(r"^#+ (.*)$", page.read_text(encoding="utf-8"), flags=re.M)}
            assert anchor in headings, f"{target}#{anchor}"


@pytest.mark.parametrize("page", sorted((ROOT / "docs").glob("*.md")), ids=lambda p: p.name)
def test_docs_links_resolve(page):
    """A link in docs/PAGE.md is relative to docs/ (`formats.md`, `../benchmarks/...`), not to the root."""
    text = page.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)\s#:]+\.md)(?:#[^)]*)?\)", text)
    assert [t for t in targets if not (page.parent / t).is_file()] == []


def test_every_exit_status_is_documented():
    """The README's and docs/usage.md's "Exit status:" sentences name every status the CLI exits with."""
    from advisor.cli.calibrate import EXIT_FAILED, EXIT_INTERRUPTED
    from advisor.cli.recommend import EXIT_NONE_QUALIFIES
    from advisor.errors import EXIT_INPUT

    for page in (README, USAGE):
        sentence = page.read_text(encoding="utf-8").split("Exit status:", 1)[1].split(".\n", 1)[0]
        named = {int(n) for n in re.findall(r"\b(\d+)\s+[a-z]", sentence)}
        assert named == {0, EXIT_INPUT, EXIT_NONE_QUALIFIES, EXIT_FAILED, EXIT_INTERRUPTED}, page.name


def usage_commands() -> list[list[str]]:
    """The `advisor` lines of docs/usage.md that run on checked-in files without a GPU or a log."""
    found = []
    for block in blocks(USAGE, "bash"):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line.split("  #")[0])
            if words[:1] == ["advisor"] and words[1] in ("predict", "recommend", "plan-calibration", "fit"):
                found.append(words[1:])
    return found


@pytest.mark.parametrize("args", usage_commands(), ids=[" ".join(a[:2]) for a in usage_commands()])
def test_usage_commands_run(args, monkeypatch):
    monkeypatch.chdir(ROOT)
    missing = [a for a in args if a.endswith(".toml") and not (ROOT / a).is_file()]
    if missing:
        pytest.skip(f"needs a file a user makes first: {missing}")
    code, _, err = invoke(*args)
    assert code in (0, 3), err


def test_readme_output_is_what_the_main_command_prints(monkeypatch):
    """Every line of the README's abridged output (but the `...`) is a line `recommend` prints now."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("COLUMNS", "100")
    (shown,) = [b for b in blocks(README, "") if "fastest-within-budget" in b]
    code, out, err = invoke("recommend", "workloads/llm7b.toml", "--budget", "20000")
    assert code == 0, err
    printed = {line.rstrip() for line in (out + err).splitlines()}
    stale = [line for line in shown.splitlines() if line.strip() not in ("", "...") and line.rstrip() not in printed]
    assert not stale, "README output differs from what recommend prints:\n" + "\n".join(stale)
