"""What Synergy would have done with a site's own job history (``synergy whatif``)."""

from .history import HistoryError, Replay, Rule, build_replay

__all__ = ["HistoryError", "Replay", "Rule", "build_replay"]
