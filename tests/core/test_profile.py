"""Profiles: loading the reference file, interpolation, the ideal point, bad input."""

from __future__ import annotations

import json

import pytest

from synergy_slurm.core import PerGpu, Profile, ProfileError, profiles_to_doc
from synergy_slurm.core.profile import profiles_from_doc
from synergy_slurm.profiles import load_profiles


def test_reference_file_loads_with_its_ideal_points(paper_profiles):
    assert len(paper_profiles) == 10
    alex = paper_profiles["alexnet"]
    assert alex.ideal == PerGpu(12, 125.0)
    fair = PerGpu(3, 62.5)
    assert alex.speedup(alex.ideal, fair) == pytest.approx(2.94)
    assert paper_profiles["m5"].speedup(PerGpu(6, 187.5), fair) == pytest.approx(2.5)
    assert paper_profiles["gnmt"].ideal == PerGpu(1, 20.0)


def test_interpolation_is_bilinear_and_clamped(paper_profiles):
    alex = paper_profiles["alexnet"]
    assert alex.at(3, 62.5) == pytest.approx(1.0)
    assert alex.at(7.5, 62.5) == pytest.approx(1.875)        # halfway between 6 and 9 cores
    assert alex.at(9, 93.75) == pytest.approx(2.0)
    assert alex.at(12, 93.75) == pytest.approx(2.47)          # halfway between 62.5 and 125 GB
    assert alex.at(48, 1000) == pytest.approx(2.94)           # clamped beyond the grid
    assert alex.at(0.5, 5) == pytest.approx(0.1)              # clamped below


def test_ideal_is_the_cheapest_point_reaching_the_best():
    p = Profile("x", (1, 2, 4), (10, 20), ((1, 1), (1, 2), (2, 2)))
    assert p.ideal == PerGpu(2, 20)


def test_round_trip_through_the_json_shape(paper_profiles, tmp_path):
    doc = profiles_to_doc(paper_profiles)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    again = load_profiles(path)
    assert again.keys() == paper_profiles.keys()
    for k, p in paper_profiles.items():
        assert again[k].throughput == p.throughput and again[k].ideal == p.ideal


@pytest.mark.parametrize("mutate, match", [
    (lambda d: d["models"]["a"].update(throughput=[[1, 1], [1]]), "must be 2 x 2"),
    (lambda d: d["models"]["a"].update(throughput=[[1, -1], [1, 1]]), "positive"),
    (lambda d: d["models"]["a"].update(throughput=[[1, "x"], [1, 1]]), "bad or missing"),
    (lambda d: d["models"]["a"].pop("throughput"), "bad or missing"),
    (lambda d: d.update(cpu_per_gpu_grid=[2, 1]), "strictly increasing"),
    (lambda d: d.pop("models"), "not a profiles document"),
    (lambda d: d["models"]["a"].update(ideal_cpu_per_gpu="lots"), "bad ideal"),
])
def test_bad_profiles_are_clear_errors(mutate, match):
    doc = {"cpu_per_gpu_grid": [1, 2], "mem_gb_per_gpu_grid": [10, 20],
           "models": {"a": {"throughput": [[1, 1], [1, 2]], "ideal_cpu_per_gpu": 2,
                            "ideal_mem_gb_per_gpu": 20}}}
    mutate(doc)
    with pytest.raises(ProfileError, match=match):
        profiles_from_doc(doc)


def test_unreadable_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ProfileError, match="cannot read profiles"):
        load_profiles(bad)


@pytest.mark.parametrize("mutate, match", [
    (lambda m: m.update(ideal_cpu_per_gpu=1e9), "off the grid"),
    (lambda m: m.update(ideal_mem_gb_per_gpu=1e6), "off the grid"),
    (lambda m: m.update(speedup_at_ideal=-3), "speedup_at_ideal = -3: must be a positive"),
    (lambda m: m.update(speedup_at_ideal="fast"), "bad speedup_at_ideal"),
    (lambda m: m.update(idael_cpu_per_gpu=4), "unknown fields idael_cpu_per_gpu"),
])
def test_an_import_with_impossible_or_unknown_values_is_refused(paper_profiles, mutate,
                                                                  match):
    from synergy_slurm.core import profiles_from_doc, profiles_to_doc

    doc = profiles_to_doc({"res18": paper_profiles["res18"]})
    mutate(doc["models"]["res18"])
    with pytest.raises(ProfileError, match=match):
        profiles_from_doc(doc)
