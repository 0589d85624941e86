"""advisor as SkyPilot's time estimator: the job's seconds on each candidate `sky.Resources`.

SkyPilot's optimizer ranks candidate clouds and accelerators by cost = hourly price x estimated
run time, and without an estimator it assumes one hour for every candidate ("Defaulting the
task's estimated time to 1 hour"; skypilot-org/skypilot PR #277, `Task.set_time_estimator`). The
run time is exactly what advisor predicts:

    import sky
    from sky.optimizer import Optimizer
    from advisor.integrations.skypilot import attach

    task = sky.Task.from_yaml("train.yaml")  # num_nodes: 2; resources: any_of H100:8, H200:8, A100-80GB:8
    attach(task, "workloads/llm7b.toml")     # task.set_time_estimator(time_estimator(..., task.num_nodes))
    with sky.Dag() as dag:
        dag.add(task)
    Optimizer.optimize(dag)                  # its table now ranks the candidates by the job's cost

In-process on purpose: since SkyPilot 0.10 the client (`sky launch --dryrun`, `sky.optimize`)
sends the task to its API server as YAML, and a Python estimator does not travel with it
(sky/client/sdk.py `optimize`: `dag_utils.dump_dag_to_yaml_str`). docs/launch.md has the recipe.

The callable takes a Resources (duck-typed: only `.accelerators`, `{"H100": 8}`, is read) and returns
seconds for the whole job on `num_nodes` such nodes: the job's optimizer steps at that count
(advisor.planning.billing.job_steps, as `advisor recommend` counts them) x the predicted step time
there (advisor.planning.layout_choice.predict, as `advisor predict` gives it). SkyPilot passes no node count to an
estimator (its optimizer's FIXME), so `num_nodes` is fixed when the estimator is made (the task's).
- The spec's GPU (`cluster.gpu`, e.g. H100-SXM for SkyPilot's H100): the calibrated model, from
  `calibration` or the workload's checked-in calibration files.
- Another accelerator in advisor's catalog: the prior model with that GPU's catalog figures (peak
  FLOPs, memory, NVLink bandwidth; the spec's network), logged once per accelerator as
  uncalibrated. Not in the catalog, no accelerator, or a count the layout cannot split: infinity
  (never the cheapest), logged once.
Models are built once and answers cached per placement: the optimizer asks many times.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

#: SkyPilot accelerator names whose catalog entry is not found by name (SkyPilot's A100 is the 40 GB card).
SKY_TO_CATALOG = {"A100": "A100-40GB"}


def catalog_gpu(accelerator: str):
    """advisor's catalog entry for a SkyPilot accelerator name, or None."""
    from advisor.calibrate.launchers.skypilot import SKYPILOT_ACCELERATORS
    from advisor.catalog import find_gpu

    named = SKY_TO_CATALOG.get(accelerator)
    if named is None:
        named = next((c for c, s in SKYPILOT_ACCELERATORS.items() if s == accelerator), accelerator)
    return find_gpu(named)


def _prior_workload(w, gpu_name: str, per_node: int):
    """The spec with another GPU (catalog figures instead of the spec's card ones), re-validated."""
    from advisor.spec import workload_from_dict

    data = w.model_dump(mode="json", exclude_none=True)
    cluster = {k: v for k, v in data["cluster"].items()
               if k not in ("gpu_memory", "peak_flops", "intra_node_bandwidth", "intra_node_latency")}
    data["cluster"] = {**cluster, "gpu": gpu_name, "gpus_per_node": max(per_node, w.cluster.gpus_per_node)}
    return workload_from_dict(data)


def job_seconds(model, gpus: int, nodes: int) -> float:
    """Seconds of the whole job at `gpus` over `nodes`: job steps x predicted step time."""
    import numpy as np

    from advisor.errors import InputError
    from advisor.planning.billing import job_steps
    from advisor.planning.layout_choice import predict
    from advisor.topology.memory import memory_evidence

    try:
        prediction, _layouts, _why = predict(model, [gpus], [nodes], memory_evidence(model))
    except InputError:
        return math.inf
    steps = float(job_steps(model.workload, np.array([gpus]), model.baseline_gpus)[0])
    return steps * float(prediction.step_seconds[0])


class _Estimator:
    """The callable `time_estimator` returns (see the module docstring)."""

    def __init__(self, workload_path: str | Path, calibration, num_nodes: int):
        from advisor.catalog import find_gpu
        from advisor.spec import load_workload

        self.workload = load_workload(Path(workload_path))
        self.calibration, self.num_nodes = calibration, int(num_nodes)
        own = find_gpu(self.workload.cluster.gpu)
        self.own = own.name if own is not None else self.workload.cluster.gpu
        self.models: dict[str, object] = {}
        self.cache: dict[tuple[str, int], float] = {}
        self.said: set[str] = set()

    def _say(self, key: str, text: str) -> None:
        if key not in self.said:
            self.said.add(key)
            log.warning(text)

    def _model(self, gpu_name: str, per_node: int):
        if gpu_name not in self.models:
            from advisor.scaling.model import ScalingModel, build_model

            if gpu_name == self.own and per_node <= self.workload.cluster.gpus_per_node:
                self.models[gpu_name] = build_model(self.workload, calibration=self.calibration)
            else:
                self._say(gpu_name, f"advisor: {gpu_name} is not {self.workload.name}'s calibrated GPU "
                                    f"({self.own}): its time is the prior's, uncalibrated")
                self.models[gpu_name] = ScalingModel(_prior_workload(self.workload, gpu_name, per_node), None)
        return self.models[gpu_name]

    def __call__(self, resources) -> float:
        accelerators = getattr(resources, "accelerators", None) or {}
        if len(accelerators) != 1:
            self._say(f"none:{accelerators}", f"advisor: no single accelerator in {resources}: no estimate (inf)")
            return math.inf
        ((name, count),) = accelerators.items()
        gpu = catalog_gpu(str(name))
        if gpu is None or count < 1 or count != int(count):
            self._say(f"unknown:{name}", f"advisor: {name} is not in advisor's GPU catalog: no estimate (inf)")
            return math.inf
        key = (gpu.name, int(count))
        if key not in self.cache:
            model = self._model(gpu.name, int(count))
            self.cache[key] = job_seconds(model, int(count) * self.num_nodes, self.num_nodes)
        return self.cache[key]


def time_estimator(workload_path: str | Path, calibration=None, num_nodes: int = 1) -> Callable[[object], float]:
    """A callable for `sky.Task.set_time_estimator`: Resources -> seconds of the whole job on
    `num_nodes` nodes of it (module docstring). `calibration`: a file or list of files (default:
    the workload's checked-in calibrations). The spec is read now: a bad one raises InputError here."""
    return _Estimator(workload_path, calibration, num_nodes)


def attach(task, workload_path: str | Path, calibration=None):
    """`task.set_time_estimator(time_estimator(workload_path, calibration, task.num_nodes))`; returns the task."""
    return task.set_time_estimator(time_estimator(workload_path, calibration, task.num_nodes))
