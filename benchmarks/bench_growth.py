"""Does the cost per delta grow with what a stream has already seen? (It must not.)

One watcher of the default rules (each with ``once=False``, so that no rule stops working
after it fired) is first fed 1 KB, 100 KB or 10 MB of reply text (reasoning
and answer segments in turn, never reset: one very long stream; fed in pieces of ~4 KB, which
gives the same state as 1-4-character deltas), then timed on the next 1-4-character deltas.
Just before each timed round, a young watcher (1 KB fed) is timed on the same deltas; the
median of the per-round ratios (``vs_young``) is the growth figure, robust to a machine whose
speed drifts between cases. A flat row (ratios near 1) across the three sizes is the point;
the 10 MB case is ``big`` (``CONTEXTCARE_BENCH_BIG=1``). The pure-Python reference runs the
1 KB and 100 KB cases.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Any

import pytest

import harness
import traces
from harness import record, run

#: Deltas per timed round.
ROUND_DELTAS = 50_000
#: Rounds (the stream reads on: every round feeds new deltas).
ROUNDS = 10
PIECE_CHARS = 4096

Pair = tuple[str, str]


def _flat(trace: traces.ReplyTrace) -> list[Pair]:
    """The trace as one stream of (channel, delta) pairs; streams cycle over it."""
    return [(s.channel, d) for r in trace.replies for s in r.segments for d in s.deltas]


def _prefeed(w: Any, flat: list[Pair], nbytes: int) -> int:
    """Feed ``nbytes`` of UTF-8 (at least) through ``w`` in pieces, cycling over ``flat``;
    return the index in ``flat`` where the stream goes on."""
    fed = 0
    j = 0
    while fed < nbytes:
        channel = flat[j][0]
        buf: list[str] = []
        size = 0
        while size < PIECE_CHARS and flat[j][0] == channel and fed + size < nbytes:
            buf.append(flat[j][1])
            size += len(flat[j][1])
            j = (j + 1) % len(flat)
        piece = "".join(buf)
        w.feed(piece, channel)
        fed += traces.utf8_len(piece)
    return j


def _timed(w: Any, pairs: list[Pair], hits: list[Any]) -> None:
    feed = w.feed
    ext = hits.extend
    for channel, d in pairs:
        r = feed(d, channel)
        if r:
            ext(r)


@pytest.mark.parametrize("fed", [1_000, 100_000, pytest.param(10_000_000, marks=pytest.mark.big)],
                         ids=["1KB", "100KB", "10MB"])
@pytest.mark.parametrize("which", ["contextcare", "reference"])
def bench_growth(benchmark: Any, clean: traces.ReplyTrace, which: str, fed: int) -> None:
    from contextcare import default_rules
    from contextcare.presets import DEFAULT_OPTIONS

    engine = harness.load_engine(which)
    if engine is None:
        pytest.skip(f"{which} engine not available")
    if not engine.native and fed > 100_000:
        pytest.skip("the pure-Python reference runs the 1 KB and 100 KB cases")
    per_round = ROUND_DELTAS if engine.native else 1000
    flat = _flat(clean)
    # once=False: a rule that fired during the pre-feed (the anxiety phrases planted in the
    # trace do) keeps working, so every case does the same work per delta.
    rules = [dataclasses.replace(r, once=False) for r in default_rules()]  # type: ignore[type-var]
    ruleset = engine.ruleset(rules, **DEFAULT_OPTIONS)
    w = ruleset.watcher()
    start = _prefeed(w, flat, fed)
    # A young watcher (1 KB fed) timed on the same deltas just before each round: the ratio per
    # round cancels the drift of a shared, noisy machine between cases run minutes apart.
    young = ruleset.watcher()
    _prefeed(young, flat, 1_000)
    rounds = []
    for k in range(ROUNDS + 1):
        a = start + k * per_round
        rounds.append([flat[(a + i) % len(flat)] for i in range(per_round)])
    state = {"round": 0}
    young_time = [0.0]
    hits: list[Any] = []
    young_hits: list[Any] = []
    ratios: list[float] = []

    def setup() -> None:
        t0 = time.perf_counter()
        _timed(young, rounds[state["round"]], young_hits)
        young_time[0] = time.perf_counter() - t0

    def target() -> None:
        t0 = time.perf_counter()
        _timed(w, rounds[state["round"]], hits)
        ratios.append((time.perf_counter() - t0) / young_time[0])
        state["round"] += 1

    deltas = rounds[0]
    name = "contextcare" if which == "contextcare" else "contextcare.reference"
    record(benchmark, table="growth", workload=f"after {fed:,} bytes", method=f"{name} feed",
           role="engine" if which == "contextcare" else "reference", native=engine.native,
           prefed=fed, **harness.deltas_size([d for _, d in deltas]))
    run(benchmark, target, setup, rounds=ROUNDS)
    benchmark.extra_info["vs_young"] = statistics.median(ratios[1:])
    # Correctness outside the timed part: the watcher still holds the end of its stream.
    last = "".join(d for _, d in rounds[state["round"] - 1])
    assert w.tail(100) == last[-100:]
    assert not [h for h in hits if h.action == "abort"]
