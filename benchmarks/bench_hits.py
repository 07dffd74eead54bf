"""Hit-dense text: what one reported detection costs, and that it stays the same per hit however
many hits one call holds (issue 17).

* ``hits: N chars``: ``replay("x" * N)`` with two ``once=False`` one-character rules, on the
  ``text`` and ``combined`` views (every character is two hits), as ONE delta and in 1000-char
  deltas (the table's "ns per delta" column is ns per hit: one "delta" there is one reported
  detection). One delta must cost what the split text costs, at every N. Before the fix the
  hits of one call were ordered by an insertion sort: 100 000 characters took 33.5 s as one
  delta against 1.7 s in 1000-char deltas. (Per hit, both rise somewhat with N, as
  pyahocorasick's does: 2 M result objects no longer fit any cache.)
* ``detections: 200 000 hits``: ns per reported detection - ``Ruleset.replay`` with one
  ``once=False`` one-character rule, beside pyahocorasick's ``iter`` over the same text (one match
  tuple per hit, its cheapest way to report every occurrence), the dataclass constructor of
  ``Detection`` alone (what the engine paid per detection before: ~2.5-4 us) and a plain tuple.

The complexity itself is asserted in ``tests/test_linear_work.py`` (comparisons per hit), never
by a timing.
"""

from __future__ import annotations

from typing import Any

import harness
import pytest
from harness import record, run

HIT_SIZES = [10_000, 100_000, 1_000_000]
DETECTIONS = 200_000


@pytest.mark.parametrize("chars", HIT_SIZES, ids=[f"{n}chars" for n in HIT_SIZES])
@pytest.mark.parametrize("split", [0, 1000], ids=["one-delta", "1000-char-deltas"])
def bench_hits_one_delta(benchmark: Any, chars: int, split: int) -> None:
    from contextcare import Phrases, Ruleset

    if harness.load_engine("contextcare") is None:
        pytest.skip("contextcare not available")
    rs = Ruleset([Phrases("t", ["x"], channel="text", once=False),
                  Phrases("c", ["x"], channel="combined", once=False)])
    text = "x" * chars
    splits = list(range(split, chars + 1, split)) if split else None
    out: list[Any] = []

    def target() -> None:
        out.append(rs.replay(text, splits))

    run(benchmark, target, out.clear)
    assert len(out[-1]) == 2 * chars
    method = f"replay in {split}-char deltas" if split else "replay as one delta"
    record(benchmark, table="hits", workload=f"{chars} chars, 2 hits per char", method=method,
           deltas=2 * chars, chars=chars, nbytes=chars)


@pytest.mark.parametrize("method", ["contextcare", "pyahocorasick", "Detection()", "tuple"])
def bench_detection_cost(benchmark: Any, method: str) -> None:
    text = "x" * DETECTIONS
    out: list[Any] = []
    if method == "contextcare":
        from contextcare import Phrases, Ruleset

        rs = Ruleset([Phrases("p", ["x"], channel="text", once=False)])

        def target() -> None:
            out.append(rs.replay(text))
    elif method == "pyahocorasick":
        ahocorasick = pytest.importorskip("ahocorasick")
        automaton = ahocorasick.Automaton()
        automaton.add_word("x", ("p", 0))
        automaton.make_automaton()

        def target() -> None:
            out.append(list(automaton.iter(text)))
    elif method == "Detection()":
        from contextcare.detection import Detection

        def target() -> None:
            out.append([Detection("p", "phrase", "remind", "text", i, phrase="x")
                        for i in range(DETECTIONS)])
    else:
        def target() -> None:
            out.append([("p", "phrase", "remind", "text", i, "x") for i in range(DETECTIONS)])

    run(benchmark, target, out.clear)
    assert len(out[-1]) == DETECTIONS
    record(benchmark, table="detections", workload=f"{DETECTIONS} hits of a one-character phrase",
           method=method, deltas=DETECTIONS, chars=DETECTIONS, nbytes=DETECTIONS)
