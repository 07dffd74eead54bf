"""Cost per delta through the Python API: ``Watcher.feed`` beside what users would use instead.

Workloads (each a benchmark group):

* ``phrases-300`` - one stream, one channel, 300 phrases (200 English, 100 Chinese), every
  occurrence reported (``Phrases(..., once=False)``), ~1 MB of BMP-only text in 1-4-character
  deltas. Peers: pyahocorasick's resumable iterator, Hyperscan's stream mode, a plain-Python port
  of the original engine (one ``in`` test per phrase on carry + delta), and the pure-Python
  reference engine.
* ``default-clean`` / ``default-loops`` - ``default_ruleset()`` on ~1 MB of replies (reasoning
  then answer; ``finish()`` and ``reset()`` between replies), without and with loops. Peers: the
  reference engine and the original's production triggers in the plain-Python port.
* ``loop-family`` - only the windowed (loop) rules of the defaults, on the trace with loops.

Slow engines (the reference, the original port) run on the head of a trace: the cost per delta
is what is compared. Correctness is asserted after timing, on the last round's results.
"""

from __future__ import annotations

from typing import Any

import pytest

import harness
import original_port
import peers
import traces
from harness import Engine, FloorWatcher, check_replies, feed_deltas, feed_replies, record, run

#: Deltas of the phrase trace the slow engines get.
SLOW_DELTAS = 10_000
#: Replies of a reply trace the slow engines get (~2 000 deltas each).
SLOW_REPLIES = 6

DEFAULT_EXPECT = {
    "line-repeat": "line-repeat", "line-cycle": "line-cycle", "filler-lines": "filler-lines",
    "prefix-monotony": "prefix-monotony", "tail-repeat": "tail-repeat",
    "abort": "line-repeat,tail-repeat",
}
ORIGINAL_EXPECT = {"line-repeat": "line-repeat", "abort": "line-repeat"}


def _phrase_ruleset(engine: Engine, phrases: tuple[str, ...]) -> Any:
    from contextcare import Phrases

    return engine.ruleset([Phrases("phrases", phrases, channel="text", once=False)])


def _check_phrase_detections(hits: list[Any], trace: traces.PhraseTrace) -> None:
    want = traces.longest_per_end(traces.occurrences(trace.text, trace.phrases), trace.phrases)
    got = {d.offset: d.phrase for d in hits}
    assert len(got) == len(hits), "two detections at one offset"
    assert got == want


# --------------------------------------------------------------------------- phrases-300

WORK = "phrases-300"


def _size(deltas: list[str]) -> dict[str, int]:
    text = "".join(deltas)
    return {"deltas": len(deltas), "chars": len(text), "nbytes": traces.utf8_len(text)}


@pytest.mark.parametrize("which", ["cpython", "engine"])
def bench_floor_phrases(benchmark: Any, ptrace: traces.PhraseTrace, which: str) -> None:
    engine = harness.load_engine("contextcare")
    if which == "engine" and (engine is None or engine.noop is None):
        pytest.skip("the engine has no _engine._Floor.feed")
    label, noop = harness.floor_feed(engine if which == "engine" else None)
    hits: list[Any] = []
    record(benchmark, table="feed", workload=WORK, method=f"floor: {label}", role="floor",
           floor_kind=which, **_size(ptrace.deltas))
    run(benchmark, lambda: feed_deltas(noop, ptrace.deltas, hits), hits.clear)
    assert hits == []


@pytest.mark.parametrize("which", ["contextcare", "reference"])
def bench_feed_phrases(benchmark: Any, ptrace: traces.PhraseTrace, which: str) -> None:
    engine = harness.load_engine(which)
    if engine is None:
        pytest.skip(f"{which} engine not available")
    trace = ptrace if engine.native else ptrace.head(SLOW_DELTAS)
    ruleset = _phrase_ruleset(engine, trace.phrases)
    state: dict[str, Any] = {}

    def setup() -> None:
        state["w"] = ruleset.watcher()
        state["hits"] = []

    def target() -> None:
        feed_deltas(state["w"].feed, trace.deltas, state["hits"])

    method = "contextcare Watcher.feed" if which == "contextcare" else "contextcare.reference feed"
    record(benchmark, table="feed", workload=WORK, method=method, role="engine" if
           which == "contextcare" else "reference", native=engine.native, **_size(trace.deltas))
    run(benchmark, target, setup)
    _check_phrase_detections(state["hits"], trace)


def bench_feed_phrases_pyahocorasick(benchmark: Any, ptrace: traces.PhraseTrace) -> None:
    if not peers.have_ahocorasick():
        pytest.skip("pyahocorasick not installed (pip install .[bench])")
    automaton = peers.aho_automaton(ptrace.phrases)
    state: dict[str, peers.AhoStream] = {}

    def setup() -> None:
        state["s"] = peers.AhoStream(automaton)

    record(benchmark, table="feed", workload=WORK, method="pyahocorasick it.set(delta)",
           role="peer", peer="pyahocorasick", **_size(ptrace.deltas))
    run(benchmark, lambda: state["s"].run(ptrace.deltas), setup)
    assert state["s"].occurrences() == traces.occurrences(ptrace.text, ptrace.phrases)


@pytest.mark.parametrize("encode", [True, False], ids=["encode", "pre-encoded"])
def bench_feed_phrases_hyperscan(benchmark: Any, ptrace: traces.PhraseTrace, encode: bool) -> None:
    if not peers.have_hyperscan():
        pytest.skip("hyperscan not installed (pip install .[bench])")
    db = peers.hs_database(ptrace.phrases, stream=True)
    state: dict[str, peers.HsStream] = {}
    encoded = ptrace.encoded

    def setup() -> None:
        if "s" in state:
            state["s"].close()
        state["s"] = peers.HsStream(db)

    def target() -> None:
        if encode:
            state["s"].run(ptrace.deltas)
        else:
            state["s"].run_bytes(encoded)

    method = ("hyperscan Stream.scan(delta.encode())" if encode
              else "hyperscan Stream.scan(bytes), pre-encoded")
    record(benchmark, table="feed", workload=WORK, method=method, role="peer",
           peer="hyperscan" if encode else "hyperscan-bytes", **_size(ptrace.deltas))
    run(benchmark, target, setup)
    assert state["s"].occurrences() == traces.byte_occurrences(ptrace.text, ptrace.phrases)
    state["s"].close()


def bench_feed_phrases_original(benchmark: Any, ptrace: traces.PhraseTrace) -> None:
    trace = ptrace.head(SLOW_DELTAS)
    state: dict[str, original_port.OriginalWatch] = {}

    def setup() -> None:
        state["w"] = original_port.OriginalWatch(
            original_port.phrase_trigger(trace.phrases), fire_once=False)

    record(benchmark, table="feed", workload=WORK, method="original engine, plain-Python port",
           role="peer", peer="original", **_size(trace.deltas))
    run(benchmark, lambda: feed_deltas(state["w"].feed, trace.deltas, []), setup)
    # Presence semantics: each frame reports the first phrase (in list order) in carry + frame.
    occurring = {trace.phrases[k] for _, k in traces.occurrences(trace.text, trace.phrases)}
    reported = {h["phrase"] for h in state["w"].hits}
    assert reported == occurring


# --------------------------------------------------------------------------- reply traces

def _windowed_rules() -> list[Any]:
    from contextcare import default_rules

    return [r for r in default_rules() if r.windowed]


def _ruleset(engine: Engine, rules: str) -> Any:
    from contextcare import default_rules
    from contextcare.presets import DEFAULT_OPTIONS

    chosen = default_rules() if rules == "default" else _windowed_rules()
    return engine.ruleset(chosen, **DEFAULT_OPTIONS)


REPLY_WORKLOADS = [
    pytest.param("default", "clean", id="default-clean"),
    pytest.param("default", "loops", id="default-loops"),
    pytest.param("loop-family", "loops", id="loop-family"),
]


def _trace(request: pytest.FixtureRequest, which: str) -> traces.ReplyTrace:
    trace: traces.ReplyTrace = request.getfixturevalue("clean" if which == "clean" else "loopy")
    return trace


def _workload(rules: str, which: str) -> str:
    return "loop-family" if rules == "loop-family" else f"default-{which}"


@pytest.mark.parametrize(("rules", "which"), REPLY_WORKLOADS)
def bench_floor_replies(benchmark: Any, request: pytest.FixtureRequest, rules: str,
                        which: str) -> None:
    trace = _trace(request, which)
    replies = harness.as_replies(trace)
    floor = FloorWatcher(harness.load_engine("contextcare"))
    hits: list[list[Any]] = []
    record(benchmark, table="feed", workload=_workload(rules, which),
           method=f"floor: {floor.label}", role="floor", **harness.replies_size(trace))
    run(benchmark, lambda: feed_replies(floor, replies, hits), hits.clear)
    assert len(hits) == len(trace.replies) and not any(hits)


@pytest.mark.parametrize("engine_name", ["contextcare", "reference"])
@pytest.mark.parametrize(("rules", "which"), REPLY_WORKLOADS)
def bench_feed_replies(benchmark: Any, request: pytest.FixtureRequest, rules: str, which: str,
                       engine_name: str) -> None:
    engine = harness.load_engine(engine_name)
    if engine is None:
        pytest.skip(f"{engine_name} engine not available")
    trace = _trace(request, which)
    if not engine.native:
        trace = trace.head(SLOW_REPLIES)
    replies = harness.as_replies(trace)
    ruleset = _ruleset(engine, rules)
    state: dict[str, Any] = {}

    def setup() -> None:
        state["w"] = ruleset.watcher()
        state["hits"] = []

    method = ("contextcare Watcher.feed" if engine_name == "contextcare"
              else "contextcare.reference feed")
    record(benchmark, table="feed", workload=_workload(rules, which), method=method,
           role="engine" if engine_name == "contextcare" else "reference", native=engine.native,
           **harness.replies_size(trace))
    run(benchmark, lambda: feed_replies(state["w"], replies, state["hits"]), setup)
    check_replies(trace, state["hits"], DEFAULT_EXPECT)


@pytest.mark.parametrize(("rules", "which"), REPLY_WORKLOADS)
def bench_feed_replies_original(benchmark: Any, request: pytest.FixtureRequest, rules: str,
                                which: str) -> None:
    trace = _trace(request, which).head(SLOW_REPLIES * 4)
    replies = harness.as_replies(trace)
    triggers = original_port.production_triggers()
    if rules == "loop-family":
        triggers = [t for t in triggers if t.kind == "line-repeat"]
    state: dict[str, Any] = {}

    def setup() -> None:
        state["w"] = original_port.OriginalWatch(triggers)
        state["hits"] = []

    record(benchmark, table="feed", workload=_workload(rules, which),
           method="original engine, plain-Python port", role="peer", peer="original",
           **harness.replies_size(trace))
    run(benchmark, lambda: feed_replies(state["w"], replies, state["hits"]), setup)
    check_replies(trace, state["hits"], ORIGINAL_EXPECT)
