"""The hook inside the real slurmctld of the test cluster."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from synergy_slurm.hook.rules import decide
from synergy_slurm.hook.sbatch_args import submission_from_args
from synergy_slurm.hook.table import DISABLE_NAME, TABLE_NAME, HookTable
from synergy_slurm.slurm.commands import SlurmError
from synergy_slurm.slurm.parse import per_gpu_value
from synergy_slurm.slurm.reader import SlurmReader

from ..conftest import slurm_section
from ..slurm.helpers import cancel_all, job_fields, per_gpu, submit, wait_file, wait_for
from .gen import option_sets

pytestmark = pytest.mark.slurm

REPORT = 'echo "cpus=$SLURM_CPUS_ON_NODE"'


def make_table(**kw) -> HookTable:
    base = dict(generated_at=int(time.time()), node_cpus=24, node_mem_mb=500000, node_gpus=8,
                partitions=("gpu",), default_partition="gpu",
                profiles={"res18": (9, 62500), "gnmt": (1, 20000), "alexnet": (12, 125000)},
                max_age_s=600, hold_unknown=False, hold_known=False)
    base.update(kw)
    return HookTable(**base)


@pytest.fixture
def hook_etc(slurm_cluster, slurm_cli):
    etc = slurm_cluster.etc
    cancel_all(slurm_cli)
    yield etc
    for name in (TABLE_NAME, DISABLE_NAME):
        (etc / name).unlink(missing_ok=True)
    cancel_all(slurm_cli)


def write(etc: Path, table: HookTable) -> None:
    """The hook sees a replaced table at the next submission (LuaFileSystem stat)."""
    table.write(etc / TABLE_NAME)


def job(cli, job_id):
    return SlurmReader(cli).snapshot().job(job_id)


def test_known_profile_starts_with_the_table_shape(hook_etc, slurm_cli, tmp_path):
    write(hook_etc, make_table())
    out = tmp_path / "o"
    jid = submit(slurm_cli, REPORT, "--gpus=1", "--comment=synergy:profile=res18",
                 "-o", str(out), tmp=tmp_path)
    wait_for(slurm_cli, jid, {"COMPLETED"})
    assert "cpus=9" in out.read_text()
    fields = job_fields(slurm_cli, jid)
    assert per_gpu(fields, "CpusPerTres") == 9 and per_gpu(fields, "MemPerTres") == 62500
    assert "synergy.managed=1,synergy.profile=res18" in fields.get("AdminComment", "")


def test_a_users_cores_per_gpu_lowered_by_the_hook_still_submit(hook_etc, slurm_cli,
                                                                 tmp_path):
    """With override_user_shape, a job that asked --cpus-per-gpu=3 and names a 1-core
    profile is lowered to 1 core and runs (26.05's sbatch made 3 its minimum cores too,
    and Slurm refused the lowered job at submission)."""
    write(hook_etc, make_table(override_user_shape=True))
    out = tmp_path / "o"
    jid = submit(slurm_cli, REPORT, "--gpus=1", "--cpus-per-gpu=3",
                 "--comment=synergy:profile=gnmt", "-o", str(out), tmp=tmp_path)
    wait_for(slurm_cli, jid, {"COMPLETED"})
    assert "cpus=1" in out.read_text()


def test_unknown_key_non_gpu_and_no_table_pass_untouched(hook_etc, slurm_cli, tmp_path):
    # No table at all first: jobs run with Slurm's defaults.
    out0 = tmp_path / "o0"
    j0 = submit(slurm_cli, REPORT, "--gpus=1", "--comment=synergy:profile=res18",
                "-o", str(out0), tmp=tmp_path)
    wait_for(slurm_cli, j0, {"COMPLETED"})
    assert "cpus=3" in out0.read_text()
    write(hook_etc, make_table())
    out1, out2 = tmp_path / "o1", tmp_path / "o2"
    j1 = submit(slurm_cli, REPORT, "--gpus=1", "--comment=synergy:profile=bert",
                "-o", str(out1), tmp=tmp_path)
    j2 = submit(slurm_cli, REPORT, "-c2", "--comment=synergy:profile=res18", "-o", str(out2),
                tmp=tmp_path)
    wait_for(slurm_cli, j1, {"COMPLETED"})
    wait_for(slurm_cli, j2, {"COMPLETED"})
    assert "cpus=3" in out1.read_text() and "cpus=2" in out2.read_text()
    f2 = job_fields(slurm_cli, j2)
    assert "synergy" not in f2.get("AdminComment", "")


@pytest.mark.parametrize("content", [
    "garbage \x00 not a table\n",
    "version 1\ngenerated_at 0\n",
    None,   # absurd values, written below
])
def test_bad_tables_never_block_or_reject(hook_etc, slurm_cli, tmp_path, content):
    if content is None:
        text = make_table().render()
        text = text.replace("profile res18 9 62500", "profile res18 -9 1e99")
        text += "profile gnmt abc 99999999999999999999\nnode_cpus 0\n"
        (hook_etc / TABLE_NAME).write_text(text)
    else:
        (hook_etc / TABLE_NAME).write_bytes(content.encode())
    assert (hook_etc / TABLE_NAME).exists()
    out = tmp_path / "o"
    jid = submit(slurm_cli, REPORT, "--gpus=1", "--comment=synergy:profile=res18",
                 "-o", str(out), tmp=tmp_path)
    wait_for(slurm_cli, jid, {"COMPLETED"})
    assert "cpus=3" in out.read_text()


def test_hostile_strings_change_nothing_they_should_not(hook_etc, slurm_cli, tmp_path):
    write(hook_etc, make_table())
    hostile = ['x"; os.execute("touch /tmp/synergy-pwned") --', "%s%d%[", "a" * 1000,
               "synergy:profile=%.*", "synergy:profile=res18'$(id)`"]
    ids = []
    for i, text in enumerate(hostile):
        ids.append(submit(slurm_cli, REPORT, "--gpus=1", f"--comment={text}",
                          f"--job-name={text[:60]}", "-o", str(tmp_path / f"h{i}"),
                          tmp=tmp_path))
    for jid in ids:
        wait_for(slurm_cli, jid, {"COMPLETED"})
    assert not Path("/tmp/synergy-pwned").exists()
    cpus = [(tmp_path / f"h{i}").read_text().strip() for i in range(len(hostile))]
    # Only the last one names a real key (res18, then junk the key pattern stops at).
    assert cpus == ["cpus=3"] * 4 + ["cpus=9"]


def test_opted_out_user_passes_untouched(hook_etc, slurm_cli, unprivileged_user):
    uid = int(subprocess.run(["id", "-u", unprivileged_user], capture_output=True, text=True,
                             check=True).stdout)
    write(hook_etc, make_table(optout_uids=(uid,)))
    # pytest's tmp_path is private to root: the user gets a directory of its own.
    work = Path(tempfile.mkdtemp(prefix="synergy-optout-"))
    try:
        work.chmod(0o777)
        script = work / "u.sh"
        script.write_text("#!/bin/sh\n" + REPORT + "\n")
        script.chmod(0o755)
        out = work / "u.out"
        res = subprocess.run(["runuser", "-u", unprivileged_user, "--", "sbatch", "--parsable",
                              "--gpus=1", "--comment=synergy:profile=res18", f"--chdir={work}",
                              "-o", str(out), str(script)], capture_output=True, text=True,
                             env=slurm_cli.env(), cwd=work, check=False)
        assert res.returncode == 0, res.stderr
        jid = int(res.stdout.strip())
        wait_for(slurm_cli, jid, {"COMPLETED"})
        assert "cpus=3" in out.read_text()
        fields = job_fields(slurm_cli, jid)
        assert "synergy" not in fields.get("AdminComment", "")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_hold_only_while_the_table_is_fresh_and_failsafe_release(hook_etc, slurm_cli,
                                                                 tmp_path, slurm_cluster):
    from click.testing import CliRunner

    from synergy_slurm.cli.main import main

    write(hook_etc, make_table(hold_unknown=True, max_age_s=30))
    held = submit(slurm_cli, REPORT, "--gpus=1", "-o", str(tmp_path / "a"), tmp=tmp_path)
    j = job(slurm_cli, held)
    assert j.pending and j.priority == 0 and "synergy.held=1" in j.admin_comment
    # The controller "dies": the table ages past max_age_s. New jobs are not held...
    write(hook_etc, make_table(hold_unknown=True, max_age_s=30,
                               generated_at=int(time.time()) - 60))
    free = submit(slurm_cli, REPORT, "--gpus=1", "-o", str(tmp_path / "b"), tmp=tmp_path)
    wait_for(slurm_cli, free, {"COMPLETED"})
    # ...and the fail-safe releases the one held before.
    cfg = tmp_path / "synergy.toml"
    cfg.write_text(slurm_section(slurm_cluster) + f'[hook]\ndir = "{hook_etc}"\n'
                   f'state_dir = "{hook_etc}"\n')
    res = CliRunner().invoke(main, ["hook", "failsafe", "--config", str(cfg)])
    assert res.exit_code == 0, res.output
    assert f"released {held}" in res.output
    wait_for(slurm_cli, held, {"COMPLETED"})
    wait_file(tmp_path / "a", "cpus=3")


def test_disable_file_is_a_kill_switch(hook_etc, slurm_cli, tmp_path):
    write(hook_etc, make_table(hold_unknown=True))
    (hook_etc / DISABLE_NAME).touch()
    jid = submit(slurm_cli, REPORT, "--gpus=1", "--comment=synergy:profile=res18",
                 "-o", str(tmp_path / "o"), tmp=tmp_path)
    wait_for(slurm_cli, jid, {"COMPLETED"})
    assert "cpus=3" in (tmp_path / "o").read_text()


def test_explain_agrees_with_the_real_hook(hook_etc, slurm_cli, tmp_path):
    # 22.05's holds: unknown and known keys held, but not gnmt (its shape is final).
    table = make_table(hold_unknown=True, hold_known=True, no_hold=frozenset({"gnmt"}))
    write(hook_etc, table)
    script = tmp_path / "p.sh"
    script.write_text("#!/bin/sh\ntrue\n")
    sets = option_sets(200, seed=5, typed=False, partitions=("gpu",))
    ids = []
    for opts in sets:
        out = slurm_cli.run("sbatch", ["--parsable", "--hold", "-o", "/dev/null", *opts,
                                       str(script)])
        ids.append(int(out.strip().split(";")[0]))
    doc = json.loads(slurm_cli.run("squeue", ["--json"]))
    by_id = {j["job_id"]: j for j in doc["jobs"]}
    now = time.time()
    for opts, jid in zip(sets, ids, strict=True):
        rec = by_id[jid]
        sub = submission_from_args(opts, uid=0)
        d = decide(table, sub, now)
        if d.cpus_per_gpu:
            got = per_gpu_value(rec["cpus_per_tres"])
            assert got == d.cpus_per_gpu, (opts, rec["cpus_per_tres"])
        if d.mem_per_gpu_mb:
            got = per_gpu_value(rec["memory_per_tres"])
            assert got == d.mem_per_gpu_mb, (opts, rec["memory_per_tres"])
        if not d.managed:
            assert "synergy.managed=1" not in rec["admin_comment"], opts
            assert ("synergy.own=" in rec["admin_comment"]) == bool(
                sub.own_shape and "left as submitted" in d.reason), opts
        else:
            assert "synergy.managed=1" in rec["admin_comment"], opts
            assert ("synergy.held=1" in rec["admin_comment"]) == d.hold, opts
        if d.managed and d.cpus_per_gpu is None and not sub.cpus_per_tres:
            # Unset on 22.05; 26.05 shows the partition's DefCpuPerGPU as "gpu:3" at once.
            assert not rec["cpus_per_tres"].startswith("gres"), (opts, rec["cpus_per_tres"])


def test_a_sites_own_hook_and_synergys_apply_to_the_same_jobs(hook_etc, slurm_cli, tmp_path):
    """The site's job_submit.lua (tests/hook/site_job_submit.lua: routes GPU jobs without
    -p to "gpu", refuses the account "bad") ends with synergy's one line, as `synergy hook
    install` tells a site to: a refused job stays refused with the site's message, a routed
    job is shaped by synergy too; `hook install` itself leaves that file alone."""
    from click.testing import CliRunner

    from synergy_slurm.cli.main import main

    script = hook_etc / "job_submit.lua"
    ours = script.read_text()
    site = (Path(__file__).parent / "site_job_submit.lua").read_text()
    try:
        time.sleep(1.1)           # job_submit/lua reloads on a new mtime, in whole seconds
        script.write_text(site.replace("@SYNERGY_DIR@", str(hook_etc)))
        res = CliRunner().invoke(main, ["hook", "install", "--conf-dir", str(hook_etc),
                                        "--state-dir", str(hook_etc), "--write"])
        assert res.exit_code == 0 and "the site's own, already joined" in res.output
        assert script.read_text() == site.replace("@SYNERGY_DIR@", str(hook_etc))
        write(hook_etc, make_table())
        with pytest.raises(SlurmError, match="site policy: account 'bad'"):
            slurm_cli.run("sbatch", ["--parsable", "-A", "bad", "--gpus=1",
                                     "--comment=synergy:profile=res18", "--wrap", "true"])
        out = tmp_path / "o"
        jid = submit(slurm_cli, REPORT, "--gpus=1", "--comment=synergy:profile=res18",
                     "-o", str(out), tmp=tmp_path)
        wait_for(slurm_cli, jid, {"COMPLETED"})
        fields = job_fields(slurm_cli, jid)
        assert fields["Partition"] == "gpu" and "cpus=9" in out.read_text()
        assert "synergy.managed=1,synergy.profile=res18" in fields.get("AdminComment", "")
    finally:
        time.sleep(1.1)
        script.write_text(ours)


@pytest.mark.parametrize("option, tag", [("-c8", "cpus-per-task"),
                                         ("--mem-per-cpu=4G", "mem-per-cpu")])
def test_a_job_with_its_own_cores_or_memory_runs_as_submitted(hook_etc, slurm_cli, tmp_path,
                                                              option, tag):
    """-c / --mem-per-cpu beside --gpus: the hook leaves the job (no per-GPU shape, no
    hold) and tags it so; it runs with the allocation plain Slurm gives it, read back; the
    controller's classification leaves it with the same reason. The same job without the
    option is shaped from its profile (9 cores/GPU)."""
    from synergy_slurm.config import Config
    from synergy_slurm.controller.classify import classify

    write(hook_etc, make_table())
    out = tmp_path / "o"
    jid = submit(slurm_cli, REPORT + "; sleep 2", "--gpus=2", option,
                 "--comment=synergy:profile=res18", "-o", str(out), tmp=tmp_path)
    snap_job = job(slurm_cli, jid)
    verdict = classify(snap_job, Config(), frozenset())
    fields = wait_for(slurm_cli, jid, {"COMPLETED"})
    assert f"synergy.managed=0,synergy.own={tag}" in fields.get("AdminComment", "")
    assert per_gpu(fields, "CpusPerTres") in (None, 3)        # not the profile's 9
    assert not verdict.managed and "left as submitted" in verdict.reason
    cpus = int(out.read_text().split("cpus=")[1].split()[0])
    assert cpus != 18                    # not the profile's 9 cores/GPU x 2
    if tag == "cpus-per-task":
        assert cpus >= 8
    plain = submit(slurm_cli, REPORT, "--gpus=2", "--comment=synergy:profile=res18",
                   "-o", str(tmp_path / "p"), tmp=tmp_path)
    wait_for(slurm_cli, plain, {"COMPLETED"})
    assert "cpus=18" in (tmp_path / "p").read_text()
