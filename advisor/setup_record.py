"""How a calibration's `[setup]` is written and compared: the one rule for "is this the measurement's
setup?", shared by calibrate (advisor.calibrate.plan: resume and collect refuse a changed spec) and the
memory model (advisor.topology.memory: a measured peak of another model shape is not applied). It
imports nothing of advisor, so the lowest layer that needs it can."""

from __future__ import annotations

#: How a field the spec leaves unset is recorded (TOML has no null).
UNSET = "(unset)"


def setup_differences(recorded: dict, current: dict) -> list[tuple[str, object, object]]:
    """(field, recorded, current) for every recorded field whose value differs now. Fields the
    record lacks (added to the spec by a later advisor) are not compared; numbers compare by value."""
    out = []
    for key in sorted(recorded):
        old, new = recorded[key], current.get(key, UNSET)
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (old, new))
        if not ((old == new and type(old) is type(new)) or (numbers and float(old) == float(new))):
            out.append((key, old, new))
    return out
