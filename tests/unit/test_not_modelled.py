"""A recipe switch advisor does not model (CPU offload) is refused with that reason, not a list of keys
(advisor.validation.NOT_MODELLED; docs/formats.md, "Not modelled")."""

from __future__ import annotations

import tomllib

import pytest

from advisor.errors import InputError
from advisor.spec import workload_from_dict
from conftest import WORKLOADS


@pytest.mark.parametrize("section, key", [("parallelism", "cpu_offload"), ("parallelism", "offload_optimizer"),
                                          ("model", "CPU_Offload")])
def test_offload_keys_say_they_are_not_modelled(section, key):
    spec = tomllib.loads((WORKLOADS / "llm7b.toml").read_text())
    spec[section][key] = True
    with pytest.raises(InputError) as e:
        workload_from_dict(spec, "w.toml")
    text = str(e.value)
    assert f"{section}.{key}" in text and "CPU offload is not modelled" in text and "known keys" not in text


def test_other_unknown_keys_keep_their_did_you_mean():
    spec = tomllib.loads((WORKLOADS / "llm7b.toml").read_text())
    spec["parallelism"]["reshard_after_forwrd"] = False
    with pytest.raises(InputError, match="did you mean 'reshard_after_forward'"):
        workload_from_dict(spec, "w.toml")
