"""The original engine's 20 stream scenarios (its specification, §7.1: not in this repository,
see docs/history.md), on this API.

Many of the originals inspect internal state (carry lengths, window arrays, the chunk list); here
each is restated as observable behaviour: detections, their offsets and evidence, ``tail()`` and
``fired``. Dropped, because they have no meaning for an engine without actions or callbacks:

* §7.1-15 (an action throws ``boom`` → ``onError``) and §7.1-16 (unknown action name → an error
  entry): the engine returns detections and never calls an action; the Guard layer acts on them.

Every other scenario is kept, numbered as in the spec.
"""

from __future__ import annotations

from types import ModuleType

import pytest
from conftest import feed_all, stream

from contextcare.errors import ArgumentValueError, RuleValueError
from contextcare.rules import LineRepeat, Marker, Phrases


#: A LineRepeat that reports its window at finish(): fires on any non-empty window, checked only
#: at finish (every_bytes too large to be reached), so ``total`` is the window size.
def _window_probe(**kwargs: object) -> LineRepeat:
    return LineRepeat("probe", min_lines=1, min_count=1, min_ratio=0.001, min_run=0,
                      every_bytes=1 << 30, **kwargs)  # type: ignore[arg-type]


def _scenario8_rule(**kwargs: object) -> LineRepeat:
    return LineRepeat("line-repeat", every_bytes=40, min_lines=30, min_count=30, min_ratio=0.35,
                      min_run=12, **kwargs)  # type: ignore[arg-type]


def test_01_window_keeps_the_last_line_window_lines(engine: ModuleType) -> None:
    # 500 distinct lines: the window holds exactly 80 of them, each once.
    rs = engine.Ruleset([_window_probe()], line_window=80)
    (d,) = stream(rs, "".join(f"line {n}\n" for n in range(500)))
    assert (d.total, d.count, d.line) == (80, 1, "line 499")
    assert d.ratio == 1 / 80


def test_02_tail_is_bounded_by_evidence_chars(engine: ModuleType) -> None:
    rs = engine.Ruleset([Marker("m", "never-fed")], evidence_chars=600)
    w = rs.watcher()
    for _ in range(50_000):
        w.feed("q")
    assert w.tail(10**6) == "q" * 600
    w.reset()
    big = "".join(chr(0x4E00 + i % 500) for i in range(49_152))
    w.feed(big)
    assert w.tail() == big[-600:]
    assert w.tail(10**6) == big[-600:]


def test_03_tail_returns_the_last_characters(engine: ModuleType) -> None:
    w = engine.Ruleset([Marker("m", "zzz")]).watcher()
    w.feed("first\nsecond")
    assert w.tail(100) == "first\nsecond"
    assert w.tail(6) == "second"


def test_04_short_and_blank_lines_never_enter_the_window(engine: ModuleType) -> None:
    rs = engine.Ruleset([_window_probe()], min_line_chars=3)
    (d,) = stream(rs, "ab\n{}\n\n   \nreal line\n")
    assert (d.total, d.line, d.count) == (1, "real line", 1)


def test_05_long_prefix_of_non_matches_then_a_match(engine: ModuleType) -> None:
    # Original: the carry of marker ABCDEF stays <= 5 chars after 10,000 "q". Observable form:
    # nothing fires on the "q"s, and the marker still fires at its exact end offset afterwards.
    w = engine.Ruleset([Marker("m", "ABCDEF")]).watcher()
    for _ in range(10_000):
        assert w.feed("q") == ()
    (d,) = w.feed("ABCDEF")
    assert (d.rule, d.phrase, d.offset) == ("m", "ABCDEF", 10_006)


def test_06_marker_straddling_deltas_fires_once(engine: ModuleType) -> None:
    w = engine.Ruleset([Marker("m", "XYZZY", channel="text")]).watcher()
    results = [w.feed(d) for d in ("AB", "XY", "Z", "ZY", "CD", "XYZZY")]
    assert [len(r) for r in results] == [0, 0, 0, 1, 0, 0]
    (d,) = results[3]
    assert (d.phrase, d.offset, d.kind, d.action, d.channel) == (
        "XYZZY", 7, "marker", "abort", "text")
    assert w.finish() == ()
    # once=False reports the second occurrence too, at its own end offset.
    w2 = engine.Ruleset([Marker("m", "XYZZY", once=False)]).watcher()
    found = feed_all(w2, [("text", d) for d in ("AB", "XY", "Z", "ZY", "CD", "XYZZY")])
    assert [d.offset for d in found] == [7, 14]


def test_07_text_scope_ignores_reasoning(engine: ModuleType) -> None:
    w = engine.Ruleset([Marker("m", "HIT", channel="text")]).watcher()
    assert w.feed("HIT", "reasoning") == ()
    (d,) = w.feed("HIT", "text")
    assert d.offset == 3   # offsets count the text view only


def test_08_line_repeat_fires_at_its_throttle_point(engine: ModuleType) -> None:
    # "same line\n" is 10 bytes; checks at 40, 80, ... bytes. The window first holds 30 lines at
    # byte 300, which is not a check point; the first check with >= 30 lines is at byte 320.
    rs = engine.Ruleset([_scenario8_rule()])
    found = stream(rs, "same line\n" * 60)
    assert len(found) == 1
    d = found[0]
    assert (d.line, d.count, d.total, d.run, d.offset) == ("same line", 32, 32, 32, 320)
    assert d.ratio == 1.0


def test_09_distinct_rounds_never_fire(engine: ModuleType) -> None:
    rs = engine.Ruleset([_scenario8_rule()])
    text = "".join(f"distinct line number {n}\n" for n in range(10)) * 8
    assert stream(rs, text) == []


def test_10_run_of_identical_lines_fires_below_min_count(engine: ModuleType) -> None:
    rs = engine.Ruleset([_scenario8_rule()])
    text = "".join(f"unique {n}\n" for n in range(68)) + "zzz\n" * 20
    (d,) = stream(rs, text)
    assert d.line == "zzz"
    assert d.run is not None and d.count is not None
    assert d.run >= 12 and d.count < 30
    assert d.count == d.run   # the only repeated line is the run itself


def test_11_min_lines_gates_everything(engine: ModuleType) -> None:
    rs = engine.Ruleset([LineRepeat("r", every_bytes=1, min_lines=30)])
    assert stream(rs, "same line\n" * 10) == []


def test_12_unreached_throttle_is_checked_at_finish(engine: ModuleType) -> None:
    # The original never checked (no end-of-stream check); here feed() never checks, finish()
    # does, once, with offset = characters of the view.
    rs = engine.Ruleset([LineRepeat("r", every_bytes=100_000)])
    w = rs.watcher()
    assert all(w.feed(d) == () for d in ["same line\n"] * 100)
    (d,) = w.finish()
    assert (d.offset, d.count, d.total) == (1000, 80, 80)


def test_13_reset_starts_a_new_attempt(engine: ModuleType) -> None:
    rs = engine.Ruleset([LineRepeat("r", every_bytes=1, min_run=5, min_count=5, min_lines=10)])
    w = rs.watcher()
    first = feed_all(w, [("text", "same line\n")] * 40, finish=False)
    assert len(first) == 1 and w.fired == frozenset({"r"})
    w.reset()
    assert w.fired == frozenset() and w.tail() == ""
    second = feed_all(w, [("text", "same line\n")] * 40, finish=False)
    assert len(second) == 1
    assert second[0].offset == first[0].offset   # same text, same throttle point


def test_14_watchers_are_independent(engine: ModuleType) -> None:
    rs = engine.Ruleset([LineRepeat("r", every_bytes=1, min_run=5, min_count=5, min_lines=10)])
    a, b = rs.watcher(), rs.watcher()
    a.feed("hello\n")
    found = feed_all(b, [("text", "same line\n")] * 20)
    assert len(found) == 1
    assert a.fired == frozenset() and a.finish() == ()
    assert a.tail() == "hello\n"


def test_17_nothing_but_ignored_input_changes_nothing(engine: ModuleType) -> None:
    # Original: tool-call and usage chunks are ignored. Here the only channels are "text" and
    # "reasoning": another channel is refused without touching the state, and empty deltas do
    # nothing (not even a channel switch).
    w = engine.Ruleset([Phrases("p", ["abcd"]), _window_probe()]).watcher()
    with pytest.raises(ArgumentValueError):
        w.feed("ab", "tool-call")
    assert w.feed("ab", "reasoning") == ()
    assert w.feed("", "text") == ()
    (d,) = w.feed("cd", "reasoning")
    assert (d.rule, d.offset) == ("p", 4)
    assert w.tail() == "abcd"
    assert w.finish() != ()    # the probe sees the pending line "abcd"


def test_18_cjk_phrase_straddling_deltas(engine: ModuleType) -> None:
    w = engine.Ruleset([Phrases("anx", ["时间不够", "加快速度"], channel="reasoning")]).watcher()
    results = [w.feed(d, "reasoning") for d in ("嗯，", "时间", "不够")]
    assert results[:2] == [(), ()]
    (d,) = results[2]
    assert (d.phrase, d.offset, d.channel) == ("时间不够", 6, "reasoning")


def test_19_empty_phrase_list_is_refused(engine: ModuleType) -> None:
    # Original: an empty list silently matched nothing; here it is a construction error.
    with pytest.raises(RuleValueError, match="phrases"):
        Phrases("p", [])


def test_20_one_character_phrases_after_a_long_run(engine: ModuleType) -> None:
    # Original: carries of 1-char phrase and marker stay empty. Observable form: no spurious or
    # repeated hits, and both still fire at their exact offsets.
    w = engine.Ruleset([Phrases("x", ["x"]), Marker("z", "Z")]).watcher()
    for _ in range(5000):
        assert w.feed("q") == ()
    assert [(d.rule, d.offset) for d in w.feed("xZ")] == [("x", 5001), ("z", 5002)]
