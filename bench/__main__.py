"""Run every benchmark: ``python -m bench [options]`` (options are passed to each benchmark)."""

from __future__ import annotations

import sys

from bench import log_bench

if __name__ == "__main__":
    log_bench.main(sys.argv[1:])
