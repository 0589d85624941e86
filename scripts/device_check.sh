#!/usr/bin/env bash
# Device check for the lent GPU machine (one H200, no network, Python 3.12 with torch+CUDA; see
# /work/.library/device/README.md): what differs on CUDA, in under 10 minutes, everything under $OUT.
#
#   here:   bash scripts/fetch_wheels.sh                 # wheels/ (git-ignored): pydantic & co
#   there:  OUT=/tmp/out bash scripts/device_check.sh    # (device tool: carry ["wheels"])
#
# 1. installs advisor's missing dependencies from wheels/ only (pip --no-index: nothing from a network);
# 2. precision and gradients on the GPU: a 7B-shaped bf16 proxy (2 layers) at N=1 under fsdp and ddp,
#    through the worker's own Rank: the dtype the first Linear computes in is asserted bf16, every
#    parameter has a gradient at the optimizer step in the full and the compute-only step, none is
#    left unsharded (tests/support/worker_harness.py);
# 3. what one GPU can check of multi-rank layouts: HSDP x TP at world 8 on torch's fake backend;
# 4. the nccl-tests-style probe loop between CUDA events (one rank: the timing path, not a busbw);
# 5. real `advisor calibrate` at N=1, fsdp and ddp in bf16 (Llama-2-7B shape, 4 proxy layers,
#    Touvron et al. 2023): the files must record bf16, TF32 ("high"), allocated and reserved peaks,
#    compute-only steps; `--warmup 0` must be refused on CUDA (exit 2);
# 6. the CUDA-only pytest tests.
# Output: $OUT/device_check.log, $OUT/checks.json, the calibration files, for docs/validation.md.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:?set OUT to a folder for the results}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
export PYTHONPATH="$PWD:$PWD/tests/support:$PWD/tests${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
exec > >(tee "$OUT/device_check.log") 2>&1

date -u +"start %Y-%m-%dT%H:%M:%SZ"
nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv || true
if ! "$PY" -c "import pydantic, typer, rich, tomli_w" 2>/dev/null; then
  ls wheels/*.whl >/dev/null 2>&1 || { echo "no wheels/: run scripts/fetch_wheels.sh where a package index answers, and carry wheels"; exit 1; }
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/advisor-site wheels/*.whl
  export PYTHONPATH="$PYTHONPATH:/tmp/advisor-site"
fi

spec() {  # spec NAME STRATEGY LAYERS EXTRA: a 7B-shaped bf16 workload at one GPU
  cat > "$OUT/$1.toml" <<TOML
name = "$1"
description = "7B-shaped transformer, $3 proxy layers, bf16, $2 (scripts/device_check.sh)"
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
strategy = "$2"
$4
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
steps = 5
proxy_layers = $3
TOML
}
spec precision-fsdp fsdp 2 ""
spec precision-ddp ddp 2 ""
spec fake-hsdp-tp hsdp 2 "tensor_parallel_degree = 2"
sed -i 's/^gpus = \[1\]/gpus = [8]/; s/^gpus_per_node = 8/gpus_per_node = 4/' "$OUT/fake-hsdp-tp.toml"
spec llm-proxy-fsdp fsdp 4 ""
spec llm-proxy-ddp ddp 4 ""

timeout 300 "$PY" - "$OUT" <<'PY'
import json, sys, pathlib
from worker_harness import single_case, fake_world_case
out = pathlib.Path(sys.argv[1])
checks = {}
for name in ("precision-fsdp", "precision-ddp"):
    case = checks[name] = single_case(out / f"{name}.toml", "auto", "cuda")
    for kind in ("full", "compute", "after"):
        step = case[kind]
        assert step["dtypes"] == ["bfloat16"], (name, kind, step)
        assert step["with_grad"] == [step["params"]] and step["leftover"] == 0, (name, kind, step)
case = checks["fake-hsdp-tp-8"] = fake_world_case(out / "fake-hsdp-tp.toml", 8, "auto", "cuda")
assert case["layout"] == "dp_shard=2, dp_replicate=2, tp=2, pp=1", case["layout"]
assert case["full"]["dtypes"] == ["bfloat16"] and case["compute"]["reduced"] == 0 < case["full"]["reduced"], case
(out / "checks.json").write_text(json.dumps(checks, indent=1))
print("precision, gradients and fake-backend layout: ok")
PY

timeout 120 "$PY" - <<'PY'
import os, socket, types
import torch, torch.distributed as dist
from advisor.calibrate.probes import probe_one
with socket.socket() as s:
    s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1")
torch.cuda.set_device(0)
dist.init_process_group("nccl", device_id=torch.device("cuda", 0))
rank = types.SimpleNamespace(torch=torch, dist=dist, cuda=True, device=torch.device("cuda", 0), rank=0, world=1,
                             local_world=1, barrier=lambda: dist.barrier(device_ids=[0]),
                             sync=lambda: torch.cuda.synchronize(), max_over_ranks=lambda v: v)
for size in (1 << 20, 1 << 26):
    row = probe_one(rank, "all_reduce", size, None, [0], "world")
    print(f"probe loop (1 rank, CUDA events): all_reduce {size} B {row['seconds'] * 1e6:.1f} us per call")
dist.destroy_process_group()
PY

day=$(date -u +%Y-%m-%d)
for s in fsdp ddp; do
  time timeout 240 "$PY" -m advisor calibrate "$OUT/llm-proxy-$s.toml" --gpus 1 --device cuda --timeout 200 \
    --notes "scripts/device_check.sh: single-GPU NCCL device check" --out "$OUT/llm-proxy-${s}_$day.toml" \
    | tee "$OUT/summary-$s.txt"
done
"$PY" - "$OUT" "$day" <<'PY'
import sys, tomllib
out, day = sys.argv[1], sys.argv[2]
for s in ("fsdp", "ddp"):
    with open(f"{out}/llm-proxy-{s}_{day}.toml", "rb") as f:
        cal = tomllib.load(f)
    env, (run,) = cal["environment"], cal["runs"]
    assert env["precision"] == "bf16" and env["float32_matmul_precision"] == "high", env
    assert run["peak_reserved_bytes"] >= run["peak_memory_bytes"] > 0 and run["compute_seconds"], run
    print(s, "bf16,", env["device"], env.get("compute_capability"), "driver", env.get("driver"),
          f"peak allocated {run['peak_memory_bytes'] / 2**30:.1f} GiB, reserved {run['peak_reserved_bytes'] / 2**30:.1f} GiB")
PY
set +e
"$PY" -m advisor calibrate "$OUT/llm-proxy-fsdp.toml" --gpus 1 --device cuda --warmup 0 --out "$OUT/refused.toml"
rc=$?
set -e
[ "$rc" = 2 ] && [ ! -e "$OUT/refused.toml" ] && echo "--warmup 0 on CUDA refused (exit 2)" || { echo "--warmup 0 not refused: $rc"; exit 1; }
if "$PY" -c "import pytest" 2>/dev/null; then
  timeout 200 "$PY" -m pytest -q -p no:cacheprovider -m gpu tests/calibration/test_calibrate_runs.py 2>&1 | tail -n 3
fi
date -u +"end %Y-%m-%dT%H:%M:%SZ"
