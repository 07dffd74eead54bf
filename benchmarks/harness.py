"""The timed loops and the bookkeeping every benchmark shares.

Every engine and every peer runs through a loop of exactly the shape a user would write, and the
floor (a no-op C method call) runs through the *same* loop function as ``Watcher.feed``, so the
ratio between the two is the engine's own cost over the unavoidable Python call overhead.

Each benchmark records, in ``benchmark.extra_info``, what ``report.py`` needs to turn seconds per
round into ns per delta and MB/s: the ``table`` and ``workload`` it belongs to, the ``method``,
and the ``deltas``, ``chars`` and ``bytes`` one round processes.
"""

from __future__ import annotations

import operator
import os
import sys
import time
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from traces import ReplyTrace, utf8_len

__all__ = [
    "BIG",
    "ROUNDS",
    "SECONDS",
    "Engine",
    "FloorWatcher",
    "Replies",
    "as_replies",
    "check_replies",
    "feed_deltas",
    "feed_replies",
    "floor_feed",
    "load_engine",
    "machine_info",
    "record",
    "rule_ids",
    "run",
    "versions",
]

#: Seconds of timed rounds per benchmark (``CONTEXTCARE_BENCH_SECONDS``); the number of rounds
#: follows from one calibration round, between :data:`MIN_ROUNDS` and :data:`MAX_ROUNDS`. More
#: rounds of a cheap case make its median steadier on a noisy machine.
SECONDS = float(os.environ.get("CONTEXTCARE_BENCH_SECONDS", "1.0"))
MIN_ROUNDS = 5
MAX_ROUNDS = 50
#: A fixed number of rounds instead (``CONTEXTCARE_BENCH_ROUNDS``), e.g. 1 for a smoke run.
ROUNDS = int(os.environ.get("CONTEXTCARE_BENCH_ROUNDS", "0"))
#: Run the large cases too (100 000 watchers, 10 MB already fed): ``CONTEXTCARE_BENCH_BIG=1``.
BIG = os.environ.get("CONTEXTCARE_BENCH_BIG", "") not in ("", "0")


# --------------------------------------------------------------------------- engines

@dataclass(frozen=True)
class Engine:
    """An engine to benchmark: its ``Ruleset`` class, whether it is compiled, and its no-op
    feed when it has one (``_engine._Floor(watcher).feed``, over a spare watcher)."""

    name: str
    ruleset: Any
    native: bool
    noop: Callable[..., Any] | None


def load_engine(which: str) -> Engine | None:
    """``"contextcare"`` (whatever ``contextcare.Ruleset`` is) or ``"reference"``; ``None`` when it
    cannot be imported or constructed yet."""
    try:
        import contextcare
        from contextcare import Phrases

        ruleset: Any = contextcare.Ruleset
        if which == "reference":
            from contextcare.reference import Ruleset as ruleset
        probe = ruleset([Phrases("probe", ("x",))]).watcher()
        probe.feed("x")
    except (ImportError, NotImplementedError):
        return None
    try:
        from contextcare.reference import Ruleset as Reference
        pure = ruleset is Reference
    except ImportError:
        pure = False
    # A compiled class's methods are not Python functions.
    native = not pure and not isinstance(getattr(ruleset, "watcher", None), types.FunctionType)
    noop = None
    if native:
        from contextcare import _engine

        floor = getattr(_engine, "_Floor", None)
        noop = floor(probe).feed if floor is not None else None
    return Engine(which, ruleset, native, noop)


# --------------------------------------------------------------------------- floors

def floor_feed(engine: Engine | None) -> tuple[str, Callable[..., Any]]:
    """The one-argument floor: the engine's own no-op feed when it has one (same argument
    parsing and return value as ``feed``), else ``().count`` (a METH_O C method that loops over
    nothing and returns the cached int 0)."""
    if engine is not None and engine.noop is not None:
        return "_Floor.feed(delta)", engine.noop
    return "().count(delta)", ().count


class FloorWatcher:
    """Looks like a watcher to :func:`feed_replies`, but every call is a no-op C call:
    ``feed(delta, channel)`` is the engine's no-op feed when it has one, else ``operator.is_``
    (a C function of two arguments that returns ``False``);
    ``finish`` and ``reset`` return the empty tuple."""

    def __init__(self, engine: Engine | None) -> None:
        self.label = "operator.is_(delta, channel)"
        self.feed: Callable[[str, str], Any] = operator.is_
        if engine is not None and engine.noop is not None:
            self.label = "_Floor.feed(delta, channel)"
            self.feed = engine.noop
        self.finish: Callable[[], Any] = tuple
        self.reset: Callable[[], Any] = tuple


# --------------------------------------------------------------------------- timed loops

def feed_deltas(feed: Callable[[str], Any], deltas: Sequence[str], hits: list[Any]) -> None:
    """``feed`` every delta; keep whatever it returns that is non-empty. The timed loop for one
    stream on one channel (engines and the floor alike)."""
    ext = hits.extend
    for d in deltas:
        r = feed(d)
        if r:
            ext(r)


#: Replies as the timed loop wants them: per reply, per segment, ``(channel, deltas)``.
Replies = list[list[tuple[str, list[str]]]]


def as_replies(trace: ReplyTrace, channel: str | None = None) -> Replies:
    """The trace as nested lists (``channel`` forces one channel for every segment)."""
    return [[(channel or s.channel, s.deltas) for s in r.segments] for r in trace.replies]


class _WatcherLike(Protocol):
    @property
    def feed(self) -> Callable[[str, str], Any]: ...
    @property
    def finish(self) -> Callable[[], Any]: ...
    @property
    def reset(self) -> Callable[[], Any]: ...


def feed_replies(w: _WatcherLike, replies: Replies, hits: list[list[Any]]) -> None:
    """Feed each reply as one attempt (``finish()`` then ``reset()`` after it); keep each
    reply's detections as one list. The timed loop for reply traces."""
    feed = w.feed
    finish = w.finish
    reset = w.reset
    keep = hits.append
    for segments in replies:
        got: list[Any] = []
        ext = got.extend
        for channel, deltas in segments:
            for d in deltas:
                r = feed(d, channel)
                if r:
                    ext(r)
        ext(finish())
        reset()
        keep(got)


# --------------------------------------------------------------------------- bookkeeping

def record(benchmark: Any, *, table: str, workload: str, method: str, deltas: int, chars: int,
           nbytes: int, **extra: Any) -> None:
    """Name the benchmark's group and store what the report needs."""
    benchmark.group = f"{table}: {workload}"
    benchmark.extra_info.update(table=table, workload=workload, method=method, deltas=deltas,
                                chars=chars, bytes=nbytes, **extra)


def run(benchmark: Any, target: Callable[[], Any], setup: Callable[[], Any],
        rounds: int = 0) -> None:
    """Time ``target`` over a number of rounds, each after a fresh ``setup`` (not timed).

    One untimed round first (warm-up, and calibration: enough rounds to fill
    :data:`SECONDS`); ``rounds`` or ``CONTEXTCARE_BENCH_ROUNDS`` fix the number instead.
    """
    setup()
    start = time.perf_counter()
    target()
    once = time.perf_counter() - start
    if not rounds:
        rounds = ROUNDS or max(MIN_ROUNDS, min(MAX_ROUNDS, int(SECONDS / max(once, 1e-6))))
    benchmark.pedantic(target, setup=setup, rounds=rounds, warmup_rounds=0, iterations=1)


def rule_ids(hits: Sequence[Any]) -> set[str]:
    """Rule ids of a reply's hits (``Detection`` objects, or the original port's dicts)."""
    return {h["trigger"] if isinstance(h, dict) else h.rule for h in hits}


def check_replies(trace: ReplyTrace, hits: list[list[Any]], rules: dict[str, str]) -> None:
    """Correctness outside the timed part: every reply holding a loop of family ``f`` fired rule
    ``rules[f]`` (families not in ``rules`` are not checked), and no reply without a loop fired an
    abort rule (``rules`` values listed under the key ``"abort"``, comma-separated)."""
    assert len(hits) == len(trace.replies)
    aborts = set(filter(None, rules.get("abort", "").split(",")))
    for i, (reply, got) in enumerate(zip(trace.replies, hits)):
        fired = rule_ids(got)
        for family in reply.loops:
            if family in rules:
                assert rules[family] in fired, (i, family, sorted(fired))
        if not reply.loops:
            assert not (fired & aborts), (i, sorted(fired & aborts))


def replies_size(trace: ReplyTrace) -> dict[str, int]:
    return {"deltas": trace.n_deltas, "chars": trace.n_chars, "nbytes": trace.nbytes}


def deltas_size(deltas: Sequence[str]) -> dict[str, int]:
    text = "".join(deltas)
    return {"deltas": len(deltas), "chars": len(text), "nbytes": utf8_len(text)}


def versions() -> dict[str, str]:
    """Installed versions of contextcare and of the peers (stored with the results)."""
    from importlib import metadata

    out = {}
    for dist in ("contextcare", "pyahocorasick", "hyperscan", "numpy", "pytest-benchmark"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out


def machine_info() -> dict[str, str]:
    """CPU model, core count and Python version (stored with the results)."""
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpu": cpu, "cores": str(os.cpu_count()), "python": sys.version.split()[0]}
