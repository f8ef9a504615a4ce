"""The training programs benchmarks/gpu_profile.py profiles: one process per measured point.

Three kinds of job, each with the input pipeline its kind really has, so that what the
cores buy is what they buy in such a job:

* ``resnet18``: ImageNet-style. JPEG files decoded and augmented in data-loader workers
  (random resized crop, flip, to tensor, normalise: torchvision's transforms where
  torchvision imports, else the same steps with Pillow and numpy; the run says which),
  ResNet-18 (torchvision's architecture, defined here: 11,689,512 parameters).
* ``transformer``: a GPT-style language model on token ids read from a file of uint16
  tokens (pre-tokenised, as language-model training reads them): almost no input work.
* ``m5``: speech. WAV files read with the standard library, speed perturbation, random
  crop, gain and noise in the workers, and the M5 network (1-D convolutions on the raw
  waveform; Dai et al. 2017, the paper's speech model).

The cores come from the profiler's allotment (``SYNERGY_PROFILE_CPUS``): cores - 1
data-loader workers, one intra-op thread each (sbatch_templates/train_pytorch.py explains
why), and every step reported through :func:`profiler.progress.track`. On CUDA it trains
in bfloat16 autocast with cuDNN autotuning, as such jobs do on an H100. With ``--stats``
it writes what torch saw (device, memory reserved, transforms used) as JSON every few
steps, for the profiler to set beside NVML's reading.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
import wave
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch import nn
from torch.utils.data import DataLoader, Dataset, RandomSampler

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
try:
    from profiler.progress import track
except ImportError:          # run without the repository: trains, reports nothing
    def track(iterable, batch_size=1):
        return iterable

MB = 1024 * 1024
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class Sizes:
    """How big each job is: the full sizes for a GPU, small ones for ``--quick`` on CPUs."""

    image_px: int = 224            # crop fed to ResNet-18
    image_batch: int = 128
    lm_vocab: int = 32000
    lm_seq: int = 512
    lm_dim: int = 512
    lm_layers: int = 6
    lm_batch: int = 32
    audio_rate: int = 16000
    audio_crop_s: float = 1.0
    audio_batch: int = 256


QUICK = Sizes(image_px=32, image_batch=8, lm_vocab=1000, lm_seq=64, lm_dim=64, lm_layers=2,
              lm_batch=8, audio_rate=8000, audio_crop_s=0.5, audio_batch=16)


# -- ResNet-18 -------------------------------------------------------------------------------

class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.down = None if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + (x if self.down is None else self.down(x)))


def resnet18(classes: int = 1000) -> nn.Module:
    """torchvision's resnet18 layer for layer (same parameter count), defined here so the
    CPU runs, where torchvision cannot be installed beside the CPU torch, train the same
    network."""
    layers: list[nn.Module] = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                               nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, classes)]
    return nn.Sequential(*layers)


def image_transform(px: int):
    """Train-time augmentation (random resized crop, flip, normalise) and its origin."""
    try:
        from torchvision import __version__ as tv_version
        from torchvision import transforms as T
        return T.Compose([T.RandomResizedCrop(px), T.RandomHorizontalFlip(), T.ToTensor(),
                          T.Normalize(MEAN, STD)]), f"torchvision {tv_version}"
    except (ImportError, RuntimeError, AttributeError) as exc:
        # The CPU torch wheel has no torchvision that imports beside it ("operator
        # torchvision::nms does not exist"): the same steps by hand.
        return _PilTransform(px), f"Pillow+numpy (torchvision: {str(exc)[:80]})"


class _PilTransform:
    """torchvision's RandomResizedCrop(scale 0.08-1, ratio 3/4-4/3) + flip + normalise."""

    def __init__(self, px: int) -> None:
        self.px = px
        self.mean = np.array(MEAN, dtype=np.float32)
        self.std = np.array(STD, dtype=np.float32)

    def __call__(self, img: Image.Image) -> torch.Tensor:
        w, h = img.size
        for _ in range(10):
            area = w * h * random.uniform(0.08, 1.0)
            ratio = math.exp(random.uniform(math.log(3 / 4), math.log(4 / 3)))
            cw, ch = round(math.sqrt(area * ratio)), round(math.sqrt(area / ratio))
            if 0 < cw <= w and 0 < ch <= h:
                break
        else:
            cw = ch = min(w, h)
        x0, y0 = random.randint(0, w - cw), random.randint(0, h - ch)
        img = img.resize((self.px, self.px), Image.BILINEAR, box=(x0, y0, x0 + cw, y0 + ch))
        if random.random() < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        a = (np.asarray(img, dtype=np.float32) / 255.0 - self.mean) / self.std
        return torch.from_numpy(a.transpose(2, 0, 1).copy())


class JpegFiles(Dataset):
    def __init__(self, root: Path, transform) -> None:
        self.files = sorted(root.glob("*.jpg"))
        if not self.files:
            raise SystemExit(f"no *.jpg files in {root}")
        self.transform = transform

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int):
        with Image.open(self.files[i]) as img:
            return self.transform(img.convert("RGB")), i % 1000


# -- the language model ----------------------------------------------------------------------

class TinyGpt(nn.Module):
    """Decoder-only transformer (pre-norm, causal) with tied input/output embeddings."""

    def __init__(self, vocab: int, dim: int, layers: int, seq: int) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(seq, dim))
        block = nn.TransformerEncoderLayer(dim, max(1, dim // 64), 4 * dim, dropout=0.0,
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq),
                             persistent=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.tok(ids) + self.pos[: ids.shape[1]]
        x = self.blocks(x, mask=self.mask, is_causal=True)
        return self.norm(x) @ self.tok.weight.T


class TokenWindows(Dataset):
    """Windows of ``seq + 1`` tokens at random offsets of a uint16 token file."""

    def __init__(self, path: Path, seq: int) -> None:
        self.path, self.seq = path, seq
        self.n = path.stat().st_size // 2 - seq - 1
        if self.n < 1:
            raise SystemExit(f"{path}: fewer than {seq + 1} tokens")
        self.tokens: np.memmap | None = None

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if self.tokens is None:    # opened in the worker that reads
            self.tokens = np.memmap(self.path, dtype=np.uint16, mode="r")
        w = torch.from_numpy(self.tokens[i:i + self.seq + 1].astype(np.int64))
        return w[:-1], w[1:]


# -- the speech model ------------------------------------------------------------------------

def m5(classes: int = 35) -> nn.Module:
    """M5: four 1-D convolution blocks on the raw waveform, global average, linear."""
    def block(cin: int, cout: int, k: int, stride: int = 1) -> list[nn.Module]:
        return [nn.Conv1d(cin, cout, k, stride), nn.BatchNorm1d(cout), nn.ReLU(), nn.MaxPool1d(4)]
    return nn.Sequential(*block(1, 128, 80, 4), *block(128, 128, 3), *block(128, 256, 3),
                         *block(256, 512, 3), nn.AdaptiveAvgPool1d(1), nn.Flatten(),
                         nn.Linear(512, classes))


class WavClips(Dataset):
    """16-bit mono WAV files: read, speed-perturbed (0.9-1.1, linear resampling), cropped
    at random, with random gain and background noise: a speech job's input work."""

    def __init__(self, root: Path, crop: int) -> None:
        self.files = sorted(root.glob("*.wav"))
        if not self.files:
            raise SystemExit(f"no *.wav files in {root}")
        self.crop = crop

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int):
        with wave.open(str(self.files[i]), "rb") as f:
            pcm = np.frombuffer(f.readframes(f.getnframes()), dtype=np.int16)
        x = pcm.astype(np.float32) / 32768.0
        speed = random.uniform(0.9, 1.1)
        x = np.interp(np.arange(0, len(x) - 1, speed), np.arange(len(x)), x).astype(np.float32)
        start = random.randint(0, max(0, len(x) - self.crop))
        x = np.pad(x[start:start + self.crop], (0, max(0, self.crop - len(x) + start)))
        x = x * random.uniform(0.5, 1.5) + np.random.normal(0, 0.01, x.shape).astype(np.float32)
        return torch.from_numpy(x[None, :].astype(np.float32)), i % 35


# -- the training loop -----------------------------------------------------------------------

def granted_cores() -> int:
    v = os.environ.get("SYNERGY_PROFILE_CPUS", "")
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = os.cpu_count() or 1
    return max(1, min(int(v), affinity)) if v.isdigit() and int(v) > 0 else affinity


def _worker_init(_worker: int) -> None:
    torch.set_num_threads(1)


def build(args: argparse.Namespace, sizes: Sizes) -> tuple[nn.Module, Dataset, int, str]:
    """The model, its data set, its batch size, and where its transforms come from."""
    if args.model == "resnet18":
        tf, origin = image_transform(sizes.image_px)
        return resnet18(), JpegFiles(args.data, tf), sizes.image_batch, origin
    if args.model == "transformer":
        net = TinyGpt(sizes.lm_vocab, sizes.lm_dim, sizes.lm_layers, sizes.lm_seq)
        return net, TokenWindows(args.data / "tokens.u16", sizes.lm_seq), sizes.lm_batch, "none"
    crop = int(sizes.audio_rate * sizes.audio_crop_s)
    return m5(), WavClips(args.data, crop), sizes.audio_batch, "numpy (speed, crop, gain, noise)"


@dataclass
class Stats:
    model: str
    device: str
    transforms: str
    cores: int
    workers: int
    params: int
    torch: str = torch.__version__
    torch_reserved_mb: float = 0.0
    torch_max_allocated_mb: float = 0.0
    steps: int = 0


def _write_stats(path: Path | None, stats: Stats, device: torch.device) -> None:
    if path is None:
        return
    if device.type == "cuda":
        stats.torch_reserved_mb = round(torch.cuda.max_memory_reserved(device) / MB, 1)
        stats.torch_max_allocated_mb = round(torch.cuda.max_memory_allocated(device) / MB, 1)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(asdict(stats)))
    os.replace(tmp, path)


def _loss(model_name: str, net: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = net(x)
    if model_name == "transformer":
        return nn.functional.cross_entropy(out.flatten(0, 1).float(), y.flatten())
    return nn.functional.cross_entropy(out.float(), y)


def train(args: argparse.Namespace) -> None:
    sizes = QUICK if args.quick else Sizes()
    device = torch.device(args.device)
    cores = granted_cores()
    workers = cores - 1
    torch.set_num_threads(1 if workers else cores)
    torch.backends.cudnn.benchmark = True
    net, data, batch, origin = build(args, sizes)
    net = net.to(device)
    if args.model == "resnet18" and device.type == "cuda":
        net = net.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    # One endless epoch: no pipeline drain at epoch ends inside a measured window.
    loader = DataLoader(data, batch_size=batch, sampler=RandomSampler(data, True, 10**9),
                        num_workers=workers, worker_init_fn=_worker_init, drop_last=True,
                        pin_memory=device.type == "cuda", persistent_workers=workers > 0)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    stats = Stats(args.model, name, origin, cores, workers,
                  sum(p.numel() for p in net.parameters()))
    amp = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda")
    for x, y in track(loader, batch_size=batch):
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        if args.model == "resnet18" and device.type == "cuda":
            x = x.contiguous(memory_format=torch.channels_last)
        with amp:
            loss = _loss(args.model, net, x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        stats.steps += 1
        if stats.steps == 10 or stats.steps % 25 == 0:
            _write_stats(args.stats, stats, device)
        if stats.steps >= args.steps:
            break


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=("resnet18", "transformer", "m5"), required=True)
    ap.add_argument("--data", type=Path, required=True, help="the model's data folder")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--quick", action="store_true", help="the small sizes (CPU checks)")
    ap.add_argument("--steps", type=int, default=10**9, help="stop after this many steps")
    ap.add_argument("--stats", type=Path, help="write torch's figures here (JSON)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    t0 = time.monotonic()
    train(args)
    print(f"{args.model}: done in {time.monotonic() - t0:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
