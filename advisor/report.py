"""A report to share: one self-contained HTML file (`advisor recommend|predict ... --html FILE`).

Everything the page shows travels inside it: figures as base64 PNG (`data:` URIs), the style sheet
and the one small script inline, no font, image, style or script fetched from anywhere, so the file
reads the same from an e-mail attachment, a wiki upload or a laptop offline. It holds the headline
and the sentences the terminal prints, the tables (every column, as with --wide), the figures (the
scaling curve with its 90% band, the cost-time frontier with the chosen plan), the step breakdown
where the model gives one, the spec (its path, SHA-256 and text), the calibration provenance
(each file's path, SHA-256 and [provenance] table), the command line, the advisor version and the
time it was written. The file is written atomically (advisor.fileio): a reader never opens half of it.

The inline script only checks the page itself: after load it marks `<body data-figures="drawn">`
when every figure decoded (a headless browser's `--dump-dom` shows it) and records script errors
in `data-errors`.
"""

from __future__ import annotations

import base64
import hashlib
import html
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path


@dataclass
class Table:
    title: str
    headers: list[str]
    rows: list[list[str]]
    bold: list[bool] = field(default_factory=list)


@dataclass
class Report:
    """The pieces of one report, already formatted as the terminal shows them (advisor.text)."""

    title: str
    headline: str = ""
    sentences: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    figures: list[tuple[str, bytes]] = field(default_factory=list)  # (caption, PNG bytes)
    breakdown: Table | None = None
    warnings: list[str] = field(default_factory=list)
    specs: list[Path] = field(default_factory=list)
    calibrations: list[Path] = field(default_factory=list)
    command: str = ""
    version: str = ""


_STYLE = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;
color:#1b1b1b}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.8em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-variant-numeric:tabular-nums;margin:.6em 0}
th,td{padding:.2em .7em;border-bottom:1px solid #eee;text-align:right;white-space:nowrap}
th{border-bottom:2px solid #999}td.l,th.l{text-align:left}tr.chosen{font-weight:bold;background:#eef6ee}
img{max-width:100%;height:auto;border:1px solid #eee}figure{margin:1em 0}
.scroll{overflow-x:auto}pre{background:#f6f6f6;padding:.8em;overflow:auto;font-size:13px}.warn{color:#8a4b00}.meta{color:#555}
"""

_CHECK = """
window.addEventListener("error", function (e) {
  document.body.setAttribute("data-errors", (document.body.getAttribute("data-errors") || "") + e.message + ";");
});
window.addEventListener("load", function () {
  var imgs = document.images, ok = imgs.length > 0;
  for (var i = 0; i < imgs.length; i++) { if (!(imgs[i].complete && imgs[i].naturalWidth > 0)) ok = false; }
  document.body.setAttribute("data-figures", ok ? "drawn" : "missing");
});
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _table(t: Table) -> str:
    left = [bool(t.rows) and not _numeric(t.rows[0][i]) for i in range(len(t.headers))]
    head = "".join(f'<th class="{"l" if left[i] else ""}">{_e(h)}</th>' for i, h in enumerate(t.headers))
    body = []
    for r, row in enumerate(t.rows):
        cls = ' class="chosen"' if t.bold and t.bold[r] else ""
        cells = "".join(f'<td class="{"l" if not _numeric(c) else ""}">{_e(c)}</td>' for c in row)
        body.append(f"<tr{cls}>{cells}</tr>")
    return (f"<h2>{_e(t.title)}</h2><div class=scroll><table><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table></div>")


def _numeric(cell: str) -> bool:
    return any(ch.isdigit() for ch in cell) and not cell[:1].isalpha()


def _figure(caption: str, png: bytes) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<figure><img alt="{_e(caption)}" src="data:image/png;base64,{data}"><figcaption>{_e(caption)}' \
           f"</figcaption></figure>"


def _file(path: Path) -> tuple[str, str]:
    """(SHA-256, text) of a file, ("unreadable", "") when it cannot be read."""
    try:
        raw = Path(path).read_bytes()
    except OSError:
        return "unreadable", ""
    return hashlib.sha256(raw).hexdigest(), raw.decode("utf-8", "replace")


def _provenance(path: Path) -> str:
    """A calibration file's [provenance] table (or the whole file's first lines when it has none)."""
    import tomllib

    digest, text = _file(path)
    try:
        prov = tomllib.loads(text).get("provenance", {}) if path.suffix == ".toml" else {}
    except tomllib.TOMLDecodeError:
        prov = {}
    lines = "\n".join(f"{k} = {v!r}" for k, v in prov.items()) or "(no [provenance] table)"
    return f"<p><code>{_e(path)}</code> <span class=meta>SHA-256 {digest}</span></p><pre>{_e(lines)}</pre>"


def breakdown_table(rows: list[dict]) -> Table | None:
    """The step breakdown of prediction rows that carry one (`"breakdown": {part: seconds}`), else None."""
    from advisor.text import number

    have = [r for r in rows if isinstance(r.get("breakdown"), dict) and r["breakdown"]]
    if not have:
        return None
    parts = list(dict.fromkeys(k for r in have for k in r["breakdown"]))
    cells = [[f"{r['gpus']:,}", *(_seconds(r["breakdown"].get(k), number) for k in parts)] for r in have]
    return Table("Step breakdown (seconds per step)", ["GPUs", *parts], cells)


def _seconds(value, number) -> str:
    return number(value, 3) if isinstance(value, (int, float)) else "-" if value is None else str(value)


def render(report: Report) -> str:
    """The whole page as one string."""
    parts = [f"<h1>{_e(report.title)}</h1>",
             f'<p class=meta>advisor {_e(report.version)} · written {datetime.now(UTC):%Y-%m-%d %H:%M} UTC · '
             f"<code>{_e(report.command)}</code></p>"]
    if report.headline:
        parts.append(f"<p><strong>{_e(report.headline)}</strong></p>")
    if report.sentences:
        parts.append("<ul>" + "".join(f"<li>{_e(line)}</li>" for line in report.sentences) + "</ul>")
    parts += [_table(t) for t in report.tables]
    if report.figures:
        parts.append("<h2>Figures</h2>" + "".join(_figure(c, png) for c, png in report.figures))
    if report.breakdown is not None:
        parts.append(_table(report.breakdown))
    if report.warnings:
        parts.append("<h2>Warnings</h2><ul>" + "".join(f'<li class="warn">{_e(w)}</li>' for w in report.warnings)
                     + "</ul>")
    parts.append(_sources(report))
    return ("<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
            '<meta name=viewport content="width=device-width, initial-scale=1">'
            f"<title>{_e(report.title)}</title><style>{_STYLE}</style><script>{_CHECK}</script></head>"
            f"<body>{''.join(parts)}</body></html>\n")


def _sources(report: Report) -> str:
    out = ["<h2>Spec and calibration</h2>"]
    for spec in report.specs:
        digest, text = _file(spec)
        out.append(f"<p>Spec <code>{_e(spec)}</code> <span class=meta>SHA-256 {digest}</span></p>"
                   f"<details><summary>spec text</summary><pre>{_e(text)}</pre></details>")
    if report.calibrations:
        out += [_provenance(p) for p in report.calibrations]
    else:
        out.append("<p>No calibration: every number is the prior's first estimate from the spec.</p>")
    return "".join(out)


def calibration_files(name: str, spec: Path, calibration: list[Path] | None, measurements: Path | None) -> list[Path]:
    """The files the model was fitted on: --calibration/--measurements, else the checked-in ones."""
    from advisor.calibration_data import find_calibrations

    given = [*(calibration or []), *([measurements] if measurements is not None else [])]
    return given or find_calibrations(name, spec)


def write(path: str | Path, report: Report) -> None:
    """Write the page to `path` atomically."""
    from advisor.fileio import atomic_write_text

    atomic_write_text(path, render(report))
