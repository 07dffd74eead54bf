"""Shared fixtures and helpers of the engine tests.

The ``engine`` fixture runs a test once per engine: ``reference`` (the pure-Python
:mod:`contextcare.reference`, the executable spec) and ``native`` (:mod:`contextcare._engine`).
Both modules expose ``Ruleset`` and ``Watcher`` with the same API, so an engine test only ever
touches ``engine.Ruleset``.
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Iterable, Sequence
from types import ModuleType

import pytest

from contextcare.detection import Detection

#: Engine name (the test id) -> module that implements it.
ENGINES = {"reference": "contextcare.reference", "native": "contextcare._engine"}

#: A stream as fed to a watcher: (channel, delta) events in order.
Events = Sequence[tuple[str, str]]


@pytest.fixture(scope="session", params=list(ENGINES))
def engine(request: pytest.FixtureRequest) -> ModuleType:
    """The engine module under test (session-scoped, so hypothesis tests may use it)."""
    return importlib.import_module(ENGINES[request.param])


def pieces(text: str, rng: random.Random, lo: int = 1, hi: int = 4) -> list[str]:
    """``text`` cut into consecutive deltas of ``lo``..``hi`` code points (the last may be
    shorter), the way a model streams it."""
    out: list[str] = []
    i = 0
    while i < len(text):
        step = rng.randint(lo, hi)
        out.append(text[i:i + step])
        i += step
    return out


def feed_all(watcher: object, events: Iterable[tuple[str, str]], *,
             finish: bool = True) -> list[Detection]:
    """Feed every (channel, delta) event to ``watcher``; then ``finish()`` unless told not to.
    Returns the detections of all calls, in order."""
    out: list[Detection] = []
    for channel, delta in events:
        out.extend(watcher.feed(delta, channel))  # type: ignore[attr-defined]
    if finish:
        out.extend(watcher.finish())  # type: ignore[attr-defined]
    return out


def stream(ruleset: object, text: str, channel: str = "text", *, seed: int = 0,
           lo: int = 1, hi: int = 4) -> list[Detection]:
    """Feed ``text`` on ``channel`` to a fresh watcher in seeded 1-4 character deltas, then
    finish; return every detection."""
    rng = random.Random(seed)
    watcher = ruleset.watcher()  # type: ignore[attr-defined]
    return feed_all(watcher, [(channel, d) for d in pieces(text, rng, lo, hi)])


def split_events(events: Events, rng: random.Random, lo: int = 1,
                 hi: int = 4) -> list[tuple[str, str]]:
    """The same stream with every event cut into smaller deltas on its own channel (this never
    adds or removes a channel switch)."""
    return [(channel, piece) for channel, text in events for piece in pieces(text, rng, lo, hi)]


def rule_ids(detections: Iterable[Detection]) -> list[str]:
    return [d.rule for d in detections]


def actions(detections: Iterable[Detection]) -> set[str]:
    return {d.action for d in detections}
