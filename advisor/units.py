"""Quantities with units, parsed from spec strings into base units, and counts formatted back.

A spec value is either a plain number in base units (count, bytes/s, seconds, USD) or a string with
a unit. Conventions follow nccl-tests: GB = 1e9 bytes, and a bandwidth in bits is divided by 8
(`"400 Gbit/s"` = 50e9 bytes/s). Binary sizes (KiB/s, MiB/s, GiB/s) are 2^10-based.

Spellings users type from vendor pages and `ibstat`:

- links times a per-link speed: `"4x200 Gbit/s"`, `"8 x 400 Gb/s"` (also `×`, `*`);
- Ethernet ports by name: `"100 GbE"` = 100 Gbit/s (IEEE 802.3 names the speed in bits);
- counts by word or letter in either case: `"13b"`, `"13 billion"`, `"250m"`, `"32k"` (powers of
  1,000; `"4Ki"` = 4,096 for a sequence length meant in powers of two);
- money (`--budget`): `"20k"`, `"$20,000"`, `"1.5M USD"`; a deadline: `"3 days"`, `"36 h"`, or a
  plain number of hours.

Case rules. The prefix letter's case is ignored for counts and bandwidths: nobody trains a
millionth of a parameter or sends a millibit per second, so `"800 gbit/s"` is 800 Gbit/s and
`"250m"` 250 million. The bit/byte letter keeps its case (`b` bits, `B` bytes): that is a factor of 8.
Sizes (`cluster.gpu_memory`) have no bits, so any case reads as bytes (`"80 gb"` = 80 GB).
Durations stay case-sensitive (`ms` is not `Ms`).

Every parse error is a ValueError whose text becomes the spec's one-line message; numbers too
large for a float (`"1e1000000 Gbit/s"`, an integer of 400 digits) are refused the same way.
"""

from __future__ import annotations

import difflib
import math
import re
from decimal import Decimal, DecimalException

_NUMBER = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
# Optional "N x" multiplier (links x per-link speed), the number, the unit (letters, '/', 'µ').
# Applied to the stripped text only: a `\s*` at both ends of a pattern backtracks quadratically
# over a run of spaces. ASCII digits: `\d` would take '١' or '²' too.
_QUANTITY = re.compile(rf"(?:([0-9]+)\s*[xX×*]\s*)?({_NUMBER})\s*([A-Za-zµμ/]*)")
#: Longest quantity string read ("8 x 400 Gbit/s" has 14 characters); longer text is refused
#: before any pattern runs, so no spec or option value can make parsing slow.
MAX_QUANTITY_CHARS = 100

COUNT_UNITS = {
    "": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12,
    "thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12, "bn": 1e9,
    "Ki": 2.0**10, "Mi": 2.0**20,  # binary, for lengths written so: seq_len = "4Ki" is 4,096 ("4k" is 4,000)
}

#: Byte sizes; the building block of the byte bandwidths (GB/s, GiB/s).
SIZE_UNITS = {
    "B": 1.0, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
    "KiB": 2.0**10, "MiB": 2.0**20, "GiB": 2.0**30, "TiB": 2.0**40,
}

_PREFIXES = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
BANDWIDTH_UNITS = {"": 1.0}
BANDWIDTH_UNITS.update({f"{unit}/s": scale for unit, scale in SIZE_UNITS.items()})
BANDWIDTH_UNITS.update({f"{unit[:-1]}Bps": scale for unit, scale in SIZE_UNITS.items() if "i" not in unit})
for _p, _scale in _PREFIXES.items():
    for _suffix in ("bit/s", "bits/s", "b/s", "bps", "bE"):  # bE: Ethernet (100 GbE = 100 Gbit/s)
        if _p or _suffix != "bE":
            BANDWIDTH_UNITS[f"{_p}{_suffix}"] = _scale / 8

TIME_UNITS = {
    "": 1.0, "ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0,
    "min": 60.0, "h": 3600.0, "hr": 3600.0, "d": 86400.0,
}
# Words, singular and plural: "30 seconds", "2 mins", "1 hour", "3 days" (µ is U+00B5, μ U+03BC: both type as micro).
for _word, _seconds in (("second", 1.0), ("sec", 1.0), ("minute", 60.0), ("min", 60.0), ("hour", 3600.0),
                        ("hr", 3600.0), ("day", 86400.0)):
    TIME_UNITS.setdefault(_word, _seconds)
    TIME_UNITS[_word + "s"] = _seconds

_EXAMPLES = {
    "count": "'6.7B', '13 billion', '250M', '32K' or a number",
    "bandwidth": "'400 Gbit/s', '8x400 Gbit/s', '100 GbE', '450 GB/s' or a number of bytes/s",
    "duration": "'10 us', '2 min', '1.5 h' or a number of seconds",
    "size": "'80 GB', '40 GiB', '64 MiB' or a number of bytes",
}


def _fold_count(unit: str) -> str:
    return unit.lower()


def _fold_bandwidth(unit: str) -> str:
    """Upper-case the SI prefix letter only; bit/byte keep their case; Ethernet's 'E' any case."""
    if unit[:1] in ("k", "m", "g", "t"):
        unit = unit[0].upper() + unit[1:]
    if unit.lower().endswith("be") and unit[-2:-1] in ("b", "B"):
        unit = unit[:-2] + "bE"
    return unit


def _fold_size(unit: str) -> str:
    """Sizes have no bits: any case reads as bytes ("80 gb" = 80 GB, "96 gib" = 96 GiB)."""
    upper = unit.upper()
    return upper[:-2] + "iB" if upper.endswith("IB") else upper


_FOLDS = {"count": _fold_count, "bandwidth": _fold_bandwidth, "size": _fold_size}


def _scale(unit: str, units: dict[str, float], kind: str) -> float:
    if unit in units:
        return units[unit]
    fold = _FOLDS.get(kind)
    if fold is not None:
        folded = {fold(u): s for u, s in units.items()}
        if fold(unit) in folded:
            return folded[fold(unit)]
    names = [u for u in units if u]
    close = difflib.get_close_matches(fold(unit) if fold else unit, names, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else f"; expected a {kind} like {_EXAMPLES[kind]}"
    raise ValueError(f"unknown {kind} unit {unit!r}{hint}")


def _parse(value: object, units: dict[str, float], kind: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"expected a {kind} like {_EXAMPLES[kind]}")
    if isinstance(value, str):
        match = _QUANTITY.fullmatch(value.strip()) if len(value) <= MAX_QUANTITY_CHARS else None
        if not match:
            raise ValueError(f"expected a {kind} like {_EXAMPLES[kind]}")
        links, digits, unit = match.groups()
        if links is not None and kind != "bandwidth":
            raise ValueError(f"'N x' multiplies a bandwidth (links x speed), not a {kind}")
        scale = _scale(unit, units, kind)
        try:
            # Decimal keeps '10 us' exactly 1e-05 rather than 9.999999999999999e-06.
            exact = Decimal(digits) * Decimal(repr(scale)) * Decimal(links or 1)
            number = float(exact)
        except (DecimalException, OverflowError):
            number = math.inf
    else:
        try:
            number = float(value)
        except OverflowError:  # an integer too large for a float (TOML allows 64-bit; Python any)
            number = math.inf
    if math.isinf(number) and not (isinstance(value, float) and math.isinf(value)):
        raise ValueError(f"{kind} is too large (a 64-bit float ends at 1.8e308)")
    if not math.isfinite(number):
        raise ValueError(f"{kind} must be a finite number")
    return number + 0.0  # -0.0 (TOML's `-0.0`, "-0 s") is 0: it printed as "$-0.00" and "cost_usd": -0.0


def parse_count(value: object) -> float:
    """`"6.7B"` -> 6.7e9; `"13b"`, `"13 billion"` -> 13e9. K, M, B (or G), T are powers of 1000."""
    return _parse(value, COUNT_UNITS, "count")


def parse_bandwidth(value: object) -> float:
    """`"400 Gbit/s"` -> 5e10 bytes/s; `"4x200 Gbit/s"` -> 1e11; `"100 GbE"` -> 1.25e10; `"450 GB/s"` -> 4.5e11."""
    return _parse(value, BANDWIDTH_UNITS, "bandwidth")


def parse_size(value: object) -> float:
    """`"64 MiB"` -> 67108864 bytes; `"80 GB"` -> 8e10 bytes (`cluster.gpu_memory`)."""
    return _parse(value, {"": 1.0, **SIZE_UNITS}, "size")


def parse_duration(value: object) -> float:
    """`"10 us"` -> 1e-5 s; `"2 min"` -> 120 s."""
    return _parse(value, TIME_UNITS, "duration")


#: The units a bound is said back in, largest first (each one the parser reads): a bound of 1e14 bytes/s
#: printed bare ("must be <= 1e+14 (got '1e9 Gbit/s')") named neither the unit nor what the user wrote.
_SAID_UNITS = {
    "bandwidth": (("TB/s", 1e12), ("GB/s", 1e9), ("MB/s", 1e6), ("KB/s", 1e3), ("B/s", 1.0)),
    "size": (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3), ("B", 1.0)),
    "duration": (("h", 3600.0), ("min", 60.0), ("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)),
}
_KIND_OF_PARSER = {parse_bandwidth: "bandwidth", parse_size: "size", parse_duration: "duration"}


def format_quantity(value: float, parser) -> str | None:
    """`value` (in base units) with the largest unit that keeps it >= 1, as `parser` reads it back:
    1e14 bytes/s -> "100 TB/s", 60 s -> "1 min"; None for a parser without units (a count, a price)."""
    kind = _KIND_OF_PARSER.get(parser)
    if kind is None:
        return None
    units = _SAID_UNITS[kind]
    if value == 0:
        return "0 s" if kind == "duration" else f"0 {units[-1][0]}"
    unit, scale = next(((u, s) for u, s in units if abs(value) >= s), units[-1])
    return f"{value / scale:.4g} {unit}"


_COUNT_LETTERS = ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K"))


def format_count(value: float, digits: int = 3) -> str:
    """A count the way specs write it, with the largest letter that keeps it >= 1: 25.6e6 -> "25.6M",
    6.7e9 -> "6.7B", 950 -> "950". `parse_count` reads it back (to `digits` significant digits)."""
    if abs(value) >= 1e15:  # no thousands separator: parse_count reads "20000T", not "20,000T"
        return f"{value / 1e12:.0f}T"
    for scale, letter in _COUNT_LETTERS:
        # Round first, so 999.96e6 prints as "1B", not "1e+03M".
        if abs(float(f"{value:.{digits}g}")) >= scale:
            return f"{value / scale:.{digits}g}{letter}"
    return f"{value:.{digits}g}"


_MONEY_EXAMPLE = "'20000', '20k', '$20,000' or '1.5M USD'"


def parse_money(value: object) -> float:
    """US dollars: `20000`, `"20k"` -> 20000.0, `"$20,000"`, `"1.5M USD"` (the count letters of `parse_count`)."""
    if isinstance(value, str):
        text = value.strip().removeprefix("$").strip()
        text = re.sub(r"\s*(?:usd|dollars?)$", "", text, flags=re.IGNORECASE)
        value = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", text)  # thousands separators: "20,000"
    try:
        return parse_count(value)
    except ValueError as error:
        raise ValueError(f"expected an amount in USD like {_MONEY_EXAMPLE}") from error


def parse_hours(value: object) -> float:
    """A deadline in hours: a plain number is hours (`36`, `"36"`), a string with a unit any duration
    of `parse_duration`: `"3 days"` -> 72.0, `"90 min"` -> 1.5."""
    if isinstance(value, str):
        match = _QUANTITY.match(value)
        if match and not match.group(3) and match.group(1) is None:
            return _parse(match.group(2), {"": 1.0}, "duration")
        return parse_duration(value) / 3600
    return _parse(value, {"": 1.0}, "duration")


def parse_fraction(value: object) -> float:
    """A probability: `0.9` or `"90%"` -> 0.9."""
    try:
        if isinstance(value, str) and value.strip().endswith("%"):
            return _parse(value.strip()[:-1], {"": 1.0}, "count") / 100
        return _parse(value, {"": 1.0}, "count")
    except ValueError as error:  # the count grammar's message offered '6.7B' and '13 billion' for a probability
        raise ValueError("expected a probability like '0.9' or '90%'") from error
