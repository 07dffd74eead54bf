"""Throughput without a Python call per delta: ``Ruleset.replay`` and one-shot bulk scans.

* ``replay`` streams a recorded trace inside C: the text plus the delta end offsets (a numpy
  array), so the per-delta work is the engine's alone. Reported in MB/s of UTF-8.
* One-shot: the whole text as one delta (``replay(text)``), beside Hyperscan's block mode and
  pyahocorasick's ``iter`` over the whole text - the fastest a bulk scan of the same phrases gets
  from Python.

Reply traces are replayed one reply at a time (each reply one attempt, all of it on the
``reasoning`` channel, so every default rule sees every character).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import harness
import peers
import traces
from harness import Engine, check_replies, record, run

SLOW_DELTAS = 10_000
SLOW_REPLIES = 6

DEFAULT_EXPECT = {
    "line-repeat": "line-repeat", "line-cycle": "line-cycle", "filler-lines": "filler-lines",
    "prefix-monotony": "prefix-monotony", "tail-repeat": "tail-repeat",
    "abort": "line-repeat,tail-repeat",
}


def _ends(deltas: list[str]) -> np.ndarray:
    return np.cumsum(np.fromiter((len(d) for d in deltas), dtype=np.int64, count=len(deltas)))


def _size(text: str, n_deltas: int) -> dict[str, int]:
    return {"deltas": n_deltas, "chars": len(text), "nbytes": traces.utf8_len(text)}


def _engine(which: str) -> Engine:
    engine = harness.load_engine(which)
    if engine is None:
        pytest.skip(f"{which} engine not available")
    return engine


def _phrase_ruleset(engine: Engine, phrases: tuple[str, ...]) -> Any:
    from contextcare import Phrases

    return engine.ruleset([Phrases("phrases", phrases, channel="text", once=False)])


def _check_phrases(hits: list[Any], text: str, phrases: tuple[str, ...]) -> None:
    want = traces.longest_per_end(traces.occurrences(text, phrases), phrases)
    assert {d.offset: d.phrase for d in hits} == want
    assert len(hits) == len(want)


# --------------------------------------------------------------------------- phrases-300

WORK = "phrases-300"


@pytest.mark.parametrize("which", ["contextcare", "reference"])
@pytest.mark.parametrize("split", [True, False], ids=["deltas", "one-shot"])
def bench_replay_phrases(benchmark: Any, ptrace: traces.PhraseTrace, which: str,
                         split: bool) -> None:
    engine = _engine(which)
    trace = ptrace if engine.native else ptrace.head(SLOW_DELTAS)
    text = trace.text
    ends = _ends(trace.deltas) if split else None
    ruleset = _phrase_ruleset(engine, trace.phrases)
    out: list[Any] = []

    def target() -> None:
        out[:] = ruleset.replay(text, ends)

    name = "contextcare" if which == "contextcare" else "contextcare.reference"
    method = f"{name} replay(text, ends)" if split else f"{name} replay(text), one delta"
    record(benchmark, table="replay" if split else "oneshot", workload=WORK, method=method,
           role="engine" if which == "contextcare" else "reference", native=engine.native,
           **_size(text, len(trace.deltas) if split else 1))
    run(benchmark, target, out.clear)
    _check_phrases(out, text, trace.phrases)


def bench_oneshot_hyperscan_block(benchmark: Any, ptrace: traces.PhraseTrace) -> None:
    if not peers.have_hyperscan():
        pytest.skip("hyperscan not installed (pip install .[bench])")
    db = peers.hs_database(ptrace.phrases, stream=False)
    data = ptrace.text.encode("utf-8")
    out: list[tuple[int, int]] = []

    def target() -> None:
        out[:] = peers.hs_block(db, data)

    record(benchmark, table="oneshot", workload=WORK,
           method="hyperscan Database.scan(bytes), block mode, pre-encoded", role="peer",
           peer="hyperscan-block", **_size(ptrace.text, 1))
    run(benchmark, target, out.clear)
    assert sorted(out) == traces.byte_occurrences(ptrace.text, ptrace.phrases)


def bench_oneshot_pyahocorasick(benchmark: Any, ptrace: traces.PhraseTrace) -> None:
    if not peers.have_ahocorasick():
        pytest.skip("pyahocorasick not installed (pip install .[bench])")
    automaton = peers.aho_automaton(ptrace.phrases)
    text = ptrace.text
    out: list[tuple[int, int]] = []

    def target() -> None:
        out[:] = peers.aho_oneshot(automaton, text)

    record(benchmark, table="oneshot", workload=WORK, method="pyahocorasick iter(text)",
           role="peer", peer="pyahocorasick-oneshot", **_size(text, 1))
    run(benchmark, target, out.clear)
    assert sorted(out) == traces.occurrences(text, ptrace.phrases)


# --------------------------------------------------------------------------- reply traces

@pytest.mark.parametrize("which", ["contextcare", "reference"])
@pytest.mark.parametrize("loops", [False, True], ids=["default-clean", "default-loops"])
@pytest.mark.parametrize("split", [True, False], ids=["deltas", "one-shot"])
def bench_replay_replies(benchmark: Any, request: pytest.FixtureRequest, which: str, loops: bool,
                         split: bool) -> None:
    from contextcare import default_rules
    from contextcare.presets import DEFAULT_OPTIONS

    engine = _engine(which)
    trace: traces.ReplyTrace = request.getfixturevalue("loopy" if loops else "clean")
    if not engine.native:
        trace = trace.head(SLOW_REPLIES)
    ruleset = engine.ruleset(default_rules(), **DEFAULT_OPTIONS)
    texts = []
    for reply in trace.replies:
        deltas = [d for s in reply.segments for d in s.deltas]
        texts.append(("".join(deltas), _ends(deltas) if split else None))
    out: list[list[Any]] = []

    def target() -> None:
        replay = ruleset.replay
        out[:] = [replay(text, ends, channel="reasoning") for text, ends in texts]

    name = "contextcare" if which == "contextcare" else "contextcare.reference"
    method = f"{name} replay(text, ends)" if split else f"{name} replay(text), one delta"
    record(benchmark, table="replay" if split else "oneshot",
           workload=f"default-{'loops' if loops else 'clean'}", method=method,
           role="engine" if which == "contextcare" else "reference", native=engine.native,
           deltas=trace.n_deltas if split else len(texts), chars=trace.n_chars,
           nbytes=trace.nbytes)
    run(benchmark, target, out.clear)
    check_replies(trace, out, DEFAULT_EXPECT)
