"""Tables and sentences that fit the terminal without cutting a number.

Every result table declares its columns once (`Column`): a compact default set chosen to fit 80
columns, and the rest marked `wide` (shown with `--wide`). Cells never wrap and are never elided:
when even the compact set is wider than the terminal, the table prints at its natural width (the
terminal folds the line; the digits stay whole) instead of rich's `2.8…`. Sentences wrap at word
boundaries to the console's width, a long number kept on one line.

The width is the terminal's, or piped, `COLUMNS` (default 100; advisor.cli.output).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    """One table column: its header, whether it shows only with --wide, and its alignment."""

    name: str
    wide: bool = False
    left: bool = False


def plain(text: str) -> str:
    """`text` as rich shows it literally: rich reads a string given to a table or `print` as markup,
    so a tier named '[red]sp[/]ot' printed as 'spot', and a path's ANSI escape reached the terminal;
    the brackets are escaped (rich.markup.escape) and what is not printable is written out
    (advisor.errors.printable), as in error lines."""
    from rich.markup import escape

    from advisor.errors import printable

    return escape(printable(text))


def build(title: str, columns: Sequence[Column], rows: Sequence[Sequence[str]], *, wide: bool = False,
          bold: Sequence[bool] | None = None):
    """A rich Table of `rows` (one string per column in `columns`), keeping the wide columns only
    with `wide`; `bold` marks rows to emphasise (the chosen plan). A note under it goes to `show`.
    The title and cells are shown literally (`plain`): they quote tier names and file names."""
    from rich import box
    from rich.table import Table

    keep = [i for i, col in enumerate(columns) if wide or not col.wide]
    table = Table(title=plain(title), box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for i in keep:
        table.add_column(columns[i].name, justify="left" if columns[i].left else "right", no_wrap=True)
    for r, row in enumerate(rows):
        table.add_row(*(plain(row[i]) for i in keep), style="bold" if bold is not None and bold[r] else None)
    return table


def natural_width(console, renderable) -> int:
    """The width `renderable` takes with no limit (the longest cell of every column side by side)."""
    from rich.measure import Measurement

    return Measurement.get(console, console.options.update_width(100_000), renderable).maximum


def show(console, table, note: str | None = None) -> None:
    """Print `table` within the console's width when it fits, else at its natural width: a cell is
    never shrunk into an ellipsis or wrapped. `note` follows it, wrapped like a sentence."""
    needed, width = natural_width(console, table), console.width
    if needed <= width:
        console.print(table)
    else:
        console.width = needed  # rich's print(width=) is capped at the console's width
        try:
            console.print(table, crop=False)
        finally:
            console.width = width
    if note:
        say(console, note)


#: A space that joins a number to its unit ("1,029 h", "96.0 GB"): no line breaks there.
_UNIT_SPACE = re.compile(r"(?<=\d) (?=(?:h|min|s|ms|GB|GB/s|days?|GPUs?|nodes?)\b)")


def wrap(text: str, width: int, indent: str = "", hanging: str | None = None) -> str:
    """`text` wrapped to `width` at spaces: `indent` before the first line, `hanging` (default: as
    many spaces) before the others; never inside a word, at a hyphen ("1,330–1,530" whole) or
    between a number and its unit."""
    rest = " " * len(indent) if hanging is None else hanging
    joined = _UNIT_SPACE.sub("\0", text)
    return textwrap.fill(joined, width=max(width, 20), initial_indent=indent, subsequent_indent=rest,
                         break_long_words=False, break_on_hyphens=False).replace("\0", " ")


def say(console, text: str, indent: str = "", hanging: str | None = None) -> None:
    """Print one sentence (or paragraph) wrapped to the console's width."""
    console.print(wrap(text, console.width, indent, hanging), markup=False, highlight=False, soft_wrap=True)
