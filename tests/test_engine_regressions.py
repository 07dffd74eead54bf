"""Regression tests for bugs found in the native engine, and for the corners of its compact
state (what a line keeps of its text, the 16-bit tail ring, the fast TailRepeat scan).

Every case runs on both engines (the ``engine`` fixture): the expected values are worked out by
hand from docs/semantics.md, so the reference checks the reasoning and the native engine checks
the implementation.
"""

from __future__ import annotations

from types import ModuleType

import contextcare as cc

from conftest import feed_all, stream


def _one(detections: list[cc.Detection]) -> cc.Detection:
    assert len(detections) == 1, detections
    return detections[0]


def test_prefix_delimiters_of_several_rules_beyond_64(engine: ModuleType) -> None:
    # Two PrefixMonotony rules with 40 delimiters each: 80 distinct delimiters on one view. The
    # native engine once kept only the first 64 of their union, so lines whose delimiter came
    # later were never counted and rule "b" could not fire.
    d1 = "".join(chr(0x4E00 + i) for i in range(40))
    d2 = "".join(chr(0x5E00 + i) for i in range(40))
    common = {"min_lines": 2, "min_count": 2, "min_ratio": 0.5, "every_bytes": 1}
    rules = [cc.PrefixMonotony("a", delimiters=d1, **common),
             cc.PrefixMonotony("b", delimiters=d2, **common)]
    rs = engine.Ruleset(rules, min_line_chars=1)
    line = d2[-1] + "x\n"
    det = _one(feed_all(rs.watcher(), [("text", line * 3)]))
    # the second line completes at character 6; from then on both lines have prefix d2[-1]
    assert (det.rule, det.offset, det.prefix, det.count, det.total) == ("b", 6, d2[-1], 2, 2)


def test_line_repeat_on_lines_seen_once(engine: ModuleType) -> None:
    # min_count=1: the most frequent line may occur once, and a long one is the evidence.
    # (The native window keeps a long line's text only from its second occurrence, unless a
    # rule like this one may report it after one.)
    long_a = "alpha " * 10 + "end"       # 63 code points: the evidence is the first 40
    long_b = "beta " * 10 + "stop"
    rs = engine.Ruleset([cc.LineRepeat("r", min_lines=2, min_count=1, min_ratio=0.5, min_run=0,
                                       every_bytes=1)])
    det = _one(stream(rs, long_a + "\n" + long_b + "\n"))
    # at the end of the second line: two lines, both once; the tie goes to the newer one
    assert det.offset == len(long_a) + 1 + len(long_b) + 1
    assert (det.line, det.count, det.total) == (long_b[:40], 1, 2)


def test_long_line_seen_twice_reports_its_text(engine: ModuleType) -> None:
    # A long line is first kept without text; its second occurrence must bring the text back.
    long_line = "这是一个很长的句子，" * 5 + "over"   # 54 code points, prefix-free within 3
    other = "something else entirely here"
    rs = engine.Ruleset([cc.LineRepeat("r", min_lines=3, min_count=2, min_ratio=0.5, min_run=0,
                                       every_bytes=1)])
    text = long_line + "\n" + other + "\n" + long_line + "\n"
    det = _one(stream(rs, text))
    assert det.offset == len(text)
    assert (det.line, det.count, det.total) == (long_line[:40], 2, 3)


def test_line_cycle_includes_a_line_seen_once(engine: ModuleType) -> None:
    # top=3 but only two short lines repeat: the third cycle line is a short line seen once.
    rs = engine.Ruleset([cc.LineCycle("c", max_line_chars=8, min_lines=5, top=3,
                                      cover_ratio=0.6, every_bytes=10_000)],
                        min_line_chars=1)
    text = "x1\ny2\n" * 3 + "z3\n" + "a long line that is not short\n"
    det = _one(stream(rs, text))
    # finish(): 8 lines; x1 and y2 three times each (y2 is newer), then z3 once
    assert det.cycle == ("y2", "x1", "z3")
    assert (det.count, det.total) == (7, 8)


def test_tail_keeps_astral_and_bmp_characters(engine: ModuleType) -> None:
    rs = engine.Ruleset([cc.Phrases("p", ["never"])], evidence_chars=8)
    w = rs.watcher()
    w.feed("abc")                 # BMP only so far
    w.feed("\U0001F600d")          # the first astral character
    w.feed("\u4e2de")              # BMP again, after it
    assert w.tail() == "abc\U0001F600d\u4e2de"[-8:]
    w.feed("fgh")
    assert w.tail(4) == "\u4e2defg"[-3:] + "h"


def test_tail_repeat_after_a_long_punctuation_loop(engine: ModuleType) -> None:
    # A long periodic tail without a word character makes every multiple of the period a
    # candidate (the native scan falls back to its linear-time path); then a word unit repeats.
    rs = engine.Ruleset([cc.TailRepeat("t", every_bytes=100_000)])
    w = rs.watcher()
    assert w.feed("-=" * 380) == ()
    assert w.finish() == ()
    w.reset()
    det = _one(feed_all(w, [("text", "-=" * 380 + "ab" * 150)]))
    # at finish(): the last 768 characters are "...-=-=" + "ab" * 150; period 2, and the
    # suffix with period 2 is the 300 characters of "ab" (the "=" before them breaks it)
    assert (det.unit, det.period, det.repeats, det.offset) == ("ab", 2, 150, 1060)


def test_copy_keeps_line_texts(engine: ModuleType) -> None:
    rs = engine.Ruleset([cc.LineRepeat("r", min_lines=3, min_count=3, min_ratio=0.5, min_run=0,
                                       every_bytes=1)])
    w = rs.watcher()
    line = "a line that repeats itself over and over again, more than forty characters"
    w.feed(line + "\n" + line + "\n")
    twin = w.copy()
    del w
    det = _one(twin.feed(line + "\n"))
    assert (det.line, det.count, det.total) == (line[:40], 3, 3)


def test_tail_repeat_periodic_but_too_short_then_long_enough(engine: ModuleType) -> None:
    # "ab" repeated over 200 characters after non-periodic text: every even period is a long
    # candidate that falls short of min_chars=240 (the native scan switches to its linear-time
    # path), so nothing fires; 60 more characters of it make L(2) = 260 and it fires.
    head = "".join(chr(0x4E00 + i) for i in range(500))
    rs = engine.Ruleset([cc.TailRepeat("t", every_bytes=100_000)])
    assert feed_all(rs.watcher(), [("text", head + "ab" * 100)]) == []
    det = _one(feed_all(rs.watcher(), [("text", head + "ab" * 130)]))
    assert (det.unit, det.period, det.repeats, det.offset) == ("ab", 2, 130, 760)


def test_phrases_with_astral_and_folded_characters_across_deltas(engine: ModuleType) -> None:
    # The native automaton steps once per code point through a class map: a two-level table for
    # the BMP, a sorted list above it. An astral phrase character and an ASCII letter folded by
    # ignore_case must match across delta boundaries and string kinds (1, 2 and 4 bytes).
    rs = engine.Ruleset([cc.Phrases("p", ["\U0001F600x"], ignore_case=True),
                         cc.Phrases("q", ["ab"], ignore_case=True)])
    w = rs.watcher()
    got = []
    for delta in ["A", "\U0001F600", "X", "a", "B"]:
        got += w.feed(delta)
    # "😀x" ends at the third character (X folds to x), "ab" at the fifth (B folds to b)
    assert [(d.rule, d.phrase, d.offset) for d in got] == [("p", "\U0001F600x", 3),
                                                           ("q", "ab", 5)]


def test_suppress_quoted_around_and_inside_phrases(engine: ModuleType) -> None:
    # With suppress_quoted the native loop stops at line ends and quote marks (they have classes
    # of their own in the automaton); a phrase that contains a quote mark is still matched.
    rs = engine.Ruleset([cc.Phrases("s", ["时间不够", 'a"b'], suppress_quoted=True, once=False)])
    text = "x \u201c时间不够\u201d y\n时间不够了\nza\"b\n"
    got = stream(rs, text)
    # the first 时间不够 is inside curly quotes (quoted); the second ends at offset 11 + 4 = 15
    # and is unquoted; a"b ends with its own '"' already seen, so it is quoted
    assert [(d.phrase, d.offset) for d in got] == [("时间不够", 15)]
