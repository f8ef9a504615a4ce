"""The controller: Synergy's rounds on a live Slurm cluster (observe, plan, reconcile, act,
record)."""
