"""How every command prints: one `Output` object per invocation, configured from `--json` and `-q`.

Conventions (those of the `hf` CLI and of Unix tools):

- the result goes to stdout: a rich table and sentences, or with `--json` one JSON document and
  nothing else on stdout;
- notes (`wrote FILE`), progress and `warning: ...` lines go to stderr; `-q/--quiet` silences them
  (errors still print; warnings stay inside the `--json` document);
- colour follows the NO_COLOR convention (https://no-color.org): set and non-empty, no colour;
- width: the terminal's; piped, `COLUMNS` (default 100, `DEFAULT_WIDTH`); tables and sentences fit
  it (advisor.cli.tables), `--wide` adds the columns that do not;
- a note or warning is one line of printable text: what it quotes from the user (a path with a
  newline, a host name with an ANSI escape read from a log) is escaped (`advisor.errors.printable`)
  as error lines are, so it can neither split the line nor drive the terminal.

`app.py` configures `current()` from each command's `--json` and `-q` options before the command
runs; commands call `current().result(...)`, `.note(...)`, `.warn(...)` and `.console()`.
The module-level `warn` and `console` are the same, for commands written before the object.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from advisor.errors import printable

#: Console width when stdout is not a terminal and COLUMNS is unset.
DEFAULT_WIDTH = 100


def width() -> int:
    """Columns to fit when piped: `COLUMNS` if it is a positive whole number, else DEFAULT_WIDTH."""
    text = os.environ.get("COLUMNS", "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else DEFAULT_WIDTH


def warning_width() -> int | None:
    """Where warnings wrap: a terminal's width, or `COLUMNS` when set; piped without COLUMNS each
    warning stays one line (a log or grep reads it whole)."""
    if sys.stderr.isatty():
        import shutil

        return shutil.get_terminal_size().columns
    return width() if os.environ.get("COLUMNS", "").strip().isdigit() else None


def no_color() -> bool:
    """True when the NO_COLOR environment variable is set to a non-empty value (no-color.org)."""
    return os.environ.get("NO_COLOR", "") != ""


@dataclass
class Output:
    """Where one command invocation's results, notes and warnings go."""

    json: bool = False
    """`--json`: the result is one JSON document on stdout."""
    quiet: bool = False
    """`-q/--quiet`: nothing on stderr but errors."""

    def result(self, document: Any, render: Callable[[], None] | None = None) -> None:
        """Print the command's result: `document` as JSON with --json (or when there is no `render`),
        else `render()` (tables and sentences on stdout)."""
        if self.json or render is None:
            print(json.dumps(strict_json(document), indent=2))
        else:
            render()

    def note(self, text: str) -> None:
        """An informational line on stderr (`wrote FILE`); silenced by -q."""
        if not self.quiet:
            print(printable(text), file=sys.stderr)

    def warn(self, lines: list[str]) -> None:
        """Each distinct warning once, as `warning: ...` on stderr; silenced by -q (the --json
        document carries them)."""
        if self.quiet:
            return
        columns = warning_width()
        for line in dict.fromkeys(lines):
            text = printable(f"warning: {line}")
            if columns is not None:
                from advisor.cli.tables import wrap

                text = wrap(text, columns, hanging="  ")
            print(text, file=sys.stderr)

    def console(self, stderr: bool = False):
        """rich Console for tables: NO_COLOR honoured; the terminal's width, or piped `width()`
        (COLUMNS, default 100); on stderr, silent under -q."""
        from rich.console import Console

        stream = sys.stderr if stderr else sys.stdout
        columns = None if stream.isatty() else width()
        return Console(file=stream, width=columns, no_color=no_color() or None, quiet=stderr and self.quiet)


def strict_json(value: Any) -> Any:
    """`value` with every NaN or infinity replaced by null: JSON (RFC 8259) has no such numbers, and
    jq or a JavaScript reader would refuse the whole document."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    return value


_current = Output()


def command_line() -> str | None:
    """The command as typed (`advisor recommend ...`), for provenance; None when not run from a shell."""
    import shlex

    return shlex.join(["advisor", *sys.argv[1:]]) if sys.argv and sys.argv[0] else None


def current() -> Output:
    """The Output of the command now running (configured by app.py from --json and -q)."""
    return _current


def configure(*, json: bool = False, quiet: bool = False) -> Output:
    """Set the options of the command about to run; returns the Output it will use."""
    global _current
    _current = Output(json=json, quiet=quiet)
    return _current


def warn(lines: list[str]) -> None:
    """`current().warn(lines)`."""
    current().warn(lines)


def console():
    """`current().console()`: the stdout Console for tables."""
    return current().console()
