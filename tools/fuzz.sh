#!/usr/bin/env bash
# Fuzz the native engine against the reference with atheris (tools/fuzz_engine.py).
#
#   tools/fuzz.sh               # short run for CI: 40 s of fuzzing (about 50 s in all)
#   tools/fuzz.sh long [SECS]   # long run (default 3600 s), two workers, then the grown corpus is
#                               # re-run on the ASan+UBSan build when tools/sanitize.sh made one
#   tools/fuzz.sh replay        # re-run the corpus and the seeds once (no fuzzing)
#
# tools/fuzz-seeds/ (committed) holds the inputs that found defects (issue 17): every run starts
# from them besides the grown corpus, and `replay` re-runs them. New inputs go to the corpus only.
#
# Environment: PYTHON (default: python, the active venv's, with contextcare installed),
# FUZZ_JOBS (worker processes of the long run; default 2),
# FUZZ_WORK (corpus and crash files; default: build/fuzz in the repository, which git ignores),
# SANITIZE_WORK (where tools/sanitize.sh keeps its venv; default as there).
#
# A crash (a native/reference disagreement, an undocumented exception, or the process dying)
# leaves FUZZ_WORK/artifacts/crash-*; `python tools/fuzz_engine.py --explain FILE` prints its
# scenario as Python, to turn into a regression test in tests/test_hardening.py.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python}
work=${FUZZ_WORK:-$root/build/fuzz}
sanitize_work=${SANITIZE_WORK:-${TMPDIR:-/tmp}/contextcare-sanitize}
mode=${1:-short}
corpus=$work/corpus
seeds=$root/tools/fuzz-seeds
artifacts=$work/artifacts
mkdir -p "$corpus" "$artifacts"

if ! "$python" -c "import atheris" 2>/dev/null; then
  "$python" -m pip install --quiet "atheris>=2.3"
fi

fuzz() {  # fuzz SECONDS [extra libFuzzer flags]
  local seconds=$1
  shift
  echo "+ fuzzing for ${seconds}s (corpus $corpus)"
  "$python" "$root/tools/fuzz_engine.py" -max_total_time="$seconds" -rss_limit_mb=4096 \
    -timeout=30 -print_final_stats=1 -artifact_prefix="$artifacts/" "$@" "$corpus" "$seeds"
}

case $mode in
  short)
    fuzz 40
    ;;
  long)
    seconds=${2:-3600}
    # Independent workers on one shared corpus (libFuzzer's -fork/-jobs re-execute the script by
    # its path, which would not pick this interpreter). A crash ends its worker only.
    pids=()
    for job in $(seq 1 "${FUZZ_JOBS:-2}"); do
      fuzz "$seconds" > "$work/worker-$job.log" 2>&1 &
      pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || true; done
    for job in $(seq 1 "${FUZZ_JOBS:-2}"); do
      grep -E "^(#[0-9]+ +DONE|stat::|==[0-9]+== ERROR)" "$work/worker-$job.log" | sed "s/^/worker $job: /"
    done
    if [ -x "$sanitize_work/venv/bin/python" ]; then
      echo "+ re-running the corpus on the sanitizer build in $sanitize_work"
      "$sanitize_work/venv/bin/python" -c "import atheris" 2>/dev/null \
        || "$sanitize_work/venv/bin/python" -m pip install --quiet "atheris>=2.3"
      (cd "$sanitize_work/src" &&
        LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)" \
        ASAN_OPTIONS="detect_leaks=0:abort_on_error=1" UBSAN_OPTIONS="halt_on_error=1" \
        PYTHONMALLOC=malloc \
        "$sanitize_work/venv/bin/python" "$root/tools/fuzz_engine.py" --replay "$corpus" "$seeds")
    else
      echo "+ no sanitizer build in $sanitize_work (run tools/sanitize.sh first to re-run the corpus there)"
    fi
    if compgen -G "$artifacts/crash-*" > /dev/null; then
      echo "fuzz.sh: crashes found:" >&2
      ls "$artifacts"/crash-* >&2
      exit 1
    fi
    ;;
  replay)
    "$python" "$root/tools/fuzz_engine.py" --replay "$corpus" "$seeds"
    ;;
  *)
    echo "usage: tools/fuzz.sh [short | long [SECONDS] | replay]" >&2
    exit 2
    ;;
esac
