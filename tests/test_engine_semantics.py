"""Table-driven cases for every rule option and every semantic point of docs/semantics.md.

Each table row gives rules, options, a stream of (channel, delta) events and the exact detections
expected after ``finish()`` — rule id, offset and evidence — worked out by hand from the semantics
page (the comment on a row says how when it is not obvious). Every row also runs with each event
cut into random 1-4 character deltas, which must not change anything.
"""

from __future__ import annotations

import pickle
import random
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from conftest import feed_all, split_events
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import rulesets, splits_of, texts, traces

from contextcare.detection import Detection
from contextcare.rules import (
    FillerLines,
    LineCycle,
    LineRepeat,
    Marker,
    Phrases,
    PrefixMonotony,
    Rule,
    TailRepeat,
)

NEVER = 1 << 30     # an every_bytes no test stream reaches: the rule is checked at finish() only

Expected = tuple[str, int, dict[str, Any]]


@dataclass(frozen=True)
class Case:
    id: str
    rules: list[Rule]
    events: list[tuple[str, str]] | str       # a str is one delta on "text"
    expected: list[Expected]
    options: dict[str, Any] = field(default_factory=dict)

    def stream(self) -> list[tuple[str, str]]:
        return [("text", self.events)] if isinstance(self.events, str) else self.events


def P(*phrases: str, rid: str = "p", **kw: Any) -> Phrases:
    """A phrase rule on the text view (offsets are then simply positions in the text)."""
    kw.setdefault("channel", "text")
    return Phrases(rid, list(phrases), **kw)


def S(*phrases: str, rid: str = "s", **kw: Any) -> Phrases:
    """A suppress_quoted phrase rule on the text view."""
    return P(*phrases, rid=rid, suppress_quoted=True, **kw)


def probe(rid: str = "probe", **kw: Any) -> LineRepeat:
    """A LineRepeat that fires on any non-empty window at finish(): its evidence shows the window
    (total lines, the most frequent line, its count, the longest run)."""
    kw.setdefault("channel", "text")
    return LineRepeat(rid, min_lines=1, min_count=1, min_ratio=0.001, min_run=0,
                      every_bytes=NEVER, **kw)


def LR(rid: str = "r", **kw: Any) -> LineRepeat:
    kw.setdefault("channel", "text")
    kw.setdefault("every_bytes", NEVER)
    return LineRepeat(rid, **kw)


def T(rid: str = "t", **kw: Any) -> TailRepeat:
    kw.setdefault("channel", "text")
    kw.setdefault("every_bytes", NEVER)
    return TailRepeat(rid, **kw)


def lines(*items: str) -> str:
    return "".join(f"{item}\n" for item in items)


def distinct(n: int, stem: str = "distinct prose line") -> list[str]:
    return [f"{stem} {i}" for i in range(n)]


def ph(phrase: str) -> dict[str, Any]:
    return {"phrase": phrase}


def rep(line: str, count: int, total: int, run: int) -> dict[str, Any]:
    return {"line": line, "count": count, "total": total, "ratio": count / total, "run": run}


def tail(unit: str, period: int, repeats: int) -> dict[str, Any]:
    return {"unit": unit, "period": period, "repeats": repeats}


CJK100 = "".join(chr(0x4E00 + i) for i in range(100))    # 100 distinct characters: period 100
CYCLE3 = lines("x1.", "y2.", "z3.")

CASES: list[Case] = [
    # ------------------------------------------------------------------ phrases
    Case("earliest-ending-wins", [P("bcdef", "cd")], "abcdefg", [("p", 4, ph("cd"))]),
    Case("same-end-longest-wins", [P("cd", "bcd")], "abcd", [("p", 4, ph("bcd"))]),
    Case("same-end-same-length-first-declared", [P("AB", "ab", ignore_case=True)], "xAb",
         [("p", 3, ph("AB"))]),
    Case("ignore-case-folds-ascii", [P("Hello", ignore_case=True)], "say hELLO",
         [("p", 9, ph("Hello"))]),
    Case("case-sensitive-by-default", [P("hello")], "HELLO hello", [("p", 11, ph("hello"))]),
    Case("ignore-case-non-ascii-not-folded", [P("straße", "ÉTÉ", ignore_case=True)],
         "STRASSE été ÉtÉ", [("p", 15, ph("ÉTÉ"))]),
    # The Kelvin sign lowers to "k" in Python; ASCII-only folding must not match it.
    Case("ignore-case-kelvin-sign", [P("kelvin", ignore_case=True)], "\u212aELVIN kelvin",
         [("p", 13, ph("kelvin"))]),
    Case("offsets-count-code-points", [P("key")], "中文😀\x00\udc80\r\nkey", [("p", 10, ph("key"))]),
    Case("multibyte-and-surrogate-phrases", [P("😀x", "\udc80z", once=False)], "a😀x\udc80z",
         [("p", 3, ph("😀x")), ("p", 5, ph("\udc80z"))]),
    Case("nul-in-phrase", [P("\x00\x00")], "a\x00\x00", [("p", 3, ph("\x00\x00"))]),
    Case("phrase-spanning-a-newline", [P("a\nb")], "xa\nby", [("p", 4, ph("a\nb"))]),
    Case("once-false-overlapping", [P("aa", once=False)], "aaa",
         [("p", 2, ph("aa")), ("p", 3, ph("aa"))]),
    Case("once-false-one-per-end-position", [P("a", "ba", once=False)], "aba",
         [("p", 1, ph("a")), ("p", 3, ph("ba"))]),
    Case("once-true-fires-once", [P("ab")], "abab", [("p", 2, ph("ab"))]),
    Case("same-character-rule-order", [P("bc", rid="A"), P("c", rid="B")], "abc",
         [("A", 3, ph("bc")), ("B", 3, ph("c"))]),
    Case("same-character-rule-order-reversed", [P("c", rid="B"), P("bc", rid="A")], "abc",
         [("B", 3, ph("c")), ("A", 3, ph("bc"))]),
    Case("character-order-before-rule-order", [P("c", rid="A"), P("a", rid="B")], "abc",
         [("B", 1, ph("a")), ("A", 3, ph("c"))]),
    Case("marker-is-one-phrase", [Marker("m", "<<END>>", channel="text")], "done <<END>>",
         [("m", 12, ph("<<END>>"))]),
    # ------------------------------------------------------------------ views and switches
    Case("no-match-spans-a-switch", [P("abcd", channel="combined")],
         [("reasoning", "ab"), ("text", "cd")], []),
    Case("text-view-is-continuous-across-interleaving", [P("abcd")],
         [("text", "ab"), ("reasoning", "zz"), ("text", "cd")], [("p", 4, ph("abcd"))]),
    Case("reasoning-view", [P("abcd", channel="reasoning")],
         [("reasoning", "ab"), ("text", "zz"), ("reasoning", "cd")], [("p", 4, ph("abcd"))]),
    Case("combined-offset-counts-both-channels", [P("key", channel="combined")],
         [("reasoning", "xx"), ("text", "key")], [("p", 5, ph("key"))]),
    Case("empty-delta-is-no-switch", [P("abcd", channel="combined")],
         [("reasoning", "ab"), ("text", ""), ("reasoning", "cd")], [("p", 4, ph("abcd"))]),
    # combined: "foo" + switch + "bar\n" are two lines, not "foobar"; tie -> the most recent.
    Case("switch-ends-the-line", [probe(channel="combined")],
         [("reasoning", "foo"), ("text", "bar\n")], [("probe", 7, rep("bar", 1, 2, 1))]),
    Case("text-view-has-no-switch", [probe()],
         [("text", "foo"), ("reasoning", "xyz\n"), ("text", "bar\n")],
         [("probe", 7, rep("foobar", 1, 1, 1))]),
    Case("switch-closes-the-fence", [probe(channel="combined")],
         [("reasoning", "```\nhidden\n"), ("text", "shown\n")],
         [("probe", 17, rep("shown", 1, 1, 1))], {"mask_code_fences": True}),
    Case("fence-stays-open-without-switch", [probe(channel="combined")],
         [("reasoning", "```\nhidden\n"), ("reasoning", "shown\n")], [],
         {"mask_code_fences": True}),
    Case("switch-resets-quote-state", [S("hurry", channel="combined")],
         [("reasoning", 'say "'), ("text", "hurry\n")], [("s", 10, ph("hurry"))]),
    Case("quote-state-without-switch", [S("hurry", channel="combined")],
         [("reasoning", 'say "'), ("reasoning", "hurry\n")], []),
    Case("tail-barrier-at-switch", [T(min_chars=40, channel="combined")],
         [("reasoning", "ab" * 100), ("text", "ab" * 10)], []),
    Case("tail-after-the-barrier", [T(min_chars=40, channel="combined")],
         [("reasoning", "xy" * 100), ("text", "ab" * 30)], [("t", 260, tail("ab", 2, 30))]),
    Case("tail-on-a-channel-view-has-no-barrier", [T(min_chars=40, channel="reasoning")],
         [("reasoning", "ab" * 100), ("text", "zz"), ("reasoning", "ab" * 10)],
         [("t", 220, tail("ab", 2, 110))]),
    # ------------------------------------------------------------------ throttle
    # bytes: a=1 \n=2 中=5 文=8 >= 7: the check happens at 文 (offset 4), not at a line end.
    Case("check-at-exact-byte-position",
         [LR(min_lines=1, min_count=1, min_ratio=0.01, min_run=0, every_bytes=7)],
         "a\n中文\n", [("r", 4, rep("a", 1, 1, 1))], {"min_line_chars": 1}),
    # 中 = 3 bytes: checks at bytes 9 (next 14), 15 (next 21), 21 (next 28), 30; then finish.
    Case("throttle-next-position-cjk",
         [T(max_period=1, min_repeats=2, min_chars=2, window_chars=4, every_bytes=7, once=False)],
         "中" * 10, [("t", 3, tail("中", 1, 3)), ("t", 5, tail("中", 1, 4)),
                    ("t", 7, tail("中", 1, 4)), ("t", 10, tail("中", 1, 4)),
                    ("t", 10, tail("中", 1, 4))]),
    Case("throttle-lone-surrogates-count-3-bytes",
         [T(max_period=1, min_repeats=2, min_chars=2, window_chars=4, every_bytes=7, once=False)],
         "\udc80" * 10, [("t", o, tail("\udc80", 1, r))
                         for o, r in ((3, 3), (5, 4), (7, 4), (10, 4), (10, 4))]),
    # 😀 = 4 bytes: checks at bytes 8 (next 14) and 16 (next 21); 20 < 21; then finish.
    Case("throttle-emoji-4-bytes",
         [T(max_period=1, min_repeats=2, min_chars=2, window_chars=4, every_bytes=7, once=False)],
         "😀" * 5, [("t", 2, tail("😀", 1, 2)), ("t", 4, tail("😀", 1, 4)),
                   ("t", 5, tail("😀", 1, 4))]),
    Case("throttle-ascii",
         [T(max_period=1, min_repeats=2, min_chars=2, window_chars=4, every_bytes=7, once=False)],
         "a" * 10, [("t", 7, tail("a", 1, 4)), ("t", 10, tail("a", 1, 4))]),
    # The original shared one byte counter per view: the first rule to check reset it and the
    # second never ran. Each rule has its own here.
    Case("per-rule-counters-same-every",
         [LR("a", every_bytes=40), LR("b", every_bytes=40)], "same line\n" * 60,
         [("a", 320, rep("same line", 32, 32, 32)), ("b", 320, rep("same line", 32, 32, 32))]),
    Case("per-rule-counters-different-every",
         [LR("a", every_bytes=40), LR("b", every_bytes=100)], "same line\n" * 60,
         [("b", 300, rep("same line", 30, 30, 30)), ("a", 320, rep("same line", 32, 32, 32))]),
    # ------------------------------------------------------------------ finish()
    Case("finish-completes-the-pending-line", [LR(min_lines=30, min_count=30, min_run=0)],
         "same line\n" * 29 + "same line", [("r", 299, rep("same line", 30, 30, 30))]),
    Case("finish-order-is-rule-order", [probe(), S("hurry")], "abc\nhurry",
         [("probe", 9, rep("hurry", 1, 2, 1)), ("s", 9, ph("hurry"))]),
    Case("finish-order-is-rule-order-reversed", [S("hurry"), probe()], "abc\nhurry",
         [("s", 9, ph("hurry")), ("probe", 9, rep("hurry", 1, 2, 1))]),
    Case("finish-checks-every-view",
         [probe("pt"), probe("pr", channel="reasoning"), probe("pc", channel="combined")],
         [("reasoning", "think\n"), ("text", "say")],
         [("pt", 3, rep("say", 1, 1, 1)), ("pr", 6, rep("think", 1, 1, 1)),
          ("pc", 9, rep("say", 1, 2, 1))]),
    # ------------------------------------------------------------------ LineRepeat
    # Counts aaa 2, bbb 2, ccc 1: the tie goes to aaa, whose last occurrence is newer.
    Case("line-repeat-tie-most-recent", [probe()], lines("aaa", "bbb", "bbb", "aaa", "ccc"),
         [("probe", 20, rep("aaa", 2, 5, 2))]),
    Case("line-repeat-ratio-at-threshold", [LR(min_lines=1, min_count=1, min_ratio=0.35,
                                               min_run=0)],
         lines(*["X line"] * 7, *distinct(13)),
         [("r", 7 * 7 + sum(len(s) + 1 for s in distinct(13)), rep("X line", 7, 20, 7))]),
    Case("line-repeat-ratio-below", [LR(min_lines=1, min_count=1, min_ratio=0.35, min_run=0)],
         lines(*["X line"] * 6, *distinct(14)), []),
    Case("line-repeat-min-count-reached", [LR(min_lines=1, min_count=5, min_ratio=0.01,
                                              min_run=0)],
         lines(*distinct(3), *["X line"] * 5), [("r", 3 * 22 + 35, rep("X line", 5, 8, 5))]),
    Case("line-repeat-min-count-missed", [LR(min_lines=1, min_count=5, min_ratio=0.01,
                                             min_run=0)],
         lines(*distinct(3), *["X line"] * 4), []),
    Case("line-repeat-run-rule", [LR(min_lines=1, min_count=80, min_ratio=1.0, min_run=3)],
         lines(*distinct(5), "rep", "rep", "rep"), [("r", 5 * 22 + 12, rep("rep", 3, 8, 3))]),
    Case("line-repeat-run-too-short", [LR(min_lines=1, min_count=80, min_ratio=1.0, min_run=4)],
         lines(*distinct(5), "rep", "rep", "rep"), []),
    Case("line-repeat-min-run-0-disables-runs",
         [LR(min_lines=1, min_count=80, min_ratio=1.0, min_run=0)],
         lines(*distinct(5), *["rep"] * 40), []),
    Case("line-repeat-min-lines-gates-runs",
         [LR(min_lines=10, min_count=1, min_ratio=0.01, min_run=3)], lines(*["rep"] * 9), []),
    Case("line-window-drops-oldest",
         [LR(min_lines=1, min_count=3, min_ratio=0.01, min_run=0)],
         lines("rep", "rep", "rep", "one", "two"), [("r", 20, rep("rep", 3, 5, 3))],
         {"line_window": 5}),
    Case("line-window-dropped", [LR(min_lines=1, min_count=3, min_ratio=0.01, min_run=0)],
         lines("rep", "rep", "rep", "one", "two", "six"), [], {"line_window": 5}),
    Case("min-line-chars-drops-short", [probe()], lines("ab", "ab", "ab"), [],
         {"min_line_chars": 3}),
    Case("min-line-chars-2-keeps-short", [probe()], lines("ab", "ab", "ab"),
         [("probe", 9, rep("ab", 3, 3, 3))], {"min_line_chars": 2}),
    Case("strip-and-crlf", [probe()], "  same\r\n\tsame \nsame",
         [("probe", 19, rep("same", 3, 3, 3))]),
    # str.isspace() whitespace: \x1c, \x85, U+3000 strip; U+2028 does not end a line.
    Case("unicode-whitespace-strip", [probe()], "same\x1c\n\x85same\n\u3000same\u00a0\n",
         [("probe", 19, rep("same", 3, 3, 3))]),
    Case("only-newline-ends-a-line", [probe()], "one\u2028one\rone\n",
         [("probe", 12, rep("one\u2028one\rone", 1, 1, 1))]),
    Case("lines-compare-exactly", [probe()], lines("Same", "same", "Same"),
         [("probe", 15, rep("Same", 2, 3, 1))]),
    Case("line-evidence-is-40-chars", [probe()], lines("x" * 50, "x" * 50),
         [("probe", 102, rep("x" * 40, 2, 2, 2))]),
    # ------------------------------------------------------------------ LineCycle
    # Equal counts: ordered by most recent occurrence, so the cycle reads back to front.
    Case("line-cycle-ties-most-recent", [LineCycle("c", channel="text", every_bytes=NEVER)],
         CYCLE3 * 10, [("c", 120, {"cycle": ["z3.", "y2.", "x1."], "count": 30, "total": 30,
                                   "ratio": 1.0})]),
    Case("line-cycle-long-lines-dilute", [LineCycle("c", channel="text", every_bytes=NEVER)],
         lines(*distinct(16)) + CYCLE3 * 8,
         [("c", len(lines(*distinct(16))) + 96, {"cycle": ["z3.", "y2.", "x1."], "count": 24, "total": 40,
                                    "ratio": 0.6})]),
    Case("line-cycle-below-cover", [LineCycle("c", channel="text", every_bytes=NEVER)],
         lines(*distinct(17)) + CYCLE3 * 8, []),
    Case("line-cycle-top-2", [LineCycle("c", top=2, channel="text", every_bytes=NEVER)],
         CYCLE3 * 10, [("c", 120, {"cycle": ["z3.", "y2."], "count": 20, "total": 30,
                                   "ratio": 20 / 30})]),
    Case("line-cycle-top-2-below", [LineCycle("c", top=2, cover_ratio=0.7, channel="text",
                                              every_bytes=NEVER)], CYCLE3 * 10, []),
    Case("line-cycle-by-count", [LineCycle("c", min_lines=1, channel="text",
                                           every_bytes=NEVER)],
         lines(*["bb."] * 12, *["aa."] * 10, *["cc."] * 8, *["dd."] * 5),
         [("c", 140, {"cycle": ["bb.", "aa.", "cc."], "count": 30, "total": 35,
                      "ratio": 30 / 35})]),
    Case("line-cycle-min-lines", [LineCycle("c", channel="text", every_bytes=NEVER)],
         CYCLE3 * 7 + lines("x1.", "y2."), []),
    Case("line-cycle-max-line-chars-excludes",
         [LineCycle("c", max_line_chars=8, min_lines=1, channel="text", every_bytes=NEVER)],
         lines(*["123456789"] * 30), []),
    Case("line-cycle-max-line-chars-includes",
         [LineCycle("c", max_line_chars=9, min_lines=1, channel="text", every_bytes=NEVER)],
         lines(*["123456789"] * 30),
         [("c", 300, {"cycle": ["123456789"], "count": 30, "total": 30, "ratio": 1.0})]),
    # ------------------------------------------------------------------ FillerLines
    Case("filler-lines-fire", [FillerLines("f", channel="text", every_bytes=NEVER)],
         lines(*distinct(5), *["做。", "好。", "嗯，简洁。", "对。", "好的。"]),
         [("f", 5 * 22 + 3 + 3 + 6 + 3 + 4, {"count": 5, "total": 10, "ratio": 0.5})],
         {"min_line_chars": 2}),
    Case("filler-lines-min-count", [FillerLines("f", channel="text", every_bytes=NEVER)],
         lines(*distinct(4), *["做。", "好。", "对。", "好的。"]), [], {"min_line_chars": 2}),
    Case("filler-lines-ratio", [FillerLines("f", channel="text", every_bytes=NEVER)],
         lines(*distinct(8), *["做。", "好。", "嗯，简洁。", "对。", "好的。"]), [],
         {"min_line_chars": 2}),
    Case("filler-lines-too-long", [FillerLines("f", channel="text", every_bytes=NEVER)],
         lines(*["做做做做做做做。"] * 10), []),
    Case("filler-lines-max-line-chars", [FillerLines("f", max_line_chars=8, channel="text",
                                                     every_bytes=NEVER)],
         lines(*["做做做做做做做。"] * 10), [("f", 90, {"count": 10, "total": 10, "ratio": 1.0})]),
    Case("filler-lines-custom-fillers", [FillerLines("f", fillers="x", channel="text",
                                                     every_bytes=NEVER)],
         lines(*["axa"] * 5, "abc"), [("f", 24, {"count": 5, "total": 6, "ratio": 5 / 6})]),
    # ------------------------------------------------------------------ PrefixMonotony
    Case("prefix-monotony-fires", [PrefixMonotony("m", channel="text", every_bytes=NEVER)],
         lines(*[f"嗯，第{i}步。" for i in range(10)]),
         [("m", 70, {"prefix": "嗯，", "count": 10, "total": 10, "ratio": 1.0})]),
    Case("prefix-delimiter-too-late", [PrefixMonotony("m", channel="text", every_bytes=NEVER)],
         lines(*[f"嗯嗯嗯，第{i}步" for i in range(10)]), []),
    Case("prefix-max-prefix-chars-4", [PrefixMonotony("m", max_prefix_chars=4, channel="text",
                                                      every_bytes=NEVER)],
         lines(*[f"嗯嗯嗯，第{i}步" for i in range(10)]),
         [("m", 80, {"prefix": "嗯嗯嗯，", "count": 10, "total": 10, "ratio": 1.0})]),
    Case("prefix-tie-most-recent", [PrefixMonotony("m", min_count=5, channel="text",
                                                   every_bytes=NEVER)],
         lines(*[f"A: step {i}" for i in range(5)], *[f"B: step {i}" for i in range(5)]),
         [("m", 100, {"prefix": "B:", "count": 5, "total": 10, "ratio": 0.5})]),
    Case("prefix-first-delimiter", [PrefixMonotony("m", min_lines=1, min_count=1, min_ratio=1.0,
                                                   channel="text", every_bytes=NEVER)],
         lines("a,b:c"), [("m", 6, {"prefix": "a,", "count": 1, "total": 1, "ratio": 1.0})]),
    Case("prefix-plain-lines-dilute", [PrefixMonotony("m", channel="text", every_bytes=NEVER)],
         lines(*[f"嗯，第{i}步。" for i in range(10)], *distinct(11)), []),
    # ------------------------------------------------------------------ TailRepeat
    Case("tail-period-2", [T()], "ab" * 150, [("t", 300, tail("ab", 2, 150))]),
    Case("tail-min-chars", [T()], "ab" * 100, []),
    Case("tail-min-chars-lowered", [T(min_chars=200)], "ab" * 100,
         [("t", 200, tail("ab", 2, 100))]),
    # The unit is the last p characters; the periodic suffix is 302 long: 100 whole units.
    Case("tail-unit-is-the-last-period", [T()], "abc" * 100 + "ab",
         [("t", 302, tail("cab", 3, 100))]),
    Case("tail-min-repeats", [T(min_chars=100)], CJK100 * 2, []),
    Case("tail-three-repeats", [T(min_chars=100)], CJK100 * 3,
         [("t", 300, tail(CJK100[:40], 100, 3))]),
    Case("tail-max-period", [T(min_chars=100, max_period=99)], CJK100 * 3, []),
    Case("tail-smallest-period", [T(min_chars=20)], "abab" * 20, [("t", 80, tail("ab", 2, 40))]),
    Case("tail-window-bounds-repeats", [T(window_chars=100, min_chars=50, max_period=50)],
         "ab" * 1000, [("t", 2000, tail("ab", 2, 50))]),
    Case("tail-divider-no-word-char", [T()], "=" * 300, []),
    Case("tail-symbols-no-word-char", [T()], "-+" * 200 + "[]{}" * 100 + "@`~" * 100, []),
    Case("tail-box-drawing", [T()], "─" * 300 + "═╬" * 200, []),
    Case("tail-cjk-punctuation", [T()], "。" * 300, []),
    Case("tail-general-punctuation-arrows", [T()], "\u2014\u2192\u2500\u2bff" * 100, []),
    Case("tail-whitespace", [T()], " \n" * 200 + "\u3000" * 300, []),
    Case("tail-word-char-after-divider", [T()], "x" + "=" * 300, []),
    Case("tail-unit-with-a-letter", [T()], "a=" * 200, [("t", 400, tail("a=", 2, 200))]),
    Case("tail-cjk-letter", [T()], "好" * 300, [("t", 300, tail("好", 1, 300))]),
    # NUL is not whitespace, not ASCII punctuation and not in the excluded ranges: a word char.
    Case("tail-nul-is-not-a-word-char", [T()], "\x00" * 300, []),
    Case("tail-ascii-punctuation-is-not-a-word-char", [T()], "-=" * 150, []),
    Case("tail-digit-is-a-word-char", [T()], "0" * 300, [("t", 300, tail("0", 1, 300))]),
    # masking fences hides code from the line rules, never from TailRepeat (loops in code)
    Case("tail-inside-fence", [T()], "```\n" + "ab" * 200, [("t", 404, tail("ab", 2, 200))],
         {"mask_code_fences": True}),
    Case("tail-fence-unmasked", [T()], "```\n" + "ab" * 200, [("t", 404, tail("ab", 2, 200))]),
    Case("tail-after-fence", [T()], "```\n" + "ab c" * 20 + "\n```\n" + "cd" * 200,
         [("t", 489, tail("cd", 2, 200))], {"mask_code_fences": True}),
    # ------------------------------------------------------------------ mask_code_fences (lines)
    Case("fenced-lines-masked", [probe()],
         "intro line\n```\n" + "x = 1\n" * 40 + "```\noutro line\n",
         [("probe", 11 + 4 + 240 + 4 + 11, rep("outro line", 1, 2, 1))],
         {"mask_code_fences": True}),
    # unmasked, the fence lines are still structure lines (no word character): never counted
    Case("fenced-lines-unmasked", [probe()],
         "intro line\n```\n" + "x = 1\n" * 40 + "```\noutro line\n",
         [("probe", 270, rep("x = 1", 40, 42, 40))]),
    Case("fence-language-tag", [probe()], lines("```python", "x = 1", "```", "kept"),
         [("probe", 25, rep("kept", 1, 1, 1))], {"mask_code_fences": True}),
    Case("fence-tildes-indented", [probe()], lines("  ~~~~  ", "hidden", "~~~~", "kept"),
         [("probe", 26, rep("kept", 1, 1, 1))], {"mask_code_fences": True}),
    Case("not-a-fence-two-backticks", [probe()], lines("``", "kept"),
         [("probe", 8, rep("kept", 1, 1, 1))], {"mask_code_fences": True, "min_line_chars": 1}),
    Case("not-a-fence-space-before-tag", [probe()], lines("``` python", "shown"),
         [("probe", 17, rep("shown", 1, 2, 1))], {"mask_code_fences": True}),
    # Any fence line toggles: "~~~" closes a block opened by "```" (kinds are not matched).
    Case("fence-kinds-not-matched", [probe()], lines("```", "~~~", "shown"),
         [("probe", 14, rep("shown", 1, 1, 1))], {"mask_code_fences": True}),
    Case("unclosed-fence-masks-the-rest", [probe()], lines("before", "```", *["x = 1"] * 30),
         [("probe", 191, rep("before", 1, 1, 1))], {"mask_code_fences": True}),
    # ------------------------------------------------------------------ suppress_quoted
    Case("suppress-plain", [S("hurry", "rush")], "hurry\n", [("s", 5, ph("hurry"))]),
    Case("suppress-backticks", [S("hurry", "rush")], "use `hurry` here\n", []),
    Case("suppress-double-quotes", [S("hurry", "rush")], 'say "hurry" now\n', []),
    Case("suppress-curly-quotes", [S("hurry", "rush")], "say “hurry” now\n", []),
    Case("suppress-corner-brackets", [S("hurry", "rush")], "say 「hurry」 now\n", []),
    Case("suppress-after-closed-backticks", [S("hurry", "rush")], "`a` hurry\n",
         [("s", 9, ph("hurry"))]),
    # Backtick parity: a double-backtick span leaves the parity even.
    Case("suppress-double-backticks-even", [S("hurry", "rush")], "``hurry``\n",
         [("s", 7, ph("hurry"))]),
    Case("suppress-after-closed-quotes", [S("hurry", "rush")], '"x" “y” 「z」 hurry\n',
         [("s", 17, ph("hurry"))]),
    Case("suppress-closing-curly-alone", [S("hurry", "rush")], "”hurry\n",
         [("s", 6, ph("hurry"))]),
    Case("suppress-quote-ends-at-newline", [S("hurry", "rush")], '"\nhurry\n',
         [("s", 7, ph("hurry"))]),
    Case("suppress-phrase-ending-in-quote", [S('hurry"')], 'hurry"\n', [("s", 6, ph('hurry"'))]),
    Case("suppress-first-unquoted-kept", [S("hurry", "rush")], "`hurry` rush hurry\n",
         [("s", 12, ph("rush"))]),
    Case("list-line-comma", [S("hurry", "rush")], "hurry, rush\n", []),
    Case("list-line-fullwidth-comma", [S("hurry", "rush")], "hurry，rush\n", []),
    Case("list-line-ideographic-comma", [S("hurry", "rush")], "hurry、rush\n", []),
    Case("list-line-pipe", [S("hurry", "rush")], "| hurry | rush |\n", []),
    Case("not-list-no-separator", [S("hurry", "rush")], "hurry rush\n", [("s", 5, ph("hurry"))]),
    Case("not-list-separator-before", [S("hurry", "rush")], "a, hurry rush\n",
         [("s", 8, ph("hurry"))]),
    Case("not-list-separator-after", [S("hurry", "rush")], "hurry rush, ok\n",
         [("s", 5, ph("hurry"))]),
    Case("not-list-separate-lines", [S("hurry", "rush")], "hurry,\nrush\n",
         [("s", 5, ph("hurry"))]),
    Case("list-line-counts-other-rules", [S("hurry"), P("rush")], "hurry, rush\n",
         [("p", 11, ph("rush"))]),
    # Occurrences of a rule that already fired, and quoted occurrences, still count as the
    # line's phrase occurrences: the list-line rule looks at the text, not at rule state.
    Case("list-line-counts-fired-rules", [P("rush", rid="a"), S("hurry")], "rush\nrush, hurry\n",
         [("a", 4, ph("rush"))]),
    Case("list-line-counts-quoted-occurrences", [S("hurry", "rush")], '"rush", hurry\n', []),
    # The gap between two listed phrases holds only separators, whitespace and quotes: prose
    # that merely mentions two phrases with a comma somewhere between them is not a list.
    Case("not-list-prose-comma-zh", [S("时间不够", "加快速度")], "我觉得时间不够了，要加快速度\n",
         [("s", 7, ph("时间不够"))]),
    Case("not-list-prose-comma-en", [S("out of time", "hurry up")],
         "we are out of time, so hurry up\n", [("s", 18, ph("out of time"))]),
    Case("list-line-quotes-in-gap", [S("hurry", "rush")], '`hurry`, "rush"\n', []),
    Case("list-line-three-items", [S("a1", "b2", "c3")], "x a1 | b2 | c3\n", []),
    Case("not-list-adjacent-without-separator", [S("hurry", "rush")], "hurry  rush\n",
         [("s", 5, ph("hurry"))]),
    Case("list-line-gap-restarts-after-occurrence", [S("hurry", "rush", "go")],
         "hurry then rush, go\n", []),
    Case("list-line-two-suppress-rules", [S("hurry", rid="a"), S("rush", rid="b")],
         "hurry, rush\n", []),
    Case("suppress-two-rules-same-line", [S("hurry", rid="a"), S("rush", rid="b")],
         "hurry rush\n", [("a", 5, ph("hurry")), ("b", 10, ph("rush"))]),
    Case("suppress-once-false-one-per-line", [S("hurry", once=False)],
         "hurry hurry\nhurry\n", [("s", 5, ph("hurry")), ("s", 17, ph("hurry"))]),
    Case("suppress-resolved-at-finish", [S("hurry")], "hurry", [("s", 5, ph("hurry"))]),
    Case("suppress-resolved-at-switch", [S("hurry", channel="combined")],
         [("reasoning", "hurry now"), ("text", "ok")], [("s", 5, ph("hurry"))]),
    Case("suppress-ignore-case-rule", [S("hurry", ignore_case=True)], "HURRY\n",
         [("s", 5, ph("hurry"))]),
]


def _observed(detections: list[Detection]) -> list[Expected]:
    """(rule, offset, evidence) of each detection; ``evidence()`` shows a cycle as a list."""
    return [(d.rule, d.offset, d.evidence()) for d in detections]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_table(engine: ModuleType, case: Case) -> None:
    rs = engine.Ruleset(case.rules, **case.options)
    whole = feed_all(rs.watcher(), case.stream())
    assert _observed(whole) == case.expected
    for d in whole:
        rule = next(r for r in case.rules if r.id == d.rule)
        assert (d.kind, d.action, d.channel) == (rule.kind, rule.action, rule.channel)
        assert d.cycle is None or isinstance(d.cycle, tuple)
    rng = random.Random(case.id)
    for _ in range(3):
        assert feed_all(rs.watcher(), split_events(case.stream(), rng)) == whole


def test_case_ids_are_unique() -> None:
    assert len({c.id for c in CASES}) == len(CASES)


# ---------------------------------------------------------------------- when detections return

def test_quoted_candidate_fires_at_the_line_end(engine: ModuleType) -> None:
    w = engine.Ruleset([S("hurry")]).watcher()
    assert w.feed("we must hurry") == ()
    assert w.feed(" now") == ()
    (d,) = w.feed("\nnext")
    assert (d.offset, d.phrase) == (13, "hurry")


def test_switch_work_comes_before_the_new_delta(engine: ModuleType) -> None:
    rs = engine.Ruleset([S("hurry", channel="combined", rid="s"), P("a", channel="combined")])
    w = rs.watcher()
    assert w.feed("hurry", "reasoning") == ()
    found = w.feed("a", "text")
    assert [(d.rule, d.offset) for d in found] == [("s", 5), ("p", 6)]


def test_windowed_detection_returned_by_the_feed_that_reaches_the_check(
        engine: ModuleType) -> None:
    rs = engine.Ruleset([LR(min_lines=1, min_count=1, min_ratio=0.01, min_run=0, every_bytes=7)],
                        min_line_chars=1)
    w = rs.watcher()
    assert w.feed("a\n中") == ()
    (d,) = w.feed("文\n")
    assert d.offset == 4


# ---------------------------------------------------------------------- finish, fire-once, reset

def test_finish_twice_and_feed_after_finish(engine: ModuleType) -> None:
    w = engine.Ruleset([LR()]).watcher()
    w.feed("same line\n" * 40)
    assert not w.finished
    first = w.finish()
    assert [d.rule for d in first] == ["r"] and w.finished
    assert w.finish() == ()
    with pytest.raises(RuntimeError):
        w.feed("more")
    with pytest.raises(RuntimeError):
        w.feed("")
    w.reset()
    assert not w.finished and w.fired == frozenset()
    assert w.feed("x") == ()


def test_fire_once_until_reset(engine: ModuleType) -> None:
    w = engine.Ruleset([P("ab"), P("zz", rid="other")]).watcher()
    assert [d.offset for d in w.feed("abab")] == [2]
    assert w.feed("ab") == ()
    assert w.fired == frozenset({"p"})
    w.reset()
    assert w.fired == frozenset()
    assert [d.offset for d in w.feed("xab")] == [3]   # offsets restart with the attempt


def test_once_false_windowed_fires_at_every_check(engine: ModuleType) -> None:
    rs = engine.Ruleset([LR(min_lines=1, min_count=1, min_ratio=0.01, min_run=0, every_bytes=10,
                            once=False)])
    found = rs.replay("same line\n" * 5)
    assert [d.offset for d in found] == [10, 20, 30, 40, 50, 50]
    assert [d.count for d in found] == [1, 2, 3, 4, 5, 5]


# ---------------------------------------------------------------------- tail()

def test_tail_both_channels_in_arrival_order(engine: ModuleType) -> None:
    # A ruleset that only watches "text" still keeps reasoning text in the tail.
    w = engine.Ruleset([P("zzz")], evidence_chars=10).watcher()
    w.feed("abc", "text")
    w.feed("defghijklmn", "reasoning")
    assert w.tail() == "efghijklmn"
    assert w.tail(None) == "efghijklmn"
    assert w.tail(3) == "lmn"
    assert w.tail(0) == ""
    assert w.tail(100) == "efghijklmn"
    w.reset()
    assert w.tail() == ""


def test_tail_keeps_every_code_point(engine: ModuleType) -> None:
    w = engine.Ruleset([P("zzz")], evidence_chars=8).watcher()
    w.feed("a\r\n\x00\udc80😀中")
    assert w.tail() == "a\r\n\x00\udc80😀中"
    assert w.tail(2) == "😀中"


def test_tail_with_evidence_chars_0(engine: ModuleType) -> None:
    w = engine.Ruleset([P("zzz")], evidence_chars=0).watcher()
    w.feed("abc")
    assert w.tail() == "" and w.tail(5) == ""


# ---------------------------------------------------------------------- copy()

def test_copy_continues_identically_and_independently(engine: ModuleType) -> None:
    rs = engine.Ruleset([LR(every_bytes=50), S("hurry"), T(min_chars=40, every_bytes=64)])
    text = "hurry " + "same line\n" * 50 + "ab" * 40
    w = rs.watcher()
    head = feed_all(w, [("text", text[:37])], finish=False)
    twin = w.copy()
    assert twin.ruleset is rs
    assert twin.tail() == w.tail() and twin.fired == w.fired
    rest_a = feed_all(w, [("text", text[37:])])
    rest_b = feed_all(twin, [("text", text[37:])])
    assert rest_a == rest_b
    assert head + rest_a == rs.replay(text)
    # Independence: finishing the original did not finish the copy's copy.
    w2 = rs.watcher()
    w2.feed("hurry")
    c2 = w2.copy()
    w2.feed("\n")
    assert w2.fired == frozenset({"s"}) and c2.fired == frozenset()
    assert c2.tail() == "hurry"


# ---------------------------------------------------------------------- replay, pickling, API

def test_replay_equals_feed_and_finish(engine: ModuleType) -> None:
    rs = engine.Ruleset([LR(every_bytes=30), T(every_bytes=30), S("hurry", channel="reasoning")])
    text = "hurry up\n" + "same line\n" * 40 + "ab" * 200
    splits = [3, 3, 10, 200, len(text)]
    manual = feed_all(rs.watcher(), [("reasoning", text[a:b])
                                     for a, b in zip([0, *splits], splits)])
    assert rs.replay(text, splits, channel="reasoning") == manual
    assert rs.replay(text, np.array(splits, dtype=np.int64), channel="reasoning") == manual
    assert rs.replay(text, channel="reasoning") == manual
    assert rs.replay("") == []


def test_pickle_round_trip(engine: ModuleType) -> None:
    rules = [LR(min_lines=100, min_count=100), P("hurry"), T()]
    rs = engine.Ruleset(rules, line_window=200, min_line_chars=2, evidence_chars=7,
                        mask_code_fences=True)
    back = pickle.loads(pickle.dumps(rs))
    assert type(back) is type(rs)
    assert back.rules == rs.rules == tuple(rules)
    assert back.options == rs.options
    text = "hurry\n" + "same\n" * 120
    assert back.replay(text) == rs.replay(text)
    w = back.watcher()
    w.feed("abcdefghij")
    assert w.tail() == "defghij"


def test_ruleset_properties_and_repr(engine: ModuleType) -> None:
    rules = [P("hurry", rid="alpha"), LR("beta")]
    rs = engine.Ruleset(rules, line_window=90)
    assert rs.rules == tuple(rules)
    assert isinstance(rs.rules, tuple)
    assert rs.options.line_window == 90 and rs.options.min_line_chars == 3
    assert rs.options.evidence_chars == 600 and rs.options.mask_code_fences is False
    text = repr(rs)
    assert "alpha" in text and "beta" in text and "90" in text
    assert rs.watcher().ruleset is rs
    assert engine.Ruleset([]).replay("anything\n" * 10) == []


# ---------------------------------------------------------------------- generated streams

_SETTINGS = settings(max_examples=150, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@_SETTINGS
@given(spec=rulesets(), events=traces(), data=st.data())
def test_split_invariance(engine: ModuleType, spec: tuple[list[Rule], dict[str, Any]],
                          events: list[tuple[str, str]], data: st.DataObject) -> None:
    """Any split of each event into deltas (same channel, so no new switches) gives the same
    detections, offsets and tail."""
    rules, options = spec
    rs = engine.Ruleset(rules, **options)
    whole_w = rs.watcher()
    whole = feed_all(whole_w, events)
    split: list[tuple[str, str]] = []
    for channel, text in events:
        ends = data.draw(splits_of(text))
        split += [(channel, text[a:b]) for a, b in zip([0, *ends], ends)]
    split_w = rs.watcher()
    assert feed_all(split_w, split) == whole
    assert split_w.tail() == whole_w.tail()
    assert split_w.fired == whole_w.fired == {d.rule for d in whole}
    for d in whole:
        assert d.offset >= 0


@_SETTINGS
@given(spec=rulesets(), text=texts(), data=st.data())
def test_replay_matches_feeding(engine: ModuleType, spec: tuple[list[Rule], dict[str, Any]],
                                text: str, data: st.DataObject) -> None:
    rules, options = spec
    rs = engine.Ruleset(rules, **options)
    ends = data.draw(splits_of(text))
    channel = data.draw(st.sampled_from(("text", "reasoning")))
    manual = feed_all(rs.watcher(), [(channel, text[a:b]) for a, b in zip([0, *ends], ends)])
    assert rs.replay(text, ends, channel=channel) == manual
