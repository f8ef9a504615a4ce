"""A small PyTorch image-training program that behaves the way synergy-slurm wants.

It is what the templates run by default, and a pattern to copy into your own script:

* cores: data-loader workers follow the cores this process really has (the profiler's
  allotment, else Slurm's grant, bounded by the CPU affinity mask), and intra-op threads
  are pinned to one per worker: decode + augment with two threads per worker was ~7x
  slower per sample in our measurements;
* checkpoint and resume: a checkpoint every ``--checkpoint-every`` steps and on
  SIGTERM (preemption, ``scontrol requeue``) or SIGUSR1 (``--signal=B:USR1@...`` before
  the time limit); on start it resumes from the checkpoint and says which restart this
  is (``SLURM_RESTART_COUNT``);
* progress: every step goes through :func:`profiler.progress.track`, so ``synergy
  profile run`` can measure it (a no-op otherwise); under the profiler it never writes
  its checkpoint (the controller may profile a job by running its script);
* multi-node: under ``torchrun`` (RANK/WORLD_SIZE set) it trains with DDP over gloo
  (CPU) or nccl (GPU); rank 0 writes the checkpoint.

The data is a folder of JPEG files; ``--synthetic N`` makes N random ones first (for
tests and demos). Needs torch and Pillow; no torchvision.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from PIL import Image
from torch import nn
from torch.utils.data import DataLoader, Dataset, DistributedSampler

try:
    from profiler.progress import track
except ImportError:          # synergy-slurm not installed: no profiling, still trains
    def track(iterable, batch_size=1):
        return iterable

CROP = 112


def granted_cores() -> int:
    """Cores for this process: the profiler's allotment, else Slurm's grant per local
    rank, never more than the affinity mask (a node without task binding shows all)."""
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = os.cpu_count() or 1
    for var in ("SYNERGY_PROFILE_CPUS", "SLURM_CPUS_ON_NODE"):
        v = os.environ.get(var, "")
        if v.isdigit() and int(v) > 0:
            per_rank = int(v) // max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
            return max(1, min(per_rank, affinity))
    return affinity


class JpegFolder(Dataset):
    """Decode + augment (random crop, flip, resize jitter, normalise) in the workers."""

    def __init__(self, root: Path) -> None:
        self.files = sorted(root.glob("*.jpg"))
        if not self.files:
            raise SystemExit(f"no *.jpg files in {root} (use --synthetic N to make some)")

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int):
        img = Image.open(self.files[i]).convert("RGB")
        side = random.randint(CROP, min(img.size))
        x0 = random.randint(0, img.width - side)
        y0 = random.randint(0, img.height - side)
        img = img.crop((x0, y0, x0 + side, y0 + side)).resize((CROP, CROP), Image.BILINEAR)
        if random.random() < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        a = np.asarray(img, dtype=np.float32) / 255.0
        a = (a - 0.5) / 0.25
        return torch.from_numpy(a.transpose(2, 0, 1).copy()), i % 10


def make_synthetic(root: Path, n: int, size: int = 256, seed: int = 0) -> None:
    root.mkdir(parents=True, exist_ok=True)
    have = len(list(root.glob("*.jpg")))
    rng = np.random.default_rng(seed + have)
    for i in range(have, n):
        pixels = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(root / f"img{i:06d}.jpg", quality=90)


def _worker_init(_worker: int) -> None:
    """One intra-op thread per worker; workers leave SIGTERM/USR1 to the main process
    (Slurm signals every process of the job: a worker dying of it would end the loader
    before the main process could checkpoint)."""
    torch.set_num_threads(1)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)


def model() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 16, 3, stride=2), nn.ReLU(), nn.Conv2d(16, 32, 3,
                         stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(32, 10))


def save(path: Path, state: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="folder of *.jpg files")
    ap.add_argument("--synthetic", type=int, default=0, help="make this many JPEGs first")
    ap.add_argument("--steps", type=int, default=1000, help="total training steps")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--workers", type=int, default=-1, help="-1: granted cores - 1")
    ap.add_argument("--checkpoint", type=Path, help="checkpoint file (resumes from it)")
    ap.add_argument("--checkpoint-every", type=int, default=50)
    ap.add_argument("--log-every", type=int, default=20)
    ap.add_argument("--step-delay", type=float, default=0.0,
                    help="extra seconds per step (to stretch tests)")
    return ap.parse_args(argv)


class Training:
    """One run of the training loop: the model, its optimiser and data, the step reached,
    and the signal (if any) that asked it to stop."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.distributed = "RANK" in os.environ and "WORLD_SIZE" in os.environ
        self.rank = int(os.environ.get("RANK", "0"))
        if self.distributed:
            dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
        self.device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) \
            if torch.cuda.is_available() else torch.device("cpu")
        if args.synthetic and self.rank == 0:
            make_synthetic(args.data, args.synthetic)
        if self.distributed:
            dist.barrier()
        self.cores = granted_cores()
        self.workers = max(0, self.cores - 1) if args.workers < 0 else args.workers
        torch.set_num_threads(1 if self.workers else self.cores)
        data = JpegFolder(args.data)
        self.sampler = DistributedSampler(data) if self.distributed else None
        self.loader = DataLoader(
            data, batch_size=args.batch_size, shuffle=self.sampler is None,
            sampler=self.sampler, num_workers=self.workers, worker_init_fn=_worker_init,
            drop_last=True, persistent_workers=self.workers > 0)
        self.net = model().to(self.device)
        if self.distributed:
            self.net = nn.parallel.DistributedDataParallel(self.net)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.01, momentum=0.9)
        self.step = 0
        self.stop: int | None = None
        # Under the profiler (synergy profile run sets SYNERGY_PROGRESS_FILE) this is a
        # measurement, not training: never overwrite the real job's checkpoint.
        self.saves = bool(args.checkpoint) and self.rank == 0 \
            and not os.environ.get("SYNERGY_PROGRESS_FILE")

    def _plain_net(self) -> nn.Module:
        return self.net.module if self.distributed else self.net

    def resume(self) -> None:
        restart = os.environ.get("SLURM_RESTART_COUNT", "0")
        if self.args.checkpoint and self.args.checkpoint.exists():
            state = torch.load(self.args.checkpoint, map_location=self.device)
            self._plain_net().load_state_dict(state["model"])
            self.opt.load_state_dict(state["optimizer"])
            self.step = int(state["step"])
            print(f"resumed from step {self.step} (restart {restart})", flush=True)
        else:
            print(f"starting at step 0 (restart {restart})", flush=True)
        print(f"rank {self.rank}: {self.cores} cores, {self.workers} data-loader workers, "
              f"device {self.device}", flush=True)

    def catch_signals(self) -> None:
        def on_signal(signum, _frame) -> None:
            self.stop = signum
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGUSR1, on_signal)

    def checkpoint(self) -> None:
        if self.saves:
            save(self.args.checkpoint, {"model": self._plain_net().state_dict(),
                                        "optimizer": self.opt.state_dict(),
                                        "step": self.step})

    def close(self) -> None:
        """Stop the data-loader workers now, while the interpreter is whole: the signal
        handlers keep this object alive until exit, where a persistent worker left to
        interpreter shutdown can hang the job (seen: the main process waiting on it)."""
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGUSR1, signal.SIG_DFL)
        del self.loader
        if self.distributed:
            dist.destroy_process_group()

    def _agree_on_stop(self) -> None:
        """Every rank stops at the same step when any was told to."""
        flag = torch.tensor([0 if self.stop is None else 1])
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        if flag.item() and self.stop is None:
            self.stop = signal.SIGTERM

    def train(self) -> None:
        args, loss_fn = self.args, nn.CrossEntropyLoss()
        t0, s0, epoch = time.monotonic(), self.step, 0
        while self.step < args.steps and self.stop is None:
            if self.sampler is not None:
                self.sampler.set_epoch(epoch)
            for x, y in track(self.loader, batch_size=args.batch_size):
                self.opt.zero_grad()
                loss = loss_fn(self.net(x.to(self.device)), y.to(self.device))
                loss.backward()
                self.opt.step()
                self.step += 1
                if args.step_delay:
                    time.sleep(args.step_delay)
                if self.step % args.log_every == 0:
                    rate = (self.step - s0) * args.batch_size / max(1e-9, time.monotonic() - t0)
                    print(f"step {self.step}/{args.steps} loss {loss.item():.3f} "
                          f"{rate:.1f} samples/s", flush=True)
                if self.distributed:
                    self._agree_on_stop()
                if self.step % args.checkpoint_every == 0:
                    self.checkpoint()
                if self.step >= args.steps or self.stop is not None:
                    break
            epoch += 1


def main(argv: list[str] | None = None) -> int:
    run = Training(parse_args(argv))
    run.resume()
    run.catch_signals()
    run.train()
    run.checkpoint()
    run.close()
    if run.stop is not None:
        # Only the rank that wrote the checkpoint says so: another rank's word would claim
        # a step that rank 0, killed before it could save, never wrote.
        print(f"signal {run.stop}: {'checkpointed' if run.saves else 'stopped'} at step "
              f"{run.step}", flush=True)
        return 0 if run.stop == signal.SIGUSR1 else 143
    print(f"finished at step {run.step}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
