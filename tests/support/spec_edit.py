"""Writing a variant of a checked-in spec or calibration for a test: one place for the corpus files that need it."""

from __future__ import annotations

import tomllib

import tomli_w


def edited_spec(tmp_path, base, name="spec.toml", **sections):
    """`base` with each section's keys updated (None removes a key), written to tmp_path / name."""
    def update(doc):
        for section, fields in sections.items():
            table = doc.setdefault(section, {})
            for key, value in fields.items():
                table.pop(key, None) if value is None else table.__setitem__(key, value)

    return edited_toml(base, update, tmp_path / name)


def edited_toml(base, edit, path):
    """`base` read, `edit(document)` applied in place, written to `path`; returns `path`."""
    doc = tomllib.loads(base.read_text())
    edit(doc)
    path.write_text(tomli_w.dumps(doc))
    return path
