"""Profiles keyed by GPU type: a profile measured on one type is not used on another."""

from __future__ import annotations

from dataclasses import replace

import pytest

from synergy_slurm.core import (
    ProfileError,
    pick_profile,
    profiles_from_doc,
    profiles_to_doc,
    usable_profiles,
)
from synergy_slurm.profiles.store import ProfileStore

A100, H100, UNTYPED = frozenset({"a100"}), frozenset({"h100"}), frozenset({""})


@pytest.fixture
def curve(paper_profiles):
    return paper_profiles["shufflenet"]


def test_the_profile_of_the_jobs_type_wins_and_another_type_is_never_used(curve):
    on_a100 = replace(curve, key="k", gpu_type="a100")
    anywhere = replace(curve, key="k", throughput=tuple(tuple(v * 2 for v in row)
                                                        for row in curve.throughput))
    both = {on_a100.slot: on_a100, anywhere.slot: anywhere}
    assert pick_profile(both, "k", A100) is on_a100
    assert pick_profile(both, "k", H100) is anywhere         # no H100 profile: untyped
    assert pick_profile(both, "k", A100 | H100) is anywhere  # may land on either
    assert pick_profile({on_a100.slot: on_a100}, "k", H100) is None
    assert pick_profile({on_a100.slot: on_a100}, "k", A100 | H100) is None
    assert pick_profile({on_a100.slot: on_a100}, "k", UNTYPED) is None
    assert pick_profile({}, "k", A100) is None
    # A typed profile filed under its bare key (a hand-built mapping) is still only for
    # its own type.
    assert pick_profile({"k": on_a100}, "k", H100) is None
    assert pick_profile({"k": on_a100}, "k", A100) is on_a100
    assert usable_profiles(both, A100) == {"k": on_a100}
    assert usable_profiles({on_a100.slot: on_a100}, A100 | H100) == {}


def test_the_type_survives_the_json_shape_and_the_store(curve, tmp_path):
    on_h100 = replace(curve, key="k", gpu_type="h100")
    plain = replace(curve, key="k")
    doc = profiles_to_doc({on_h100.slot: on_h100, plain.slot: plain})
    assert sorted(doc["models"]) == ["k", "k@h100"]
    assert doc["models"]["k@h100"]["gpu_type"] == "h100"
    back = profiles_from_doc(doc)
    assert back["k@h100"].gpu_type == "h100" and back["k@h100"].key == "k"
    assert back["k"].gpu_type == ""
    store = ProfileStore(tmp_path / "p.db")
    store.put(on_h100)
    store.put(plain)
    assert store.list_keys() == ["k", "k@h100"]
    assert store.get("k@h100").profile.gpu_type == "h100"
    assert set(store.all()) == {"k", "k@h100"}


@pytest.mark.parametrize("models, match", [
    ({"k@h100": {"gpu_type": "a100"}}, "must be named KEY@a100"),
    ({"k@h100": {}}, "'@' is for KEY@GPU_TYPE"),
    ({"k": {"gpu_type": "h 100"}}, "must be named"),
])
def test_a_mislabelled_type_is_a_clear_error(curve, models, match):
    entry = profiles_to_doc({"x": curve})
    base = entry["models"]["x"]
    doc = {**entry, "models": {k: {**base, **v} for k, v in models.items()}}
    with pytest.raises(ProfileError, match=match):
        profiles_from_doc(doc)


def test_a_result_is_stored_under_the_type_it_was_measured_on(curve, tmp_path):
    doc = {**profiles_to_doc({"k": replace(curve, key="k")}),
           "_synergy_result": {"measured_points": 5, "profiling_cpu_s": 12.5}}
    store = ProfileStore(tmp_path / "p.db")
    got = store.import_result(doc, "k", source="test", gpu_type="a100")
    assert got.profile.gpu_type == "a100" and store.list_keys() == ["k@a100"]
    with pytest.raises(ValueError, match="bad GPU type"):
        store.import_result(doc, "k", source="test", gpu_type="a100;rm")
