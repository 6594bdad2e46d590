"""``eos-assets bench``: speed measured against the machine's own ceiling, in one run.

Every figure that matters is a ratio of two things measured in the same run on the same data
(ingest vs a plain consume loop, exactly-once vs at-least-once, a batch on a large table vs on
a small one), so that a busy or slow machine moves both sides alike. BENCHMARKS.md explains the
method of each measurement; ``runner.run_bench`` runs them.
"""
