"""How every command prints: rich tables on stdout (wide when piped), warnings on stderr."""

from __future__ import annotations

import sys


def warn(lines: list[str]) -> None:
    """Each distinct warning once, as `warning: ...` on stderr (results stay alone on stdout)."""
    for line in dict.fromkeys(lines):
        print(f"warning: {line}", file=sys.stderr)


def console():
    """rich Console for tables; wide when piped (rich would wrap at 80 columns and truncate cells)."""
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=200)
