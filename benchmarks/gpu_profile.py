"""The profiler on real PyTorch training, with no Slurm: how much each kind of job gains
from CPU cores on this machine's GPU.

Runs the project's profiler harness (profiler.harness.measure, what ``synergy profile run``
measures with inside a Slurm job) on the three programs of benchmarks/gpu_workloads.py
(ResNet-18 on JPEGs it writes itself, a small GPT on token ids, M5 on waveforms), at
1, 2, 4, 8, 12 and 16 cores with all memory (the page cache holds the data). Each point
is a fresh process: cores limited as the harness limits them (an affinity mask of k cores,
k - 1 data-loader workers, one thread each; plus a CFS quota of k cores where a cgroup can
be made here, else the mask alone, and the output says which and why), warm-up steps
dropped, then ``--point-s`` seconds measured while NVML is read every half second. The
most-cores point is measured twice, to show two runs agree.

Per model it writes the profile in the store's format (``<model>.profile.json``, the
shape ``synergy profile import`` reads, and the same in ``profiles.db``), the class the
measured use implies (synergy_slurm.whatif.infer's rule at ``--fair-cores``), a PNG of
speedup against cores beside the paper's V100 profile of the same kind of model, and
prints one line per point; its last line is one JSON object.

    python benchmarks/gpu_profile.py --out DIR                      # the GPU machine, ~5 min
    python benchmarks/gpu_profile.py --device cpu --quick --out DIR  # the same code on CPUs

It imports only what the GPU machine has (torch, torchvision, nvidia-ml-py, psutil, numpy,
Pillow) and the parts of synergy_slurm that need nothing more; the plot is drawn with
Pillow, not matplotlib.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shutil
import sys
import tempfile
import time
import wave
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from profiler.cpulimit import QuotaUnavailable, quota_group  # noqa: E402
from profiler.gpu import NvmlSampler  # noqa: E402
from profiler.harness import MeasureError, Measurement, PointConfig, measure  # noqa: E402
from synergy_slurm.core import Profile, profiles_to_doc  # noqa: E402
from synergy_slurm.profiles.build import build_profile  # noqa: E402
from synergy_slurm.profiles.files import load_profiles  # noqa: E402
from synergy_slurm.profiles.store import ProfileStore  # noqa: E402
from synergy_slurm.whatif.infer import class_of_use  # noqa: E402

log = logging.getLogger("gpu_profile")
WORKLOADS = ROOT / "benchmarks" / "gpu_workloads.py"
PAPER_PROFILES = ROOT / "synergy_slurm" / "data" / "model_profiles.json"
MODELS = ("resnet18", "transformer", "m5")
PAPER_MODEL = {"resnet18": "res18", "transformer": "transformer", "m5": "m5"}


@dataclass(frozen=True)
class Plan:
    """What to measure and how long: the GPU sizes, or ``--quick`` ones for CPUs."""

    device: str
    quick: bool
    points: tuple[int, ...]
    point_s: float
    budget_s: float
    fair_cores: int
    repeat: bool
    models: tuple[str, ...]
    out: Path
    data: Path
    own_data: bool = True          # a folder of our own, removed after

    @property
    def images(self) -> tuple[int, int, int]:   # how many JPEGs, width, height
        # ImageNet's photos average about 400 x 350 pixels: decoding them is most of
        # the input work, so the size matters more than the count (the page cache holds
        # them all: the profile's "all memory").
        return (96, 96, 96) if self.quick else (2000, 448, 384)

    @property
    def clips(self) -> tuple[int, int, float]:  # how many WAVs, rate, seconds
        return (64, 8000, 1.0) if self.quick else (1000, 16000, 2.0)

    @property
    def tokens(self) -> int:
        return 200_000 if self.quick else 8_000_000


@dataclass
class ModelRun:
    """One model's points (first run of each), the repeat, and what went wrong."""

    model: str
    points: dict[int, Measurement] = field(default_factory=dict)
    torch_stats: dict[int, dict] = field(default_factory=dict)
    errors: dict[int, str] = field(default_factory=dict)
    skipped: dict[int, str] = field(default_factory=dict)
    repeat: tuple[int, float] | None = None     # (cores, samples/s of the second run)
    repeat_why: str = ""                        # why there is none


# -- setup -----------------------------------------------------------------------------------

def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cpu_limit() -> tuple[float | None, str]:
    """How points' cores are limited here: with a CFS quota where a cgroup can be made
    (core_fraction 1.0: each core a whole one), else the affinity mask alone."""
    mask = "affinity mask of k cores, k-1 data-loader workers, 1 thread each"
    try:
        with quota_group(1.0):
            pass
    except QuotaUnavailable as exc:
        return None, f"{mask}; no CFS quota ({exc})"
    return 1.0, f"{mask}, and a CFS quota of k cores"


def _jpeg(args: tuple[Path, int, int, int]) -> None:
    """One synthetic photo-like JPEG: smooth colour fields plus grain (pure noise would
    decode slower than photos, flat colour far faster)."""
    path, w, h, seed = args
    rng = np.random.default_rng(seed)
    base = Image.fromarray(rng.integers(0, 256, (6, 6, 3), dtype=np.uint8)).resize(
        (w, h), Image.BICUBIC)
    grain = rng.normal(0, 18, (h, w, 3))
    pixels = np.clip(np.asarray(base, dtype=np.float32) + grain, 0, 255).astype(np.uint8)
    Image.fromarray(pixels).save(path, quality=90)


def _wav(args: tuple[Path, int, float, int]) -> None:
    """One synthetic utterance: a few gliding harmonics under a syllable-rate envelope."""
    path, rate, seconds, seed = args
    rng = np.random.default_rng(seed)
    t = np.arange(int(rate * seconds)) / rate
    f0 = rng.uniform(90, 250) * (1 + 0.2 * np.sin(2 * np.pi * rng.uniform(0.5, 2) * t))
    phase = 2 * np.pi * np.cumsum(f0) / rate
    x = sum(np.sin(h * phase) / h for h in range(1, 6))
    x = x * (0.5 + 0.5 * np.sin(2 * np.pi * 4 * t) ** 2) + rng.normal(0, 0.02, t.shape)
    pcm = (x / np.max(np.abs(x)) * 20000).astype(np.int16)
    with wave.open(str(path), "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(rate)
        f.writeframes(pcm.tobytes())


def write_data(plan: Plan) -> dict[str, Path]:
    """Each model's data folder, written with every usable core."""
    dirs = {m: plan.data / m for m in MODELS}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    n_img, w, h = plan.images
    n_wav, rate, secs = plan.clips
    with ProcessPoolExecutor(max_workers=usable_cores()) as pool:
        list(pool.map(_jpeg, [(dirs["resnet18"] / f"img{i:05d}.jpg", w, h, i)
                              for i in range(n_img)], chunksize=16))
        list(pool.map(_wav, [(dirs["m5"] / f"clip{i:05d}.wav", rate, secs, i)
                             for i in range(n_wav)], chunksize=16))
    rng = np.random.default_rng(0)
    vocab = 1000 if plan.quick else 32000
    # Zipf-like ids, as a tokenizer's output is: the loader reads them, never looks.
    ids = np.minimum(rng.zipf(1.2, plan.tokens), vocab) - 1
    ids.astype(np.uint16).tofile(dirs["transformer"] / "tokens.u16")
    return dirs


# -- measuring -------------------------------------------------------------------------------

def point_config(plan: Plan, cores: int) -> PointConfig:
    """Warm-up past start-up and past the batches the workers queued meanwhile (two per
    worker), then ``point_s`` seconds of steps (two windows at least)."""
    extra, window = (3, 3) if plan.quick else (5, 5)
    return PointConfig(warmup_steps=2 * (cores - 1) + extra, window=window,
                       duration_s=plan.point_s, budget_s=plan.point_s * 4 + 60, stall_s=45.0)


def measure_point(plan: Plan, model: str, data: Path, cores: int, nvml,
                  fraction: float | None) -> tuple[Measurement, dict]:
    """One point: the workload at ``cores`` cores, and what torch said of it."""
    with tempfile.TemporaryDirectory(prefix="gpu-profile-") as tmp:
        stats = Path(tmp) / "stats.json"
        cmd = [sys.executable, str(WORKLOADS), "--model", model, "--data", str(data),
               "--device", plan.device, "--stats", str(stats)] + (["--quick"] * plan.quick)
        m = measure(cmd, cores, point_config(plan, cores), nvml, fraction)
        torch_stats = json.loads(stats.read_text()) if stats.exists() else {}
    return m, torch_stats


def profile_model(plan: Plan, model: str, data: Path, nvml, fraction: float | None,
                  t0: float) -> ModelRun:
    """Every point of one model (then the most cores again), within the whole budget."""
    run = ModelRun(model)
    todo = [c for c in plan.points if c <= usable_cores()]
    for c in plan.points:
        if c not in todo:
            run.skipped[c] = f"only {usable_cores()} cores usable here"
    last_wall = plan.point_s + 15.0
    for c in todo + ([max(todo)] if plan.repeat and todo else []):
        again = c in run.points or c in run.errors
        if time.monotonic() - t0 + last_wall > plan.budget_s:
            why = f"the {plan.budget_s:.0f} s budget would be spent"
            if again:
                run.repeat_why = why
            else:
                run.skipped[c] = why
            continue
        try:
            m, st = measure_point(plan, model, data, c, nvml, fraction)
        except MeasureError as exc:
            if again:
                run.repeat_why = str(exc)
            else:
                run.errors[c] = str(exc)
            log.warning("%s at %d cores: %s", model, c, exc)
            continue
        last_wall = m.wall_s
        if m.core_use is not None and m.core_use > 1.1:
            # k processes of one thread each cannot keep more than k cores busy unless
            # the mask is not enforced (a sandbox's kernel): the point had more cores.
            log.warning("%s at %d cores kept %.1f cores busy: the affinity mask does not "
                        "hold here", model, c, m.core_use * c)
        if again:
            run.repeat = (c, m.samples_per_s)
        else:
            run.points[c], run.torch_stats[c] = m, st
        print(point_line(model, m, st), flush=True)
    return run


def point_line(model: str, m: Measurement, st: dict) -> str:
    gpu = m.gpu
    g = (f"GPU {gpu['util_pct'][0]:.0f}% (max {gpu['util_pct_max'][0]}%), "
         f"{gpu['mem_used_mb'][0]} MB (torch {st.get('torch_reserved_mb', '?')} MB)"
         if gpu.get("gpus") else f"no GPU figures ({gpu.get('why', 'no probe')})")
    busy = f"{m.core_use:.0%}" if m.core_use is not None else "?"
    host = f"{m.peak_mem_mb / 1024:.2f} GB" if m.peak_mem_mb is not None else "?"
    return (f"{model:<11} {m.cpus:>2} cores: {m.samples_per_s:9.1f} samples/s "
            f"(cv {m.cv:.1%}, {m.wall_s:.0f} s)  {g}  host peak {host}  cores busy {busy}")


# -- results ---------------------------------------------------------------------------------

def gpu_util(m: Measurement | None) -> float | None:
    return m.gpu["util_pct"][0] if m is not None and m.gpu.get("gpus") else None


def paper_profile(model: str) -> Profile:
    """The paper's V100 profile of the same kind of model."""
    return load_profiles(PAPER_PROFILES)[PAPER_MODEL[model]]


def paper_curve(model: str) -> dict[float, float]:
    """The paper's profile at full memory, as speedup over its 1-core point."""
    p = paper_profile(model)
    top = p.mem_grid[-1]
    return {c: p.at(c, top) / p.at(p.cpu_grid[0], top) for c in p.cpu_grid}


def summarise(plan: Plan, run: ModelRun, idle: dict, device: str) -> tuple[dict, Profile]:
    """The model's entry in the JSON line, and its profile."""
    curve = {c: m.samples_per_s for c, m in sorted(run.points.items())}
    prof = build_profile(f"gpu-{run.model}", curve)
    assert prof.ideal is not None
    ideal, base = prof.ideal.cpus, min(curve)
    fair = max((c for c in curve if c <= plan.fair_cores), default=base)
    fm = run.points[fair]
    util = gpu_util(fm)
    cls, why = (None, "no CPU time read") if fm.core_use is None else \
        class_of_use(fm.core_use, None if util is None else util / 100)
    paper, paper_ideal = paper_curve(run.model), paper_profile(run.model).ideal
    entry = {
        "points": {str(c): point_entry(m, run.torch_stats.get(c, {}), idle)
                   for c, m in sorted(run.points.items())},
        "ideal_cores": ideal, "speedup_at_ideal": round(curve[ideal] / curve[base], 3),
        "speedup_base_cores": base,
        "gpu_util_at_1": gpu_util(run.points.get(1)), "gpu_util_at_ideal": gpu_util(
            run.points[ideal]), "device_name": device,
        "class": cls, "class_why": f"at {fair} cores: {why}",
        "repeat": {"why_none": run.repeat_why or "not asked for"} if run.repeat is None else {
            "cores": run.repeat[0], "samples_per_s": round(run.repeat[1], 2),
            "differs_pct": round(abs(run.repeat[1] / curve[run.repeat[0]] - 1) * 100, 2)},
        "errors": {str(c): e for c, e in run.errors.items()},
        "skipped": {str(c): s for c, s in run.skipped.items()},
        "paper_v100": {"model": PAPER_MODEL[run.model], "ideal_cores": paper_ideal.cpus
                       if paper_ideal else None,
                       "speedup_at_ideal_over_1_core": round(max(paper.values()), 3)}}
    return entry, prof


def point_entry(m: Measurement, st: dict, idle: dict) -> dict:
    out = {"samples_per_s": round(m.samples_per_s, 2), "cv": round(m.cv, 4),
           "wall_s": round(m.wall_s, 1), "core_use": m.core_use, "host_peak_mb": m.peak_mem_mb,
           "host_mem_kind": m.peak_mem_kind}
    if m.gpu.get("gpus"):
        mem = m.gpu["mem_used_mb"][0]
        out |= {"gpu_util_pct": m.gpu["util_pct"][0], "gpu_util_max_pct":
                m.gpu["util_pct_max"][0], "gpu_mem_mb": mem, "gpu_samples": m.gpu["samples"]}
        if st.get("torch_reserved_mb"):
            # What NVML saw used beyond the idle GPU, less what torch's allocator holds:
            # the CUDA context and libraries' workspaces (a few hundred MB to ~1.5 GB).
            idle_mb = idle["mem_used_mb"][0] if idle.get("gpus") else 0
            out |= {"torch_reserved_mb": st["torch_reserved_mb"],
                    "nvml_minus_torch_mb": round(mem - idle_mb - st["torch_reserved_mb"], 1)}
    else:
        out["gpu_why"] = m.gpu.get("why", "no probe")
    return out


def keep_profile(plan: Plan, run: ModelRun, prof: Profile) -> Path:
    """The profile as ``synergy profile import`` reads it, and in a store of its own."""
    path = plan.out / f"{run.model}.profile.json"
    path.write_text(json.dumps(profiles_to_doc({prof.key: prof}), indent=1) + "\n")
    ProfileStore(plan.out / "profiles.db").put(
        prof, measured_points=len(run.points),
        profiling_cpu_s=sum(m.cpu_s for m in run.points.values()), source="gpu_profile")
    return path


# -- the plot (Pillow: the GPU machine is promised Pillow, not matplotlib) --------------------

def _font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    try:
        return ImageFont.load_default(size=size)
    except (TypeError, OSError):      # Pillow < 10.1, or no FreeType: the bitmap font
        return ImageFont.load_default()


@dataclass(frozen=True)
class Frame:
    """Plot coordinates: cores 0..xmax, speedup 0..ymax, into a W x H image."""

    xmax: float
    ymax: float
    w: int = 760
    h: int = 500
    left: int = 70
    right: int = 190
    top: int = 50
    bottom: int = 55

    def xy(self, c: float, s: float) -> tuple[float, float]:
        return (self.left + (self.w - self.left - self.right) * c / self.xmax,
                self.h - self.bottom - (self.h - self.top - self.bottom) * min(s, self.ymax)
                / self.ymax)


def _axes(d: ImageDraw.ImageDraw, f: Frame, xs: list[int], font) -> None:
    d.line([f.xy(0, 0), f.xy(f.xmax, 0)], fill="black")
    d.line([f.xy(0, 0), f.xy(0, f.ymax)], fill="black")
    for c in xs:
        x, y = f.xy(c, 0)
        d.line([(x, y), (x, y + 5)], fill="black")
        d.text((x, y + 8), str(c), fill="black", font=font, anchor="ma")
    step = next(s for s in (0.5, 1, 2, 5, 10, 20, 50, 1e9) if f.ymax / s <= 8)
    k = 0.0
    while k <= f.ymax:
        x, y = f.xy(0, k)
        d.line([(x - 5, y), (x, y)], fill="black")
        d.line([(x + 1, y), f.xy(f.xmax, k)], fill=(235, 235, 235))
        d.text((x - 8, y), f"{k:g}x", fill="black", font=font, anchor="rm")
        k += step
    d.text(((f.left + f.w - f.right) / 2, f.h - 22), "cores per GPU", fill="black", font=font,
           anchor="ma")


def plot(path: Path, run: ModelRun, ideal: int, device: str) -> Path:
    """Speedup over the fewest cores measured, against cores: the measurement (GPU
    utilisation by each point), the linear line, and the paper's V100 profile."""
    curve = {c: m.samples_per_s for c, m in sorted(run.points.items())}
    base = curve[min(curve)]
    speed = {c: v / base for c, v in curve.items()}
    xmax = max(16, max(curve))
    full = paper_curve(run.model)
    pp = paper_profile(run.model)     # and at the plot's edge, between its grid points
    paper = {c: s for c, s in full.items() if c < xmax} | {
        xmax: pp.at(xmax, pp.mem_grid[-1]) / pp.at(pp.cpu_grid[0], pp.mem_grid[-1])}
    f = Frame(xmax, max(2.0, *speed.values(), *paper.values()) * 1.1)
    img = Image.new("RGB", (f.w, f.h), "white")
    d = ImageDraw.Draw(img)
    font, small = _font(14), _font(12)
    _axes(d, f, sorted({0, *curve} | {c for c in (1, 2, 4, 8, 12, 16) if c <= xmax}), font)
    d.line([f.xy(1, 1), f.xy(min(xmax, f.ymax), min(xmax, f.ymax))], fill=(170, 170, 170))
    d.line([f.xy(c, s) for c, s in paper.items()], fill=(230, 140, 20), width=2)
    d.line([f.xy(c, s) for c, s in speed.items()], fill=(30, 80, 200), width=3)
    for c, s in speed.items():
        x, y = f.xy(c, s)
        d.ellipse([x - 4, y - 4, x + 4, y + 4], fill=(30, 80, 200))
        util = gpu_util(run.points[c])
        if util is not None:
            d.text((x, y - 10), f"{util:.0f}%", fill=(30, 80, 200), font=small, anchor="md")
    x, y = f.xy(ideal, speed[ideal])
    d.ellipse([x - 9, y - 9, x + 9, y + 9], outline=(200, 30, 30), width=2)
    d.text((f.left, 8), f"{run.model} on {device}", fill="black", font=font)
    d.text((f.left, 26), f"speedup over {min(curve)} core(s) ({base:.0f} samples/s)",
           fill="black", font=small)
    lx, ly = f.w - f.right + 15, f.top
    for colour, label in (((30, 80, 200), "measured (label: GPU util)"),
                          ((230, 140, 20), f"paper V100 {PAPER_MODEL[run.model]}"),
                          ((170, 170, 170), "linear"), ((200, 30, 30), "ideal (profile)")):
        d.line([(lx, ly + 7), (lx + 18, ly + 7)], fill=colour, width=3)
        d.text((lx + 24, ly), label, fill="black", font=small)
        ly += 22
    img.save(path)
    return path


# -- the run ---------------------------------------------------------------------------------

def device_name(plan: Plan, nvml: NvmlSampler) -> str:
    if plan.device != "cpu":
        return nvml.names[0] if nvml.names else plan.device
    name = platform.processor() or "cpu"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"cpu: {name} ({usable_cores()} usable cores)"


def nvml_checks(idle: dict, entries: dict) -> dict:
    """Does NVML's reading behave: utilisation above the idle GPU's under load, and the
    memory it sees used matching torch's allocator (plus the CUDA context)."""
    if not idle.get("gpus"):
        return {"why": idle.get("why", "no GPU")}
    pts = [p for e in entries.values() for p in e.get("points", {}).values()]
    utils = [p["gpu_util_pct"] for p in pts if "gpu_util_pct" in p]
    gaps = [p["nvml_minus_torch_mb"] for p in pts if "nvml_minus_torch_mb" in p]
    return {"idle_util_pct": idle["util_pct"][0], "idle_mem_mb": idle["mem_used_mb"][0],
            "max_util_pct_under_load": max(utils, default=None),
            "util_moves_with_load": bool(utils) and max(utils) >= idle["util_pct"][0] + 20,
            "nvml_minus_torch_mb": [min(gaps), max(gaps)] if gaps else None,
            "mem_matches_torch": bool(gaps) and all(0 <= g <= 2048 for g in gaps)}


def parse_args(argv: list[str] | None) -> Plan:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", help="cuda (the GPU machine) or cpu")
    ap.add_argument("--quick", action="store_true",
                    help="small models, data and points: the test suite's run on CPUs")
    ap.add_argument("--points", default="1,2,4,8,12,16", help="core counts to measure")
    ap.add_argument("--point-s", type=float, help="seconds measured per point after "
                    "warm-up (default 6; 2 with --quick)")
    ap.add_argument("--budget-s", type=float, help="stop starting points after this long "
                    "(default 450; 110 with --quick)")
    ap.add_argument("--fair-cores", type=int, default=8,
                    help="cores per GPU at which to judge the class (a site's share)")
    ap.add_argument("--no-repeat", action="store_true", help="skip the repeated point")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--out", type=Path, default=Path("gpu-profile-out"))
    ap.add_argument("--data", type=Path, help="where to write the data (default: a "
                    "temporary folder, removed after)")
    a = ap.parse_args(argv)
    models = tuple(m for m in a.models.split(",") if m)
    if not models or set(models) - set(MODELS):
        ap.error(f"--models: some of {', '.join(MODELS)}")
    points = tuple(sorted({int(p) for p in a.points.split(",") if p}))
    if not points or points[0] < 1:
        ap.error("--points: positive core counts")
    return Plan(a.device, a.quick, points, a.point_s or (2.0 if a.quick else 6.0),
                a.budget_s or (110.0 if a.quick else 450.0), a.fair_cores, not a.no_repeat,
                models, a.out, a.data or Path(tempfile.mkdtemp(prefix="gpu-profile-data-")),
                own_data=a.data is None)


def results(plan: Plan, runs: list[ModelRun], idle: dict, device: str) -> dict:
    """Each model's entry (profile, class, PNG written), and NVML's checks."""
    entries: dict[str, dict] = {}
    for run in runs:
        if not run.points:
            entries[run.model] = {"points": {}, "errors": run.errors, "skipped": run.skipped}
            continue
        name = next((s["device"] for s in run.torch_stats.values() if s.get("device")),
                    device) if plan.device != "cpu" else device
        entry, prof = summarise(plan, run, idle, name)
        entry["transforms"] = next(iter(run.torch_stats.values()), {}).get("transforms")
        entry["profile"] = str(keep_profile(plan, run, prof))
        entry["png"] = str(plot(plan.out / f"{run.model}_speedup.png", run, entry["ideal_cores"],
                                name))
        print(f"{run.model}: ideal {entry['ideal_cores']} cores, "
              f"{entry['speedup_at_ideal']:.2f}x over {entry['speedup_base_cores']} core(s); "
              f"class {entry['class']} ({entry['class_why']}); paper V100 "
              f"{entry['paper_v100']['model']}: ideal {entry['paper_v100']['ideal_cores']} "
              f"cores, {entry['paper_v100']['speedup_at_ideal_over_1_core']:.2f}x", flush=True)
        entries[run.model] = entry
    return entries


def main(argv: list[str] | None = None) -> int:
    plan = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    plan.out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    fraction, limit = cpu_limit()
    print(f"cores limited by: {limit}", flush=True)
    try:
        with NvmlSampler() as nvml:
            idle, device = nvml(), device_name(plan, nvml)
            print(f"device: {device}; NVML: {'ok' if idle.get('gpus') else idle.get('why')}",
                  flush=True)
            dirs = write_data(plan)
            print(f"data written in {time.monotonic() - t0:.1f} s", flush=True)
            runs = [profile_model(plan, m, dirs[m], nvml, fraction, t0) for m in plan.models]
    finally:
        if plan.own_data:
            shutil.rmtree(plan.data, ignore_errors=True)
    entries = results(plan, runs, idle, device)
    torch_v = next((s.get("torch") for r in runs for s in r.torch_stats.values()), None)
    print(json.dumps({"device": device, "torch": torch_v, "cpu_limit": limit,
                      "quick": plan.quick, "point_s": plan.point_s,
                      "wall_s": round(time.monotonic() - t0, 1),
                      "nvml": nvml_checks(idle, entries), "models": entries}))
    return 0 if all(e["points"] for e in entries.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
