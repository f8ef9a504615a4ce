"""The profiler's NVML probe: GPU figures where there is a GPU, a clean answer without."""

from __future__ import annotations

import builtins
import sys
import types
from pathlib import Path

import pytest

from profiler.gpu import NvmlSampler, gpu_probe, summarise_gpu


def test_the_probe_reports_gpus_or_says_why_not():
    res = gpu_probe()
    if Path("/dev/nvidiactl").exists():
        assert res["gpus"] >= 1 and len(res["util_pct"]) == len(res["mem_used_mb"]) == \
            res["gpus"], res
    else:
        # No driver: NVML's library is not found (NVMLError_LibraryNotFound), no crash.
        assert res["gpus"] == 0 and res["why"].startswith("NVML: "), res


def test_without_nvidia_ml_py_the_probe_says_so(monkeypatch):
    real_import = builtins.__import__

    def no_pynvml(name, *args, **kwargs):
        if name == "pynvml":
            raise ImportError("no pynvml")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pynvml)
    assert gpu_probe() == {"gpus": 0, "why": "nvidia-ml-py not installed"}


class FakeNvml(types.ModuleType):
    """nvidia-ml-py's calls the profiler makes, over GPUs whose utilisation and memory the
    test sets; it counts opens and closes, and can fail where the real one fails."""

    class NVMLError(Exception):
        pass

    def __init__(self, names=("NVIDIA H100 80GB HBM3",), fail_init=False) -> None:
        super().__init__("pynvml")
        self.names = list(names)
        self.util = [0] * len(names)
        self.mem_mb = [600] * len(names)
        self.fail_init, self.fail_reads = fail_init, False
        self.opened = self.closed = 0

    def nvmlInit(self):
        if self.fail_init:
            raise self.NVMLError("Driver Not Loaded")
        self.opened += 1

    def nvmlShutdown(self):
        self.closed += 1

    def nvmlDeviceGetCount(self):
        return len(self.names)

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetName(self, h):
        return self.names[h].encode()       # older releases give bytes

    def nvmlDeviceGetUtilizationRates(self, h):
        if self.fail_reads:
            raise self.NVMLError("GPU is lost")
        return types.SimpleNamespace(gpu=self.util[h], memory=0)

    def nvmlDeviceGetMemoryInfo(self, h):
        return types.SimpleNamespace(used=self.mem_mb[h] * 1024 * 1024, total=80 << 30)


@pytest.fixture
def nvml(monkeypatch) -> FakeNvml:
    fake = FakeNvml(names=("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"))
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    return fake


def test_the_sampler_opens_nvml_once_and_reads_every_gpu_each_call(nvml):
    with NvmlSampler() as sample:
        nvml.util, nvml.mem_mb = [10, 0], [1000, 600]
        first = sample()
        nvml.util, nvml.mem_mb = [90, 5], [3000, 600]
        second = sample()
    assert nvml.opened == 1 and nvml.closed == 1
    assert first == {"gpus": 2, "util_pct": [10, 0], "mem_used_mb": [1000, 600],
                     "names": ["NVIDIA H100 80GB HBM3"] * 2}
    assert second["util_pct"] == [90, 5] and second["mem_used_mb"] == [3000, 600]


def test_without_a_driver_the_sampler_says_why_and_never_raises(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(fail_init=True))
    with NvmlSampler() as sample:
        assert sample() == {"gpus": 0, "why": "NVML: Driver Not Loaded"}
    assert gpu_probe() == {"gpus": 0, "why": "NVML: Driver Not Loaded"}


def test_a_gpu_lost_mid_run_is_a_reading_with_the_reason(nvml):
    with NvmlSampler() as sample:
        nvml.fail_reads = True
        assert sample() == {"gpus": 0, "why": "NVML: GPU is lost"}


def test_a_points_readings_fold_into_mean_utilisation_and_peak_memory():
    readings = [{"gpus": 1, "util_pct": [u], "mem_used_mb": [m], "names": ["H100"]}
                for u, m in ((40, 2000), (80, 5000), (60, 4000))]
    # A failed reading in between (NVML hiccup) is left out, not averaged as zero.
    readings.insert(1, {"gpus": 0, "why": "NVML: timeout"})
    assert summarise_gpu(readings) == {"gpus": 1, "util_pct": [60.0], "util_pct_max": [80],
                                       "mem_used_mb": [5000], "samples": 3, "names": ["H100"]}
    assert summarise_gpu([{"gpus": 0, "why": "NVML: x"}]) == {"gpus": 0, "why": "NVML: x"}
    assert summarise_gpu([]) == {"gpus": 0, "why": "no reading taken"}
