"""User-facing errors: one line per problem, exit status 2, never a traceback.

Every problem a user can fix (a bad spec, a truncated calibration file, a CSV with a missing
column) is raised as `InputError`; the CLI prints its lines to stderr and exits with status 2.
Anything else that escapes is a bug in advisor.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

EXIT_INPUT = 2

#: Unicode categories of characters that end a line or drive a terminal: C0/C1 controls and DEL
#: (Cc, which holds U+0085 NEL), U+2028 LINE SEPARATOR and U+2029 PARAGRAPH SEPARATOR (Zl, Zp).
#: A shell, sbatch and YAML 1.1 end a line at each (YAML 1.1 spec, 5.4 "Line Break Characters").
CONTROL_CATEGORIES = ("Cc", "Zl", "Zp")
#: The bidirectional embedding, override and isolate controls (Unicode UAX #9, Table 1: LRE RLE PDF
#: LRO RLO, LRI RLI FSI PDI): a terminal shows the rest of the line reordered ("Trojan Source",
#: CVE-2021-42574), so a tier name holding U+202E would print its table row backwards.
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


@dataclass(frozen=True)
class Problem:
    """One problem at one place: `FILE: path: message (got VALUE)`."""

    file: str
    path: str
    message: str
    value: object = None
    has_value: bool = False

    def line(self) -> str:
        """One line, whatever the file name or message holds: a newline or control character in a
        path (`--out $'a\\nb'`) is escaped, never printed (it would split the line or drive the terminal)."""
        where = f"{self.file}: {self.path}: " if self.path else f"{self.file}: "
        got = f" (got {_show(self.value)})" if self.has_value else ""
        return printable(f"{where}{self.message}") + got


def dotted_path(loc: tuple) -> str:
    """`('tiers', 1, 'name')` -> `tiers[1].name`; odd keys are quoted as in TOML (`model."a b"`)."""
    import json
    import re

    out = ""
    for item in loc:
        if isinstance(item, int):
            out += f"[{item}]"
            continue
        key = str(item)
        key = key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)
        out += ("." if out else "") + key
    return out


def printable(text: str) -> str:
    """`text` with every character that is not printable (a newline, a control character, U+2028)
    escaped as Python writes it (`\\n`, `\\x01`, `\\u2028`): safe in one line of a message or a comment."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def control_character(text: str) -> str | None:
    """The first character of `text` that ends a line or drives a terminal (CONTROL_CATEGORIES,
    BIDI_CONTROLS), or None: the one test for names a spec prints and words an emitter writes."""
    return next((c for c in text if c in BIDI_CONTROLS or unicodedata.category(c) in CONTROL_CATEGORIES), None)


def _show(value: object) -> str:
    text = printable(repr(value) if isinstance(value, str) else str(value))
    return text if len(text) <= 80 else text[:77] + "..."


class InputError(Exception):
    """Bad input the user can fix. Holds one or more `Problem`s."""

    def __init__(self, problems: list[Problem] | Problem):
        self.problems = [problems] if isinstance(problems, Problem) else list(problems)
        super().__init__("\n".join(p.line() for p in self.problems))

    @classmethod
    def at(cls, file: object, path: str, message: str, *value: object) -> "InputError":
        """One problem; pass a value to have it shown as `(got VALUE)`."""
        return cls(Problem(str(file), path, message, value[0] if value else None, bool(value)))

    def lines(self) -> list[str]:
        return [p.line() for p in self.problems]
