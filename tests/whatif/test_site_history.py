"""whatif on a history like a real site's (tests/whatif/site_history.py): users chose their
own cores per GPU, nothing has a profile, the export lacks the load that made its jobs
wait. Synergy would change nothing for these jobs, so the synergy replay must use the
cores and memory the plain replay uses, the forecast and the headline must say 1.00x, and
the report must say the replay cannot reproduce the history's waiting."""

from __future__ import annotations

from synergy_slurm.site import load_site

from .site_history import CLUSTER_TOML, site_history
from .test_whatif import pipeline_run


def test_a_site_whose_users_set_their_own_shapes_gets_no_change_and_a_warning(
        tmp_path, paper_profiles):
    hist = tmp_path / "history.txt"
    hist.write_text(site_history(n=400, seed=3))
    cluster = tmp_path / "v100.toml"
    cluster.write_text(CLUSTER_TOML)
    # The release is not read (None): the report warns that 22.05's rules were assumed.
    doc = pipeline_run(hist, paper_profiles, found=load_site(str(cluster)).pools()).doc
    util = doc["utilisation"]
    for r in ("cpu", "mem", "gpu"):
        assert abs(util["synergy"][r] - util["plain"][r]) <= 0.02 * util["plain"][r], util
        assert abs(util["plain"][r] - util["actual"][r]) <= 0.02 * util["actual"][r], util
    assert doc["changes"] == {"release": doc["replayed"]}
    assert doc["headline"]["kind"] == "forecast"
    assert round(doc["headline"]["jct_mean"], 2) == round(doc["forecast"]["expected"], 2) \
        == 1.0
    warned = " / ".join(w["what"] for w in doc["warnings"])
    assert "misses 100% of the history's waiting" in warned, warned
    assert "ran on 4 of the 40 nodes described" in warned, warned
    assert "Slurm release was not read" in warned and "could not be read" in warned
    assert doc["skipped_reasons"] and all("'|' inside JobName or Comment" in r
                                          for r in doc["skipped_reasons"])
