"""Writing a variant of a checked-in spec for a test: one helper for the corpus files that need it."""

from __future__ import annotations

import tomllib

import tomli_w


def edited_spec(tmp_path, base, name="spec.toml", **sections):
    """`base` with each section's keys updated (None removes a key), written to tmp_path / name."""
    doc = tomllib.loads(base.read_text())
    for section, fields in sections.items():
        table = doc.setdefault(section, {})
        for key, value in fields.items():
            table.pop(key, None) if value is None else table.__setitem__(key, value)
    path = tmp_path / name
    path.write_text(tomli_w.dumps(doc))
    return path
