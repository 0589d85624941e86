"""advisor.scaling.ceiling by hand: the shortest physical step from measured per-GPU throughput."""

from __future__ import annotations

import numpy as np
import pytest

from advisor.scaling.ceiling import NOISE, Ceiling, superlinear_ratio
from advisor.scaling.fitting import FitData


def _data(gpus, batch, step) -> FitData:
    g = np.asarray(gpus, float)
    return FitData(gpus=g, nodes=np.ones_like(g), batch=np.asarray(batch, float), step=np.asarray(step, float),
                   comm=np.full_like(g, np.nan), count=np.ones_like(g))


def test_the_floor_is_the_best_rate_at_or_below_n_unless_n_does_more_work_per_gpu_than_all_of_them():
    # rates (samples/s/GPU): 1 GPU 64/1.0 = 64 (64 per GPU); 4 GPUs 256/(4 x 0.5) = 128 (64 per GPU);
    # 8 GPUs 160/(8 x 0.25) = 80 (20 per GPU)
    c = Ceiling.of(_data([1, 4, 8], [64, 256, 160], [1.0, 0.5, 0.25]))
    floor = c.step_floor(np.array([2.0, 16.0, 16.0, 16.0, 0.5]), np.array([128.0, 160.0, 1024.0, 1040.0, 32.0]))
    # 2 GPUs: only N=1 is below -> 128 / (2 x 64 x 1.05); 16 GPUs at 10 or 64 per GPU: N=4's 128 ->
    # 160 / (16 x 128 x 1.05), 1024 / (16 x 128 x 1.05); at 65 per GPU, more than any row ran: none; below N=1: none
    assert floor == pytest.approx([128 / (2 * 64 * 1.05), 160 / (16 * 128 * 1.05), 1024 / (16 * 128 * 1.05), 0, 0])


def test_the_reference_count_moves_only_beyond_the_noise():
    assert Ceiling.of(_data([1, 2], [1, 2], [1.0, 1.0 / (1 + NOISE / 2)])).reference_count() == 1
    assert Ceiling.of(_data([1, 2, 4], [1, 2, 4], [1.0, 0.8, 0.9])).reference_count() == 2
    assert Ceiling.of(_data([], [], [])).reference_count() is None


def test_superlinear_ratio_is_the_ratio_above_one_plus_noise_only():
    assert superlinear_ratio(1.04, 1.0) is None and superlinear_ratio(1.2, 1.0) == pytest.approx(1.2)
    assert superlinear_ratio(1.2, 1.0, noise=0.3) is None
