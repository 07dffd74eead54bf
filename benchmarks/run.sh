#!/usr/bin/env bash
# Rerun the benchmarks and rewrite the results in benchmarks/README.md.
#
#   pip install '.[bench]'              # once: pytest-benchmark, numpy, pyahocorasick, hyperscan
#   bash benchmarks/run.sh              # the default suite and the phrase-set sweep (~10 minutes)
#   CONTEXTCARE_BENCH_BIG=1 bash benchmarks/run.sh   # also 100 000 watchers and 10 MB fed
#
# Extra arguments go to pytest (e.g. -k phrases). PYTHON picks the interpreter (default: python).
# Run it on an otherwise idle machine: the load average is recorded with the results.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python}"
OUT="${CONTEXTCARE_BENCH_JSON:-benchmarks/results.json}"
load=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo 0)
if awk "BEGIN { exit !($load > 0.5) }"; then
  echo "warning: load average is $load; other processes will inflate the numbers" >&2
fi
"$PY" -m pytest benchmarks/ --benchmark-json="$OUT" "$@"
"$PY" benchmarks/report.py "$OUT" --readme benchmarks/README.md
"$PY" benchmarks/sweep.py    # phrase sets of 100 ... 100 000: sweep.json, sweep.png, README
echo "results: $OUT; tables rewritten in benchmarks/README.md"
