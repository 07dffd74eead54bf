"""Shared fixtures of the benchmark suites: the traces (generated once per session), their ground
truth, and the engines. Large cases are marked ``big`` and skipped unless
``CONTEXTCARE_BENCH_BIG=1``."""

from __future__ import annotations

import os
from typing import Any

import pytest

import harness
import traces

_LOAD_START: list[float] = []


def pytest_sessionstart(session: pytest.Session) -> None:
    _LOAD_START.append(os.getloadavg()[0])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if harness.BIG:
        return
    skip = pytest.mark.skip(reason="large case: set CONTEXTCARE_BENCH_BIG=1 to run it")
    for item in items:
        if "big" in item.keywords:
            item.add_marker(skip)


def pytest_benchmark_update_json(config: pytest.Config, benchmarks: list[Any],
                                 output_json: dict[str, Any]) -> None:
    """Store the machine and the engine that ran with the results (read by report.py)."""
    engine = harness.load_engine("contextcare")
    output_json["contextcare"] = {
        **harness.machine_info(),
        "versions": harness.versions(),
        "engine": "missing" if engine is None else ("native" if engine.native else "reference"),
        "engine_noop": bool(engine is not None and engine.noop is not None),
        "big": harness.BIG,
        "load_start": round(_LOAD_START[0], 2) if _LOAD_START else None,
        "load_end": round(os.getloadavg()[0], 2),
        "seconds": harness.SECONDS,
        "rounds": harness.ROUNDS,
    }


@pytest.fixture(scope="session")
def phrases() -> tuple[str, ...]:
    """300 phrases: 200 English, 100 Chinese."""
    return traces.make_phrases()


@pytest.fixture(scope="session")
def ptrace(phrases: tuple[str, ...]) -> traces.PhraseTrace:
    """~1 MB of BMP-only text on one channel with the phrases planted, in 1-4-character deltas."""
    return traces.phrase_trace(1_000_000, phrases=phrases)


@pytest.fixture(scope="session")
def clean() -> traces.ReplyTrace:
    """~1 MB of replies (reasoning then answer) without loops."""
    return traces.reply_trace(1_000_000, seed=2, loops=False)


@pytest.fixture(scope="session")
def loopy() -> traces.ReplyTrace:
    """~1 MB of replies, every second one holding a degenerate loop."""
    return traces.reply_trace(1_000_000, seed=3, loops=True)


@pytest.fixture(scope="session")
def engine() -> harness.Engine:
    """``contextcare.Ruleset`` as installed (native once the engine has landed)."""
    found = harness.load_engine("contextcare")
    if found is None:
        pytest.skip("contextcare.Ruleset cannot be constructed yet")
    return found


@pytest.fixture(scope="session")
def reference() -> harness.Engine:
    """The pure-Python reference engine."""
    found = harness.load_engine("reference")
    if found is None:
        pytest.skip("contextcare.reference is not available")
    return found
