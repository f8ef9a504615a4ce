"""Trace-driven simulation of Synergy's rounds, driving the pure core."""
