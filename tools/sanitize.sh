#!/usr/bin/env bash
# Build the native engine with AddressSanitizer + UndefinedBehaviorSanitizer in a private venv and
# run the engine test suites (differential, hardening, semantics, bad input) under it.
#
#   tools/sanitize.sh                 # default: the fast suites (-m "not slow"), ~3 min on 2 cores
#   tools/sanitize.sh -m slow         # extra pytest arguments replace the default marker filter
#   SANITIZERS=undefined tools/sanitize.sh
#
# Environment:
#   SANITIZERS      the -fsanitize= list (default: address,undefined)
#   SANITIZE_WORK   work folder for the source copy, build tree and venv
#                   (default: ${TMPDIR:-/tmp}/contextcare-sanitize; kept between runs, so a rerun
#                   only rebuilds what changed)
#   PYTHON          the interpreter the venv is made from (default: python3)
#   CC              the C compiler (default: gcc); its own ASan/UBSan runtimes are preloaded
#   SANITIZE_TESTS  the test files to run (default: the engine suites listed at the end; CI
#                   runs a subset, see .ci/run)
#
# Why a copy: pyproject.toml builds in build/{wheel_tag} inside the source tree, and the installed
# development package must not be touched. Why LD_PRELOAD: the python binary is not built with
# ASan, so the ASan runtime has to be the first library loaded. Why PYTHONMALLOC=malloc: with
# pymalloc, small str objects live in pymalloc arenas where ASan cannot see an overread; with
# malloc every str the engine reads has its own red zones. Leak detection is off at exit
# (CPython keeps objects alive then, by design); a targeted LeakSanitizer check runs before the
# tests instead, and tests/test_hardening.py checks RSS on the normal build.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
work=${SANITIZE_WORK:-${TMPDIR:-/tmp}/contextcare-sanitize}
sanitizers=${SANITIZERS:-address,undefined}
python=${PYTHON:-python3}
cc=${CC:-gcc}
venv=$work/venv

mkdir -p "$work/src"
# A fresh copy of what the build and the tests need (rsync-free: plain cp).
rm -rf "$work/src/csrc" "$work/src/src" "$work/src/tests" "$work/src/tools"
for item in pyproject.toml CMakeLists.txt README.md csrc src tests tools; do
  if [ -e "$root/$item" ]; then cp -r "$root/$item" "$work/src/"; fi
done

if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet "scikit-build-core>=0.10" "cython>=3.0.10" \
  "hypothesis>=6.100" "pytest>=8" "numpy>=1.24" "atheris>=2.3" "msgspec>=0.23" "rich>=13"

echo "+ building contextcare with -fsanitize=$sanitizers (CC=$cc)"
CC=$cc CONTEXTCARE_SANITIZE=$sanitizers "$venv/bin/python" -m pip install --quiet \
  --no-build-isolation --no-deps --force-reinstall \
  -Ccmake.define.CONTEXTCARE_SANITIZE="$sanitizers" -Cbuild-dir="$work/build" "$work/src"

runtimes=()
case ",$sanitizers," in *,address,*) runtimes+=("$("$cc" -print-file-name=libasan.so)");; esac
case ",$sanitizers," in *,undefined,*) runtimes+=("$("$cc" -print-file-name=libubsan.so)");; esac
for lib in "${runtimes[@]}"; do
  if [ ! -e "$lib" ]; then
    echo "sanitize.sh: $cc has no runtime $lib" >&2
    exit 2
  fi
done

export LD_PRELOAD="${runtimes[*]}"
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:halt_on_error=1:detect_stack_use_after_return=1:strict_string_checks=1:check_initialization_order=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
export PYTHONMALLOC=malloc
export PYTHONFAULTHANDLER=1
export CONTEXTCARE_SANITIZED=$sanitizers   # the RSS tests skip themselves (ASan's quarantine)

cd "$work/src"
# Prove that the instrumented module is the one imported, before trusting a green run.
"$venv/bin/python" - <<'EOF'
import contextcare._engine as engine
path = engine.__file__
with open(path, "rb") as f:
    blob = f.read()
assert b"__asan_" in blob or b"__ubsan_" in blob, f"{path} is not instrumented"
assert "/site-packages/" in path, f"imported {path}, not the sanitized install"
print(f"+ sanitized engine: {path}")
EOF

# LeakSanitizer, on the engine alone: CPython keeps objects alive at exit, so an exit-time report
# would be all CPython. Instead, drive every allocation path of the engine (rulesets built and
# refused, watchers fed past the GIL-release size, copied, reset, finished; replay, bad splits),
# drop it all, collect, and ask LSan for the unreachable blocks now. A deliberate leak afterwards
# proves the check can fail.
case ",$sanitizers," in
  *,address,*)
    echo "+ LeakSanitizer check of the engine's allocations"
    ASAN_OPTIONS="${ASAN_OPTIONS/detect_leaks=0/detect_leaks=1}:leak_check_at_exit=0" \
    LSAN_OPTIONS="exitcode=0:${LSAN_OPTIONS:-}" "$venv/bin/python" - <<'PYEOF'
import ctypes
import gc
import random

import contextcare as cc
from contextcare.presets import DEFAULT_OPTIONS
from contextcare.rules import FillerLines, LineCycle, Phrases, PrefixMonotony, TailRepeat


def work() -> None:
    rules = [*cc.default_rules(),
             Phrases("p", ["hurry", "ab", "\udc80z"], once=False, suppress_quoted=True),
             LineCycle("c", min_lines=3), FillerLines("f", min_count=2),
             PrefixMonotony("m", min_lines=2, min_count=2),
             TailRepeat("t", window_chars=64, max_period=8, min_chars=10, every_bytes=5,
                        once=False)]
    rs = cc.Ruleset(rules, **DEFAULT_OPTIONS)
    rng = random.Random(1)
    parts = ["same line\n", "做。\n", "hurry ", "ab, ab\n", "😀", "\udc80z", "the " * 10,
             "```\n", "x" * 70000]
    for _ in range(200):
        w = rs.watcher()
        for _ in range(30):
            w.feed(rng.choice(parts), rng.choice(("text", "reasoning")))
        c = w.copy()
        c.feed("more\n")
        w.finish(), c.finish(), c.reset(), c.feed("again\n"), w.tail(), c.tail(7)
    text = "".join(rng.choice(parts) for _ in range(500))
    rs.replay(text, sorted(rng.sample(range(len(text)), 50)) + [len(text)], channel="reasoning")
    alphabet = [chr(c) for c in range(33, 127)] + [chr(c) for c in range(0xA1, 0x100)]
    too_big = ["".join(rng.choices(alphabet, k=22)) for _ in range(30000)]
    for bad in (lambda: cc.Ruleset([Phrases("p", too_big)]), lambda: rs.replay("abc", [5])):
        try:
            bad()
        except cc.ArgumentValueError:  # RuleValueError (the automaton) is one too
            pass


work()
gc.collect()
lsan = ctypes.CDLL(None)
assert lsan.__lsan_do_recoverable_leak_check() == 0, "LeakSanitizer: the engine leaked (above)"
lsan.malloc.restype = ctypes.c_void_p
for _ in range(3):
    lsan.malloc(1000)
gc.collect()
assert lsan.__lsan_do_recoverable_leak_check() == 1, "LeakSanitizer missed a deliberate leak"
print("+ no engine leaks (a deliberate 3 x 1000-byte leak was caught: its report above is expected)")
PYEOF
    ;;
esac

if [ "$#" -eq 0 ]; then
  set -- -m "not slow"
fi
echo "+ pytest under $sanitizers: $*"
tests=${SANITIZE_TESTS:-tests/test_differential.py tests/test_hardening.py
  tests/test_engine_semantics.py tests/test_engine_scenarios.py tests/test_bad_input.py
  tests/test_rule_errors.py tests/test_linear_work.py tests/test_detection_build.py
  tests/test_engine_contract.py}
# shellcheck disable=SC2086
exec "$venv/bin/python" -m pytest -p no:cacheprovider -q $tests "$@"
