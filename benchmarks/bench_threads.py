"""``Ruleset.replay`` across threads: one shared Ruleset, the work split over 1 or 2 threads.

``replay`` scans inside C with the GIL released, so on a machine with two free cores two threads
get through the same traces in about half the time (the rest is the Python part of each call:
checking ``splits``, building the ``Detection`` objects). Two workloads, both with the default
rules on the ``reasoning`` channel:

* ``replies``: the ~1 MB ``loopy`` reply trace, one ``replay`` per reply (a few thousand
  characters each: many short calls, so the Python part weighs more);
* ``long``: 8 texts of 1 MiB each, one ``replay`` per text.

Every round checks that the threads found exactly what one thread finds. The pytest-benchmark
group is ``threads``; compare the ``threads=1`` and ``threads=2`` rows of one workload (the
``speedup`` in extra_info is filled in by the second of the two).

A control workload, ``sha256`` (hashlib over the same 8 MiB, which releases the GIL too), shows
what parallelism the machine offers at that moment: when another process holds a core, neither
speeds up, and the replay speed-up should be read against the control's.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import hashlib

import pytest

import harness
import traces

GROUP = "threads"
_SERIAL: dict[str, float] = {}


def _reply_texts(trace: traces.ReplyTrace) -> list[str]:
    return ["".join(d for s in reply.segments for d in s.deltas) for reply in trace.replies]


def _long_texts() -> list[str]:
    base = _reply_texts(traces.reply_trace(1 << 20, seed=5, loops=True))
    text = "".join(base)
    return [(text[i * 997:] + text[:i * 997])[:1 << 20] for i in range(8)]


@pytest.fixture(scope="module")
def pool() -> Iterator[ThreadPoolExecutor]:
    """Two worker threads, started once (thread start-up is not what is measured)."""
    with ThreadPoolExecutor(max_workers=2) as executor:
        yield executor


@pytest.mark.parametrize("workload", ["replies", "long"])
@pytest.mark.parametrize("threads", [1, 2])
def bench_replay_threads(benchmark: Any, request: pytest.FixtureRequest,
                         pool: ThreadPoolExecutor, workload: str, threads: int) -> None:
    from contextcare import default_rules
    from contextcare.presets import DEFAULT_OPTIONS

    engine = harness.load_engine("contextcare")
    if engine is None or not engine.native:
        pytest.skip("the native engine is not built: replay would hold the GIL")
    ruleset = engine.ruleset(default_rules(), **DEFAULT_OPTIONS)
    texts = _reply_texts(request.getfixturevalue("loopy")) if workload == "replies" \
        else _long_texts()
    expected = [ruleset.replay(t, channel="reasoning") for t in texts]
    shares = [texts[i::threads] for i in range(threads)]
    out: list[list[Any]] = []

    def replay_all(share: list[str]) -> list[Any]:
        return [ruleset.replay(t, channel="reasoning") for t in share]

    def target() -> None:
        if threads == 1:
            out[:] = [replay_all(texts)]
        else:
            out[:] = list(pool.map(replay_all, shares))

    nbytes = sum(traces.utf8_len(t) for t in texts)
    benchmark.group = GROUP
    benchmark.extra_info.update(workload=workload, threads=threads, texts=len(texts),
                                chars=sum(map(len, texts)), bytes=nbytes)
    harness.run(benchmark, target, out.clear)
    got = [None] * len(texts)
    for i, share_result in enumerate(out):
        got[i::threads] = share_result
    assert got == expected
    median = benchmark.stats.stats.median
    benchmark.extra_info["mb_per_s"] = round(nbytes / median / 1e6, 1)
    if threads == 1:
        _SERIAL[workload] = median
    elif workload in _SERIAL:
        benchmark.extra_info["speedup"] = round(_SERIAL[workload] / median, 2)


@pytest.mark.parametrize("threads", [1, 2])
def bench_sha256_threads_control(benchmark: Any, pool: ThreadPoolExecutor, threads: int) -> None:
    blobs = [t.encode("utf-8", "surrogatepass") for t in _long_texts()]
    shares = [blobs[i::threads] for i in range(threads)]

    def hash_all(share: list[bytes]) -> list[str]:
        return [hashlib.sha256(b).hexdigest() for b in share]

    def target() -> None:
        if threads == 1:
            hash_all(blobs)
        else:
            list(pool.map(hash_all, shares))

    benchmark.group = GROUP
    benchmark.extra_info.update(workload="sha256", threads=threads, texts=len(blobs),
                                bytes=sum(map(len, blobs)))
    harness.run(benchmark, target, lambda: None)
    median = benchmark.stats.stats.median
    if threads == 1:
        _SERIAL["sha256"] = median
    elif "sha256" in _SERIAL:
        benchmark.extra_info["speedup"] = round(_SERIAL["sha256"] / median, 2)
