"""The profiler's NVML probe: GPU figures where there is a GPU, a clean answer without."""

from __future__ import annotations

import builtins
from pathlib import Path

from profiler.gpu import gpu_probe


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
