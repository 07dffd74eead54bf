"""Shared helpers for the labelled real-model streams in tests/data (tools/label_streams.py wrote
them): read a trace file into labelled replies, find a reply's first abort, and check that the
native engine and the reference agree on a reply replayed delta by delta."""

from __future__ import annotations

import gzip
import json
import os
from typing import NamedTuple

from contextcare import reference
from contextcare.presets import DEFAULT_OPTIONS, default_rules, default_ruleset

DATA = os.path.join(os.path.dirname(__file__), "data")


class Labelled(NamedTuple):
    name: str
    loop: bool
    #: Offset of the first character of the loop's first copy (None for a clean reply).
    start: int | None
    shape: str
    deltas: list[str]


def read_labelled(path: str) -> list[Labelled]:
    """The replies of a gzip JSONL trace, in file order; [] when the file is missing."""
    if not os.path.exists(path):
        return []
    out: dict[str, Labelled] = {}
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            e = json.loads(line)
            if e["type"] == "start":
                out[e["stream"]] = Labelled(e["stream"], e["label"] == "loop", e["loop_start"],
                                            e.get("shape", ""), [])
            elif e["type"] == "text-delta":
                out[e["stream"]].deltas.append(e["text"])
    return list(out.values())


def first_abort(rs, deltas: list[str]) -> int | None:  # type: ignore[no-untyped-def]
    """Offset of the first abort when ``deltas`` are fed one by one to a watcher of ``rs``."""
    w = rs.watcher()
    found = []
    for d in deltas:
        found.extend(w.feed(d))
    found.extend(w.finish())
    return next((d.offset for d in found if d.action == "abort"), None)


def assert_engines_agree(deltas: list[str]) -> None:
    """The default rules give the same detections in both engines on ``deltas`` replayed."""
    native = default_ruleset()
    ref = reference.Ruleset(default_rules(), **DEFAULT_OPTIONS)
    text = "".join(deltas)
    splits = []
    at = 0
    for d in deltas:
        at += len(d)
        splits.append(at)
    assert native.replay(text, splits) == ref.replay(text, splits)
