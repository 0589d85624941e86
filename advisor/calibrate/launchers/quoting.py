"""The one quoting of everything advisor writes for a shell or a scheduler, and the text checks before it.

- `shell_quote(word)`: one shell word that expands nothing (shlex.quote); `Raw` fragments are
  expansions advisor wrote itself (`"$ROOT"`, `"$head_ip"`) and never hold user text.
- `check_text(option, value)`: refuses, naming the option, any character that ends a line for a
  shell, sbatch or YAML (`advisor.errors.control_character`, the test the spec's names pass too):
  C0/C1 control characters and DEL (Unicode category Cc, which holds U+0085 NEL), U+2028 LINE
  SEPARATOR and U+2029 PARAGRAPH SEPARATOR (categories Zl, Zp), and the bidirectional overrides.
  YAML 1.1 (PyYAML) ends lines at NEL, LS and PS too (YAML 1.1 spec, 5.4 "Line Break Characters"),
  so one of them in a value written into a hand-made YAML line would start a new key such as `setup:`. Every option
  is checked at the boundary (`advisor.calibrate.launchers.job`); `shell_quote` checks again, so a
  word that skipped the boundary still cannot end a command.
- `relative_path`, `inside(folder, path, option)`: paths as the cluster addresses them.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from advisor.errors import InputError, control_character


class Raw(str):
    """A shell fragment advisor wrote itself (an expansion such as "$ROOT"); never user text."""


Word = str | Raw


def check_text(option: object, value: object) -> str:
    """`value` as text, or InputError naming `option` when it holds a line-ending or control character."""
    text = str(value)
    bad = control_character(text)
    if bad is not None:
        raise InputError.at(option, "", f"refusing a control or line-separator character (U+{ord(bad):04X}): it "
                            "would end a line of the emitted file", text)
    return text


def shell_quote(word: object) -> str:
    """One shell word, expanding nothing; a line-ending character is refused (InputError, exit 2)."""
    if isinstance(word, Raw):
        return str(word)
    return shlex.quote(check_text("emit", word))


def join_words(words: list[Word]) -> str:
    return " ".join(shell_quote(w) for w in words)


def concat(*parts: Word) -> Raw:
    """One shell word from pieces: Raw pieces as written, the others quoted (`"$ROOT"/'a b'`)."""
    return Raw("".join(shell_quote(p) for p in parts))


def relative_path(path: Path) -> str:
    """`path` as the user will address it from the submit folder: relative to the current folder
    when it lies under it, else as given (an absolute path the user chose)."""
    p = Path(path)
    if not p.is_absolute():
        return p.as_posix()
    try:
        return p.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return p.as_posix()


def inside(folder: Path, path: Path, option: object, why: str) -> str:
    """`path` relative to `folder` (both resolved, symlinks followed), or InputError naming `option`
    when it lies outside (`../x`, an absolute path elsewhere, a link out of the folder)."""
    try:
        return Path(path).resolve().relative_to(Path(folder).resolve()).as_posix()
    except ValueError:
        raise InputError.at(option, "", f"lies outside {folder.resolve()}: {why}", str(path)) from None
