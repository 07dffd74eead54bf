"""The native engine builds ``Detection`` objects without the dataclass constructor (issue 17,
item 5: that constructor cost ~2.5-4 us per detection). What it builds must be an ordinary
``Detection`` in every respect, must not leak or lose references, and the engine must fall back
to the constructor when the class is not the shape it fills."""

from __future__ import annotations

import copy
import dataclasses
import gc
import pickle
import sys
from typing import Any

import pytest

import contextcare._engine as native
from contextcare import reference
from contextcare.detection import Detection
from contextcare.rules import (
    FillerLines,
    LineCycle,
    LineRepeat,
    Marker,
    Phrases,
    PrefixMonotony,
    TailRepeat,
)

#: One rule of every kind and a text that fires each of them.
RULES = [
    Phrases("phrase", ["hmm"], once=False), Marker("marker", "<<END>>"),
    LineRepeat("repeat", min_lines=4, min_count=4, min_run=0, every_bytes=16),
    LineCycle("cycle", min_lines=6, every_bytes=16),
    FillerLines("filler", min_count=4, min_ratio=0.05, every_bytes=16),
    PrefixMonotony("prefix", min_lines=4, min_count=4, min_ratio=0.05, every_bytes=16),
    TailRepeat("tail"),
]
TEXT = ("hmm\n" + "same line\n" * 6 + "one\ntwo\nthree\n" * 4 + "好。\n" * 6
        + "嗯，a\n嗯，b\n嗯，c\n嗯，d\n嗯，e\n" + "<<END>>" + "ab" * 300)


def _all_kinds() -> list[Detection]:
    got = native.Ruleset(RULES, line_window=20).replay(TEXT)
    assert {d.rule for d in got} == {r.id for r in RULES}, "every kind must fire to prove it"
    return got


def test_fast_path_is_on() -> None:
    """The shape check passes for the real class (else the benchmark measures the fallback)."""
    assert native._setup_fast_detection() is True


def test_fast_detections_are_ordinary_detections() -> None:
    got = _all_kinds()
    assert got == reference.Ruleset(RULES, line_window=20).replay(TEXT)
    for d in got:
        built = Detection(**{f.name: getattr(d, f.name) for f in dataclasses.fields(Detection)})
        assert type(d) is Detection
        assert d == built and hash(d) == hash(built) and repr(d) == repr(built)
        assert d.to_dict() == built.to_dict()
        assert sys.getsizeof(d) == sys.getsizeof(built)
        # its fields are atoms and tuples of str: it can never be in a cycle, so the engine
        # leaves it out of the cyclic GC (built by hand, the dataclass is tracked)
        assert not gc.is_tracked(d) and gc.is_tracked(built)
        for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
            assert pickle.loads(pickle.dumps(d, protocol)) == d
        assert copy.deepcopy(d) == d and copy.copy(d) == d
        assert dataclasses.replace(d, offset=0) == dataclasses.replace(built, offset=0)
        with pytest.raises(dataclasses.FrozenInstanceError):
            d.rule = "other"  # type: ignore[misc]
        match d:
            case Detection(rule, kind, action, channel, offset):
                assert (rule, kind, action, channel, offset) == (
                    built.rule, built.kind, built.action, built.channel, built.offset)


def test_no_reference_is_leaked_or_lost() -> None:
    rule_id = "".join(["leak", "-check"])  # noqa: FLY002 - a fresh str, not an interned constant
    phrase = "".join(["q", "q"])  # noqa: FLY002
    rs = native.Ruleset([Phrases(rule_id, [phrase], once=False)])
    text = "qq " * 5_000
    rs.replay(text)  # warm-up: caches of the first call
    gc.collect()
    before = sys.getrefcount(rs.rules[0].id), sys.getrefcount(rs.rules[0].phrases[0])
    got = rs.replay(text)
    assert len(got) == 5_000 and all(d.rule is rs.rules[0].id for d in got)
    del got
    gc.collect()
    assert (sys.getrefcount(rs.rules[0].id), sys.getrefcount(rs.rules[0].phrases[0])) == before


def test_a_changed_class_falls_back_to_its_constructor(monkeypatch: pytest.MonkeyPatch) -> None:
    """If Detection ever validates in __post_init__ (or changes its fields), the engine must
    construct it normally rather than fill slots behind its back."""
    calls: list[Any] = []

    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked(Detection):
        def __post_init__(self) -> None:
            calls.append(self.rule)

    monkeypatch.setattr(native, "Detection", Checked)
    try:
        assert native._setup_fast_detection() is False
        got = native.Ruleset([Phrases("p", ["x"])]).replay("x")
        assert type(got[0]) is Checked and calls == ["p"]
    finally:
        monkeypatch.undo()
        assert native._setup_fast_detection() is True
