"""Shared fixtures: where the read-only reference data lives (never copied into the repo)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

REPO = Path(__file__).resolve().parents[1]

# The quick loop's property tests (README, "Develop"): a third of the examples, chosen at
# random as always; the whole suite runs them all.
settings.register_profile("quick", max_examples=34)


def shared_dir() -> Path:
    """``../shared`` beside the checkout, or $SYNERGY_SHARED."""
    env = os.environ.get("SYNERGY_SHARED")
    return Path(env) if env else REPO.parent / "shared"


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    """The paper's traces and the reference simulator's results, which stay outside the
    repository: a test that needs them skips, saying so, in a clone without them (and
    fails where SYNERGY_SHARED names a directory that lacks them)."""
    ref = shared_dir() / "reference"
    if not (ref / "model_profiles.json").exists():
        msg = f"reference data not found at {ref} (set SYNERGY_SHARED)"
        if os.environ.get("SYNERGY_SHARED"):
            pytest.fail(msg)
        pytest.skip(msg + ": the paper's traces and results are not in the repository")
    return ref


@pytest.fixture(scope="session")
def profiles_path() -> Path:
    """The paper's model profiles: the reference copy where it is beside the checkout,
    else the identical one the package ships (tests/test_packaging.py checks they are)."""
    ref = shared_dir() / "reference" / "model_profiles.json"
    if ref.exists():
        return ref
    from synergy_slurm.shipped import SHIPPED_PROFILES

    return Path(SHIPPED_PROFILES)


@pytest.fixture(scope="session")
def paper_profiles(profiles_path: Path):
    from synergy_slurm.profiles import load_profiles

    return load_profiles(profiles_path)


# -- the real Slurm cluster ----------------------------------------------------------------
# scripts/test.sh runs the passes of every Slurm release side by side (the real-Slurm tests
# mostly wait on Slurm, not on the CPUs): each pass is a slot (SYNERGY_TEST_SLOT 0-5: one
# per release, then one per release for the PyTorch and demo files) whose clusters get
# their own directories and ports, 2000 apart, so that they never meet.
TEST_SLOT = int(os.environ.get("SYNERGY_TEST_SLOT", "0"))


def slot_port(port: int) -> int:
    """``port`` in this pass's range (a cluster uses its port + 184 + node for slurmd)."""
    return port + 2000 * TEST_SLOT


def slot_dir(name: str) -> Path:
    """A cluster's state directory under /tmp (which every daemon's user can reach),
    this pass's own."""
    return Path("/tmp") / (f"{name}-{TEST_SLOT}" if TEST_SLOT else name)


TEST_CLUSTER_DIR = slot_dir("synergy-test-cluster")
TEST_CLUSTER_PORT = slot_port(16917)
# Which Slurm the real-cluster tests run on: "system" or a release from a cached root
# (22.05, 24.11, 26.05); scripts/test.sh runs the suite once per release.
TEST_SLURM = os.environ.get("SYNERGY_TEST_SLURM", "system")


@pytest.fixture(scope="session")
def slurm_cluster(request):
    """A 4-node dev cluster (32 fake GPUs) with a site's accounting (slurmdbd, MariaDB,
    multifactor priority) for the whole session, started with the same code as
    ``synergy dev-cluster up --accounting --slurm $SYNERGY_TEST_SLURM`` (installing Slurm or
    building its root if needed) and stopped at the end. A release from a cached root puts
    its commands first on PATH for the session, as a user of that cluster does. Set
    SYNERGY_SKIP_SLURM=1 to skip the tests that need it on a machine without root."""
    if os.environ.get("SYNERGY_SKIP_SLURM") == "1":
        pytest.skip("SYNERGY_SKIP_SLURM=1")
    from synergy_slurm import devcluster
    from synergy_slurm.devcluster import local_spec

    # The hook is installed but inert until a test writes its table (no table = pass all).
    # Memory limits bite, as at most sites (task/cgroup), where the machine allows it:
    # every memory synergy lowers is lowered under enforcement.
    spec = local_spec(TEST_CLUSTER_DIR, nodes=4, port=TEST_CLUSTER_PORT, hook=True,
                      slurm=TEST_SLURM,
                      binds=tuple(str(d.resolve()) for d in [shared_dir()] if d.is_dir()),
                      accounting=True, enforce_memory=not devcluster.memory_cgroups())
    devcluster.down(devcluster.existing_spec(TEST_CLUSTER_DIR))  # leftovers of a broken run
    # The test users before the cluster: a release from a cached root sees the host's
    # /etc/passwd as it was when its daemons started (useradd replaces the file), and
    # slurmctld maps an association to its user's uid when the association is added (one
    # added for a user that did not exist yet never matches: "Invalid account or
    # account/partition combination specified").
    created = [u for u in TEST_USERS if _ensure_user(u)]
    seconds, spec = devcluster.up(spec, install=True, timeout_s=90)
    devcluster.add_user(spec, UNPRIVILEGED_USER)
    version = devcluster.release_info(spec).get("version")
    msg = (f"dev cluster: Slurm {version}, 4 nodes idle {seconds:.2f} s after start "
           f"({spec.state_dir})")
    capman = request.config.pluginmanager.getplugin("capturemanager")
    with capman.global_and_fixture_disabled():
        print(f"\n{msg}", flush=True)
    path = os.environ.get("PATH", "")
    if spec.bindir.is_dir():
        os.environ["PATH"] = f"{spec.bindir}:{path}"
    yield spec
    os.environ["PATH"] = path
    devcluster.down(spec)
    for user in created:
        _remove_user(user)


def slurm_section(spec) -> str:
    """The [slurm] section of a synergy.toml for the test cluster."""
    bindir = f'bindir = "{spec.bindir}"\n' if spec.bindir.is_dir() else ""
    return f'[slurm]\nconf = "{spec.conf_path}"\n{bindir}'


@pytest.fixture(scope="session")
def slurm_release(slurm_cluster) -> tuple[int, int]:
    """(major, minor) of the test cluster's Slurm, e.g. (26, 5)."""
    from synergy_slurm import devcluster

    version = devcluster.release_info(slurm_cluster).get("version", "0.0")
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


@pytest.fixture
def slurm_cli(slurm_cluster):
    from synergy_slurm import devcluster

    return devcluster.slurm_cli(slurm_cluster, timeout_s=30)


UNPRIVILEGED_USER = "synergy-t-user"
# A user the tests make a Slurm admin (AdminLevel=Admin), as a site's controller service user.
ADMIN_USER = "synergy-t-ctl"
TEST_USERS = (UNPRIVILEGED_USER, ADMIN_USER)


@pytest.fixture(scope="session")
def unprivileged_user():
    """A user without privileges (created for the session, removed at its end if the
    session created it; the cluster's fixture creates it first where Slurm is used)."""
    created = _ensure_user(UNPRIVILEGED_USER)
    yield UNPRIVILEGED_USER
    if created:
        _remove_user(UNPRIVILEGED_USER)


def _ensure_user(name: str) -> bool:
    """Create the Unix user ``name`` unless it exists; whether this call created it."""
    import pwd
    import subprocess

    try:
        pwd.getpwnam(name)
        return False
    except KeyError:
        return subprocess.run(["useradd", "-M", name], capture_output=True).returncode == 0


def _remove_user(name: str) -> None:
    import subprocess

    subprocess.run(["userdel", name], capture_output=True, check=False)
