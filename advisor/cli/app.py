"""The typer application every command module registers on, and the entry point.

The CLI is a thin skin: each command parses options, calls a function of the importable API,
and prints through `advisor.cli.output`. Conventions every command shares, set up here once:

- `advisor --version` prints the installed version;
- `advisor --install-completion` / `--show-completion [bash|zsh|fish|powershell]` (typer's);
- every command takes `-q/--quiet` (added by `AdvisorTyper.command`, so no command can forget it),
  and its `--json` and `-q` configure the one `Output` object before the command runs;
- every command refuses, before it runs, an empty value or a non-finite number typed for any of
  its options (`check_option_values`), naming the option;
- `main()` turns `InputError` into its one-line messages on stderr with exit status 2 and never
  shows a traceback for user mistakes (typer's pretty exceptions are off; NO_COLOR is honoured by
  the rich consoles of `advisor.cli.output`).
"""

from __future__ import annotations

import functools
import inspect
import sys
from typing import Annotated

import typer

from advisor.cli import output
from advisor.errors import EXIT_INPUT, InputError, printable

QuietOpt = Annotated[
    bool,
    typer.Option("--quiet", "-q", help="Print only the result (and errors): no notes, progress or warnings on stderr."),
]


class OnceCommand(typer.core.TyperCommand):
    """A command whose options that take one value are given once: click keeps the last of
    `--tier spot --tier on-demand` and drops the first without a word (`--budget 20k --budget 2k`
    priced the second), so a repeat is refused naming the option. Options that collect a list
    (`--calibration A --calibration B`) and flags (`--json --json`) may repeat."""

    def make_parser(self, ctx):
        """click's parser, checking the order it met each option in (check_given_once) as it returns it,
        before any value is converted: the one parse of the command line, not a second."""
        parser = super().make_parser(ctx)
        parse = parser.parse_args

        def parse_given_once(args):
            opts, rest, order = parse(args=args)
            check_given_once(order)
            return opts, rest, order

        parser.parse_args = parse_given_once
        return parser


def check_given_once(order: list) -> None:
    """Refuse an option that takes one value appearing more than once in `order` (the parser's own
    record of the order it met each option in), naming it: exit 2, one line."""
    seen: dict[str, int] = {}
    for param in order:
        if getattr(param, "multiple", True) or getattr(param, "is_flag", True) or getattr(param, "count", False):
            continue
        seen[param.name] = seen.get(param.name, 0) + 1
        if seen[param.name] == 2:
            flag = next((o for o in param.opts if o.startswith("--")), param.opts[0])
            raise InputError.at(flag, "", "given more than once: it takes one value, and all but the last would be "
                                "ignored; give it once")


class AdvisorTyper(typer.Typer):
    """A Typer whose commands all get `-q/--quiet` and configure `output.current()` from it and
    from their own `--json` (a parameter named `as_json`)."""

    def command(self, *args, **kwargs):
        kwargs.setdefault("cls", OnceCommand)
        register = super().command(*args, **kwargs)

        def decorator(func):
            signature = inspect.signature(func, eval_str=True)  # annotations as objects, evaluated once
            if "quiet" in signature.parameters:  # the command declares it itself
                return register(func)

            @functools.wraps(func)
            def wrapper(*a, quiet: bool = False, advisor_context: typer.Context, **kw):
                output.configure(json=bool(kw.get("as_json", False)), quiet=quiet)
                check_option_values(advisor_context, kw)
                check_output_paths(advisor_context, kw)
                return func(*a, **kw)

            quiet = inspect.Parameter("quiet", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=QuietOpt)
            context = inspect.Parameter("advisor_context", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context)
            params = _with_keyword(_with_keyword(list(signature.parameters.values()), quiet), context)
            wrapper.__signature__ = signature.replace(parameters=params)
            wrapper.__annotations__ = {p.name: p.annotation for p in wrapper.__signature__.parameters.values()}
            register(wrapper)
            return func

        return decorator


def check_option_values(ctx: typer.Context, values: dict) -> None:
    """What every command refuses in a value typed on the command line, before it runs: an empty
    or blank string (`--time ''` was silently ignored, `--tier ''` matched nothing) and a number
    that is not finite (`--budget inf` priced a plan at `$inf`). Named by the option, one line."""
    import math

    for param in ctx.command.params:
        if param.name not in values or ctx.get_parameter_source(param.name).name != "COMMANDLINE":
            continue
        value = values[param.name]
        items = value if isinstance(value, (list, tuple)) else [value]
        flag = next((o for o in param.opts if o.startswith("--")), str(param.name).upper())
        if any(isinstance(v, str) and not v.strip() for v in items):
            raise InputError.at(flag, "", "empty value: give one, or leave the option out for its default", value)
        if any(isinstance(v, float) and not math.isfinite(v) for v in items):  # every float option is a
            raise InputError.at(flag, "", "must be a positive number", value)  # quantity: money, hours, odds


#: Options naming one file a command writes (advisor.cli.options.output_path): none may name a file the
#: command reads, nor the file another of them writes. `predict spec.toml --plot spec.toml` replaced the
#: spec with a PNG, `--calibration cal.toml --html cal.toml` the calibration with HTML, and `--plot r.png
#: --html r.png` kept only the page.
OUTPUT_FILE_OPTIONS = ("--out", "--plot", "--html")


def check_output_paths(ctx: typer.Context, values: dict) -> None:
    """Refuse an output option (OUTPUT_FILE_OPTIONS) naming an input of the same command (any other path
    argument or option: the workload, --calibration, --measurements, logs) or another output's file; the
    same file under two names (a symlink, `./a` and `a`, a hard link) counts. Named by the option, one line."""
    import os
    from pathlib import Path

    from advisor.fileio import check_output_folder

    def same(a: Path, b: Path) -> bool:
        try:
            if os.path.realpath(a) == os.path.realpath(b):
                return True
            return a.exists() and b.exists() and os.path.samefile(a, b)
        except (OSError, ValueError):
            return False

    outputs, inputs = [], []
    for param in ctx.command.params:
        value = values.get(param.name)
        items = value if isinstance(value, (list, tuple)) else [value]
        paths = [v for v in items if isinstance(v, Path)]
        flag = next((o for o in param.opts if o.startswith("--")), None)
        (outputs if flag in OUTPUT_FILE_OPTIONS else inputs).extend(
            (flag or str(param.name).upper(), p) for p in paths)
    for i, (flag, path) in enumerate(outputs):
        if flag != "--out":  # --plot, --html: written last, after one another; calibrate creates --out's folder
            check_output_folder(path)
        clash = next(((f, p) for f, p in inputs if same(path, p)), None)
        if clash is not None:
            raise InputError.at(flag, "", f"the file {clash[0]} reads ({clash[1]}): writing it would overwrite the "
                                "input; give another path", str(path))
        clash = next(((f, p) for f, p in outputs[:i] if same(path, p)), None)
        if clash is not None:
            raise InputError.at(flag, "", f"the same file as {clash[0]}: one would overwrite the other; give "
                                "each its own path", str(path))


def _with_keyword(params: list[inspect.Parameter], extra: inspect.Parameter) -> list[inspect.Parameter]:
    """Parameters with `extra` appended as keyword-only (after *args if any, before **kwargs)."""
    tail = [p for p in params if p.kind is inspect.Parameter.VAR_KEYWORD]
    head = [p for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD]
    return [*head, extra, *tail]


def package_version() -> str:
    """The installed distribution's version; in a source checkout run without installing,
    `advisor.__version__` (pyproject reads its version from there, so the two agree)."""
    from importlib import metadata

    try:
        return metadata.version("advisor")
    except metadata.PackageNotFoundError:
        from advisor import __version__

        return __version__


def _show_version(value: bool) -> None:
    if value:
        print(f"advisor {package_version()}")
        raise typer.Exit()


app = AdvisorTyper(
    name="advisor",
    help="How many GPUs to rent, and on which billing tier: measured scaling, not the linear-scaling myth.",
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    add_completion=True,
    rich_markup_mode=None,
)


@app.callback()
def _root(
    version: Annotated[
        bool | None,
        typer.Option("--version", callback=_show_version, is_eager=True, help="Print advisor's version and exit."),
    ] = None,
) -> None:
    """How many GPUs to rent, and on which billing tier: measured scaling, not the linear-scaling myth."""


def fail(error: InputError) -> None:
    for line in error.lines():
        print(line, file=sys.stderr)
    raise SystemExit(EXIT_INPUT)


# click's exception base, wherever this typer keeps click (its own `typer._click` from typer 0.2x on,
# the `click` package before): found through a class typer exports, so no private import is needed.
ClickException = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


def usage_line(error: Exception) -> str:
    """A usage error (unknown option, missing or malformed value, typer's own range checks) as the
    one line every other bad input gets, `--option: message`: click's standalone form prints a
    usage block, a hint and a blank line around it, which scripts and the promise of one line per
    problem cannot read."""
    param = getattr(error, "param", None)
    name = param.opts[0] if param is not None and getattr(param, "opts", None) else None
    plain = isinstance(error, typer.BadParameter) and error.message and type(error).__name__ == "BadParameter"
    message = error.message if name is not None and plain else error.format_message()
    message = _plain_range(error.__cause__) or message
    ctx = getattr(error, "ctx", None)
    where = name or (ctx.command_path if ctx is not None else "advisor")
    return printable(f"{where}: {' '.join(str(message).split())}")


#: pydantic's wording for a typed option's range and number checks (typer 0.2x validates option
#: values with pydantic: `--max-nodes 0` read "Input should be greater than or equal to 1"), as the
#: spec's own messages word them: `--max-nodes: must be at least 1 (got 0)`.
_RANGE_WORDS = {
    "greater_than_equal": "must be at least {ge}",
    "greater_than": "must be above {gt}",
    "less_than_equal": "must be at most {le}",
    "less_than": "must be below {lt}",
    "int_parsing": "expected a whole number",
    "int_from_float": "expected a whole number",
    "int_parsing_size": "expected a whole number of at most 19 digits",
    "float_parsing": "expected a number",
    "finite_number": "must be a finite number",
}


def _finite(value: object) -> bool:
    """False for a typed 'nan', 'inf' or '-Infinity' (or such a float); True for anything else."""
    import math

    try:
        return math.isfinite(float(value))  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return True


def _plain_range(cause: BaseException | None) -> str | None:
    """`_RANGE_WORDS` for the first error of a pydantic ValidationError behind a BadParameter, with
    the value typed; None for anything else (choices keep their "Input should be 'a' or 'b'")."""
    errors = getattr(cause, "errors", None)
    if cause is None or not callable(errors) or type(cause).__name__ != "ValidationError":
        return None
    try:
        first = errors()[0]
    except Exception:
        return None
    words = _RANGE_WORDS.get(first.get("type"))
    if words is None:
        return None
    if "{" in words and not _finite(first.get("input")):  # NaN fails every bound: `--timeout nan` read
        words = _RANGE_WORDS["finite_number"]             # "must be at most 604800.0"
    try:
        text = words.format(**(first.get("ctx") or {}))
    except (KeyError, IndexError):
        return None
    return f"{text} (got {first.get('input')!r})"


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point. Bad input and usage errors exit 2 (click's convention) with one
    line each; typer.Exit codes (--help, --version) pass through."""
    try:
        code = app(args=argv, prog_name="advisor", standalone_mode=False)
    except InputError as error:
        fail(error)
    except ClickException as error:
        # `advisor` alone: click answers with the help text as its "error"; show it whole
        help_only = type(error).__name__ == "NoArgsIsHelpError"
        print(error.format_message() if help_only else usage_line(error), file=sys.stderr)
        raise SystemExit(error.exit_code) from None
    except typer.Abort:
        raise SystemExit(130) from None
    if isinstance(code, int) and code:
        raise SystemExit(code)
