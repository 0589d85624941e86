"""Commands about the spec itself: validate, schema, gpus."""

from __future__ import annotations

import math

from advisor.cli.app import app
from advisor.cli.options import JsonOpt, WorkloadArg
from advisor.cli.output import current
from advisor.errors import printable


@app.command()
def validate(workload: WorkloadArg, as_json: JsonOpt = False) -> None:
    """Check a workload spec; print one line per problem (exit 2) or a summary (exit 0)."""
    from advisor.errors import InputError
    from advisor.spec import load_workload

    out = current()
    try:
        w = load_workload(workload)
    except InputError as error:
        if as_json:  # the problems as data too; the lines still go to stderr, exit 2
            out.result({"file": str(workload), "valid": False, "problems": [_problem(p) for p in error.problems]})
        raise
    out.result(_validated(workload, w), lambda: print(printable(f"{workload}: valid: {_summary(w)}")))


def _summary(w) -> str:
    """One line: what is trained, how it is batched and sharded, on which cluster, which tiers."""
    from advisor.text import plural
    from advisor.units import format_count

    batch = (
        f"global batch {w.batch.global_samples:,}" if w.batch.policy == "fixed-global"
        else f"{plural(w.batch.per_gpu_samples, 'sample')} per GPU"
    )
    return (
        f"{w.name}: {format_count(w.model.params)} params, {w.parallelism.strategy}, {w.batch.policy} ({batch}), "
        f"{w.cluster.gpu} x{w.cluster.gpus_per_node} per node, up to {plural(w.cluster.max_gpus, 'GPU')}, "
        f"tiers: {', '.join(t.name for t in w.tiers)}"
    )


def _validated(path, w) -> dict:
    """The --json document of a valid spec: the spec with every default and unit resolved to base
    units, plus the numbers advisor derives from it."""
    return {
        "file": str(path),
        "valid": True,
        "summary": _summary(w),
        "workload": w.model_dump(mode="json"),
        "derived": {
            "training_flops_per_sample": w.model.training_flops_per_sample,
            "gradient_bytes": w.model.gradient_bytes,
            "intra_node_bandwidth": w.intra_node_bandwidth,
            "peak_flops": w.peak_flops,
        },
    }


def _problem(p) -> dict:
    doc = {"path": p.path, "message": p.message, "line": p.line()}
    if p.has_value:  # JSON has no NaN or inf, nor TOML's dates and tables: those are shown as text
        plain = isinstance(p.value, (str, int, bool, type(None))) or (
            isinstance(p.value, float) and math.isfinite(p.value))
        doc["got"] = p.value if plain else str(p.value)
    return doc


@app.command()
def schema(as_json: JsonOpt = False) -> None:
    """Print the JSON Schema of the workload spec, with every field's description (always JSON: --json is
    accepted, as on every command that prints a result, so a script may pass it to each)."""
    from advisor.spec import workload_json_schema

    current().result(workload_json_schema())


@app.command()
def gpus(as_json: JsonOpt = False) -> None:
    """List the GPU catalog: peak dense FLOP/s, memory, intra-node bandwidth, source."""
    from advisor.catalog import gpus as catalog

    rows = [
        {
            "name": g.name,
            "aliases": list(g.aliases),
            "memory_gb": g.memory_bytes / 1e9,
            "peak_fp8_tflops": _tera(g.peak_flops("fp8")),
            "peak_bf16_tflops": _tera(g.peak_flops("bf16")),
            "peak_fp16_tflops": _tera(g.peak_flops("fp16")),
            "peak_fp32_tflops": _tera(g.peak_flops("fp32")),
            "intra_node_gbps": g.intra_node_bandwidth / 1e9 if g.intra_node_bandwidth else None,
            "source": g.source,
        }
        for g in catalog()
    ]
    current().result({"gpus": rows}, lambda: _print_catalog(rows))


def _print_catalog(rows: list[dict]) -> None:
    from rich.table import Table

    table = Table(
        title="GPU catalog: dense peak FLOP/s (fp32 column: TF32 where the GPU has it)",
        caption="Sources per number: advisor/data/gpus.toml, or `advisor gpus --json`.",
    )
    for col in ("GPU", "memory GB", "fp8 TFLOP/s", "bf16 TFLOP/s", "fp16 TFLOP/s", "fp32/tf32 TFLOP/s",
                "intra-node GB/s"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(
            r["name"], f"{r['memory_gb']:.0f}", _fmt(r["peak_fp8_tflops"]), _fmt(r["peak_bf16_tflops"]),
            _fmt(r["peak_fp16_tflops"]),
            _fmt(r["peak_fp32_tflops"]), _fmt(r["intra_node_gbps"]),
        )
    current().console().print(table)


def _tera(x):
    return None if x is None else x / 1e12


def _fmt(x):
    return "-" if x is None else f"{x:g}"
