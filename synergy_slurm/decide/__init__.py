"""The decisions synergy's drivers share: pure rules that the hook, the controller, the
controller model and whatif's replay all call, so that none of them keeps its own copy.

The first of them is :func:`change.what_synergy_changes`: for one GPU job, whether synergy
reshapes it (a known profile), releases it as it is (managed, profile unknown), or leaves
it as submitted (not ours to shape)."""

from .change import Change, Decision, JobFacts, what_synergy_changes

__all__ = ["Change", "Decision", "JobFacts", "what_synergy_changes"]
