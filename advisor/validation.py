"""pydantic validation errors as advisor's one-line problems: `FILE: dotted.path: message (got VALUE)`.

One translation for every validated file (workload specs, calibration files): bounds read as
`must be >= 0`, unknown keys get a "did you mean" from the keys the owning section accepts.
"""

from __future__ import annotations

import difflib

from pydantic import BaseModel, ValidationError

from advisor.errors import InputError, Problem, dotted_path

#: pydantic's type messages ("Input should be a valid integer", "Input should be a finite number") in the
#: words the rest of advisor's messages use; choices keep pydantic's "Input should be 'a', 'b' or 'c'",
#: which lists them.
_TYPE_WORDS = {
    "finite_number": "must be a finite number",
    "int_type": "must be a whole number", "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number", "int_parsing_size": "must be a whole number of at most 19 digits",
    "float_type": "must be a number", "float_parsing": "must be a number",
    "bool_type": "must be true or false", "bool_parsing": "must be true or false",
    "string_type": "must be text (in quotes)",
    "list_type": "must be a list ([...])", "tuple_type": "must be a list ([...])",
    "dict_type": "must be a table", "model_type": "must be a table", "model_attributes_type": "must be a table",
}


def validation_error(exc: ValidationError, file: str, root: type[BaseModel]) -> InputError:
    """One Problem per pydantic error of a `root` model read from `file`."""
    return InputError([_problem_for(e, str(file), root) for e in exc.errors()])


def _model_at(root: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    """The pydantic model class that owns the key at `loc` (for 'did you mean')."""
    cls: type[BaseModel] | None = root
    for item in loc[:-1]:
        if isinstance(item, int) or cls is None:
            continue
        field = cls.model_fields.get(item)
        if field is None:
            return None
        ann = field.annotation
        inner = getattr(ann, "__args__", None)
        candidates = [ann, *(inner or ())]
        cls = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
    return cls


def _problem_for(error: dict, file: str, root: type[BaseModel]) -> Problem:
    loc = tuple(error["loc"])
    path = dotted_path(loc)
    kind = error["type"]
    value = error.get("input")
    if kind == "extra_forbidden":
        owner = _model_at(root, loc)
        known = [f.alias or k for k, f in owner.model_fields.items() if not f.exclude] if owner else []
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else (f"; known keys: {', '.join(known)}" if known else "")
        return Problem(file, path, f"unknown key{hint}", value, True)
    if kind == "missing":
        return Problem(file, path, "required", None, False)
    message = error["msg"]
    ctx = error.get("ctx") or {}
    bounds = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<", "less_than_equal": "<="}
    if kind in bounds:
        limit = next(iter(ctx.values()), "")
        if isinstance(limit, float):  # 0, not 0.0; 1e+14, not 100000000000000
            limit = int(limit) if limit.is_integer() and abs(limit) < 1e6 else f"{limit:g}"
        message = f"must be {bounds[kind]} {limit}"
    if kind in ("too_long", "too_short", "string_too_long", "string_too_short"):
        from advisor.text import plural

        bound = ctx.get("max_length", ctx.get("min_length"))
        unit = "character" if isinstance(value, str) else "item"
        message = f"must have at {'most' if 'long' in kind else 'least'} {plural(bound, unit)}"
    if kind in _TYPE_WORDS:
        message = _TYPE_WORDS[kind]
    if kind == "value_error":
        message = message.removeprefix("Value error, ")
    if kind == "string_pattern_mismatch" and loc == ("name",):
        message = "must be lower-case letters, digits, '-' or '_', starting with a letter or digit"
    return Problem(file, path, message, value, True)
