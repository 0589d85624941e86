"""Quantities with units, parsed from spec strings into base units.

A spec value is either a plain number in base units (count, bytes, bytes/s, seconds, USD) or a
string with a unit. Conventions follow nccl-tests: GB = 1e9 bytes, and a bandwidth in bits is
divided by 8 (`"400 Gbit/s"` = 50e9 bytes/s). Binary sizes (KiB, MiB, GiB) are 2^10-based.
"""

from __future__ import annotations

import difflib
import math
import re
from decimal import Decimal

_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_QUANTITY = re.compile(rf"^\s*({_NUMBER})\s*([A-Za-zµ/]*)\s*$")

COUNT_UNITS = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}

SIZE_UNITS = {
    "": 1.0, "B": 1.0,
    "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
    "KiB": 2.0**10, "MiB": 2.0**20, "GiB": 2.0**30, "TiB": 2.0**40,
}

_BIT_PREFIX = {"": 1.0, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
BANDWIDTH_UNITS = {f"{unit}/s": scale for unit, scale in SIZE_UNITS.items() if unit}
for _p, _scale in _BIT_PREFIX.items():
    BANDWIDTH_UNITS[f"{_p}bit/s"] = _scale / 8
    BANDWIDTH_UNITS[f"{_p}b/s"] = _scale / 8
    BANDWIDTH_UNITS[f"{_p}bps"] = _scale / 8
BANDWIDTH_UNITS[""] = 1.0

TIME_UNITS = {
    "": 1.0, "ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0,
    "min": 60.0, "h": 3600.0, "hr": 3600.0, "d": 86400.0,
}

_EXAMPLES = {
    "count": "'6.7B', '250M', '32K' or a number",
    "size": "'64 MiB', '80 GB' or a number of bytes",
    "bandwidth": "'400 Gbit/s', '450 GB/s' or a number of bytes/s",
    "duration": "'10 us', '2 min', '1.5 h' or a number of seconds",
}


def _parse(value: object, units: dict[str, float], kind: str) -> float:
    if isinstance(value, bool):
        raise ValueError(f"expected a {kind} like {_EXAMPLES[kind]}")
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        match = _QUANTITY.match(value)
        if not match:
            raise ValueError(f"expected a {kind} like {_EXAMPLES[kind]}")
        unit = match.group(2)
        if unit not in units:
            close = difflib.get_close_matches(unit, [u for u in units if u], n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; expected a {kind} like {_EXAMPLES[kind]}"
            raise ValueError(f"unknown {kind} unit {unit!r}{hint}")
        # Decimal keeps '10 us' exactly 1e-05 rather than 9.999999999999999e-06.
        number = float(Decimal(match.group(1)) * Decimal(repr(units[unit])))
    else:
        raise ValueError(f"expected a {kind} like {_EXAMPLES[kind]}")
    if not math.isfinite(number):
        raise ValueError(f"{kind} must be a finite number")
    return number


def parse_count(value: object) -> float:
    """`"6.7B"` -> 6.7e9. K, M, B (or G), T are powers of 1000."""
    return _parse(value, COUNT_UNITS, "count")


def parse_size(value: object) -> float:
    """`"64 MiB"` -> 67108864 bytes; `"80 GB"` -> 8e10 bytes."""
    return _parse(value, SIZE_UNITS, "size")


def parse_bandwidth(value: object) -> float:
    """`"400 Gbit/s"` -> 5e10 bytes/s; `"450 GB/s"` -> 4.5e11 bytes/s."""
    return _parse(value, BANDWIDTH_UNITS, "bandwidth")


def parse_duration(value: object) -> float:
    """`"10 us"` -> 1e-5 s; `"2 min"` -> 120 s."""
    return _parse(value, TIME_UNITS, "duration")

