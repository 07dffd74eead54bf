"""Replay's speed on the 1 MB reply traces of ``bench_replay.py``, by wall clock and by the
thread's CPU time, for comparing two builds on a shared machine.

    python benchmarks/replay_time.py [--rounds 40] [--one-delta]

Each reply is replayed on ``reasoning`` with its delta ends (1-4 code points), as in
``bench_replay_replies``; the best of ``--rounds`` rounds is reported. The CPU time
(``time.thread_time``: the replay runs in this thread, GIL released) leaves out the time the
thread waits for a core, so it stays close to the idle figure when other processes load the
machine, where the wall clock does not. Compare builds by running this script from each build's
environment in turn, several times, and comparing the best figures.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import traces  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--one-delta", action="store_true", help="each reply as one delta")
    args = parser.parse_args()

    import contextcare as cc
    from contextcare.presets import DEFAULT_OPTIONS

    ruleset = cc.Ruleset(cc.default_rules(), **DEFAULT_OPTIONS)
    for name, seed, loops in (("default-clean", 2, False), ("default-loops", 3, True)):
        trace = traces.reply_trace(1_000_000, seed=seed, loops=loops)
        work = []
        for reply in trace.replies:
            deltas = [d for s in reply.segments for d in s.deltas]
            ends = None if args.one_delta else np.cumsum([len(d) for d in deltas], dtype=np.int64)
            work.append(("".join(deltas), ends))
        wall = cpu = float("inf")
        hits = 0
        gc.disable()
        for _ in range(args.rounds):
            c0, t0 = time.thread_time(), time.perf_counter()
            hits = sum(len(ruleset.replay(text, ends, channel="reasoning")) for text, ends in work)
            t1, c1 = time.perf_counter(), time.thread_time()
            wall, cpu = min(wall, t1 - t0), min(cpu, c1 - c0)
        gc.enable()
        mb = trace.nbytes / 1e6
        print(f"{name}: wall {wall * 1e3:.2f} ms ({mb / wall:.1f} MB/s), "
              f"cpu {cpu * 1e3:.2f} ms ({mb / cpu:.1f} MB/s), {hits} detections, "
              f"{trace.nbytes} bytes, load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
