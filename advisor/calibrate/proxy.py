"""The calibration proxy model (imports torch: only the worker imports this module).

A GPT-2-style decoder (Radford et al. 2019; the block of karpathy/nanoGPT `model.py`): token and
position embeddings, `layers` pre-norm blocks (causal self-attention through
`F.scaled_dot_product_attention`, a 4x-wide GELU MLP), a final LayerNorm and an output head tied
to the token embedding. Parameters: V·h + T·h + L·(12·h² + 13·h) + 2·h, the count that
`params_of_transformer` states without building the model. Specs without a transformer shape get
an MLP of square layers (plan.ProxyShape) with the declared parameter count and FLOPs per sample.
"""

from __future__ import annotations

from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from advisor.calibrate.plan import ProxyShape
from advisor.calibrate.plan import params_of_transformer as params_of_transformer  # torch-free, for the planner


class Block(nn.Module):
    """Separate q, k, v projections (same parameters as nanoGPT's fused c_attn) so that tensor
    parallelism can split them by heads: `TP_PLAN` is Megatron-LM's split (Shoeybi et al. 2019 §3):
    column-parallel q/k/v and MLP up-projection, row-parallel attention output and MLP down-projection,
    one all-reduce after each row-parallel layer in the forward, one per column-parallel input in the
    backward. Under TP each rank holds heads / tp heads; `forward` reads the local width."""

    TP_PLAN: ClassVar[dict[str, str]] = {"q": "colwise", "k": "colwise", "v": "colwise", "proj": "rowwise",
                                         "fc": "colwise", "out": "rowwise"}

    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.head_dim = hidden // heads
        self.ln1 = nn.LayerNorm(hidden)
        self.q = nn.Linear(hidden, hidden)
        self.k = nn.Linear(hidden, hidden)
        self.v = nn.Linear(hidden, hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.fc = nn.Linear(hidden, 4 * hidden)
        self.out = nn.Linear(4 * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        h = self.ln1(x)
        q, k, v = (z(h).view(b, t, -1, self.head_dim).transpose(1, 2) for z in (self.q, self.k, self.v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, -1))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class TransformerProxy(nn.Module):
    def __init__(self, shape: ProxyShape):
        super().__init__()
        self.tok = nn.Embedding(shape.vocab, shape.hidden)
        self.pos = nn.Embedding(shape.seq_len, shape.hidden)
        self.blocks = nn.ModuleList(Block(shape.hidden, shape.heads) for _ in range(shape.layers))
        self.ln_f = nn.LayerNorm(shape.hidden)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        inputs, targets = tokens[:, :-1], tokens[:, 1:]
        positions = torch.arange(inputs.shape[1], device=tokens.device)
        x = self.tok(inputs) + self.pos(positions)
        for block in self.blocks:
            x = block(x)
        logits = self.ln_f(x) @ self.tok.weight.t()  # tied output head
        return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())


class MlpProxy(nn.Module):
    def __init__(self, shape: ProxyShape):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(shape.hidden, shape.hidden) for _ in range(shape.layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = F.gelu(block(x))
        return x.float().pow(2).mean()


class StageProxy(nn.Module):
    """Blocks [lo, hi) of the proxy for one pipeline stage (torchtitan's manual pipeline split): the
    first stage also embeds the tokens, the last adds the final norm and the output head, untied
    (tied weights cannot span stages; the head adds vocab x hidden parameters to the proxy)."""

    def __init__(self, shape: ProxyShape, lo: int, hi: int, first: bool, last: bool):
        super().__init__()
        self.tok = nn.Embedding(shape.vocab, shape.hidden) if first else None
        self.pos = nn.Embedding(shape.seq_len, shape.hidden) if first else None
        self.blocks = nn.ModuleList(Block(shape.hidden, shape.heads) for _ in range(lo, hi))
        self.ln_f = nn.LayerNorm(shape.hidden) if last else None
        self.head = nn.Linear(shape.hidden, shape.vocab, bias=False) if last else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.tok is not None:
            x = self.tok(x) + self.pos(torch.arange(x.shape[1], device=x.device))
        for block in self.blocks:
            x = block(x)
        if self.head is not None:
            x = self.head(self.ln_f(x)).float()
        return x


def pipeline_stages(shape: ProxyShape, stages: int, ranks: int, rank: int) -> list[tuple[int, StageProxy]]:
    """(stage index, module) of the stages pipeline rank `rank` holds: `stages` = ranks x model chunks,
    stage i on rank i mod ranks (the looped placement of torch's interleaved 1F1B), layers split as
    evenly as possible (the first stages take the remainder)."""
    base, extra = divmod(shape.layers, stages)
    bounds = [0]
    for i in range(stages):
        bounds.append(bounds[-1] + base + (1 if i < extra else 0))
    return [(i, StageProxy(shape, bounds[i], bounds[i + 1], i == 0, i == stages - 1))
            for i in range(rank, stages, ranks)]


def pipeline_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def tensor_parallel(model: nn.Module, mesh) -> nn.Module:
    """Split every block over the 1-D tensor-parallel `mesh` with torch.distributed.tensor.parallel
    (Block.TP_PLAN); embeddings, norms and the head stay replicated (identical on every TP rank)."""
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    styles = {"colwise": ColwiseParallel, "rowwise": RowwiseParallel}
    for block in model.blocks:
        parallelize_module(block, mesh, {name: styles[kind]() for name, kind in Block.TP_PLAN.items()})
    return model


def build_proxy(shape: ProxyShape) -> nn.Module:
    return TransformerProxy(shape) if shape.kind == "transformer" else MlpProxy(shape)


def sample_inputs(shape: ProxyShape, samples: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """One micro-batch of random inputs: token ids (seq_len + 1 per sample, shifted for targets)
    for the transformer, rows of activations for the MLP. Content does not change the timing."""
    if shape.kind == "transformer":
        return torch.randint(0, shape.vocab, (samples, shape.seq_len + 1), device=device)
    return torch.randn(samples, shape.seq_len, shape.hidden, device=device, dtype=dtype)
