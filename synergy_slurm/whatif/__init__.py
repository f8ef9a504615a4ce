"""What Synergy would have done with a site's own job history (``synergy whatif``)."""

from .history import HistoryError, ReplayInput, Rule, build_replay

__all__ = ["HistoryError", "ReplayInput", "Rule", "build_replay"]
