"""The GPU catalog: the spellings people type, dense FP8 peaks, and a suggestion for a typo."""

import pytest

from advisor.catalog import find_gpu, gpus, suggest_gpus


@pytest.mark.parametrize("typed, name", [
    ("A100-SXM4-40GB", "A100-SXM-40GB"), ("NVIDIA H100 80GB HBM3", "H100-SXM"), ("h100", "H100-SXM"),
    ("nvidia-h100 sxm", "H100-SXM"), ("NVIDIA A100-SXM4-80GB", "A100-SXM"), ("Tesla V100-SXM2-32GB", "V100-SXM2"),
    ("AMD Instinct MI300X", "MI300X"), ("Tesla K80", "K80"), ("gb200", "GB200"), ("NVIDIA H100 PCIe", "H100-PCIe"),
])
def test_the_spellings_people_type_find_the_entry(typed, name):
    assert find_gpu(typed).name == name


def test_no_key_names_two_entries():
    from advisor.catalog import _key

    owner = {}
    for gpu in gpus():
        for key in {_key(a) for a in (gpu.name, *gpu.aliases)}:
            assert owner.setdefault(key, gpu.name) == gpu.name, key


@pytest.mark.parametrize("name, fp8_tflops", [
    ("H100-SXM", 1979), ("H100-PCIe", 1513), ("H100-NVL", 1670.5), ("H200", 1979), ("B200", 4500),
    ("GB200", 5000), ("MI300X", 2614.9), ("L40S", 733),
])
def test_dense_fp8_peak_is_half_the_sparsity_figure(name, fp8_tflops):
    gpu = find_gpu(name)
    assert gpu.peak_flops("fp8") == pytest.approx(fp8_tflops * 1e12)
    assert gpu.peak_flops("fp8") == pytest.approx(2 * gpu.peak_flops("bf16"), rel=0.02)


def test_gpus_without_fp8_say_so():
    for name in ("A100-SXM", "V100-SXM2", "T4", "K80", "P100"):
        assert find_gpu(name).peak_flops("fp8") is None
    assert find_gpu("K80").peak_flops("fp32") == pytest.approx(4.37e12)


def test_every_entry_cites_a_source_and_has_a_peak():
    for gpu in gpus():
        assert len(gpu.source) > 20 and gpu.peaks and gpu.memory_bytes > 1e9


def test_a_typo_gets_the_close_names_and_nonsense_none():
    assert suggest_gpus("H10O")[0] == "H100-SXM"
    assert suggest_gpus("B2OO")[0] == "B200"
    assert suggest_gpus("Z9000") == []


@pytest.mark.parametrize("name, precision, tflops, tensor", [
    ("V100-SXM2", "fp32", 15.7, False), ("V100-SXM2", "fp16", 125, True), ("V100-PCIe", "fp32", 14, False),
    ("T4", "fp32", 8.1, False), ("T4", "fp16", 65, True), ("P100", "fp16", 21.2, False), ("K80", "fp32", 4.37, False),
    ("A100-SXM", "fp32", 156, True), ("H100-SXM", "fp32", 494.7, True), ("B200", "fp32", 1125, True),
    ("MI300X", "fp32", 653.7, True),
])
def test_fp32_is_tf32_where_the_gpu_has_it_else_the_cuda_cores(name, precision, tflops, tensor):
    """Datasheets: V100 SXM2 15.7 TFLOPS single precision (no TF32 before Ampere), A100 TF32 156 dense,
    HGX B200 TF32 18 PFLOPS per 8 GPUs with sparsity (1.125 dense each); Pascal and Kepler have no tensor cores."""
    gpu = find_gpu(name)
    assert gpu.peak_flops(precision) == pytest.approx(tflops * 1e12)
    assert gpu.tensor_cores(precision) is tensor


def test_tf32_is_half_the_16_bit_tensor_peak_on_every_gpu_that_has_it():
    for gpu in gpus():
        if gpu.peaks.get("peak_tf32_flops") and gpu.peaks.get("peak_bf16_flops"):
            assert gpu.peak_flops("fp32") == pytest.approx(gpu.peak_flops("bf16") / 2, rel=0.02), gpu.name
