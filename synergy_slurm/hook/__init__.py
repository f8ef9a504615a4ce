"""The Python side of the job_submit hook: the table the Lua reads, and the same rules in
Python for ``synergy hook explain``."""
