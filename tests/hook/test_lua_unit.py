"""job_submit.lua under lua5.1 with a mock slurm table: every rule, and bad input."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from synergy_slurm.hook.table import DISABLE_NAME, TABLE_NAME, HookTable
from synergy_slurm.vocabulary import OPT_OUT_TOKEN, has_token

from .luahook import run_lua


def table(**kw) -> HookTable:
    """A fresh table: written now, not when the module was collected (a long suite runs
    these minutes later, past max_age_s)."""
    base = dict(generated_at=int(time.time()), node_cpus=24, node_mem_mb=500000, node_gpus=8,
                partitions=("gpu",), default_partition="gpu", optout_uids=(4242,),
                profiles={"res18": (9, 62500), "gnmt": (1, 20000), "alexnet": (12, 125000)},
                max_age_s=120, hold_unknown=True, hold_known=False)
    base.update(kw)
    return HookTable(**base)


@pytest.fixture
def hook_dir(tmp_path: Path) -> Path:
    table().write(tmp_path / TABLE_NAME)
    return tmp_path


def one(hook_dir, fields, uid=1000):
    (res,), logs = run_lua(hook_dir, [(uid, fields)])
    return res, logs


def test_known_profile_is_shaped_and_tagged(hook_dir):
    r, _ = one(hook_dir, {"tres_per_job": "gres:gpu:1", "comment": "synergy:profile=res18"})
    assert (r.cpus_per_tres, r.mem_per_tres) == ("gres:gpu:9", "gres:gpu:62500")
    assert r.admin_comment == "synergy.managed=1,synergy.profile=res18" and r.priority == ""
    assert r.rc == "0"


@pytest.mark.parametrize("request_tres, prefix", [("gres:gpu:1", "gres:gpu:"),
                                                  ("gres/gpu:1", "gres/gpu:"),
                                                  ("gres/gpu:a100:2", "gres/gpu:")])
def test_the_shape_is_written_in_the_form_this_slurm_writes_requests(hook_dir, request_tres,
                                                                     prefix):
    # 22.05 writes "gres:gpu:N" in job_desc; 23.02+ "gres/gpu:N" and rejects the old form.
    r, _ = one(hook_dir, {"tres_per_job": request_tres, "comment": "synergy:profile=res18"})
    assert r.cpus_per_tres.startswith(prefix) and r.mem_per_tres.startswith(prefix)


def test_unknown_profile_is_tagged_and_held_but_not_shaped(hook_dir):
    r, _ = one(hook_dir, {"tres_per_node": "gres:gpu:2", "comment": "synergy:profile=bert"})
    assert (r.cpus_per_tres, r.mem_per_tres) == ("", "")
    assert r.priority == "0" and "synergy.held=1" in r.admin_comment


def test_a_known_key_is_held_unless_the_table_says_no_hold(tmp_path):
    # 22.05's table: known keys held, but gnmt's shape (1 core, 20 GB per GPU) is within
    # the proportional share: shaped and passed at once (decide.needs_no_hold).
    table(hold_known=True, no_hold=frozenset({"gnmt"})).write(tmp_path / TABLE_NAME)
    (gnmt, res18), _ = run_lua(tmp_path, [
        (1000, {"tres_per_job": "gres:gpu:1", "comment": f"synergy:profile={key}"})
        for key in ("gnmt", "res18")])
    assert (gnmt.cpus_per_tres, gnmt.priority) == ("gres:gpu:1", "")
    assert "synergy.held=1" not in gnmt.admin_comment
    assert (res18.cpus_per_tres, res18.priority) == ("gres:gpu:9", "0")
    assert "synergy.held=1" in res18.admin_comment


def test_non_gpu_jobs_and_other_partitions_pass_untouched(hook_dir):
    for fields in ({"comment": "synergy:profile=res18"},
                   {"tres_per_node": "gres:mps:100"},
                   {"tres_per_job": "gres:gpu:1", "partition": "cpu"},
                   {"tres_per_job": "gres:gpu:1", "comment": "x synergy:off"}):
        r, _ = one(hook_dir, fields)
        assert (r.cpus_per_tres, r.mem_per_tres, r.priority, r.admin_comment) == \
            ("", "", "", ""), fields


@pytest.mark.parametrize("comment, opted_out", [("synergy:off", True),
                                               ("vision  synergy:off x", True),
                                               ("synergy:offline", False),
                                               ("xsynergy:off", False),
                                               ("synergy:off,x", False)])
def test_the_opt_out_is_a_word_of_its_own(hook_dir, comment, opted_out):
    r, _ = one(hook_dir, {"tres_per_job": "gres:gpu:1",
                          "comment": f"{comment} synergy:profile=res18"})
    assert (r.cpus_per_tres == "") == opted_out
    assert has_token(comment, OPT_OUT_TOKEN) == opted_out      # the Python readers' twin


def test_opted_out_user_passes_untouched(hook_dir):
    r, _ = one(hook_dir, {"tres_per_job": "gres:gpu:1", "comment": "synergy:profile=res18"},
               uid=4242)
    assert (r.cpus_per_tres, r.admin_comment) == ("", "")


def test_explicit_user_shape_is_respected_unless_overridden(tmp_path):
    fields = {"tres_per_job": "gres:gpu:1", "comment": "synergy:profile=res18",
              "cpus_per_tres": "gres:gpu:2", "pn_min_memory": "10240"}
    table().write(tmp_path / TABLE_NAME)
    r, _ = one(tmp_path, fields)
    assert (r.cpus_per_tres, r.mem_per_tres) == ("gres:gpu:2", "")
    table(override_user_shape=True).write(tmp_path / TABLE_NAME)
    (r,), _ = run_lua(tmp_path, [(1, fields)])
    # Cores may be overridden; memory never, since --mem cannot combine with memory/GPU.
    assert (r.cpus_per_tres, r.mem_per_tres) == ("gres:gpu:9", "")


def test_a_table_changed_within_the_second_it_was_read_is_read_again(tmp_path):
    """Stamps are whole seconds and inodes are reused: a table rewritten in place (or
    replaced after the old one was removed, as between two tests) within the second it was
    read has the stamp read before. It must not be mistaken for the table already read."""
    table().write(tmp_path / TABLE_NAME)
    (tmp_path / "next").write_text(table(override_user_shape=True).render())
    fields = {"tres_per_job": "gres:gpu:1", "comment": "synergy:profile=res18",
              "cpus_per_tres": "gres:gpu:2"}
    before, after = run_lua(tmp_path, [(1, fields), "!rewrite next", (1, fields)])[0]
    assert before.cpus_per_tres == "gres:gpu:2"         # the user's, not overridden
    assert after.cpus_per_tres == "gres:gpu:9"          # the rewritten table's override


def test_an_overridden_user_shape_lowers_the_minimum_cores_sbatch_derived(tmp_path):
    """sbatch makes --cpus-per-gpu=3 the job's minimum cores as well (26.05): lowering the
    cores per GPU alone left a job Slurm refused at submission."""
    table(override_user_shape=True).write(tmp_path / TABLE_NAME)
    fields = {"tres_per_job": "gres/gpu:2", "comment": "synergy:profile=gnmt",
              "cpus_per_tres": "gres/gpu:3", "min_cpus": "6"}
    r, _ = one(tmp_path, fields)
    assert (r.cpus_per_tres, r.min_cpus, r.rc) == ("gres/gpu:1", "2", "0")
    # Raised above the user's: the minimum stays as it was (Slurm takes the larger).
    r, _ = one(tmp_path, {**fields, "comment": "synergy:profile=res18", "min_cpus": "6"})
    assert (r.cpus_per_tres, r.min_cpus) == ("gres/gpu:9", "6")
    r, _ = one(tmp_path, {**fields, "min_cpus": "4294967294"})       # not set: left alone
    assert r.min_cpus == "4294967294"


def test_multi_gpu_shapes_are_capped_to_a_node(hook_dir):
    r, _ = one(hook_dir, {"tres_per_job": "gres:gpu:8", "comment": "synergy:profile=alexnet"})
    assert (r.cpus_per_tres, r.mem_per_tres) == ("gres:gpu:3", "gres:gpu:62500")
    r, _ = one(hook_dir, {"tres_per_node": "gres:gpu:2", "comment": "synergy:profile=alexnet"})
    assert (r.cpus_per_tres, r.mem_per_tres) == ("gres:gpu:12", "gres:gpu:125000")


@pytest.mark.parametrize("content", [
    None,                                            # missing
    "garbage\n\x00\xff not a table",                 # corrupt
    "version 2\n",                                   # other version
    "version 1\ngenerated_at soon\n",                # incomplete
    "whole table of version 2",                      # a newer controller's, complete
])
def test_missing_or_corrupt_table_passes_jobs_unchanged(tmp_path, content):
    if content == "whole table of version 2":
        content = table().render().replace("version 1\n", "version 2\n")
        assert "\nversion 2\n" in content
    if content is not None:
        (tmp_path / TABLE_NAME).write_bytes(content.encode("utf-8", "surrogateescape"))
    r, logs = one(tmp_path, {"tres_per_job": "gres:gpu:1", "comment": "synergy:profile=res18"})
    assert (r.cpus_per_tres, r.priority, r.admin_comment, r.rc) == ("", "", "", "0")
    assert logs.count("synergy hook:") >= 1


def test_absurd_table_values_are_ignored(tmp_path):
    text = table().render().replace("profile res18 9 62500", "profile res18 -3 62500")
    text += "profile huge 99999 1\nprofile nan abc def\nprofile frac 2.5 100\n"
    (tmp_path / TABLE_NAME).write_text(text)
    cases = [(1, {"tres_per_job": "gres:gpu:1", "comment": f"synergy:profile={k}"})
             for k in ("res18", "huge", "nan", "frac", "gnmt")]
    res, _ = run_lua(tmp_path, cases)
    assert [r.cpus_per_tres for r in res] == ["", "", "", "", "gres:gpu:1"]
    assert all(r.rc == "0" for r in res)


def test_stale_table_and_disable_file_pass_everything(tmp_path):
    table(generated_at=int(time.time()) - 1000).write(tmp_path / TABLE_NAME)
    r, logs = one(tmp_path, {"tres_per_job": "gres:gpu:1", "comment": "synergy:profile=res18"})
    assert (r.cpus_per_tres, r.priority, r.admin_comment) == ("", "", "")
    assert "stale" in logs
    other = tmp_path / "d"
    other.mkdir()
    table().write(other / TABLE_NAME)
    (other / DISABLE_NAME).touch()
    r, _ = one(other, {"tres_per_job": "gres:gpu:1", "comment": "synergy:profile=res18"})
    assert (r.cpus_per_tres, r.priority, r.admin_comment) == ("", "", "")


@pytest.mark.parametrize("comment", [
    'synergy:profile=res18"; os.execute("touch /tmp/pwned") --',
    "synergy:profile=%s%d%[",
    "synergy:profile=" + "a" * 5000,
    "synergy:profile=res18\nsynergy:profile=alexnet",
    "synergy:profile=../../etc/passwd",
    "'; DROP TABLE jobs; --",
])
def test_hostile_comments_change_nothing_they_should_not(hook_dir, comment):
    fields = {"tres_per_job": "gres:gpu:1", "comment": comment.replace("\n", " ")}
    r, _ = one(hook_dir, fields)
    assert r.rc == "0"
    assert not Path("/tmp/pwned").exists()
    # Only a real key from the table can shape a job; the tag never carries user text
    # other than a key that matched [A-Za-z0-9_.:-]{1,64}.
    assert r.cpus_per_tres in ("", "gres:gpu:9")
    assert all(tok.startswith("synergy.") for tok in r.admin_comment.split(","))
    assert len(r.admin_comment) < 120


def test_an_error_inside_the_hook_lets_the_job_through(hook_dir):
    r, logs = one(hook_dir, {"tres_per_job": "gres:gpu:1", "explode": "1"})
    assert r.rc == "0" and (r.cpus_per_tres, r.admin_comment) == ("", "")
    assert "error, job passed unchanged" in logs


def test_without_luafilesystem_the_hook_still_works(hook_dir):
    cases = [(1, {"tres_per_job": "gres:gpu:1", "comment": "synergy:profile=res18"}),
             (1, {"tres_per_job": "gres:gpu:1", "comment": "synergy:profile=gnmt"})]
    res, logs = run_lua(hook_dir, cases, lfs=False)
    assert [r.cpus_per_tres for r in res] == ["gres:gpu:9", "gres:gpu:1"]
    assert "lfs false" in logs
    (hook_dir / DISABLE_NAME).touch()
    res, _ = run_lua(hook_dir, cases, lfs=False)
    assert [r.cpus_per_tres for r in res] == ["", ""]


def test_the_module_joins_a_sites_own_hook_after_its_rules(hook_dir):
    """A site's job_submit.lua (routing, a refusal) with synergy's line at its end: the
    site's refusal stands and the refused job is not tagged; a routed GPU job gets the
    site's partition and then synergy's shape; the site's rules run without synergy when
    synergy's table is gone (its rules pass, never the site's)."""
    site = (Path(__file__).parent / "site_job_submit.lua").read_text()
    (hook_dir / "job_submit.lua").write_text(site.replace("@SYNERGY_DIR@", str(hook_dir)))
    res, _ = run_lua(hook_dir, [
        (1000, {"account": "bad", "tres_per_job": "gres:gpu:1",
                "comment": "synergy:profile=res18"}),
        (1000, {"account": "lab", "tres_per_job": "gres:gpu:1",
                "comment": "synergy:profile=res18"}),
        (1000, {"account": "lab", "partition": "cpu"})])
    refused, routed, cpu = res
    assert refused.rc == "-1" and refused.admin_comment == "" and refused.cpus_per_tres == ""
    assert routed.rc == "0" and routed.partition == "gpu"
    assert routed.cpus_per_tres == "gres:gpu:9" and "synergy.managed=1" in routed.admin_comment
    assert cpu.rc == "0" and cpu.admin_comment == ""
    (hook_dir / TABLE_NAME).unlink()
    (refused, routed, _), _ = run_lua(hook_dir, [
        (1000, {"account": "bad", "tres_per_job": "gres:gpu:1"}),
        (1000, {"account": "lab", "tres_per_job": "gres:gpu:1"}),
        (1000, {"account": "lab", "partition": "cpu"})])
    assert refused.rc == "-1" and routed.rc == "0" and routed.partition == "gpu"
    assert routed.admin_comment == ""


@pytest.mark.parametrize("fields, option", [
    ({"cpus_per_task": "8"}, "cpus-per-task"),
    ({"min_mem_per_cpu": "4096"}, "mem-per-cpu"),
    ({"ntasks_per_node": "2"}, "ntasks-per-node"),
    ({"shared": "0"}, "exclusive"),
    ({"pn_min_memory": "0"}, "mem0"),
])
def test_a_job_that_sets_its_own_cores_or_memory_is_left_as_submitted(hook_dir, fields,
                                                                        option):
    """-c, --mem-per-cpu, --ntasks-per-node, --exclusive, --mem=0: Slurm would give such a
    job the larger of its own request and a per-GPU shape, so the hook neither shapes nor
    holds it; it tags it synergy.managed=0 with the option, so the controller, which
    cannot see every such option in Slurm's JSON on every release, leaves it too."""
    base = {"tres_per_job": "gres:gpu:2", "comment": "synergy:profile=res18",
            "cpus_per_task": "65534", "ntasks_per_node": "65534", "shared": "65534"}
    r, _ = one(hook_dir, {**base, **fields})
    assert (r.cpus_per_tres, r.mem_per_tres, r.priority) == ("", "", "")
    assert r.admin_comment == f"synergy.managed=0,synergy.own={option}"
    plain, _ = one(hook_dir, base)
    assert plain.cpus_per_tres == "gres:gpu:9"       # the same job without it is shaped


def test_the_table_is_read_from_the_state_dir_the_chain_line_names(tmp_path):
    """Runtime state lives apart from slurm.conf's directory ([hook] state_dir): the
    installed line names it; a table beside the module is then not read, and the kill
    switch is the state dir's. A bad argument passes jobs unchanged, never breaks the
    site's script."""
    conf, state = tmp_path / "etc", tmp_path / "state"
    conf.mkdir()
    state.mkdir()
    job = {"tres_per_job": "gres:gpu:1", "comment": "synergy:profile=res18"}
    table(profiles={"res18": (5, 10000)}).write(conf / TABLE_NAME)   # stale place: ignored
    table().write(state / TABLE_NAME)
    script = (Path(__file__).parents[2] / "job_submit_hook" / "job_submit.lua").read_text()
    (conf / "job_submit.lua").write_text(script.replace(".chain()", f'.chain("{state}")'))
    r, logs = one(conf, job)
    assert r.cpus_per_tres == "gres:gpu:9" and f"table {state}/{TABLE_NAME}" in logs
    (state / DISABLE_NAME).touch()
    r, _ = one(conf, job)
    assert (r.cpus_per_tres, r.admin_comment, r.rc) == ("", "", "0")
    (conf / "job_submit.lua").write_text(script.replace(".chain()", '.chain("state")'))
    r, logs = one(conf, job)
    assert (r.cpus_per_tres, r.admin_comment, r.rc) == ("", "", "0")
    assert "not an absolute directory" in logs
