"""contextwarden's benchmarks: ``python -m bench`` (or ``make bench``) runs them all and writes
``bench/results/*.json``; ``python -m bench.report`` turns those into ``docs/benchmarks.md``."""
