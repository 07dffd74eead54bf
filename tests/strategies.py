"""Hypothesis strategies for engine tests: traces, splits and random valid rulesets.

Traces are built from fragments that exercise every semantic point of ``docs/semantics.md``:
prose, repeated lines and cycles (so the windowed rules fire), CJK, emoji, ``\\r\\n``, lone
surrogates, NUL, code fences, quotes and separators (``suppress_quoted``), and the phrases of
:data:`PHRASES`, so that phrases occur, straddle delta boundaries and channel switches.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from hypothesis import strategies as st

from contextcare.rules import (
    BlockRepeat,
    SegmentRepeat,
    StructureFlood,
    FillerLines,
    LineCycle,
    LineRepeat,
    Marker,
    Phrases,
    PrefixMonotony,
    Rule,
    TailRepeat,
    VocabCollapse,
    WordRepeat,
)

__all__ = ["FRAGMENTS", "PHRASES", "rule_lists", "rulesets", "splits_of", "texts", "traces"]

#: The small phrase set every generated phrase rule draws from (overlapping on purpose: ``ab`` /
#: ``aba`` / ``bab``; mixed case for ``ignore_case``; multi-byte, surrogate and newline phrases).
PHRASES = ("ab", "aba", "bab", "Hurry", "hurry up", "时间不够", "不够", "😀x", "\udc80z",
           "a\nb", "out of time", "TIME")

#: Text fragments traces are made of.
FRAGMENTS = (
    "We parse the config file and check each key.\n",
    "Then we update the tests for the new parser.\n",
    "same line\n",
    "做。\n", "好。\n", "嗯，简洁。\n", "对。\n",
    "（输出。）\n", "**做。**\n", "go.\n",
    "嗯，先看一下。\n", "嗯，再看一下。\n",
    "the ", "ab", "ba", "x",
    "中文字符，", "、", "😀", "🧪 emoji line\n",
    "\r\n", "\n", "  \n", "\x00", "\udc80", "\ud83d",
    "```\n", "```python\n", "~~~\n", "x = 1\n",
    "`", '"', "“", "”", "「", "」", "|", ",", "，",
    "| a | b |\n", "|---|---|\n", "=" * 30 + "\n",
    # segments and words (BlockRepeat, VocabCollapse): sentences, list numbers, near-variants
    "Step 14: check it. ", "Step 15: check it. ", "12. Ilan\n", "13. Ilan\n",
    "first one! second? third; ", "它来了。又来了！", "items its itemsThe ",
    # VocabCollapse list gaps: separators between words (a list, not a collapse)
    "heads, tails, heads, ", "up → up → left ", "yes / no > ok | no; ", "正面、反面、",
    "class A2:\n    def f(self):\n        return 2\n",
    # code fences: short lines repeated inside (BlockRepeat fence_letters, SegmentRepeat fences)
    "```python\nx.NULL,\nx.NULL,\nx.NULL,\n", "    f(a, b)  # retry\n", "```\n\n",
    # SegmentRepeat: a changing word, short CJK names
    "Alice has the key 3.\n", "Alice had the key 4.\n", "12. 伊兰\n", "13. 王芳\n",
    # numeric segments (data rows): later numbers equal, different, or repeating the first
    "Day 3: high 23, low 1\n", "Day 4: high 23, low 1\n", "Day 5: high 19, low 2\n",
    "2024-03-05,AAPL,185.2\n", "| TypeORM10 | TypeORM10 | 2017 |\n", "KEY_F7: 'kf7',\n",
    "第3天：最高气温23度，最低气温1度\n", "v1.2 ", "3 4 ",
    # WordRepeat: words repeated with other gaps between them (punctuation, newlines, a list)
    "let me check it again, ", "Let me check it again.\n", "check, it, again; ",
    # identifiers whose numbers jump, a counter; floods without words; a traceback frame
    "- https://x.io/issues/4821\n", "- https://x.io/issues/77\n", "#100000000000000000000 ok\n",
    "433437  FreeBSD part 1\n", "# \n", "..", "#\n",
    '  File "a.py", line 2, in f\n    return f(n)\n',
)


@st.composite
def texts(draw: st.DrawFn, max_fragments: int = 40) -> str:
    """A text of fragments, phrases and a few random characters."""
    parts = draw(st.lists(
        st.one_of(
            st.sampled_from(FRAGMENTS),
            st.sampled_from(PHRASES),
            st.sampled_from(FRAGMENTS).map(lambda f: f * 6),       # short loops
            st.text(alphabet=st.characters(), max_size=4),
        ),
        max_size=max_fragments,
    ))
    return "".join(parts)


@st.composite
def traces(draw: st.DrawFn, max_events: int = 12) -> list[tuple[str, str]]:
    """A stream: (channel, non-empty delta) events on "text" and "reasoning", with switches
    between them; sometimes an empty delta (which must change nothing)."""
    events = draw(st.lists(
        st.tuples(st.sampled_from(("text", "reasoning")), texts()),
        min_size=1, max_size=max_events,
    ))
    return [(channel, text) for channel, text in events if text or draw(st.booleans())]


@st.composite
def splits_of(draw: st.DrawFn, text: str) -> list[int]:
    """Delta end offsets for ``Ruleset.replay(text, splits)``: non-decreasing, ending at
    ``len(text)`` (repeated offsets make empty deltas)."""
    if not text:
        return draw(st.sampled_from([[], [0], [0, 0]]))
    cuts = draw(st.lists(st.integers(0, len(text)), max_size=min(len(text), 30)))
    return sorted(cuts) + [len(text)]


_CHANNELS = st.sampled_from(("text", "reasoning", "combined"))
_ACTIONS = st.sampled_from(("abort", "remind", "record"))
_EVERY = st.integers(1, 40)
_RATIO = st.sampled_from((0.05, 0.2, 0.35, 0.5, 0.6, 1.0))


@cache
def _rule_strategy(index: int, line_window: int) -> st.SearchStrategy[Rule]:
    """One random valid rule named ``r<index>`` whose thresholds fit ``line_window``.

    Cached: building the strategy is far slower than drawing from it."""
    rid = f"r{index}"
    small = st.integers(1, min(line_window, 12))
    common: dict[str, Any] = {"channel": _CHANNELS, "action": _ACTIONS, "once": st.booleans()}
    phrases = st.lists(st.sampled_from(PHRASES), min_size=1, max_size=4)
    return st.one_of(
        st.builds(Phrases, st.just(rid), phrases, ignore_case=st.booleans(),
                  suppress_quoted=st.booleans(), **common),
        st.builds(Marker, st.just(rid), st.sampled_from(PHRASES), ignore_case=st.booleans(),
                  **common),
        st.builds(LineRepeat, st.just(rid), min_lines=small, min_count=small, min_ratio=_RATIO,
                  min_run=st.integers(0, min(line_window, 12)), every_bytes=_EVERY, **common),
        st.builds(LineCycle, st.just(rid), max_line_chars=st.integers(1, 10), min_lines=small,
                  top=st.integers(1, 4), cover_ratio=_RATIO, every_bytes=_EVERY, **common),
        st.builds(FillerLines, st.just(rid), fillers=st.sampled_from(("做好嗯对", "x", "a=")),
                  max_line_chars=st.integers(1, 8), min_count=small, min_ratio=_RATIO,
                  every_bytes=_EVERY, **common),
        st.builds(PrefixMonotony, st.just(rid), max_prefix_chars=st.integers(1, 8),
                  min_lines=small, min_count=small, min_ratio=_RATIO, every_bytes=_EVERY,
                  **common),
        st.integers(8, 64).flatmap(lambda w: st.builds(
            TailRepeat, st.just(rid), window_chars=st.just(w),
            max_period=st.integers(1, w // 2), min_repeats=st.integers(2, 4),
            min_chars=st.integers(2, w), every_bytes=_EVERY, **common)),
        st.builds(BlockRepeat, st.just(rid), near=st.booleans(), max_period=st.integers(1, 8),
                  min_repeats=st.integers(2, 4), min_chars=st.integers(1, 120),
                  min_letters=st.integers(0, 6),
                  fence_letters=st.sampled_from([0, 0, 1, 5, 12, 40]), every_bytes=_EVERY,
                  **common),
        st.integers(2, 40).flatmap(lambda m: st.builds(
            StructureFlood, st.just(rid), min_chars=st.just(m),
            max_period=st.sampled_from([0, 0, 1, min(2, m - 1), min(4, m - 1), m - 1]),
            every_bytes=_EVERY, **common)),
        st.integers(1, 12).flatmap(lambda n: st.builds(
            SegmentRepeat, st.just(rid), window=st.just(n), top=st.integers(1, 4),
            min_count=st.integers(1, n), min_letters=st.integers(0, 6), fences=st.booleans(),
            top_letters=st.sampled_from([0, 0, 4, 8, 20]), every_bytes=_EVERY, **common)),
        st.integers(3, 12).flatmap(lambda n: st.builds(
            VocabCollapse, st.just(rid), words=st.just(n), max_distinct=st.integers(1, n - 1),
            one_line=st.booleans(), every_bytes=_EVERY, **common)),
        st.builds(WordRepeat, st.just(rid), max_period=st.integers(1, 8),
                  min_repeats=st.integers(2, 4), min_chars=st.integers(1, 80),
                  min_words=st.integers(0, 3), every_bytes=_EVERY, **common),
    )


@st.composite
def rule_lists(draw: st.DrawFn, line_window: int = 80, max_rules: int = 6) -> list[Rule]:
    """A random valid rule list (unique ids, thresholds reachable within ``line_window``)."""
    n = draw(st.integers(1, max_rules))
    return [draw(_rule_strategy(i, line_window)) for i in range(n)]


@st.composite
def rulesets(draw: st.DrawFn) -> tuple[list[Rule], dict[str, Any]]:
    """``(rules, options)`` for ``Ruleset(rules, **options)``, both random and valid."""
    options: dict[str, Any] = {
        "line_window": draw(st.integers(1, 20)),
        "min_line_chars": draw(st.integers(1, 4)),
        "evidence_chars": draw(st.integers(0, 50)),
        "mask_code_fences": draw(st.booleans()),
    }
    return draw(rule_lists(options["line_window"])), options
