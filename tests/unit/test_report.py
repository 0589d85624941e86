"""The report to share (advisor.report via `recommend|predict --html`): one self-contained file
with no network reference, holding the table, the sentences, the figures, the spec and calibration
provenance and the version; drawn in a real headless browser where one is installed."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from advisor.cli.app import package_version
from advisor.report import Report, Table, breakdown_table, render
from cli_inprocess import invoke

ROOT = Path(__file__).resolve().parents[2]
LLM7B = ROOT / "workloads" / "llm7b.toml"
#: Anything a browser would fetch: a src/href/url() to a scheme or a protocol-relative address,
#: a <link> (style sheets, fonts), @import, a script from a file.
NETWORK = re.compile(r"""(?:src|href|action|poster|data)\s*=\s*["']?\s*(?:https?:|//|ftp:)|url\(\s*["']?\s*"""
                     r"""(?:https?:|//)|<link\b|@import|<script[^>]*\bsrc\s*=|<iframe\b""", re.IGNORECASE)


@pytest.fixture(scope="module")
def recommend_page(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("report")
    path = folder / "R.html"
    code, _, err = invoke("recommend", LLM7B, "--budget", "20000", "--html", path)
    assert code == 0, err
    assert f"wrote {path}" in err
    return path


@pytest.fixture(scope="module")
def predict_page(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("report") / "P.html"
    code, _, err = invoke("predict", LLM7B, "--gpus", "4,8,16", "--html", path)
    assert code == 0, err
    return path


def test_one_file_and_no_network_reference(recommend_page, predict_page):
    for page in (recommend_page, predict_page):
        assert [p.name for p in page.parent.iterdir()] == [page.name]  # atomic: no temporary left beside it
        text = page.read_text()
        assert NETWORK.search(text) is None, NETWORK.search(text)
        assert text.count('src="data:image/png;base64,') >= 1


def test_the_network_check_can_fail():
    for bad in ('<img src="https://x/y.png">', "<link rel=stylesheet href=a.css>", "a{background:url(//cdn/x)}",
                '<script src="app.js"></script>'):
        assert NETWORK.search(bad)


def test_recommend_page_holds_the_decision_and_its_provenance(recommend_page):
    text = recommend_page.read_text()
    code, out, err = invoke("recommend", LLM7B, "--budget", "20000")  # the decision as the terminal reads it
    assert code == 0, err
    (decision,) = [line for line in out.splitlines() if line.startswith("Fastest plan within $20,000: ")]
    assert decision.split(":")[1].strip() in text  # e.g. "304 GPUs (38 nodes) on spot"
    assert "<th" in text and "P(meet)" in text and "speedup" in text  # every column, as --wide
    assert text.count("data:image/png;base64,") == 2  # the frontier, the scaling curve
    assert f"advisor {package_version()}" in text
    assert hashlib.sha256(LLM7B.read_bytes()).hexdigest() in text  # the spec, by content
    cal = ROOT / "calibrations" / "llm7b_published_torchtitan.toml"
    assert hashlib.sha256(cal.read_bytes()).hexdigest() in text and "source" in text
    assert "Left out below 8 GPUs" in text


def test_predict_page_holds_the_left_out_counts(predict_page):
    text = predict_page.read_text()
    assert "Left out 4 GPUs (1 node): the footprint per GPU" in text
    assert "speedup vs 8 GPUs" in text and "naive samples/s" in text


def test_breakdown_is_shown_where_the_model_gives_one():
    rows = [{"gpus": 8, "breakdown": {"compute": 2.1, "exposed comm": 0.4}}, {"gpus": 16}]
    table = breakdown_table(rows)
    assert table.headers == ["GPUs", "compute", "exposed comm"] and table.rows == [["8", "2.1", "0.4"]]
    assert breakdown_table([{"gpus": 8}]) is None
    page = render(Report("t", breakdown=table))
    assert "Step breakdown" in page and "<td>2.1</td>" in page.replace(' class=""', "")


def test_text_is_escaped():
    page = render(Report("<script>x</script>", sentences=["a < b & c"], tables=[Table("t", ["h"], [["<b>"]])]))
    assert "<script>x</script>" not in page and "a &lt; b &amp; c" in page and "&lt;b&gt;" in page


def _browser() -> str | None:
    return next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)


@pytest.mark.skipif(_browser() is None, reason="no headless browser installed (chromium, chromium-browser or "
                    "google-chrome); apt-get install chromium to run this check")
def test_a_real_browser_draws_every_figure_without_errors(recommend_page, predict_page, tmp_path):
    for page in (recommend_page, predict_page):
        done = subprocess.run([_browser(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                               f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000",
                               "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
        body = re.search(r"<body([^>]*)>", done.stdout)
        assert body is not None, done.stderr[-2000:]
        assert 'data-figures="drawn"' in body.group(1)  # every <img> decoded with a width (the page's own check)
        assert "data-errors" not in body.group(1)  # no script error
        assert "Uncaught" not in done.stderr
