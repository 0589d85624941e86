"""pydantic validation errors as advisor's one-line problems: `FILE: dotted.path: message (got VALUE)`.

One translation for every validated file (workload specs, calibration files): bounds read as
`must be >= 0`, unknown keys get a "did you mean" from the keys the owning section accepts.
"""

from __future__ import annotations

import difflib

from pydantic import BaseModel, BeforeValidator, ValidationError

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


_BOUNDS = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<", "less_than_equal": "<="}


def _bound_message(kind: str, limit: object, parser) -> str:
    """`must be <= 100 TB/s`: a bound of a quantity with units (advisor.units) in a unit its field reads,
    not the base unit it was converted to (`must be <= 1e+14 (got '1e9 Gbit/s')` named no unit)."""
    from advisor.units import format_quantity

    said = format_quantity(float(limit), parser) if isinstance(limit, int | float) else None
    if said is None and isinstance(limit, float):  # 0, not 0.0; 1e+14, not 100000000000000
        said = int(limit) if limit.is_integer() and abs(limit) < 1e6 else f"{limit:g}"
    return f"must be {_BOUNDS[kind]} {limit if said is None else said}"


def _parser_at(root: type[BaseModel], loc: tuple):
    """The BeforeValidator function (a unit parser: advisor.units.parse_bandwidth, ...) of the field at `loc`."""
    owner = _model_at(root, loc)
    field = owner.model_fields.get(loc[-1]) if owner is not None and isinstance(loc[-1], str) else None
    stack = [*field.metadata, field.annotation] if field is not None else []
    while stack:
        item = stack.pop()
        if isinstance(item, BeforeValidator):
            return item.func
        stack += [*getattr(item, "__metadata__", ()), *getattr(item, "__args__", ())]
    return None


def validation_error(exc: ValidationError, file: str, root: type[BaseModel]) -> InputError:
    """One Problem per pydantic error of a `root` model read from `file`; a value no member of a union
    takes is one problem, not one per member (`setup."model.precision" = nan` printed four lines, under
    `.bool`, `.int`, `.float` and `.str`)."""
    problems: list[Problem] = []
    last: tuple | None = None
    for e in exc.errors():
        loc = tuple(e["loc"])
        owner = _model_at(root, loc) if len(loc) > 1 else root
        member = isinstance(loc[-1], str) and (owner is None or loc[-1] not in owner.model_fields)
        key = (loc[:-1], repr(e.get("input"))) if member else None
        if key is not None and key == last:
            problems[-1] = Problem(problems[-1].file, dotted_path(loc[:-1]), f"{problems[-1].message}; or "
                                   f"{_problem_for(e, str(file), root).message}", e.get("input"), True)
            continue
        problems.append(_problem_for(e, str(file), root))
        last = key
    return InputError(problems)


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


#: Recipe switches people copy from their configs that advisor does not model, by a word of the key:
#: the hint says so instead of listing the keys (docs/formats.md, "Not modelled").
NOT_MODELLED = {"offload": "CPU offload is not modelled (docs/formats.md, 'Not modelled')"}


def _unknown_key_hint(key: str, known: list[str]) -> str:
    """'; did you mean ...?', what is not modelled, or the keys the section accepts."""
    said = next((why for word, why in NOT_MODELLED.items() if word in key.lower()), None)
    if said:
        return f"; {said}"
    close = difflib.get_close_matches(key, known, n=1)
    return f"; did you mean '{close[0]}'?" if close else (f"; known keys: {', '.join(known)}" if known else "")


def _problem_for(error: dict, file: str, root: type[BaseModel]) -> Problem:
    loc = tuple(error["loc"])
    path = dotted_path(loc)
    kind = error["type"]
    value = error.get("input")
    if kind == "extra_forbidden":
        owner = _model_at(root, loc)
        known = [f.alias or k for k, f in owner.model_fields.items() if not f.exclude] if owner else []
        return Problem(file, path, f"unknown key{_unknown_key_hint(str(loc[-1]), known)}", value, True)
    if kind == "missing":
        return Problem(file, path, "required", None, False)
    message = error["msg"]
    ctx = error.get("ctx") or {}
    if kind in _BOUNDS:
        message = _bound_message(kind, next(iter(ctx.values()), ""), _parser_at(root, loc))
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
