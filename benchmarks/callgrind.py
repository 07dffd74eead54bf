"""Instruction counts of the engine's feed and replay cases under callgrind (a gate for changes
to the C core that must not cost speed: counts are exact where timings on a shared machine are not).

    python benchmarks/callgrind.py            # every case, a table of instruction counts
    python benchmarks/callgrind.py --phrases  # the phrase automaton's cases (floor, 300, 100 000)
    python benchmarks/callgrind.py --word-repeat  # the default rules plus the opt-in WordRepeat
    python benchmarks/callgrind.py CASE       # one case, run inside callgrind (used by the above)

Only the feeding is counted: traces are built and the ruleset compiled first, then the loop runs
as the comparison callback of libc's ``bsearch``, called through ctypes: callgrind collects only
inside libffi's ``ffi_call`` (``--toggle-collect``; nothing else in the process uses ctypes). The
extension is stripped, so its own symbols cannot serve. ``PYTHONHASHSEED=0`` keeps the counts
exact across runs.
The traces are those of ``bench_feed.py`` / ``bench_replay.py`` at 200 kB, to keep a run short.
"""

from __future__ import annotations

import gc
import os
import re
import subprocess
import sys
import tempfile
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import traces  # noqa: E402

NBYTES = 200_000
CASES = ("feed-phrases-300", "feed-default-clean", "feed-default-loops", "feed-loop-family",
         "replay-phrases-300", "replay-default-clean", "replay-default-loops")
#: The phrase automaton's cases (``python benchmarks/callgrind.py --phrases``): the phrase trace
#: through the no-op ``_Floor.feed`` (the Python loop and argument handling, no engine work),
#: through the 300 benchmark phrases, and through 100 000 phrases of ``traces.phrase_set``
#: (Chinese, English; the 300 are among them, so the detections are the same).
#: The default rules plus the opt-in ``WordRepeat`` rule (``--word-repeat``): its cost.
WORD_REPEAT_CASES = ("feed-wordrepeat-clean", "feed-wordrepeat-loops", "replay-wordrepeat-clean",
                     "replay-wordrepeat-loops")
PHRASE_CASES = ("feed-floor", "feed-phrases-300", "feed-phrases-zh-100k", "feed-phrases-en-100k",
                "replay-phrases-300", "replay-phrases-zh-100k", "replay-phrases-en-100k")


def _rules(name: str) -> Any:
    import contextcare as cc
    from contextcare.presets import DEFAULT_OPTIONS

    if name in ("phrases-300", "floor"):
        return cc.Ruleset([cc.Phrases("phrases", traces.make_phrases(), channel="text",
                                      once=False)])
    if name.startswith("phrases-"):  # phrases-LANG-100k
        _, lang, size = name.split("-")
        n = int(size.removesuffix("k")) * 1000
        return cc.Ruleset([cc.Phrases("phrases", traces.phrase_set(n, lang), channel="text",
                                      once=False)])
    rules = cc.default_rules()
    if name.startswith("wordrepeat-"):
        rules = [*rules, cc.WordRepeat("word-repeat")]
    if name == "loop-family":
        rules = [r for r in rules if not isinstance(r, cc.Phrases)]
    return cc.Ruleset(rules, **DEFAULT_OPTIONS)


def run_case(case: str) -> int:
    import ctypes

    import numpy as np

    op, name = case.split("-", 1)
    ruleset = _rules(name)
    phrase_case = name == "floor" or name.startswith("phrases-")
    if phrase_case:
        ptrace = traces.phrase_trace(NBYTES, phrases=traces.make_phrases())
        replies = [[("text", ptrace.deltas)]]
    else:
        trace = traces.reply_trace(NBYTES, loops=not name.endswith("-clean"))
        replies = [[(s.channel, s.deltas) for s in r.segments] for r in trace.replies]
    out: list[int] = []
    if op == "feed" and name == "floor":
        from contextcare import _engine

        put = _engine._Floor(ruleset.watcher()).feed

        def measured() -> None:
            hits = 0
            for segments in replies:
                for channel, deltas in segments:
                    for d in deltas:
                        hits += len(put(d, channel))
            out.append(hits)
    elif op == "feed":
        w = ruleset.watcher()

        def measured() -> None:
            hits = 0
            for segments in replies:
                for channel, deltas in segments:
                    for d in deltas:
                        hits += len(w.feed(d, channel))
                hits += len(w.finish())
                w.reset()
            out.append(hits)
    else:
        channel = "text" if phrase_case else "reasoning"
        work = []
        for segments in replies:
            deltas = [d for _, ds in segments for d in ds]
            work.append(("".join(deltas), np.cumsum([len(d) for d in deltas], dtype=np.int64)))

        def measured() -> None:
            out.append(sum(len(ruleset.replay(text, ends, channel=channel))
                           for text, ends in work))
    def compare(a: object, b: object) -> int:
        gc.disable()  # as the benchmarks do: a collection would land in one build and not another
        measured()
        gc.enable()
        return 0

    libc = ctypes.CDLL(None)
    libc.bsearch.restype = ctypes.c_void_p
    callback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)(compare)
    key, table = ctypes.c_int(0), (ctypes.c_int * 1)(0)
    libc.bsearch(ctypes.byref(key), table, 1, ctypes.sizeof(ctypes.c_int), callback)
    if not out:
        raise RuntimeError("the measured loop did not run")
    return out[0]


def count(case: str) -> tuple[int, int]:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
               "--toggle-collect=ffi_call", sys.executable, os.path.abspath(__file__), case]
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        proc = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
        hits = int(proc.stdout.strip().splitlines()[-1])
        m = re.search(r"Collected : (\d+)", proc.stderr)
        if not m:
            raise RuntimeError(proc.stderr[-2000:])
        return int(m.group(1)), hits


def main() -> None:
    cases = CASES
    if len(sys.argv) > 1 and sys.argv[1] == "--phrases":
        cases = PHRASE_CASES
    elif len(sys.argv) > 1 and sys.argv[1] == "--word-repeat":
        cases = WORD_REPEAT_CASES
    elif len(sys.argv) > 1:
        print(run_case(sys.argv[1]))
        return
    import contextcare  # build the extension before valgrind runs it

    del contextcare
    print(f"| case | instructions | detections |\n|---|---:|---:|")
    for case in cases:
        ir, hits = count(case)
        print(f"| {case} | {ir:,} | {hits} |", flush=True)


if __name__ == "__main__":
    main()
