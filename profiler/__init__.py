"""The in-job profiling harness (optimistic profiling): measures a training job's
throughput against its CPU count from inside its allocation. Filled in by the profiler
issue; importable now so that the package layout is fixed."""
