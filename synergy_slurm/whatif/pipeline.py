"""``synergy whatif`` from a history to its report: read the history (a saved export or
sacct), parse it, build the replays (the synergy replay and the forecasts beside it), run
them, and build the report's document.

Plain values in, plain values out: the command line resolves its options (the config, the
cluster to replay on, the release, the profiles, the controller's settings) and prints what
comes back; a test or a benchmark calls :func:`run_whatif` the same way. Errors are
synergy's own: :class:`OptionError` names the option a value came from, other bad input is
a ``BadInputError``, a Slurm that cannot be read a ``SynergyError``.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ..core import PerGpu, Profile
from ..core.pools import Pool, merged
from ..core.usage import UsageRule
from ..decide import ControllerSettings
from ..errors import BadInputError, SynergyError
from ..slurm.commands import SlurmCLI, SlurmError
from ..slurm.model import Skipped
from ..slurm.parse import ParseError
from ..slurm.release import Release
from ..slurm.sacct import HistoryJob, parse_history, read_history
from ..slurm.sacct_usage import UsageRead, parse_usage
from . import forecast, report
from . import replay as replay_mod
from .history import HistoryError, MixGuess, ReplayInput, Rule, build_replay


class OptionError(HistoryError):
    """A value that cannot be used, with the option (or config key) it came from."""

    def __init__(self, message: str, option: str) -> None:
        super().__init__(message)
        self.option = option


@dataclass(frozen=True)
class Request:
    """What one whatif replays and how, as plain values."""
    export: Path | None = None            # a saved history; None: ask sacct
    start: str = "now-7days"              # without export: sacct's -S and -E
    end: str = "now"
    rules: tuple[Rule, ...] = ()          # --rule, then [whatif] rules
    mix: tuple[float, ...] | None = None  # --assume-mix: the optimistic forecast's classes
    seed: int = 0
    allocator: str = "tune"
    startup_s: float = 0.0
    default_time_limit_min: float = 0.0   # 0: unlimited
    headroom: float = 1.25                # [usage] headroom: the guaranteed forecast's need
    usage_rule: UsageRule | None = None   # the closed loop's rule; None: [usage] off
    trust: str = "own"                    # [profiles] trust


@dataclass(frozen=True)
class Inputs:
    """What the replays run on: the profiles (who measured each, and where they came
    from, for the report), the pools, the release (None: none read, 22.05's rules) and the
    controller's settings."""
    profiles: Mapping[str, Profile]
    pools: tuple[Pool, ...]
    ctl: ControllerSettings
    release: Release | None = None
    owners: Mapping[str, str] = field(default_factory=dict)
    profiles_from: str = ""


@dataclass(frozen=True)
class History:
    """The raw history, where it came from and when it was read (None: unknown)."""
    raw: str
    source: str
    read_at: float | None = None


@dataclass(frozen=True)
class Parsed:
    """The history's jobs, the records skipped and how many for each reason, and what the
    jobs used where the history says."""
    jobs: list[HistoryJob]
    skipped: list[Skipped]
    reasons: dict[str, int]
    used: UsageRead


@dataclass(frozen=True)
class Built:
    """The synergy replay (the expected forecast), the others beside it (guaranteed, and
    optimistic with a mix) and the closed loop's caps."""
    replay: ReplayInput
    forecasts: dict[str, ReplayInput]
    caps: dict[tuple[str, str], PerGpu]


@dataclass(frozen=True)
class Result:
    """The report's document, and what its HTML form plots."""
    doc: dict[str, Any]
    outcome: replay_mod.Replays
    used: UsageRead


def run_whatif(req: Request, inputs: Inputs, cli: SlurmCLI | None = None,
               on_progress: Callable[[float], None] | None = None) -> Result:
    """The whole pipeline: ``cli`` reads the history when ``req.export`` is None;
    ``on_progress`` hears the share of the replays done (0 to 1)."""
    check_rule_keys(req.rules, inputs.profiles)
    history = read(req, cli)
    return replay_history(req, inputs, history, parse(history), on_progress)


def replay_history(req: Request, inputs: Inputs, history: History, parsed: Parsed,
                   on_progress: Callable[[float], None] | None = None) -> Result:
    """The pipeline from a history already read and parsed (the command reads it before
    the cluster, so that a bad history is said before Slurm is asked anything)."""
    built = build(req, parsed, inputs, history.read_at, history.source)
    outcome = replay_all(built, inputs, req.allocator, on_progress)
    return Result(document(req, inputs, history.source, parsed, built, outcome), outcome,
                  parsed.used)


def check_rule_keys(rules: Sequence[Rule], profiles: Mapping[str, Profile]) -> None:
    keys = {p.key for p in profiles.values()}
    unknown = sorted({r.key for r in rules if r.key not in keys})
    if unknown:
        raise OptionError(
            f"no profile named {', '.join(unknown)} (known: {', '.join(sorted(keys))});"
            " import it (synergy profile import) or name another",
            "--rule / [whatif] rules")


def read(req: Request, cli: SlurmCLI | None) -> History:
    """The raw history: the export's text, else sacct's for the window."""
    if req.export is not None:
        try:
            return History(req.export.read_text(errors="replace"), str(req.export))
        except OSError as exc:
            raise BadInputError(f"--from {req.export}: {exc.strerror or exc}") from None
    for v, name in ((req.start, "--start"), (req.end, "--end")):
        if not v or any(c.isspace() for c in v) or v.startswith("-"):
            raise OptionError(f"{v!r} is not a time sacct takes", name)
    if cli is None:
        raise ValueError("reading the history from sacct needs a SlurmCLI")
    now = time.time()
    try:
        raw = read_history(cli, req.start, req.end)
    except SlurmError as exc:
        raise SynergyError(f"could not read the history: {exc}") from None
    return History(raw, f"sacct -S {req.start} -E {req.end} "
                   f"({datetime.now().strftime('%Y-%m-%d %H:%M')})", now)


def parse(history: History) -> Parsed:
    """The history's jobs, the records skipped and how many for each reason; bad input
    when nothing could be read."""
    try:
        jobs, skipped = parse_history(history.raw)
    except ParseError as exc:
        raise BadInputError(f"{history.source}: {exc}") from None
    reasons = dict(Counter(s.reason for s in skipped))
    if not jobs and skipped:
        raise BadInputError(
            f"{history.source}: none of its {len(skipped)} records could be read: " +
            "; ".join(f"{n} {why}" for why, n in
                      sorted(reasons.items(), key=lambda kv: -kv[1])[:5]))
    return Parsed(jobs, skipped, reasons, usage(history.raw))


def usage(raw: str) -> UsageRead:
    """What the jobs used, where the history carries it (sacct's JSON with steps); the
    text form without steps says nothing of it."""
    try:
        return parse_usage(raw)
    except ParseError:
        out = UsageRead()
        out.unknown["usage not in this export (sacct -P text: give sacct --json without -X)"] \
            += 1
        return out


def build(req: Request, parsed: Parsed, inputs: Inputs, export_time: float | None,
          source: str) -> Built:
    """The synergy replay (the expected forecast), the others beside it (guaranteed, and
    optimistic with a mix: forecast.py) and the closed loop's caps."""
    history, used = parsed.jobs, parsed.used
    guesses: dict[str, Any] = {
        "synergy": forecast.InferredGuess(forecast.key_classes(history, used.jobs)),
        "guaranteed": forecast.UsedGuess(forecast.key_needs(history, used.jobs,
                                                            req.headroom))}
    if req.mix is not None:
        # An assumption, so only when it is stated (and a replay less on a large site).
        guesses["optimistic"] = MixGuess(req.mix, req.seed)
    try:
        built = {name: build_replay(history, inputs.profiles, inputs.pools, req.rules,
                                    guess, export_time, req.startup_s,
                                    req.default_time_limit_min * 60, inputs.owners,
                                    req.trust)
                 for name, guess in guesses.items()}
    except HistoryError as exc:
        raise BadInputError(f"{source}: {exc}") from None
    rp = built.pop("synergy")
    _note_future(rp, history)
    cluster = merged(inputs.pools)
    too_big = [j for j in rp.trace if j.gpus > cluster.total.gpus]
    if too_big:
        raise BadInputError(
            f"{len(too_big)} jobs ran on more GPUs than the replayed cluster has "
            f"({cluster.total.gpus}), e.g. job {too_big[0].job_id}: replay on the "
            "site's own nodes, or give --servers")
    return Built(rp, built, _caps(rp, used, inputs.pools, req.usage_rule))


def _note_future(rp: ReplayInput, history: list[HistoryJob]) -> None:
    future = [j for j in history if j.submit > time.time() + 86400]
    if future:
        # No window bounds a saved export: a clock set wrong shows only against today.
        first = datetime.fromtimestamp(min(j.submit for j in future)).strftime("%Y-%m-%d")
        rp.notes[f"submitted after today (from {first}): check the export's clock"] += \
            len(future)


def _caps(rp: ReplayInput, used: UsageRead, pools: tuple[Pool, ...], rule: UsageRule | None
          ) -> dict[tuple[str, str], PerGpu]:
    """The closed loop's caps the controller would hold, each noted on the replay."""
    caps = forecast.suspect_caps(rp, used.jobs, pools, rule) if rule is not None else {}
    jobs_of = Counter((t.model, t.user) for t in rp.trace) if caps else Counter()
    for (key, user), cap in sorted(caps.items()):
        rp.notes[f"profile {key} of user {user}: its jobs used far less than given, capped "
                 f"at {cap.cpus} cores and {cap.mem_gb:.1f} GB per GPU as the controller's "
                 "closed loop would"] += jobs_of[key, user]
    return caps


def replay_all(built: Built, inputs: Inputs, allocator: str,
               on_progress: Callable[[float], None] | None = None) -> replay_mod.Replays:
    """Every replay (plain, synergy, the forecasts); ``on_progress`` hears the share done."""
    rp = built.replay
    span = max(1.0, max((t.arrival for t in rp.trace), default=1.0))
    names = ["plain", "synergy", *built.forecasts]

    def on_round(which: str, now: float) -> None:
        if on_progress is not None:
            on_progress((min(1.0, now / span) + names.index(which)) / len(names))

    return replay_mod.run(rp, inputs.profiles, merged(inputs.pools), inputs.pools, allocator,
                          inputs.ctl, on_round if on_progress else None, built.forecasts,
                          built.caps)


def document(req: Request, inputs: Inputs, source: str, parsed: Parsed, built: Built,
             outcome: replay_mod.Replays) -> dict[str, Any]:
    """The report's document (report.as_text and report.write_html show it)."""
    cluster = merged(inputs.pools)
    rp, release = built.replay, inputs.release
    doc = report.build(rp, outcome, cluster, list(inputs.pools), inputs.ctl, source,
                       len(parsed.skipped), parsed.reasons,
                       {"slurm_release": str(release) if release else "22.05 rules",
                        "startup_s": req.startup_s, "profiles_from": inputs.profiles_from,
                        "default_time_limit_min": req.default_time_limit_min or "unlimited"})
    doc.update(report.usage_section(parsed.jobs, rp, parsed.used, inputs.profiles,
                                    cluster.fair))
    doc.update(report.forecast_section(outcome, rp, built.forecasts, req.mix))
    doc.update(report.first_screen(doc, rp, cluster, release is not None))
    return doc
