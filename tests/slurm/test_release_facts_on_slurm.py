"""The Slurm facts synergy relies on, checked on the release the test cluster runs
(SYNERGY_TEST_SLURM; scripts/test.sh runs 22.05 and 26.05). Each test holds what each
release does; docs/slurm-notes.md has the same table. A release with no recorded answer
fails with what it did, so a new release is never assumed to behave like an old one."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from synergy_slurm.devcluster.cluster import status
from synergy_slurm.slurm.commands import SlurmError
from synergy_slurm.slurm.reader import SlurmReader
from synergy_slurm.slurm.writer import Shape, SlurmWriter

from .helpers import cancel_all, job_fields, submit, wait_file, wait_for
from .test_real_cluster_on_slurm import REPORT

pytestmark = pytest.mark.slurm


@pytest.fixture(autouse=True)
def clean(slurm_cli):
    cancel_all(slurm_cli)
    yield
    cancel_all(slurm_cli)


@pytest.fixture
def release(slurm_release) -> str:
    return f"{slurm_release[0]}.{slurm_release[1]:02d}"


def expect(table: dict[str, object], release: str, seen: object) -> None:
    assert release in table, f"no recorded answer for Slurm {release}: it did {seen!r}"
    assert seen == table[release], f"Slurm {release}"


def test_lowering_a_pending_job_the_scheduler_has_seen(slurm_cli, tmp_path, release):
    """22.05 ignores a lower core count once the job was evaluated (hence the hook's hold);
    24.11 takes it and then never starts the job ("Resources" on an idle cluster; raising
    works); 26.05 honours it."""
    out = tmp_path / "low.out"
    jid = submit(slurm_cli, REPORT, "--begin=now+60", "--gpus=1", "--cpus-per-gpu=12",
                 "-o", str(out), tmp=tmp_path)
    time.sleep(7)   # past a scheduler pass (sched_interval=5): the job has been looked at
    slurm_cli.run("scontrol", ["update", f"JobId={jid}", "CpusPerTres=gres:gpu:4",
                               "TresPerJob=gres:gpu:1", "NumCPUs=4"])
    slurm_cli.run("scontrol", ["update", f"JobId={jid}", "StartTime=now"])
    try:
        wait_for(slurm_cli, jid, {"COMPLETED"}, 45)
        cpus: int | str = int(wait_file(out, "cpus=").split("cpus=")[1].split()[0])
    except AssertionError:
        cpus = "never started"
    expect({"22.05": 12, "24.11": "never started", "26.05": 4}, release, cpus)
    assert SlurmReader(slurm_cli).release.lowers_pending is (cpus == 4)


def test_squeue_json_honours_state_filters(slurm_cli, tmp_path, release):
    done = submit(slurm_cli, "true", "--gpus=1", "-o", "/dev/null", tmp=tmp_path)
    wait_for(slurm_cli, done, {"COMPLETED"}, 60)
    doc = json.loads(slurm_cli.run("squeue", ["--json", "-t", "PENDING"]))
    listed = any(int(j["job_id"]) == done for j in doc["jobs"])
    expect({"22.05": True, "24.11": False, "26.05": False}, release, listed)
    assert SlurmReader(slurm_cli).release.json_filters is (not listed)


def test_scontrol_json_and_the_data_parser_each_release_prints(slurm_cli, release):
    try:
        nodes = json.loads(slurm_cli.run("scontrol", ["show", "nodes", "--json"]))
        parser = nodes["meta"]["plugin"].get("data_parser")
    except (SlurmError, ValueError):
        parser = None
    expect({"22.05": None, "24.11": "data_parser/v0.0.42", "26.05": "data_parser/v0.0.45"},
           release, parser)
    assert SlurmReader(slurm_cli).release.scontrol_json is (parser is not None)


def test_lowering_a_running_jobs_memory(slurm_cluster, slurm_cli, tmp_path, release):
    """26.05 lowers a running job's memory in place, downward only, for jobs with an extern
    step (``PrologFlags=Contain``, which the dev cluster sets from 26.05: it works with
    proctrack/linuxproc, no cgroups needed), and the job runs on. Earlier releases refuse
    any memory change to a running job.

    The update is asynchronous: scontrol returns once slurmctld has sent the new limit to
    the job's nodes; until each slurmd has answered, the job shows the RESIZING flag with its
    old memory, and another update is refused. The test stops the node's slurmd (SIGSTOP)
    across the update so it sees that state every time, then lets it answer."""
    jid = submit(slurm_cli, "sleep 120", "--gpus=1", "-o", "/dev/null", tmp=tmp_path)
    wait_for(slurm_cli, jid, {"RUNNING"}, 60)
    reader = SlurmReader(slurm_cli)
    before = reader.snapshot().job(jid)
    assert before is not None and before.alloc and not before.resizing
    node = before.alloc[0].node
    slurmd = status(slurm_cluster)["processes"][f"slurmd-{node}"]
    assert slurmd
    os.kill(slurmd, signal.SIGSTOP)
    try:
        try:
            slurm_cli.run("scontrol", ["update", f"JobId={jid}", "MinMemoryNode=20000"])
            outcome = "lowered"
        except SlurmError as exc:
            msg = str(exc)
            outcome = ("extern step" if "extern step" in msg else
                       "not pending" if "pending" in msg.lower() else msg)
        expect({"22.05": "not pending", "24.11": "not pending", "26.05": "lowered"}, release,
               outcome)
        assert reader.release.lowers_running_memory is (outcome == "lowered")
        if outcome != "lowered":
            return
        during = reader.snapshot().job(jid)
        assert during is not None and during.running and during.resizing
        assert [a.mem_mb for a in during.alloc] == [a.mem_mb for a in before.alloc]
        with pytest.raises(SlurmError, match="can not be altered now"):
            slurm_cli.run("scontrol", ["update", f"JobId={jid}", "MinMemoryNode=10000"])
    finally:
        os.kill(slurmd, signal.SIGCONT)
    t0 = time.monotonic()
    deadline = t0 + 60
    while True:
        after = reader.snapshot()
        job = after.job(jid)
        assert job is not None
        if not job.resizing or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    print(f"\nthe resize completed {time.monotonic() - t0:.1f} s after slurmd went on")
    assert job.running and not job.resizing and job.start_time == before.start_time
    assert [a.mem_mb for a in job.alloc] == [20000]
    assert next(n for n in after.nodes if n.name == node).alloc_mem_mb == 20000
    with pytest.raises(SlurmError, match="Memory required by task is not available"):
        slurm_cli.run("scontrol", ["update", f"JobId={jid}", "MinMemoryNode=30000"])


def test_job_modify_sees_the_controllers_own_updates(slurm_cluster, slurm_cli, tmp_path,
                                                     release):
    """job_submit.lua's ``slurm_job_modify`` runs for every ``scontrol update``, the
    controller's own (as root) included: a site's job_modify that rejects or rewrites
    updates would act on synergy's shaping too (the project's hook passes them through).
    The test hook logs each call; job_submit/lua reloads a script whose mtime changed."""
    script = slurm_cluster.etc / "job_submit.lua"
    original = script.read_text()
    marker = f"synergy-fact-{time.time_ns()}"
    # A site's job_modify that logs, before synergy's line (which keeps the site's).
    logged = original.replace(
        "dofile(",
        "function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)\n"
        f'    slurm.log_info("{marker} job=%d uid=%d", job_rec.job_id, modify_uid)\n'
        "    return slurm.SUCCESS\nend\ndofile(", 1)
    assert logged != original
    log_file = slurm_cluster.state_dir / "log" / "slurmctld.log"
    try:
        script.write_text(logged)
        jid = submit(slurm_cli, "true", "-H", "--gpus=1", "-o", "/dev/null", tmp=tmp_path)
        slurm_cli.run("scontrol", ["update", f"JobId={jid}", "CpusPerTres=gres:gpu:4",
                                   "TresPerJob=gres:gpu:1", "NumCPUs=4"])
        deadline = time.monotonic() + 10
        seen = False
        while not seen and time.monotonic() < deadline:
            seen = f"{marker} job={jid} uid=0" in log_file.read_text(errors="replace")
            time.sleep(0.2)
    finally:
        time.sleep(1.1)   # the plugin compares mtimes in whole seconds
        script.write_text(original)
    expect({"22.05": True, "24.11": True, "26.05": True}, release, seen)


def test_requeue_into_a_new_shape_and_its_wall_cost(slurm_cli, tmp_path, release):
    """requeuehold, update, release: the job runs again with the new shape; the time it
    takes is the restart cost the controller and the simulator charge (printed)."""
    out = tmp_path / "rq.out"
    jid = submit(slurm_cli, REPORT + "\nsleep 300", "--gpus=1", "--requeue", "-o", str(out),
                 "--open-mode=append", tmp=tmp_path)
    wait_file(out, "restarts=0", 60)
    job = SlurmReader(slurm_cli).snapshot().job(jid)
    assert job is not None
    t0 = time.monotonic()
    SlurmWriter(slurm_cli, enforce=True).requeue_reshape(job, Shape(6, 62500))
    text = wait_file(out, "restarts=1", 120)
    seconds = time.monotonic() - t0
    print(f"\nSlurm {release}: requeue into a new shape ran again after {seconds:.1f} s")
    assert "cpus=6" in text.split("restarts=1")[0].splitlines()[-1]
    assert seconds < 60


def _restart_after_plain_requeue(slurm_cli, tmp_path, name: str, *opts: str) -> float:
    """Seconds from ``scontrol requeue`` (no hold, no update) until the job runs again."""
    out = tmp_path / f"{name}.out"
    jid = submit(slurm_cli, REPORT + "\nsleep 300", "--gpus=1", *opts, "-o", str(out),
                 "--open-mode=append", tmp=tmp_path)
    wait_file(out, "restarts=0", 60)
    t0 = time.monotonic()
    slurm_cli.run("scontrol", ["requeue", str(jid)])
    wait_file(out, "restarts=1", 120)
    return time.monotonic() - t0


def test_expedited_requeue_and_the_requeue_delay(slurm_cli, tmp_path, release):
    """A plain requeue waits out the requeue delay (``cred_expire``, 10 s on the dev
    cluster; 26.05's ``SchedulerParameters=requeue_delay`` sets it apart). 25.11 added
    ``sbatch --requeue=expedite`` (the dev cluster sets ``SlurmctldParameters=
    enable_expedited_requeue`` from 25.11): such a job is eligible again at once. Older
    releases reject the option. Printed: both restart times. The controller's own requeue
    (requeuehold, update, release with StartTime=now) does not wait either, on every
    release, so it gains nothing from expediting (docs/slurm-notes.md)."""
    plain = _restart_after_plain_requeue(slurm_cli, tmp_path, "plain", "--requeue")
    try:
        fast: float | str = _restart_after_plain_requeue(slurm_cli, tmp_path, "expedite",
                                                        "--requeue=expedite")
    except SlurmError as exc:
        fast = "rejected"
        print(f"\nSlurm {release}: sbatch --requeue=expedite: {exc}")
    print(f"\nSlurm {release}: a plain requeue ran again after {plain:.1f} s, an expedited "
          f"one {fast if isinstance(fast, str) else f'after {fast:.1f} s'}")
    assert plain > 10                                       # cred_expire=10, + 1 s
    expect({"22.05": "rejected", "24.11": "rejected", "26.05": "at once"}, release,
           fast if isinstance(fast, str) else "at once" if fast < plain - 5 else
           f"{fast:.0f} s")


def test_where_cons_tres_puts_gpu_jobs(slurm_cli, tmp_path, release):
    """What the replay's placement (core.ledger "fullest", core.backfill) rests on: a
    --gpus=N job goes whole to one node that holds it, and is spread over several when
    none does (with --cpus-per-gpu too), while a --gres=gpu:k job asks per node and waits
    for a node with k free. Which node of those that hold it differs: 22.05 takes the one
    with the fewest free GPUs (best fit); 24.11 and 26.05 took an idle node over one it
    would have filled exactly (though with no idle node they too took the fullest: the
    replay keeps best fit, docs/slurm-notes.md)."""
    hold = "sleep 120"

    def run(*opts: str) -> int:
        return submit(slurm_cli, hold, *opts, "-o", "/dev/null", tmp=tmp_path)

    def running(jid: int) -> str:
        return wait_for(slurm_cli, jid, {"RUNNING"})["NodeList"]

    for node, gpus in {"n1": 6, "n2": 5, "n3": 8}.items():       # free: 2, 3, 0, 8
        running(run(f"--gpus={gpus}", "-w", node))
    best_on = running(run("--gpus=2"))                           # n1: exactly 2 free
    running(run("--gpus=6", "-w", "n4"))                         # free: 0, 3, 0, 2
    per_node = run("--gres=gpu:4", "-N1")                        # no node has 4 free
    time.sleep(7)                                                # past a scheduler pass
    waits = job_fields(slurm_cli, per_node).get("JobState")
    slurm_cli.run("scancel", [str(per_node)])
    spread_on = running(run("--gpus=4", "--cpus-per-gpu=2", "--mem-per-gpu=1000"))
    expect({"22.05": ("n1", "PENDING", "n[2,4]"), "24.11": ("n4", "PENDING", "n[1-2]"),
            "26.05": ("n4", "PENDING", "n[1-2]")}, release, (best_on, waits, spread_on))


def test_a_backfill_reservation_takes_its_nodes_whole(slurm_cli, tmp_path, release):
    """What the replay's backfill (core.backfill) rests on: a job waiting for cores
    reserves its node from when it can start, and backfill's map is one of whole nodes, so
    a lower-priority job whose time limit reaches into that reservation does not start
    there even where it would leave the waiting job all it needs; one that ends before
    the reservation does (#42: e2e_forecast's 1-core jobs waited behind a 3-core one)."""
    def run(*opts: str) -> int:
        return submit(slurm_cli, "sleep 300", "-w", "n1", "--gpus=1", *opts, "-o",
                      "/dev/null", tmp=tmp_path)

    wait_for(slurm_cli, run("--cpus-per-gpu=20", "--time=30"), {"RUNNING"})
    waiting = run("--cpus-per-gpu=10", "--time=30")       # 4 of 24 cores left: it waits
    reaches = run("--cpus-per-gpu=1", "--time=30", "--nice=1000")
    ends_before = run("--cpus-per-gpu=1", "--time=2", "--nice=1000")
    wait_for(slurm_cli, ends_before, {"RUNNING"}, 30)      # a backfill pass has run
    time.sleep(7)                                          # and another one
    seen = tuple(job_fields(slurm_cli, j).get("JobState") for j in (waiting, reaches))
    expect({"22.05": ("PENDING", "PENDING"), "24.11": ("PENDING", "PENDING"),
            "26.05": ("PENDING", "PENDING")}, release, seen)


def test_a_slurm_admin_user_may_shape_and_release_other_users_jobs(slurm_cli, slurm_cluster,
                                                                   tmp_path, release):
    """What running the controller as a service user needs (docs/admin-guide.md, "The
    controller as a service"): AdminLevel=Admin in Slurm's database lets a user that is
    not root shape and release root's held job; without it the same update is refused."""
    import subprocess

    from ..conftest import ADMIN_USER

    name = ADMIN_USER                 # made with the cluster (see tests/conftest.py)
    env = dict(os.environ, SLURM_CONF=str(slurm_cluster.conf_path))

    def as_ctl(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["runuser", "-u", name, "--", *args], capture_output=True,
                              text=True, env=env, cwd="/", check=False)

    try:
        slurm_cli.run("sacctmgr", ["-i", "add", "user", name, "account=lab-a"])
        jid = submit(slurm_cli, REPORT, "--hold", "--gpus=1", "--cpus-per-gpu=8",
                     "-o", str(tmp_path / "ctl.out"), tmp=tmp_path)
        shape = ["scontrol", "update", f"JobId={jid}", "CpusPerTres=gres:gpu:4",
                 "TresPerJob=gres:gpu:1", "NumCPUs=4"]
        refused = as_ctl(*shape).returncode != 0
        slurm_cli.run("sacctmgr", ["-i", "modify", "user", name, "set", "adminlevel=Admin"])
        time.sleep(2)                 # slurmdbd pushes the change to slurmctld
        shaped = as_ctl(*shape)
        released = as_ctl("scontrol", "release", str(jid))
        assert shaped.returncode == 0 and released.returncode == 0, \
            shaped.stderr + released.stderr
        wait_for(slurm_cli, jid, {"COMPLETED"}, 45)
        cpus = int(wait_file(tmp_path / "ctl.out", "cpus=").split("cpus=")[1].split()[0])
        expect({r: (True, 4) for r in ("22.05", "24.11", "26.05")}, release, (refused, cpus))
    finally:
        slurm_cli.run("sacctmgr", ["-i", "delete", "user", name])


def test_how_a_spread_gpus_job_gets_its_cores_and_its_batch_step_says_so(
        slurm_cli, tmp_path, release):
    """What whatif's pace of a spread job rests on (HistoryJob.poorest_cores_per_gpu): a
    --gpus=8 job spread over two nodes, and how its cores are laid out there when they come
    from its partition's DefCpuPerGPU (3), from --cpus-per-gpu=3, and from the controller's
    shaping of a held job (``SlurmWriter.reshape_pending``, then release); accounting's
    batch step (an export without -X, JSON and text) records the batch node's cores and
    GPUs as ``scontrol -d show job`` shows them. 22.05 gave the default's 24 cores 4 on the
    batch node's 4 GPUs (1 per GPU) and 20 on the other, but 12 and 12 for an explicit
    cores-per-GPU, the controller's shape too; 24.11 and 26.05 12 and 12 in every case."""
    def run(*opts: str) -> int:
        return submit(slurm_cli, "sleep 180", *opts, "-o", "/dev/null", tmp=tmp_path)

    for node, gpus in {"n1": 4, "n2": 4, "n3": 8, "n4": 8}.items():     # 20 cores free
        wait_for(slurm_cli, run(f"--gpus={gpus}", "--cpus-per-gpu=1", "-w", node),
                 {"RUNNING"})                                           # on n1 and n2
    seen = {how: _spread_layout(slurm_cli, _submit_spread(slurm_cli, tmp_path, how, 3))
            for how in ("default", "explicit", "shaped")}
    even = {"default": {(12, 4)}, "explicit": {(12, 4)}, "shaped": {(12, 4)}}
    expect({"22.05": {**even, "default": {(4, 4), (20, 4)}}, "24.11": even, "26.05": even},
           release, seen)


def test_a_shaped_spread_job_on_a_node_short_of_cores(slurm_cli, tmp_path, release):
    """The model places a shaped job only where each node has its share (core.backfill):
    an 8-GPU job with 1 core per GPU, asked for (--cpus-per-gpu) or given by the controller
    (held, reshape_pending, released), whose free GPUs are on a node with 1 free core and
    one with 20, waits on every release; it is not started with its cores laid out as they
    are free. (The uneven shaped jobs of docs/results section 8's 22.05 seed 13 came about
    otherwise: not found.)"""
    def run(*opts: str) -> int:
        return submit(slurm_cli, "sleep 180", *opts, "-o", "/dev/null", tmp=tmp_path)

    for node, opts in {"n1": ("--gpus=4", "-c", "23"), "n2": ("--gpus=4", "--cpus-per-gpu=1"),
                       "n3": ("--gpus=8",), "n4": ("--gpus=8",)}.items():
        wait_for(slurm_cli, run(*opts, "-w", node), {"RUNNING"})
    seen: dict[str, object] = {}
    for how in ("explicit", "shaped"):
        jid = _submit_spread(slurm_cli, tmp_path, how, 1)
        time.sleep(12)      # past two scheduler passes and a backfill pass (5 s each)
        state = job_fields(slurm_cli, jid).get("JobState")
        seen[how] = _spread_layout(slurm_cli, jid, cores=8) if state == "RUNNING" \
            else state
        slurm_cli.run("scancel", [str(jid)])
    waits = {"explicit": "PENDING", "shaped": "PENDING"}
    expect({"22.05": waits, "24.11": waits, "26.05": waits}, release, seen)

def _submit_spread(slurm_cli, tmp_path, how: str, cores_per_gpu: int) -> int:
    """A 4-second 8-GPU job whose cores come from the partition's default (``default``),
    ``--cpus-per-gpu`` (``explicit``) or the controller's shaping of it held (``shaped``:
    ``SlurmWriter.reshape_pending``, then released)."""
    opts = {"default": (), "explicit": (f"--cpus-per-gpu={cores_per_gpu}",),
            "shaped": ("-H",)}[how]
    jid = submit(slurm_cli, "sleep 4", "--gpus=8", "--mem-per-gpu=1000", *opts,
                 "-o", "/dev/null", tmp=tmp_path)
    if how == "shaped":
        job = SlurmReader(slurm_cli).snapshot().job(jid)
        assert job is not None
        writer = SlurmWriter(slurm_cli, enforce=True)
        writer.reshape_pending(job, Shape(cores_per_gpu, 1000))
        writer.release(jid)
    return jid


def _spread_layout(slurm_cli, jid: int, cores: int = 24) -> set[tuple[int, int]]:
    """The (cores, GPUs) on each node of a running job, from ``scontrol -d show job``,
    once the job has ended and sacct's batch step (JSON and text) was checked to agree."""
    from synergy_slurm.slurm.parse import expand_hostlist
    from synergy_slurm.slurm.sacct import PRIORITY_FIELDS, parse_history

    def count(ranges: str) -> int:
        return sum(int(b) - int(a) + 1 if b else 1 for r in ranges.split(",") if r
                   for a, _, b in [r.partition("-")])

    fields = wait_for(slurm_cli, jid, {"RUNNING"})
    layout = {}         # node -> (cores, GPUs)
    for line in slurm_cli.run("scontrol", ["-d", "show", "job", str(jid)]).splitlines():
        parts = dict(p.split("=", 1) for p in line.split() if "=" in p)
        if "CPU_IDs" in parts:
            gpus = count(parts.get("GRES", "").partition("IDX:")[2].rstrip(")"))
            for node in expand_hostlist(parts["Nodes"]):
                layout[node] = (count(parts["CPU_IDs"]), gpus)
    wait_for(slurm_cli, jid, {"COMPLETED"}, 60)
    deadline = time.monotonic() + 30
    while True:     # slurmdbd hears of the end a moment later
        raw = slurm_cli.run("sacct", ["-a", "-D", "--json", "-j", str(jid)])
        text = slurm_cli.run("sacct", ["-a", "-D", "-P", "-o", ",".join(PRIORITY_FIELDS),
                                       "-j", str(jid)])
        jobs, skipped = parse_history(raw)
        if (jobs and jobs[0].end and jobs[0].batch_node) or time.monotonic() > deadline:
            break
        time.sleep(1)
    (job,), (from_text,) = jobs, parse_history(text)[0]
    assert not skipped and not parse_history(text)[1]
    assert job.batch_node == from_text.batch_node == layout[fields["BatchHost"]], layout
    assert len(layout) == 2 and job.cpus == sum(c for c, _ in layout.values()) == cores
    return set(layout.values())
