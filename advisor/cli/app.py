"""The typer application every command module registers on, and the entry point.

The CLI is a thin skin: each command parses options, calls a function of the importable API,
and prints. `main()` turns `InputError` into its one-line messages on stderr with exit status 2
and never shows a traceback for user mistakes (typer's pretty exceptions are off).
"""

from __future__ import annotations

import sys

import typer

from advisor.errors import EXIT_INPUT, InputError

app = typer.Typer(
    name="advisor",
    help="How many GPUs to rent, and on which billing tier: measured scaling, not the linear-scaling myth.",
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


def fail(error: InputError) -> None:
    for line in error.lines():
        print(line, file=sys.stderr)
    raise SystemExit(EXIT_INPUT)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point. Usage errors exit 2 (click's convention, same as bad input)."""
    try:
        app(args=argv, prog_name="advisor")
    except InputError as error:
        fail(error)
