"""Bytes per watcher, idle and active, for 1, 1 000 and 100 000 concurrent streams.

Each case creates ``n`` watchers of ``default_ruleset()`` (idle), then brings every one of them
to a mid-reply state (active): each stream reads its own coherent text (the clean reply trace,
starting at a different reply), ~8 000 characters of reasoning and answer, fed round-robin
across the streams so no stream finishes before the others start. Memory is read three ways:

* ``sys.getsizeof(watcher)`` - the engine's own report (``__sizeof__`` counts its C buffers);
* the growth of the process's resident set (``/proc/self/statm``), the allocator-independent
  truth, meaningful from 1 000 watchers on;
* ``tracemalloc`` (up to 1 000 watchers) - everything allocated through Python's allocators:
  the whole state of the pure-Python reference, only the Python objects of the native engine.

The timed part is the interleaved feeding itself: ``k`` more 1-4-character deltas per stream,
every delta to the next stream in turn (ns per delta, with a no-op floor of the same loop shape
measured alongside, median of 5 runs). The 100 000-watcher case is ``big``
(``CONTEXTCARE_BENCH_BIG=1``).
"""

from __future__ import annotations

import gc
import operator
import os
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from typing import Any

import pytest

import harness
import traces
from harness import record, run

#: Characters each stream has been fed when it counts as active.
ACTIVE_CHARS = 8000
#: Size of the pieces the activation feeds (the state does not depend on the split).
PIECE_CHARS = 64
#: Deltas per stream and round in the timed, interleaved part, by number of streams.
TIMED_DELTAS = {1: 20_000, 1000: 100, 100_000: 10}
#: Timed rounds (each feeds new deltas: the streams read on).
ROUNDS = 4

Pair = tuple[str, str]  # (channel, delta)


def _rss() -> int:
    """Resident set size of this process, in bytes."""
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class _Streams:
    """``n`` coherent streams over one reply trace: stream ``i`` starts at reply ``i % R`` and
    reads on through the following replies (channel switches included, no reset)."""

    def __init__(self, trace: traces.ReplyTrace, n: int, timed: int) -> None:
        flat: list[Pair] = [(s.channel, d) for r in trace.replies for s in r.segments
                            for d in s.deltas]
        starts = []
        k = 0
        for r in trace.replies:
            starts.append(k)
            k += sum(len(s.deltas) for s in r.segments)
        self.flat = flat + flat  # room to read on past the end
        # Per distinct start: the activation pieces, and where the deltas go on after them.
        self.pieces: dict[int, list[Pair]] = {}
        self.resume: dict[int, int] = {}
        for start in {starts[i % len(starts)] for i in range(min(n, len(starts)))}:
            self.pieces[start], self.resume[start] = self._activation(start)
        self.starts = [starts[i % len(starts)] for i in range(n)]
        self.timed = timed

    def _activation(self, start: int) -> tuple[list[Pair], int]:
        pieces: list[Pair] = []
        buf: list[str] = []
        size = total = 0
        channel = self.flat[start][0]
        j = start
        while total < ACTIVE_CHARS:
            ch, d = self.flat[j]
            if ch != channel or size >= PIECE_CHARS:
                pieces.append((channel, "".join(buf)))
                buf, size, channel = [], 0, ch
            buf.append(d)
            size += len(d)
            total += len(d)
            j += 1
        pieces.append((channel, "".join(buf)))
        return pieces, j

    def activate(self, watchers: list[Any]) -> None:
        """Feed every stream its activation pieces, round-robin across streams."""
        feeds = [w.feed for w in watchers]
        plans = [self.pieces[s] for s in self.starts]
        for j in range(max(len(p) for p in plans)):
            for feed, plan in zip(feeds, plans):
                if j < len(plan):
                    ch, piece = plan[j]
                    feed(piece, ch)

    def timed_schedule(self, rounds: int) -> list[list[Pair]]:
        """Per stream, the next ``rounds * timed`` deltas after its activation."""
        n = rounds * self.timed
        return [self.flat[self.resume[s]:self.resume[s] + n] for s in self.starts]

    def expected_tail(self, i: int, fed: int, n: int) -> str:
        """The last ``n`` characters stream ``i`` has been fed after ``fed`` timed deltas."""
        s = self.starts[i]
        text = "".join(p for _, p in self.pieces[s])
        text += "".join(d for _, d in self.flat[self.resume[s]:self.resume[s] + fed])
        return text[-n:]


def interleaved(feeds: Sequence[Callable[[str, str], Any]], schedule: list[list[Pair]], j0: int,
                k: int, hits: list[Any]) -> None:
    """Delta ``j`` of every stream, then delta ``j + 1`` of every stream, ... for ``j`` in
    ``j0 .. j0 + k - 1``. The timed loop."""
    ext = hits.extend
    for j in range(j0, j0 + k):
        for feed, pairs in zip(feeds, schedule):
            ch, d = pairs[j]
            r = feed(d, ch)
            if r:
                ext(r)


def _measure(ruleset: Any, streams: _Streams, n: int, trace_py: bool) -> tuple[dict[str, Any],
                                                                              list[Any]]:
    """Create ``n`` watchers and activate them; memory readings per watcher."""
    out: dict[str, Any] = {}
    gc.collect()
    if trace_py:
        tracemalloc.start()
    rss0 = _rss()
    py0 = tracemalloc.get_traced_memory()[0] if trace_py else 0
    watchers = [ruleset.watcher() for _ in range(n)]
    out["sizeof_idle"] = sum(sys.getsizeof(w) for w in watchers) / n
    out["rss_idle"] = (_rss() - rss0) / n
    if trace_py:
        out["tracemalloc_idle"] = (tracemalloc.get_traced_memory()[0] - py0) / n
    streams.activate(watchers)
    gc.collect()
    out["sizeof_active"] = sum(sys.getsizeof(w) for w in watchers) / n
    out["rss_active"] = (_rss() - rss0) / n
    out["rss_active_total"] = _rss() - rss0
    if trace_py:
        out["tracemalloc_active"] = (tracemalloc.get_traced_memory()[0] - py0) / n
        tracemalloc.stop()
    return out, watchers


@pytest.mark.parametrize("n", [1, 1000, pytest.param(100_000, marks=pytest.mark.big)])
@pytest.mark.parametrize("which", ["contextcare", "reference"])
def bench_memory(benchmark: Any, clean: traces.ReplyTrace, which: str, n: int) -> None:
    from contextcare import default_rules
    from contextcare.presets import DEFAULT_OPTIONS

    engine = harness.load_engine(which)
    if engine is None:
        pytest.skip(f"{which} engine not available")
    if not engine.native and n > 1:
        pytest.skip("the pure-Python reference is measured on one watcher")
    ruleset = engine.ruleset(default_rules(), **DEFAULT_OPTIONS)
    k = TIMED_DELTAS[n] if engine.native else 2000
    streams = _Streams(clean, n, k)
    mem, watchers = _measure(ruleset, streams, n, trace_py=n <= 1000)
    schedule = streams.timed_schedule(ROUNDS + 2)

    # The same loop with a no-op C call, timed by hand (median of 5), for the ratio.
    noop = [operator.is_] * n
    times = []
    for _ in range(5):
        start = time.perf_counter()
        interleaved(noop, schedule, 0, k, [])
        times.append(time.perf_counter() - start)
    floor_seconds = statistics.median(times)
    chars = sum(len(d) for pairs in schedule for _, d in pairs[:k])
    nbytes = sum(traces.utf8_len(d) for pairs in schedule for _, d in pairs[:k])
    name = "contextcare" if which == "contextcare" else "contextcare.reference"
    record(benchmark, table="memory", workload=f"{n:,} watcher{'s' if n > 1 else ''}",
           method=f"{name} feed, interleaved",
           role="engine" if which == "contextcare" else "reference", native=engine.native,
           watchers=n, deltas=n * k, chars=chars, nbytes=nbytes, floor_seconds=floor_seconds,
           **mem)
    state = {"next": 0}
    hits: list[Any] = []
    feeds = [w.feed for w in watchers]

    def target() -> None:
        interleaved(feeds, schedule, state["next"], k, hits)
        state["next"] += k

    # One calibration round plus ROUNDS timed ones; each round feeds the next k deltas.
    run(benchmark, target, lambda: None, rounds=ROUNDS)
    # Correctness outside the timed part: the clean trace raises no abort in any stream, and
    # every watcher holds the end of its own stream (interleaving kept the streams apart).
    assert not [h for h in hits if h.action == "abort"]
    for i in sorted({0, n // 2, n - 1}):
        assert watchers[i].tail(200) == streams.expected_tail(i, state["next"], 200)
    watchers.clear()
    feeds.clear()
    gc.collect()
