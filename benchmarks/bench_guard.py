"""What the actions layer costs per delta: ``Reply.feed`` beside ``Watcher.feed``.

Workload ``default-clean``: ``default_ruleset()`` on ~1 MB of replies without loops (reasoning then
answer, 1-4-character deltas), the fast path where nothing asks for action. Each reply is one
attempt: a fresh ``guard.reply()`` for the guard, ``finish()`` + ``reset()`` for the bare watcher.
The target is a guard overhead of at most 20 % over ``Watcher.feed``; the floor (a no-op C call
through the same loop) shows how much of either is Python call overhead.

All three loops have the same shape (bind ``feed`` once per reply, call it per delta, keep what is
truthy), so their difference is the guard's own work: one Python frame, the append of the delta to
the partial text, one ``if``. Correctness is checked after timing: the guard saw exactly the
detections the bare watcher saw, reply by reply, and the clean trace never aborted.

Run: ``cd benchmarks && python -m pytest bench_guard.py``.
"""

from __future__ import annotations

from typing import Any

import harness
import traces
from harness import Engine, FloorWatcher, Replies, as_replies, feed_replies, record, run

from contextcare.guard import Abort, Guard

WORK = "default-clean"
GROUP = "guard"


def guard_replies(guard: Guard, replies: Replies, hits: list[list[Any]],
                  seen: list[list[Any]]) -> None:
    """Feed each reply through a fresh ``guard.reply()``; keep its verdicts (``hits``) and its
    reply object's detections (``seen``). The timed loop of the guard."""
    keep = hits.append
    keep_seen = seen.append
    new_reply = guard.reply
    for segments in replies:
        reply = new_reply()
        feed = reply.feed
        got: list[Any] = []
        add = got.append
        for channel, deltas in segments:
            for d in deltas:
                v = feed(d, channel)
                if v:
                    add(v)
        v = reply.finish()
        if v:
            add(v)
        keep(got)
        keep_seen(reply.detections)


def _record(benchmark: Any, method: str, role: str, trace: traces.ReplyTrace) -> None:
    record(benchmark, table="guard", workload=WORK, method=method, role=role,
           **harness.replies_size(trace))
    benchmark.group = GROUP


def bench_guard_floor(benchmark: Any, engine: Engine, clean: traces.ReplyTrace) -> None:
    replies = as_replies(clean)
    floor = FloorWatcher(engine)
    hits: list[list[Any]] = []
    _record(benchmark, f"floor: {floor.label}", "floor", clean)
    run(benchmark, lambda: feed_replies(floor, replies, hits), hits.clear)
    assert all(got == [] for got in hits)


def bench_guard_watcher_feed(benchmark: Any, engine: Engine, clean: traces.ReplyTrace) -> None:
    from contextcare import default_rules
    from contextcare.presets import DEFAULT_OPTIONS

    replies = as_replies(clean)
    watcher = engine.ruleset(default_rules(), **DEFAULT_OPTIONS).watcher()
    hits: list[list[Any]] = []
    _record(benchmark, "Watcher.feed", "baseline", clean)
    run(benchmark, lambda: feed_replies(watcher, replies, hits), hits.clear)
    assert not any(d.action == "abort" for got in hits for d in got)


def bench_guard_reply_feed(benchmark: Any, engine: Engine, clean: traces.ReplyTrace) -> None:
    from contextcare import default_rules
    from contextcare.presets import DEFAULT_OPTIONS

    replies = as_replies(clean)
    ruleset = engine.ruleset(default_rules(), **DEFAULT_OPTIONS)
    guards: list[Guard] = []
    hits: list[list[Any]] = []
    seen: list[list[Any]] = []

    def setup() -> None:
        guards[:] = [Guard(ruleset)]
        hits.clear()
        seen.clear()

    _record(benchmark, "Reply.feed (Guard)", "engine", clean)
    run(benchmark, lambda: guard_replies(guards[0], replies, hits, seen), setup)

    # Outside the timing: the guard saw what a bare watcher sees, and never aborted.
    bare = ruleset.watcher()
    expected: list[list[Any]] = []
    feed_replies(bare, replies, expected)
    assert seen == expected
    assert not any(isinstance(v, Abort) for got in hits for v in got)
