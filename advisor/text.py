"""Numbers and nouns in printed sentences, written once: "1 run", "8 GPUs", "1,330–1,530".

Every sentence, table title and plot label that puts a count before a noun uses `plural`; every
number a reader compares by eye uses `number` (plain notation, 3 significant digits, thousands
separators) and a range uses `interval`. Scientific notation (`1.33e+03`) is kept only where plain
notation would need more than 4 zeros (below 1e-4 or from 1e15 up).
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


def interval(low: float, high: float, digits: int = 3) -> str:
    """A range in plain notation with an en dash: (1330, 1530) -> "1,330–1,530"."""
    return f"{number(low, digits)}–{number(high, digits)}"


def count(n: float) -> str:
    """A count of things: whole numbers with thousands separators (1024 -> "1,024"), else `number`."""
    return f"{int(n):,}" if float(n).is_integer() else number(n)


def plural(n: float, noun: str, many: str | None = None) -> str:
    """"1 run", "2 runs", "1 GPU", "0 nodes"; `many` for irregular plurals ("process", "processes")."""
    word = noun if n == 1 else (many if many is not None else noun + "s")
    return f"{count(n)} {word}"
