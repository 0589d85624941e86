"""A fixed job for the physics tests (not the examples, which follow their sources): a 7B FSDP job on
H100 nodes, 450 GB/s NVLink at 3 us, 3200 Gbit/s of NICs per node at 10 us."""

from __future__ import annotations

from advisor.spec import workload_from_dict


def spec(**over):
    """The job, with `section__field=value` overrides."""
    data = {
        "name": "t",
        "model": {"params": "6.7B", "layers": 32, "hidden": 4096, "heads": 32, "seq_len": 4096, "precision": "bf16"},
        "batch": {"policy": "fixed-global", "global_samples": 1024, "micro_samples": 2},
        "parallelism": {"strategy": "fsdp"},
        "cluster": {"gpu": "H100-SXM", "gpus_per_node": 8, "max_gpus": 1024, "intra_node_bandwidth": "450 GB/s",
                    "intra_node_latency": "3 us", "inter_node_bandwidth": "3200 Gbit/s", "inter_node_latency": "10 us"},
        "job": {"samples": "250M"},
        "tiers": [{"name": "on-demand", "usd_per_gpu_hour": 2.64}],
    }
    for key, value in over.items():
        section, field = key.split("__")
        data[section][field] = value
    return workload_from_dict(data)


LLM7B = spec()
