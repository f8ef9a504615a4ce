"""The profile store and `synergy profile import/export/show/list`."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace

import pytest
from click.testing import CliRunner

from synergy_slurm.cli.main import main
from synergy_slurm.profiles import load_profiles
from synergy_slurm.profiles.store import ProfileStore, fingerprint


def test_fingerprints():
    assert fingerprint("res18-imagenet") == "res18-imagenet"
    assert fingerprint(model="res18", batch_size=256, dataset="imagenet", gpus=2) == \
        "res18:b256:imagenet:g2"
    with pytest.raises(ValueError):
        fingerprint("bad key; rm -rf /")
    with pytest.raises(ValueError):
        fingerprint()


def test_import_show_export_round_trip(tmp_path, profiles_path, paper_profiles):
    db = str(tmp_path / "p.db")
    run = CliRunner().invoke
    res = run(main, ["profile", "import", "--store", db,
                     str(profiles_path)])
    assert res.exit_code == 0 and "imported 10 profiles" in res.output
    listed = json.loads(run(main, ["profile", "list", "--store", db, "--format", "json"]).output)
    assert [(p["key"], p["source"]) for p in listed] == [(k, "store") for k in
                                                        sorted(paper_profiles)]
    shown = json.loads(run(main, ["profile", "show", "--store", db, "alexnet", "--format",
                                  "json"]).output)
    assert set(shown) >= {"key", "points", "measured_points", "profiling_cpu_s"}
    assert shown["key"] == "alexnet" and len(shown["points"]) == 45
    best = max(shown["points"], key=lambda p: p["throughput"])
    assert best["throughput"] == pytest.approx(2.94)
    out = tmp_path / "export.json"
    assert run(main, ["profile", "export", "--store", db, "--out", str(out)]).exit_code == 0
    again = ProfileStore(tmp_path / "q.db")
    again.import_doc(json.loads(out.read_text()))
    for k, p in paper_profiles.items():
        got = again.get(k).profile
        assert got.throughput == p.throughput and got.ideal == p.ideal


def test_bad_imports_and_missing_keys_are_clear(tmp_path, profiles_path):
    db = str(tmp_path / "p.db")
    bad = tmp_path / "bad.json"
    bad.write_text('{"models": 1}')
    res = CliRunner().invoke(main, ["profile", "import", "--store", db, str(bad)])
    assert res.exit_code == 2 and "not a profiles document" in res.output
    assert not (tmp_path / "p.db").exists()      # a bad file is refused before the store
    res = CliRunner().invoke(main, ["profile", "show", "--store", db, "nope"])
    assert res.exit_code == 2 and "no profile 'nope'" in res.output and "no store" in res.output
    good = str(profiles_path)
    assert CliRunner().invoke(main, ["profile", "import", "--store", db, good]).exit_code == 0
    res = CliRunner().invoke(main, ["profile", "show", "--store", db, "nope"])
    assert res.exit_code == 2 and "no profile 'nope'" in res.output


def test_a_store_of_an_earlier_version_reads_as_site_wide_and_gains_owners(tmp_path,
                                                                           profiles_path):
    """Stores written before profiles had owners: read-only, every profile is site-wide;
    opened for writing, the owner column is added and old rows stay site-wide."""
    db = tmp_path / "old.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE profiles (key TEXT PRIMARY KEY, doc TEXT NOT NULL, "
                "measured_points INTEGER, profiling_cpu_s REAL, created REAL, source TEXT)")
    con.commit()
    con.close()
    prof = load_profiles(profiles_path)["gnmt"]
    old = ProfileStore(db, readonly=True)
    assert old.owners() == {} and old.get("gnmt") is None
    store = ProfileStore(db)
    store.put(prof)
    store.put(replace(prof, key="mine"), owner="eve")
    assert store.owners() == {"mine": "eve"}
    assert store.get("gnmt").owner == "" and store.get("mine").owner == "eve"
    assert ProfileStore(db, readonly=True).get("mine").show()["owner"] == "eve"


def test_a_users_measurement_never_replaces_a_site_wide_or_another_users(tmp_path,
                                                                        profiles_path):
    """Issue 43, item 2: the store's put made the writer the owner of whatever slot it
    wrote, so a user's profiling job (whose numbers the user writes) replaced a
    site-wide profile or another user's and shaped their jobs. Now a user may replace
    only their own; an admin's site-wide write replaces anything."""
    from synergy_slurm.profiles.store import ProfileOwned

    paper = load_profiles(profiles_path)
    site, planted = paper["gnmt"], replace(paper["alexnet"], key="gnmt")
    store = ProfileStore(tmp_path / "p.db")
    store.put(site, source="import")
    store.put(replace(site, key="bobs"), owner="bob")
    for slot, owner in (("gnmt", "eve"), ("bobs", "eve")):
        with pytest.raises(ProfileOwned):
            store.put(replace(planted, key=slot), owner=owner, source="auto")
        got = store.get(slot)
        assert got.profile.throughput == site.throughput and got.owner != "eve"
    store.put(replace(planted, key="bobs"), owner="bob")            # bob's own: replaced
    assert store.get("bobs").profile.throughput == planted.throughput
    store.put(replace(planted, key="bobs"), source="import")        # the admin's: site-wide
    assert store.get("bobs").owner == ""
    with pytest.raises(ProfileOwned):                               # and no longer bob's
        store.put(replace(site, key="bobs"), owner="bob")
