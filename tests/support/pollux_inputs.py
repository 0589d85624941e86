"""Real step times for CLI tests: the Pollux OSDI'21 ResNet-50 (imagenet) placements trace, read
from ../shared/data in place (never copied into the project), written as a measurement CSV."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from conftest import SHARED_DATA

POLLUX = SHARED_DATA / "pollux-osdi21"


#: The Pollux testbed (4 x T4 per g4dn.12xlarge node, 50 Gbit/s) running ResNet-50 (25.6M params,
#: 4.1 GFLOPs forward, He et al. 2016) with data parallelism; batch, job and tiers filled in per test.
IMAGENET_SPEC = """name = "pollux-imagenet"
[model]
params = "25.6M"
flops_per_sample = 1.23e10
precision = "fp32"
[batch]
policy = "fixed-per-gpu"
per_gpu_samples = {local_bsz}
[parallelism]
strategy = "ddp"
[cluster]
gpu = "T4"
gpus_per_node = 4
max_gpus = 64
inter_node_bandwidth = "50 Gbit/s"
[job]
{job}
{tiers}"""

ON_DEMAND = """[[tiers]]
name = "on-demand"
usd_per_gpu_hour = 1.0
"""


def write_imagenet_inputs(folder: Path, local_bsz: int, job: str = "steps = 1000",
                          tiers: str = ON_DEMAND) -> tuple[Path, Path]:
    """(spec, CSV): the testbed spec as pollux-imagenet.toml, and the trace rows at `local_bsz`
    images per GPU (1-16 GPUs on 1-4 nodes) as imagenet.csv. Skips the test when the data is absent."""
    if not POLLUX.is_dir():
        pytest.skip("Pollux traces (../shared/data) not present")
    out = folder / "imagenet.csv"
    with (POLLUX / "imagenet" / "placements.csv").open() as f, out.open("w") as g:
        g.write("# Pollux (OSDI'21) trace, petuum/adaptdl osdi21-artifact simulator/traces/imagenet\n")
        g.write("gpus,nodes,step_seconds,global_batch,comm_seconds\n")
        for r in csv.DictReader(f):
            if r["local_bsz"] == str(local_bsz):
                n = sum(int(c) for c in r["placement"])
                g.write(f"{n},{len(r['placement'])},{r['step_time']},{local_bsz * n},{r['sync_time']}\n")
    spec = folder / "pollux-imagenet.toml"
    spec.write_text(IMAGENET_SPEC.format(local_bsz=local_bsz, job=job, tiers=tiers))
    return spec, out
