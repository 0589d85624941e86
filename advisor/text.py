"""Numbers and nouns in printed sentences, written once: "1 run", "8 GPUs", "1,330–1,530".

Every sentence, table title and plot label that puts a count before a noun uses `plural`; every
number a reader compares by eye uses `number` (plain notation, 3 significant digits, thousands
separators) and a range uses `interval` (or `span` for ends already formatted); money, hours,
percentages, bytes and multipliers use `usd`, `hours`, `percent`, `gigabytes` and `times`, here
and nowhere else. Scientific notation (`1.33e+03`) is kept only where plain notation would need
more than 4 zeros (below 1e-4 or from 1e15 up).
"""

from __future__ import annotations

import math


def number(x: float, digits: int = 3) -> str:
    """`x` to `digits` significant digits in plain notation: 1330.2 -> "1,330", 0.0123 -> "0.0123",
    2.50 -> "2.5", 1e-7 -> "1e-07"."""
    x = float(x)
    if not math.isfinite(x):
        return str(x)
    if x == 0:
        return "0"
    rounded = float(f"{x:.{digits}g}")
    if abs(rounded) < 1e-4 or abs(rounded) >= 1e15:
        return f"{x:.{digits}g}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(rounded))))
    text = f"{rounded:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def interval(low: float, high: float, digits: int = 3, unit: str = "") -> str:
    """A range in plain notation with an en dash: (1330, 1530) -> "1,330–1,530"; ends that print the
    same collapse to one value (1.91, 1.94 at 2 digits -> "1.9"). `unit` follows the range ("1.8–2.2x")."""
    return span(number(low, digits), number(high, digits)) + unit


def span(low: str, high: str) -> str:
    """Two formatted ends as a range with an en dash ("$12,019–$20,909"), one value when they read the same."""
    return low if low == high else f"{low}–{high}"


def usd(x: float) -> str:
    """Money: whole dollars from $100 ("$20,331"), cents below ("$9.88")."""
    return f"${x:,.0f}" if abs(x) >= 100 else f"${x:,.2f}"


def hours(h: float, days: bool = True) -> str:
    """A duration given in hours: "963 h (40.1 days)" from 72 h (`days=False`: "963 h", for table
    cells), "61.8 h", "5.4 min" below 0.1 h."""
    if h >= 72:
        return f"{h:,.0f} h ({h / 24:,.1f} days)" if days else f"{h:,.0f} h"
    return f"{number(h)} h" if h >= 0.1 else f"{h * 60:.2g} min"


def percent(p: float, digits: int = 0) -> str:
    """A fraction as a percentage: 0.471 -> "47%" (`digits` decimals: "47.1%")."""
    return f"{100 * p:.{digits}f}%"


def gigabytes(b: float, decimals: int = 1) -> str:
    """Bytes in GB (1e9, the GPU vendors' unit), one decimal: 1.045e11 -> "104.5 GB"."""
    return f"{b / 1e9:,.{decimals}f} GB"


def above(value: float, limit: float, fmt=gigabytes) -> tuple[str, str]:
    """(value, limit) formatted with enough decimals that a value above its limit reads above it:
    8.004e10 over 8e10 is ("80.04 GB", "80.00 GB"), not "80.0 GB" over "80.0 GB"."""
    for decimals in (1, 2, 3):
        a, b = fmt(value, decimals), fmt(limit, decimals)
        if a != b:
            return a, b
    return a, b


def times(x: float, decimals: int | None = None) -> str:
    """A multiplier: "19.1x", "0.936x" (3 significant digits), or with `decimals` "1.19x"; from 1,000
    on whole, with separators: 13196.78 -> "13,197x"."""
    if abs(x) >= 1000:
        return f"{x:,.0f}x"
    return f"{x:.{decimals}f}x" if decimals is not None else f"{number(x)}x"


def count(n: float) -> str:
    """A count of things: whole numbers with thousands separators (1024 -> "1,024"), else `number`."""
    return f"{int(n):,}" if float(n).is_integer() else number(n)


def plural(n: float, noun: str, many: str | None = None) -> str:
    """"1 run", "2 runs", "1 GPU", "0 nodes"; `many` for irregular plurals ("process", "processes")."""
    word = noun if n == 1 else (many if many is not None else noun + "s")
    return f"{count(n)} {word}"
