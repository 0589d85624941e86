"""Bring your own numbers: turn other tools' output into advisor calibration data.

- `nccl_tests`: nccl-tests' all_reduce_perf / reduce_scatter_perf / all_gather_perf stdout ->
  [[collectives]] (`advisor import nccl-tests`).
- `torchtitan`: torchtitan training-log lines -> one [[runs]] entry (`advisor import torchtitan`).
"""
