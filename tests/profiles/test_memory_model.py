"""The memory model against hand-computed cases."""

from __future__ import annotations

import pytest

from synergy_slurm.profiles.memory_model import StorageModel, throughput_matrix


def test_all_cached_is_the_measured_epoch():
    m = StorageModel(dataset_gb=100, disk_gb_s=0.5, mem_gb_s=10)
    # 100 GB of memory caches it all: 100/10 = 10 s of I/O, below the 50 s measured epoch.
    assert m.epoch_s(50.0, 100) == 50.0


def test_nothing_cached_is_disk_bound():
    m = StorageModel(dataset_gb=100, disk_gb_s=0.5, mem_gb_s=10)
    assert m.epoch_s(50.0, 0) == pytest.approx(200.0)   # 100 GB / 0.5 GB/s


def test_half_cached_and_working_set():
    m = StorageModel(dataset_gb=100, disk_gb_s=0.5, mem_gb_s=10, working_set_gb=20)
    # 70 GB of memory leave 50 GB for the cache: 50/10 + 50/0.5 = 105 s.
    assert m.cached_fraction(70) == pytest.approx(0.5)
    assert m.epoch_s(50.0, 70) == pytest.approx(105.0)


def test_cpu_bound_points_ignore_memory_once_io_is_fast_enough():
    m = StorageModel(dataset_gb=10, disk_gb_s=0.5, mem_gb_s=10)
    # 1,000 samples/epoch; 4 cores: 100 samples/s (10 s epoch), 1 core: 25/s (40 s).
    rows = throughput_matrix({1: 25.0, 4: 100.0}, cpu_grid=(1, 2, 4), mem_grid=(0, 5, 10),
                             gpus=1, samples_per_epoch=1000, model=m)
    # 1 core is CPU-bound except with nothing cached (20 s disk epoch < 40 s: still CPU).
    assert rows[0] == pytest.approx([25.0, 25.0, 25.0])
    # 2 cores: interpolated 50/s (20 s epoch); nothing cached = 20 s disk: equal.
    assert rows[1] == pytest.approx([50.0, 50.0, 50.0])
    # 4 cores: 10 s CPU epoch; 0 GB -> 20 s (I/O bound), 5 GB -> 0.5+10 = 10.5 s, 10 GB -> 10 s.
    assert rows[2] == pytest.approx([50.0, 1000 / 10.5, 100.0])


def test_bad_models_are_rejected():
    with pytest.raises(ValueError):
        StorageModel(dataset_gb=0)
    with pytest.raises(ValueError):
        throughput_matrix({}, (1,), (1,), 1, 10, StorageModel(1))
