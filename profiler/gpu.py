"""GPU utilisation and memory through NVML, with a clean "no GPU" path."""

from __future__ import annotations

import contextlib
import logging

log = logging.getLogger(__name__)


def gpu_probe() -> dict:
    """{"gpus": n, "util_pct": [...], "mem_used_mb": [...]}; {"gpus": 0, "why": ...} when
    there is no NVML library or no GPU. Never raises."""
    try:
        import pynvml
    except ImportError:
        return {"gpus": 0, "why": "nvidia-ml-py not installed"}
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:   # NVMLError_LibraryNotFound (12) without a driver
        return {"gpus": 0, "why": f"NVML: {exc}"}
    try:
        n = pynvml.nvmlDeviceGetCount()
        util, mem = [], []
        for i in range(n):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            util.append(pynvml.nvmlDeviceGetUtilizationRates(h).gpu)
            mem.append(pynvml.nvmlDeviceGetMemoryInfo(h).used // (1024 * 1024))
        return {"gpus": n, "util_pct": util, "mem_used_mb": mem}
    except pynvml.NVMLError as exc:
        return {"gpus": 0, "why": f"NVML: {exc}"}
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()
