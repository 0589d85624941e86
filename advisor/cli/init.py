"""`advisor init`: write a commented workload spec for the user to edit (as `accelerate config` does).

Every value the options do not give comes with its source in a comment: the transformer shape of
the published model closest in size, Chinchilla's 20 tokens per parameter, Llama 2's 4M-token
batch. The price is a placeholder and says so. The text is validated with the real spec loader
before anything is written, then written atomically; an existing file is never overwritten
(`write_new`: the check and the write are one link(2), so a file created meanwhile survives too).
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Annotated

import typer

from advisor.cli.app import app
from advisor.cli.options import JsonOpt, output_path
from advisor.cli.output import current
from advisor.errors import InputError, printable

#: Published transformer shapes (layers, hidden, heads), by parameter count. GPT-2: Radford et al.
#: 2019, Table 2 (HF configs gpt2..gpt2-xl); Llama 2: Touvron et al. 2023 (HF configs
#: meta-llama/Llama-2-*-hf); Llama 3.1 405B: Dubey et al. 2024, Table 3.
SHAPES = (
    (124e6, 12, 768, 12, "GPT-2 small"),
    (355e6, 24, 1024, 16, "GPT-2 medium"),
    (774e6, 36, 1280, 20, "GPT-2 large"),
    (1.5e9, 48, 1600, 25, "GPT-2 XL"),
    (6.7e9, 32, 4096, 32, "Llama-2-7B"),
    (13e9, 40, 5120, 40, "Llama-2-13B"),
    (69e9, 80, 8192, 64, "Llama-2-70B"),
    (405e9, 126, 16384, 128, "Llama-3.1-405B"),
)

#: Chinchilla-optimal training tokens per parameter (Hoffmann et al. 2022, Table 3: ~20).
TOKENS_PER_PARAM = 20
#: Tokens per optimizer step of Llama 2 pretraining (Touvron et al. 2023, §2.2: 4M tokens).
BATCH_TOKENS = 4 * 2**20

Opt = typer.Option
NODES_LINK_HELP = 'Bandwidth between nodes, all NICs together: "8x400 Gbit/s", "100 GbE".'


def _shape(params: float) -> tuple[int, int, int, str]:
    """The published shape closest in log(params) among those whose attention weights alone do not
    exceed it (advisor.spec.ModelSpec.attention_params: the spec refuses fewer parameters than that)."""
    from advisor.spec import ModelSpec

    def attention(s) -> float:
        return ModelSpec(params=s[0], layers=s[1], hidden=s[2], heads=s[3], seq_len=1).attention_params

    fit = [s for s in SHAPES if attention(s) <= params]
    if not fit:
        from advisor.units import format_count

        small = SHAPES[0]
        raise InputError.at("--params", "", f"below {format_count(attention(small))}, the attention weights of the "
                            f"smallest shape advisor init writes ({small[4]}: {small[1]} layers of {small[2]}): "
                            "write the spec's [model] section by hand", format_count(params))
    best = min(fit, key=lambda s: abs(math.log(s[0] / params)))
    return best[1], best[2], best[3], best[4]


def _toml(value) -> str:
    """One TOML value (strings quoted and escaped by tomli_w)."""
    import tomli_w

    return tomli_w.dumps({"v": value}).split("=", 1)[1].strip()


def _lines(rows: list) -> str:
    """TOML lines with their comments aligned: a row is `code`, or `(code, comment)`."""
    out = []
    for row in rows:
        code, comment = (row, "") if isinstance(row, str) else row
        out.append(f"{code:<39} # {comment}" if comment and code else f"# {comment}" if comment else code)
    return "\n".join(out) + "\n"


def spec_text(path: Path, name: str, gpu: str, params: str, nodes_link: str, gpus_per_node: int, max_gpus: int,
              strategy: str, seq_len: int, price: float | None, intra: str | None) -> str:
    """The commented spec. Values stay as the user typed them (units included)."""
    from advisor.text import plural
    from advisor.units import format_count, parse_count

    n = parse_count(params)
    shown = printable(str(path))  # a path may hold a newline: never one inside a TOML comment
    layers, hidden, heads, like = _shape(n)
    batch = max(1, BATCH_TOKENS // seq_len)
    intra_row = (f"intra_node_bandwidth = {_toml(intra)}", "per GPU, one direction") if intra is not None else (
        "", 'intra_node_bandwidth = "450 GB/s"    per GPU, one direction (default: `advisor gpus`)')
    return _lines([
        ("", f"Workload spec written by `advisor init`: edit it, then `advisor validate {shown}`."),
        ("", 'Every field: `advisor schema`. Quantities take units ("13B", "4x200 Gbit/s", "10 us").'),
        f"name = {_toml(name)}",
        'description = "EDIT: one line saying what is trained"',
        "",
        "[model]",
        f"params = {_toml(params)}",
        ("", f"Shape of {like}, the published model closest to {format_count(n)} parameters: EDIT to yours."),
        f"layers = {layers}",
        f"hidden = {hidden}",
        f"heads = {heads}",
        (f"seq_len = {seq_len}", "tokens per sample"),
        (f"precision = {_toml(_precision(gpu))}", "bf16 | fp16 | fp32: the first of them this GPU computes"),
        "",
        "[batch]",
        ('policy = "fixed-global"', "fixed-global (strong scaling) | fixed-per-gpu (weak scaling)"),
        (f"global_samples = {batch}", f"{plural(batch * seq_len, 'token')} per step (Llama 2: 4M tokens)"),
        ("micro_samples = 1", "per-GPU micro-batch; gradient accumulation follows"),
        "",
        "[parallelism]",
        (f"strategy = {_toml(strategy)}", "ddp | fsdp | hsdp | auto (advisor schema: the degrees)"),
        "",
        "[cluster]",
        (f"gpu = {_toml(gpu)}", "`advisor gpus` lists the catalog"),
        f"gpus_per_node = {gpus_per_node}",
        (f"max_gpus = {max_gpus}", "largest count to consider"),
        intra_row,
        (f"inter_node_bandwidth = {_toml(nodes_link)}", "per node, all NICs together"),
        ("", 'inter_node_latency = "10 us"'),
        "",
        "[job]",
        (f"tokens = {_toml(format_count(TOKENS_PER_PARAM * n))}",
         f"Chinchilla: {TOKENS_PER_PARAM} tokens per parameter; or samples = ..., steps = ..."),
        *_tiers_and_calibration(price, max_gpus, layers, gpus_per_node),
    ])


#: The precisions init writes, the first one the GPU has a peak for (advisor.catalog.GPU.peak_flops): bf16
#: where the GPU computes it, else fp16 (T4, V100: no bf16 tensor cores), else fp32 (K80). `--gpu T4` wrote
#: bf16, which the spec refuses on a T4, so init could write no spec at all for seven catalog GPUs.
PRECISIONS = ("bf16", "fp16", "fp32")


def _precision(gpu: str) -> str:
    """The first of PRECISIONS the catalog's `gpu` has a peak for; bf16 for a GPU the catalog lacks (the
    spec then asks for cluster.peak_flops under --gpu, whatever the precision)."""
    from advisor.catalog import find_gpu

    found = find_gpu(gpu)
    return next((p for p in PRECISIONS if found is None or found.peak_flops(p)), PRECISIONS[0])


def _calibration_counts(gpus_per_node: int, max_gpus: int) -> list[int]:
    """1, 2, 4, 8, 16 GPUs, those that split evenly over the nodes they fill (the spec's rule, as calibrate's);
    where some do not (3 per node: 4, 8, 16), one node and two whole nodes instead, so the spec still
    calibrates across nodes. Up to max_gpus."""
    from advisor.spec import nodes_filled, splits_evenly

    counts = {c for c in (1, 2, 4, 8, 16) if splits_evenly(c, nodes_filled(c, gpus_per_node))}
    if len(counts) < 5:
        counts |= {gpus_per_node, 2 * gpus_per_node}
    return sorted(c for c in counts if c <= max_gpus)


def _tiers_and_calibration(price: float | None, max_gpus: int, layers: int, gpus_per_node: int) -> list:
    """The spec's tail: the on-demand tier (a marked placeholder price unless given), a spot tier to
    uncomment, the counts to calibrate at."""
    price_note = "your price" if price is not None else "PLACEHOLDER: your provider's price per GPU-hour"
    return [
        "",
        "[[tiers]]",
        'name = "on-demand"',
        (f"usd_per_gpu_hour = {_toml(price if price is not None else 2.0)}", price_note),
        "",
        ("", "[[tiers]]                             a spot tier, if you have one (example values: EDIT)"),
        ("", 'name = "spot"'),
        ("", "usd_per_gpu_hour = 1.0"),
        ("", "preemptions_per_node_hour = 0.05       any node lost stops a synchronous job"),
        ("", 'restart = "10 min"'),
        ("", 'checkpoint = "2 min"'),
        "",
        "[calibration]",
        f"gpus = [{', '.join(map(str, _calibration_counts(gpus_per_node, max_gpus)))}]",
        (f"proxy_layers = {min(2, layers)}", "layers of the calibration proxy: the full model rarely fits one GPU"),
    ]


#: Spec fields each option writes, so a bad option is reported by its own name.
OPTION_OF = {
    "name": "--name", "model.params": "--params", "model.seq_len": "--seq-len", "parallelism.strategy": "--strategy",
    "cluster.gpu": "--gpu", "cluster.gpus_per_node": "--gpus-per-node", "cluster.max_gpus": "--max-gpus",
    "cluster.inter_node_bandwidth": "--nodes-link", "cluster.intra_node_bandwidth": "--intra-node-bandwidth",
    "tiers[0].usd_per_gpu_hour": "--usd-per-gpu-hour",
}


def _validated(text: str, path: Path):
    """The Workload the text describes, by the real loader; problems named by the option that caused them."""
    from advisor.errors import Problem
    from advisor.spec import workload_from_dict

    try:
        return workload_from_dict(tomllib.loads(text), path)
    except InputError as error:
        raise InputError([Problem(OPTION_OF.get(p.path, p.file), "" if p.path in OPTION_OF else p.path,
                                  p.message, p.value, p.has_value) for p in error.problems]) from None


def write_new(path: Path, text: str) -> None:
    """Write `text` to `path` only if `path` does not exist, never half-written, with the umask's
    mode (advisor.fileio.write_new_bytes: temp file, fsync, link(2))."""
    from advisor.fileio import write_new_bytes

    write_new_bytes(path, text.encode("utf-8"), "exists; advisor init never overwrites a file: choose another --out")


def _check_params(params: str) -> None:
    """--params must be a count the spec accepts (1 to MAX_PARAMS) before a shape is looked up."""
    from advisor.spec import MAX_PARAMS
    from advisor.units import parse_count

    try:
        n = parse_count(params)
    except ValueError as exc:
        raise InputError.at("--params", "", str(exc), params) from None
    if not 1 <= n <= MAX_PARAMS:
        raise InputError.at("--params", "", f"must be between 1 and {MAX_PARAMS:g} trainable parameters", params)


@app.command()
def init(
    out: Annotated[Path | None, Opt("--out", help="Spec to write (default: NAME.toml); never overwritten.",
                                    parser=output_path("--out", suffixes=(".toml",)))] = None,
    name: Annotated[str, Opt("--name", help="Workload name: lower-case letters, digits, '-', '_'.")] = "my-job",
    gpu: Annotated[str, Opt("--gpu", help="GPU model (`advisor gpus` lists the catalog).")] = "H100-SXM",
    params: Annotated[str, Opt("--params", help="Trainable parameters, e.g. 13B, \"13 billion\".")] = "7B",
    nodes_link: Annotated[str, Opt("--nodes-link", help=NODES_LINK_HELP)] = "8x400 Gbit/s",
    gpus_per_node: Annotated[int, Opt("--gpus-per-node", min=1, help="GPUs in one node.")] = 8,
    max_gpus: Annotated[int, Opt("--max-gpus", min=1, help="Largest GPU count to consider.")] = 1024,
    strategy: Annotated[str, Opt("--strategy", help="parallelism.strategy: ddp, fsdp, hsdp or auto.")] = "fsdp",
    seq_len: Annotated[int, Opt("--seq-len", min=1, help="Tokens per sample.")] = 4096,
    price: Annotated[float | None, Opt("--usd-per-gpu-hour", help="On-demand price (default: a placeholder).")] = None,
    intra: Annotated[str | None, Opt("--intra-node-bandwidth", help="Per GPU, in a node (default: catalog's).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Write a commented workload spec to edit, validated before it is written."""

    path = out if out is not None else Path(f"{name}.toml")
    if path.exists():
        raise InputError.at(path, "", "exists; advisor init never overwrites a file: choose another --out")
    _check_params(params)
    text = spec_text(path, name, gpu, params, nodes_link, gpus_per_node, max_gpus, strategy, seq_len, price, intra)
    workload = _validated(text, path)  # nothing is written unless the real loader accepts it
    write_new(path, text)
    output = current()
    shown = printable(str(path))  # a newline or escape in --out is written out, never sent to the terminal
    output.result({"file": str(path), "workload": workload.model_dump(mode="json")}, lambda: print(shown))
    placeholder = "" if price is not None else "the price is a placeholder; "
    output.note(f"wrote {shown}: {placeholder}edit the model shape and job size too, then `advisor validate {shown}`")
