"""Axis ticks and labels shared by advisor's plots, so every axis has readable labels.

matplotlib's log locator labels only powers of ten: an axis spanning less than a decade (tiny-cpu's
hours, rental-ethernet's dollars) gets one label or none. `log_ticks` picks 1-2-5 steps (finer
when the range is short) so every axis carries at least three labelled ticks, in the tables'
plain notation (`advisor.text.number`: 1,000,000 not 1e+06); `percent_axis` labels fractions as
the tables do (97%).
"""

from __future__ import annotations

import math

_STEPS = ((1.0,), (1.0, 2.0, 5.0), (1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0))


def log_ticks(low: float, high: float, at_least: int = 3, at_most: int = 8) -> list[float]:
    """Round tick values inside [low, high] on a log axis: powers of ten, else 1-2-5 steps, else
    finer; a range too short for any of those gets `at_least` log-spaced values with as few
    significant digits as keep them distinct (2 or more)."""
    if not (low > 0 and high > low and math.isfinite(high)):
        return [low] if low > 0 else []
    decades = range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1)
    for steps in _STEPS:
        ticks = [s * 10.0**d for d in decades for s in steps if low <= s * 10.0**d <= high]
        if at_least <= len(ticks) <= at_most:
            return ticks
        if len(ticks) > at_most:
            return ticks[:: math.ceil(len(ticks) / at_most)]
    values = [10 ** (math.log10(low) + (math.log10(high) - math.log10(low)) * (i + 0.5) / at_least)
              for i in range(at_least)]
    for digits in range(2, 17):  # as few digits as keep the ticks distinct and inside the range
        ticks = sorted({float(f"{v:.{digits}g}") for v in values})
        if len(ticks) == at_least and low <= ticks[0] and ticks[-1] <= high:
            return ticks
    return values


def set_log_axis(axis, low: float, high: float) -> None:
    """Put `log_ticks(low, high)` on a matplotlib axis (ax.xaxis / ax.yaxis), labelled plainly."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    from advisor.text import number

    axis.set_major_locator(FixedLocator(log_ticks(low, high)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: number(v)))
    axis.set_minor_formatter(NullFormatter())


def percent_axis(axis) -> None:
    """Label a fraction axis in percent, as the tables print efficiency and MFU."""
    from matplotlib.ticker import PercentFormatter

    axis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))


def padded(low: float, high: float, factor: float = 1.15) -> tuple[float, float]:
    """Log-axis limits a little outside the data, so edge points are not cut in half."""
    if low == high:
        return low / 2, high * 2
    return low / factor, high * factor
