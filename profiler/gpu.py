"""GPU utilisation and memory through NVML, with a clean "no GPU" path.

One reading is cheap once NVML is open, but opening it is not (on a node without the
persistence daemon ``nvmlInit`` can take a second): :class:`NvmlSampler` opens it once and
reads as often as asked, which is how the harness samples a point while it runs;
:func:`gpu_probe` is the one-shot form. :func:`summarise_gpu` folds a point's readings
into one figure per GPU: the mean utilisation and the peak memory.
"""

from __future__ import annotations

import contextlib
import logging
import statistics
from collections.abc import Sequence
from types import ModuleType, TracebackType

log = logging.getLogger(__name__)

MB = 1024 * 1024


class NvmlSampler:
    """NVML opened once; calling the sampler gives one reading:
    ``{"gpus": n, "util_pct": [...], "mem_used_mb": [...], "names": [...]}``, or
    ``{"gpus": 0, "why": ...}`` when there is no NVML library or no GPU. Never raises."""

    def __init__(self) -> None:
        self._nvml: ModuleType | None = None
        self._handles: list = []
        self.names: list[str] = []
        self.why = ""

    def __enter__(self) -> NvmlSampler:
        try:
            import pynvml
        except ImportError:
            self.why = "nvidia-ml-py not installed"
            return self
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:   # NVMLError_LibraryNotFound (12) without a driver
            self.why = f"NVML: {exc}"
            return self
        self._nvml = pynvml
        try:
            n = pynvml.nvmlDeviceGetCount()
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
            self.names = [_text(pynvml.nvmlDeviceGetName(h)) for h in self._handles]
        except pynvml.NVMLError as exc:
            self.why = f"NVML: {exc}"
            self._handles = []
        if not self._handles and not self.why:
            self.why = "NVML: no GPU"
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._nvml is not None:
            with contextlib.suppress(self._nvml.NVMLError):
                self._nvml.nvmlShutdown()
            self._nvml = None

    def __call__(self) -> dict:
        nvml = self._nvml
        if nvml is None or not self._handles:
            return {"gpus": 0, "why": self.why or "NVML not opened"}
        try:
            util = [nvml.nvmlDeviceGetUtilizationRates(h).gpu for h in self._handles]
            mem = [nvml.nvmlDeviceGetMemoryInfo(h).used // MB for h in self._handles]
        except nvml.NVMLError as exc:
            return {"gpus": 0, "why": f"NVML: {exc}"}
        return {"gpus": len(self._handles), "util_pct": util, "mem_used_mb": mem,
                "names": list(self.names)}


def _text(name: bytes | str) -> str:
    """Older nvidia-ml-py releases give bytes, newer ones str."""
    return name.decode(errors="replace") if isinstance(name, bytes) else name


def gpu_probe() -> dict:
    """One reading with NVML opened and closed around it (see :class:`NvmlSampler`)."""
    with NvmlSampler() as sampler:
        return sampler()


def summarise_gpu(readings: Sequence[dict]) -> dict:
    """A point's GPU figures from its readings: per GPU the mean and the highest
    utilisation and the peak memory used, with how many readings they rest on. No
    readings with GPUs: the last reading's reason (or that there was none)."""
    good = [r for r in readings if r.get("gpus")]
    if not good:
        why = readings[-1].get("why", "no reading") if readings else "no reading taken"
        return {"gpus": 0, "why": why}
    n = min(r["gpus"] for r in good)
    util = [[r["util_pct"][i] for r in good] for i in range(n)]
    mem = [[r["mem_used_mb"][i] for r in good] for i in range(n)]
    out = {"gpus": n, "util_pct": [round(statistics.fmean(u), 1) for u in util],
           "util_pct_max": [max(u) for u in util], "mem_used_mb": [max(m) for m in mem],
           "samples": len(good)}
    if good[-1].get("names"):
        out["names"] = good[-1]["names"][:n]
    return out
