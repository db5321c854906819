#!/bin/sh
# The scaling tables (refscale, FileRef get+put, grace-period throughput) on whatever
# machine this runs on: thread counts 1, 2, 4, ... up to the core count, which is
# `cargo xtask bench`'s default. Run it with the machine otherwise idle; it rewrites
# docs/bench/REPORT.md. Extra arguments go to `cargo xtask bench` (e.g. --quick).
set -eu
cd "$(dirname "$0")/.."
cores=$(nproc)
echo "refscale: $cores cores; thread counts 1,2,4,... up to $cores"
exec cargo xtask bench "$@"
