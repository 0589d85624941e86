"""`advisor init`: a commented spec the real loader accepts, never an overwrite, bad options named.

One case per exit status (0: a spec written; 2: never an overwrite) runs as a user runs it; the rest in-process."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cli_inprocess import invoke, run_in_process
from conftest import run_cli


def test_init_as_a_user_runs_it_writes_a_commented_spec_the_loader_accepts(tmp_path):
    from advisor.spec import load_workload

    r = run_cli("init", "--gpu", "H100-SXM", "--params", "13B", "--nodes-link", "4x200 Gbit/s", "--out", "job.toml",
                cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "job.toml" and "placeholder" in r.stderr
    text = (tmp_path / "job.toml").read_text()
    assert text.count("#") >= 10  # a spec to edit, with the source of every default
    w = load_workload(tmp_path / "job.toml")
    assert w.model.params == 13e9
    assert w.cluster.inter_node_bandwidth == pytest.approx(4 * 200e9 / 8)
    assert (w.model.layers, w.model.hidden, w.model.heads) == (40, 5120, 40)  # Llama-2-13B's config
    assert w.job.tokens == pytest.approx(20 * 13e9)  # Chinchilla: 20 tokens per parameter
    assert w.job.samples == pytest.approx(20 * 13e9 / w.model.seq_len)
    assert run_in_process("validate", "job.toml", cwd=tmp_path).returncode == 0


@pytest.mark.parametrize("params, layers", [("124M", 12), ("70 billion", 80), ("1.3b", 48), ("400B", 126)])
def test_init_takes_the_closest_published_shape(tmp_path, params, layers):
    from advisor.spec import load_workload

    r = run_in_process("init", "--params", params, "--out", "x.toml", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert load_workload(tmp_path / "x.toml").model.layers == layers


def test_init_as_a_user_runs_it_never_overwrites(tmp_path):
    (tmp_path / "my-job.toml").write_text("keep me\n")
    r = run_cli("init", cwd=tmp_path)
    assert r.returncode == 2 and "never overwrites" in r.stderr
    assert (tmp_path / "my-job.toml").read_text() == "keep me\n"


@pytest.mark.parametrize("args, line", [
    (("--strategy", "zero9"), "--strategy: Input should be 'ddp', 'fsdp'"),
    (("--nodes-link", "10 furlongs"), "--nodes-link: unknown bandwidth unit 'furlongs'"),
    (("--params", "lots"), "--params: expected a count like"),
    (("--name", "../evil"), "--name: must be lower-case letters"),
])
def test_init_bad_option_is_named_and_nothing_is_written(tmp_path, args, line):
    r = run_in_process("init", *args, "--out", "x.toml", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.startswith(line), r.stderr
    assert list(tmp_path.iterdir()) == []


def test_init_json(tmp_path):
    import json

    r = run_in_process("init", "--json", "--usd-per-gpu-hour", "2.5", "-q", cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == ""
    doc = json.loads(r.stdout)
    assert doc["file"] == "my-job.toml" and doc["workload"]["tiers"][0]["usd_per_gpu_hour"] == 2.5


def test_write_new_refuses_a_file_created_after_the_check(tmp_path):
    from advisor.cli.init import write_new
    from advisor.errors import InputError

    target = tmp_path / "spec.toml"
    write_new(target, "a = 1\n")
    with pytest.raises(InputError, match="never overwrites"):
        write_new(target, "a = 2\n")
    assert target.read_text() == "a = 1\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.toml"]  # no temporary file left


def test_init_into_a_missing_folder_is_one_line(tmp_path):
    r = run_in_process("init", "--out", "no/such/dir/x.toml", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.strip() == "no/such/dir/x.toml: cannot write: No such file or directory"


HOSTILE = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)


NAMES = st.from_regex(r"[a-z0-9][a-z0-9_-]{0,10}", fullmatch=True) | HOSTILE
GPUS = st.sampled_from(["H100-SXM", "A100-SXM", "my gpu"]) | HOSTILE
LINKS = st.sampled_from(["100 GbE", "4x200 Gbit/s", "800 gbit/s"]) | HOSTILE
PARAMS = st.sampled_from(["13B", "7b", "70 billion", "1e9"]) | HOSTILE


@settings(max_examples=80, deadline=None)
@given(name=NAMES, gpu=GPUS, link=LINKS, params=PARAMS)
def test_init_with_any_option_text_writes_a_valid_spec_or_one_error(name, gpu, link, params):
    import tempfile
    from pathlib import Path

    from advisor.spec import load_workload

    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "x.toml"
        code, _, err = invoke("init", "--name", name, "--gpu", gpu, "--nodes-link", link, "--params", params,
                                   "--intra-node-bandwidth", "450 GB/s", "--out", out)
        assert code in (0, 2), err
        if code == 2:
            assert not out.exists() and err and "Traceback" not in err
            return
        w = load_workload(out)  # quotes, newlines and brackets in options stay inside their strings
        assert (w.name, w.cluster.gpu) == (name, gpu)
