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
