#!/usr/bin/env bash
# Device check for a machine with an NVIDIA GPU (written for one H200): a real single-GPU NCCL
# calibration of an LLM proxy, in one go, everything it writes under $OUT.
#
#   OUT=/tmp/out bash scripts/device_check.sh
#
# The proxy: Llama-2-7B's shape (Touvron et al. 2023: hidden 4096, 32 heads, 32 layers) cut to
# 4 proxy layers, 2048-token samples, bf16, FSDP2, global batch 16 in micro-batches of 2 (8
# accumulation steps per optimizer step). Expect a few minutes in all: model build, 3 warm-up,
# 10 timed and 10 compute-only steps. Needs torch with CUDA already installed (the machine may
# have no package index); advisor itself is used from this checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:?set OUT to a folder for the results}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec > >(tee "$OUT/device_check.log") 2>&1

date -u +"start %Y-%m-%dT%H:%M:%SZ"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
"$PY" - <<'PY'
import torch, sys
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)
assert torch.cuda.is_available(), "torch sees no CUDA GPU"
print("device", torch.cuda.get_device_name(0), "nccl", torch.cuda.nccl.version())
PY
"$PY" -c "import pydantic, typer, rich, tomli_w" 2>/dev/null \
  || "$PY" -m pip install -q pydantic typer rich tomli-w \
  || { echo "advisor's dependencies (pydantic typer rich tomli-w) are missing and cannot be installed"; exit 1; }

cat > "$OUT/llm-proxy.toml" <<'TOML'
# Llama-2-7B shape, 4 of 32 layers as the calibration proxy, on one GPU (scripts/device_check.sh).
name = "llm-proxy"
description = "7B-shaped transformer, 4 proxy layers, bf16, FSDP2, single-GPU NCCL device check"

[model]
params = "6.7B"
layers = 32
hidden = 4096
heads = 32
seq_len = 2048
vocab = 32000
precision = "bf16"

[batch]
policy = "fixed-global"
global_samples = 16
micro_samples = 2

[parallelism]
strategy = "fsdp"

[cluster]
gpu = "H200"
gpus_per_node = 8
max_gpus = 64
intra_node_bandwidth = "450 GB/s"
inter_node_bandwidth = "3200 Gbit/s"

[job]
steps = 1000

[[tiers]]
name = "on-demand"
usd_per_gpu_hour = 3.50

[calibration]
gpus = [1]
warmup_steps = 3
steps = 10
proxy_layers = 4
TOML

"$PY" -m advisor validate "$OUT/llm-proxy.toml"
time "$PY" -m advisor calibrate "$OUT/llm-proxy.toml" --gpus 1 --device cuda --timeout 420 \
  --notes "scripts/device_check.sh: single-GPU NCCL device check" \
  --out "$OUT/llm-proxy_$(date -u +%Y-%m-%d).toml" | tee "$OUT/summary.txt"
# The GPU-only test (skips without CUDA), if pytest is there.
if "$PY" -c "import pytest" 2>/dev/null; then
  "$PY" -m pytest -q -m gpu tests/test_calibrate_runs.py 2>&1 | tail -n 3
fi
date -u +"end %Y-%m-%dT%H:%M:%SZ"
