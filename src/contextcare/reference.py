"""The pure-Python engine: the executable specification of ``docs/semantics.md``.

This module has the same API as the native engine (:mod:`contextcare._engine`): a
:class:`Ruleset` compiled once from rule objects, and a :class:`Watcher` per stream that is fed
text deltas and returns :class:`~contextcare.detection.Detection` values. It is written for
clarity, not speed: every step of the per-character processing order of ``docs/semantics.md`` is
a visible step here, so it serves as the oracle of the differential and split-invariance tests.

Where the native engine uses an Aho–Corasick automaton, this one checks, at every character, which
declared phrases end there (a phrase can only end at a character equal to its last one, so the
phrases are indexed by their last code point). Where the native engine keeps hashes and counters,
this one keeps the lines themselves and recounts the window at each check.
"""

from __future__ import annotations

import copy as _copy
import re
import threading
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .detection import Detection
from .errors import (
    ArgumentTypeError,
    ArgumentValueError,
    UninitialisedError,
    uninitialised,
)
from .rules import (
    BUSY_MESSAGE,
    CHANNELS,
    EVIDENCE_LINE_CHARS,
    FINISHED_MESSAGE,
    QUOTE_CHARS,
    BlockRepeat,
    SegmentRepeat,
    StructureFlood,
    FillerLines,
    LineCycle,
    LineRepeat,
    PrefixMonotony,
    Rule,
    RulesetOptions,
    TailRepeat,
    VocabCollapse,
    WordRepeat,
    check_feed_channel,
    check_rules,
    check_splits,
    check_text,
)

__all__ = ["Ruleset", "Watcher", "Recorder"]

#: A completed, stripped line that opens or closes a fenced code block.
_FENCE_LINE = re.compile(r"(`{3,}|~{3,})[A-Za-z0-9_+-]*")
#: ASCII letters folded to lower case; every other code point is left alone.
_ASCII_FOLD = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
#: Characters that count as separators on a line, for the list-line rule of ``suppress_quoted``.
_SEPARATORS = frozenset("|,，、")
#: Quote characters, which a list-line gap may hold besides whitespace and separators.
_QUOTES = frozenset("`\"“”「」")
_NO_DETECTIONS: tuple[Detection, ...] = ()


def _fold(text: str) -> str:
    return text.translate(_ASCII_FOLD)


def _utf8_len(c: str) -> int:
    """UTF-8 length of one code point; a lone surrogate takes 3 bytes (``surrogatepass``)."""
    cp = ord(c)
    if cp < 0x80:
        return 1
    if cp < 0x800:
        return 2
    if cp < 0x10000:
        return 3
    return 4


def _is_word_char(c: str) -> bool:
    """The word-character rule of ``TailRepeat``: a unit must hold one of these to count.

    Below U+0080 only ASCII letters and digits; above, anything but whitespace, U+2000-U+2BFF
    (punctuation, arrows, math, box drawing, shapes) and U+3000-U+303F (CJK punctuation)."""
    cp = ord(c)
    if cp < 0x80:
        return c.isascii() and c.isalnum()
    if c.isspace():
        return False
    return not (0x2000 <= cp <= 0x2BFF or 0x3000 <= cp <= 0x303F)


#: ASCII characters after which whitespace ends a segment; characters that end one themselves.
_SENTENCE_END = frozenset(".!?;")
_CJK_SENTENCE_END = frozenset("\u3002\uff01\uff1f\uff1b")


def _skeleton(stripped: str) -> str:
    """A segment's skeleton: each run of ASCII digits -> ``#``, ASCII letters lower-cased, each
    run of whitespace -> one space (``stripped`` has none at its ends)."""
    out: list[str] = []
    prev = ""
    for c in stripped:
        if "0" <= c <= "9":
            if prev != "#":
                out.append("#")
            prev = "#"
        elif c.isspace():
            if prev != " ":
                out.append(" ")
            prev = " "
        else:
            out.append(c)
            prev = ""
    return _fold("".join(out))


def _letters(stripped: str) -> int:
    """Word characters other than ASCII digits."""
    return sum(1 for c in stripped if _is_word_char(c) and not "0" <= c <= "9")


_DIGIT_RUN = re.compile(r"[0-9]+")

#: A segment is *numeric* (a data row: its numbers are its content) when it holds three runs of
#: ASCII digits or more, or two and fewer letters than this.
NUMERIC_TWO_RUN_LETTERS = 16

#: Inside a code fence, a BlockRepeat unit of two segments up to this many needs one copy more
#: than ``min_repeats``.
FENCE_SHORT_UNIT = 3

#: A segment's first digit run is read as a number up to this (larger ones are this).
NUM_SAT = 10**18
#: Only a segment with fewer letters than this (CJK counting twice) may jump.
JUMP_LETTERS = 32


def _first_number(stripped: str) -> int | None:
    """The value of the segment's first run of ASCII digits (saturated), None without one."""
    m = _DIGIT_RUN.search(stripped)
    return None if m is None else min(int(m.group()), NUM_SAT)


def _numbers(stripped: str, letters: int) -> str | None:
    """A numeric segment's digit runs after its first that differ from it, joined by ``,``; None
    when the segment is not numeric."""
    runs = _DIGIT_RUN.findall(stripped)
    if len(runs) < 2 or (len(runs) == 2 and letters >= NUMERIC_TWO_RUN_LETTERS):
        return None
    # a run that repeats the first (a counter written twice, `TypeORM10 | TypeORM10`) is left out
    return ",".join(r for r in runs[1:] if r != runs[0])


def _wide(stripped: str) -> int:
    """1 when the first letter (word character other than an ASCII digit) is at U+3040 or above
    (kana, CJK, Hangul), else 0."""
    for c in stripped:
        if _is_word_char(c) and not "0" <= c <= "9":
            return 1 if c >= "\u3040" else 0
    return 0


@dataclass(frozen=True)
class _Segment:
    """A completed segment with a word character, as BlockRepeat compares it."""

    exact: str
    skeleton: str
    gap: int       # characters from the end of the previous kept segment to the end of this one
    raw: int       # characters of this segment (with its whitespace and terminator)
    letters: int
    wide: int      # 1: its first letter is at U+3040 or above (SegmentRepeat counts letters twice)
    fenced: bool   # it lies inside a code fence (mask_code_fences on)
    numbers: str | None = None  # a numeric segment's numbers after its first (None: not numeric)
    number: int | None = None  # the value of its first digit run (None: no digit)
    jump: bool = False  # its number jumps: an identifier in a list, not a counter

    def near_key(self) -> tuple[str, str | None]:
        """The segment alone as near rules compare it: a numeric segment keeps its numbers."""
        return (self.skeleton, self.numbers)


# --------------------------------------------------------------------------- compiled ruleset

@dataclass(frozen=True)
class _PhraseEntry:
    """One declared phrase of one phrase rule, as the matcher sees it."""

    rule_index: int
    position: int      # index in the rule's phrase list (ties between equal lengths: lowest)
    phrase: str        # as declared (the evidence)
    key: str           # what is compared with the view's text: the phrase, folded if ignore_case
    folded: bool


@dataclass(frozen=True)
class _ViewPlan:
    """What one channel view has to do: its phrase rules (indexed by last code point) and its
    windowed rules, both in rule order."""

    name: str
    phrase_rules: tuple[int, ...]
    by_last_exact: dict[str, tuple[_PhraseEntry, ...]]
    by_last_folded: dict[str, tuple[_PhraseEntry, ...]]
    windowed_rules: tuple[int, ...]
    recent_chars: int   # how much text since the barrier the view keeps (phrases, TailRepeat)
    segments: int = 0   # segments kept for BlockRepeat (0: the view does not cut segments)
    words: int = 0      # words kept for VocabCollapse (0: the view does not cut words)
    tail_words: int = 0  # words of the word tail kept for WordRepeat (0: none)


def _segments_kept(rule: Rule) -> int:
    """Segments a view keeps for one of its segment rules."""
    if isinstance(rule, SegmentRepeat):
        return rule.window
    return rule.max_period * rule.min_repeats  # type: ignore[attr-defined]


def _plan_view(name: str, rules: tuple[Rule, ...]) -> _ViewPlan:
    exact: dict[str, list[_PhraseEntry]] = {}
    folded: dict[str, list[_PhraseEntry]] = {}
    phrase_rules: list[int] = []
    windowed: list[int] = []
    recent = 1
    segments = words = tail_words = 0
    for index, rule in enumerate(rules):
        if rule.channel != name:
            continue
        if rule.windowed:
            windowed.append(index)
            reads = _DETECTORS[rule.detector][1]
            if reads in ("tail", "tail+fence"):
                recent = max(recent, rule.min_chars if isinstance(rule, StructureFlood)
                             else rule.window_chars)  # type: ignore[attr-defined]
            elif reads == "segments":
                segments = max(segments, _segments_kept(rule))
            elif reads == "words":
                words = max(words, rule.words)  # type: ignore[attr-defined]
            elif reads == "word-tail":
                tail_words = max(tail_words,
                                 rule.max_period * rule.min_repeats)  # type: ignore[attr-defined]
                words = max(words, 1)   # (words are cut only for a view that keeps some)
            continue
        phrase_rules.append(index)
        fold = rule.ignores_case
        for position, phrase in enumerate(rule.phrase_list()):
            key = _fold(phrase) if fold else phrase
            entry = _PhraseEntry(index, position, phrase, key, fold)
            (folded if fold else exact).setdefault(key[-1], []).append(entry)
            recent = max(recent, len(phrase))
    return _ViewPlan(
        name=name,
        phrase_rules=tuple(phrase_rules),
        by_last_exact={k: tuple(v) for k, v in exact.items()},
        by_last_folded={k: tuple(v) for k, v in folded.items()},
        windowed_rules=tuple(windowed),
        recent_chars=recent,
        segments=segments,
        words=words,
        tail_words=tail_words,
    )


class Ruleset:
    """Rules compiled once: immutable, shareable between threads, picklable.

    ``rules`` is a sequence of rule objects (:mod:`contextcare.rules`); the keyword options apply
    to every rule (see :class:`~contextcare.rules.RulesetOptions`). Both are validated here.
    """

    __slots__ = ("_options", "_plans", "_rules")

    def __init__(self, rules: Sequence[Rule], /, *, line_window: int = 80, min_line_chars: int = 3,
                 evidence_chars: int = 600, mask_code_fences: bool = False) -> None:
        options = RulesetOptions(line_window=line_window, min_line_chars=min_line_chars,
                                 evidence_chars=evidence_chars, mask_code_fences=mask_code_fences)
        self._rules = check_rules(rules, options)
        self._options = options
        watched = {rule.channel for rule in self._rules}
        # Views in the fixed order text, reasoning, combined (finish() ends lines in this order).
        self._plans = tuple(_plan_view(name, self._rules) for name in CHANNELS if name in watched)

    @property
    def rules(self) -> tuple[Rule, ...]:
        """The rules, in the order given (the order detections of one character are reported)."""
        return self._rules

    @property
    def options(self) -> RulesetOptions:
        return self._options

    def _option_kwargs(self) -> dict[str, Any]:
        o = self._options
        return {"line_window": o.line_window, "min_line_chars": o.min_line_chars,
                "evidence_chars": o.evidence_chars, "mask_code_fences": o.mask_code_fences}

    def watcher(self) -> Watcher:
        """A fresh watcher (the state of one stream) over this ruleset."""
        return Watcher(self)

    def replay(self, text: str, /, splits: Sequence[int] | None = None, *,
               channel: str = "text") -> list[Detection]:
        """Feed ``text`` to a fresh watcher as deltas ending at ``splits`` (the whole text as one
        delta by default) on ``channel``, then ``finish()``; return every detection in order."""
        text = check_text(text, "text")
        channel = check_feed_channel(channel)
        ends = check_splits(splits, len(text))
        watcher = self.watcher()
        out: list[Detection] = []
        prev = 0
        for end in ends:
            out.extend(watcher.feed(text[prev:end], channel))
            prev = end
        out.extend(watcher.finish())
        return out

    def __reduce__(self) -> tuple[Any, ...]:
        # Not (Ruleset, (rules,), options): rebuilding with the default options first would reject
        # rules whose thresholds only fit a larger line_window.
        return (_rebuild_ruleset, (self._rules, self._option_kwargs()))

    if not TYPE_CHECKING:  # (for mypy, a Ruleset has no dynamic attributes)
        def __getattr__(self, name: str) -> Any:
            # reached only when normal lookup failed: a slot never set means __init__ never ran
            if name in Ruleset.__slots__:
                raise uninitialised(self)
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __repr__(self) -> str:
        try:
            ids = [rule.id for rule in self._rules]
        except UninitialisedError:
            return f"<uninitialised {type(self).__name__}>"
        opts = ", ".join(f"{k}={v!r}" for k, v in self._option_kwargs().items())
        return f"Ruleset({ids!r}, {opts})"


def _rebuild_ruleset(rules: tuple[Rule, ...], options: dict[str, Any]) -> Ruleset:
    """Unpickle a :class:`Ruleset`."""
    return Ruleset(rules, **options)


# --------------------------------------------------------------------------- per-view state

@dataclass
class _Occurrence:
    """A phrase occurrence kept for a ``suppress_quoted`` rule until its line ends."""

    offset: int
    phrase: str


@dataclass
class _ViewState:
    """The state of one channel view (see "Views" and "Per character" in docs/semantics.md)."""

    chars: int = 0
    bytes: int = 0
    recent: str = ""                  # text since the tail barrier (bounded to plan.recent_chars)
    pending: str = ""                 # the pending line (unstripped)
    window: deque[str] = field(default_factory=deque)
    inside_fence: bool = False
    # Quote state of the current line (suppress_quoted).
    backticks: int = 0
    double_quote: bool = False
    curly: bool = False
    corner: bool = False
    # The list-line rule: after a phrase occurrence, the gap of whitespace and separators that
    # follows it (gap_seps separators; gap_end = offset of the first other character).
    after_occurrence: bool = False
    gap_seps: int = 0
    gap_end: int | None = None
    list_line: bool = False
    # suppress_quoted rule index -> first unquoted occurrence on the current line.
    kept: dict[int, _Occurrence] = field(default_factory=dict)
    # windowed rule index -> next throttle position, in UTF-8 bytes of this view.
    next_check: dict[int, int] = field(default_factory=dict)
    # The last QUOTE_CHARS characters (not reset at a channel switch): evidence quotes.
    quote: str = ""
    # Segments (BlockRepeat): the pending one, the kept ones, and what came after the last kept.
    seg_text: str = ""
    segments: deque[_Segment] = field(default_factory=deque)
    seg_serial: int = 0
    tail_gap: int = 0
    # The first-number values of the last two kept segments that had one, newest first.
    prev_numbers: list[int] = field(default_factory=list)
    # Words (VocabCollapse): the pending one, the kept ones (folded), their starts.
    word: str = ""
    word_start: int = 0
    words: deque[str] = field(default_factory=deque)
    word_starts: deque[int] = field(default_factory=deque)
    word_serial: int = 0
    # Words kept since the last newline or channel switch (one_line); whether the gap before
    # each kept word (since the previous word ended) held a list separator.
    line_words: int = 0
    gap_mark: bool = False
    word_gap: bool = False
    word_gaps: deque[bool] = field(default_factory=deque)
    # The word tail (WordRepeat): the kept words (folded, start, lexical, list gap), and how many
    # were kept since the view began.
    tail: deque[tuple[str, int, bool, bool]] = field(default_factory=deque)
    tail_serial: int = 0
    # windowed rule index -> the segment / word serial at its previous check.
    seen_serial: dict[int, int] = field(default_factory=dict)

    def clear_quote_state(self) -> None:
        self.backticks = 0
        self.double_quote = self.curly = self.corner = False
        self.after_occurrence = self.list_line = False
        self.gap_seps = 0
        self.gap_end = None

    @property
    def quoted(self) -> bool:
        return self.backticks % 2 == 1 or self.double_quote or self.curly or self.corner


@dataclass
class _State:
    views: dict[str, _ViewState]
    fired: set[str] = field(default_factory=set)
    tail: str = ""
    last_channel: str | None = None
    finished: bool = False


# A detection waiting to be ordered: (rule index, detection).
_Pending = tuple[int, Detection]


class Watcher:
    """The state of one stream (one attempt of one reply) over a :class:`Ruleset`."""

    __slots__ = ("_lock", "_ruleset", "_state")

    def __init__(self, ruleset: Ruleset) -> None:
        if not isinstance(ruleset, Ruleset):
            raise ArgumentTypeError(f"ruleset must be a Ruleset, got {type(ruleset).__name__}")
        self._ruleset = ruleset
        self._state = self._fresh_state()
        self._lock = threading.Lock()

    def _fresh_state(self) -> _State:
        views: dict[str, _ViewState] = {}
        for plan in self._ruleset._plans:
            view = _ViewState()
            for index in plan.windowed_rules:
                view.next_check[index] = self._rule(index).every_bytes  # type: ignore[attr-defined]
            views[plan.name] = view
        return _State(views=views)

    def _rule(self, index: int) -> Rule:
        return self._ruleset._rules[index]

    def _busy(self) -> _Busy:
        return _Busy(self._lock)

    # ----------------------------------------------------------------------- public API

    @property
    def ruleset(self) -> Ruleset:
        return self._ruleset

    @property
    def fired(self) -> frozenset[str]:
        """Ids of the rules that fired in this attempt."""
        return frozenset(self._state.fired)

    @property
    def finished(self) -> bool:
        return self._state.finished

    def feed(self, text: str, /, channel: str = "text") -> tuple[Detection, ...]:
        """Append a delta on ``channel`` ("text" or "reasoning"); return what fired, in order."""
        text = check_text(text, "text")
        channel = check_feed_channel(channel)
        with self._busy():
            state = self._state
            if state.finished:
                raise RuntimeError(FINISHED_MESSAGE)
            if not text:
                return _NO_DETECTIONS
            out: list[Detection] = []
            if state.last_channel is not None and state.last_channel != channel:
                out.extend(self._switch())
            state.last_channel = channel
            self._append_tail(text)
            targets = [name for name in (channel, "combined") if name in state.views]
            plans = {plan.name: plan for plan in self._ruleset._plans}
            for c in text:
                fired_here: list[_Pending] = []
                for name in targets:
                    fired_here.extend(self._push_char(plans[name], state.views[name], c))
                out.extend(_in_rule_order(fired_here))
            return tuple(out) if out else _NO_DETECTIONS

    def finish(self) -> tuple[Detection, ...]:
        """End of stream: complete every pending line, resolve quoted candidates, check every
        windowed rule once more. A second call returns ``()``."""
        with self._busy():
            state = self._state
            if state.finished:
                return _NO_DETECTIONS
            state.finished = True
            pending: list[_Pending] = []
            for plan in self._ruleset._plans:
                view = state.views[plan.name]
                self._end_pieces(plan, view)
                if view.pending:
                    pending.extend(self._end_line(plan, view))
            for plan in self._ruleset._plans:
                view = state.views[plan.name]
                for index in plan.windowed_rules:
                    pending.extend(self._check(index, view))
            out = _in_rule_order(pending)
            return tuple(out) if out else _NO_DETECTIONS

    def reset(self) -> None:
        """Start a new attempt: forget all text, lines and fired rules."""
        with self._busy():
            self._state = self._fresh_state()

    def tail(self, n: int | None = None) -> str:
        """The last ``min(n, evidence_chars)`` code points fed in this attempt, both channels in
        arrival order without separators (``n=None``: ``evidence_chars``)."""
        limit = self._ruleset._options.evidence_chars
        if n is not None:
            if isinstance(n, bool) or not isinstance(n, int):
                raise ArgumentTypeError(f"n must be an int or None, got {type(n).__name__}")
            if n < 0:
                raise ArgumentValueError(f"n must be >= 0, got {n}")
            limit = min(limit, n)
        return self._state.tail[-limit:] if limit else ""

    def copy(self) -> Watcher:
        """An independent watcher in the same state (it continues exactly as this one would)."""
        with self._busy():
            twin = Watcher(self._ruleset)
            twin._state = _copy.deepcopy(self._state)
            return twin

    if not TYPE_CHECKING:
        def __getattr__(self, name: str) -> Any:
            if name in Watcher.__slots__:
                raise uninitialised(self)
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __repr__(self) -> str:
        try:
            s = self._state
        except UninitialisedError:
            return f"<uninitialised {type(self).__name__}>"
        return (f"<Watcher rules={len(self._ruleset._rules)} fired={sorted(s.fired)!r}"
                f" finished={s.finished}>")

    # ----------------------------------------------------------------------- internals

    def _append_tail(self, text: str) -> None:
        limit = self._ruleset._options.evidence_chars
        tail = self._state.tail + text
        self._state.tail = tail[-limit:] if limit else ""

    def _may_fire(self, index: int) -> bool:
        rule = self._rule(index)
        return not rule.once or rule.id not in self._state.fired

    def _fire(self, index: int, offset: int, view_name: str, **evidence: Any) -> _Pending:
        rule = self._rule(index)
        self._state.fired.add(rule.id)
        return index, Detection(rule=rule.id, kind=rule.kind, action=rule.action,
                                channel=view_name, offset=offset, **evidence)

    def _switch(self) -> list[Detection]:
        """The combined view's work at a channel switch (docs/semantics.md, "Views")."""
        view = self._state.views.get("combined")
        if view is None:
            return []
        plan = next(p for p in self._ruleset._plans if p.name == "combined")
        self._end_pieces(plan, view)
        pending = self._end_line(plan, view)
        view.line_words = 0         # the line ended (VocabCollapse one_line)
        view.recent = ""            # phrase automata to the start state; the tail barrier
        view.clear_quote_state()
        view.inside_fence = False
        return _in_rule_order(pending)

    def _push_char(self, plan: _ViewPlan, view: _ViewState, c: str) -> list[_Pending]:
        """Steps 1-5 of "Per character" for one code point on one view."""
        out: list[_Pending] = []
        # 1. counters and the text since the barrier
        view.chars += 1
        view.bytes += _utf8_len(c)
        view.recent += c
        if len(view.recent) > 2 * plan.recent_chars:
            view.recent = view.recent[-plan.recent_chars:]
        if plan.segments or plan.words:
            view.quote += c
            if len(view.quote) > 2 * QUOTE_CHARS:
                view.quote = view.quote[-QUOTE_CHARS:]
        # 2. phrases ending at c (the gap after the previous occurrence is measured first, so an
        #    occurrence that starts at c sees where the gap ended)
        if view.after_occurrence and view.gap_end is None:
            if c in _SEPARATORS:
                view.gap_seps += 1
            elif not (c.isspace() or c in _QUOTES):
                view.gap_end = view.chars - 1
        if plan.phrase_rules:
            out.extend(self._match_phrases(plan, view, c))
        # 3. quote state (after phrases: a phrase ending at c does not see c)
        if c == "`":
            view.backticks += 1
        elif c == '"':
            view.double_quote = not view.double_quote
        elif c == "“":
            view.curly = True
        elif c == "”":
            view.curly = False
        elif c == "「":
            view.corner = True
        elif c == "」":
            view.corner = False
        # 4a. segments and words (before the line builder: a word or segment that ends at a
        #     newline sees the fence state of its own line)
        if plan.segments:
            self._segment_char(plan, view, c)
        if plan.words:
            self._word_char(plan, view, c)
        # 4. line builder (the end of a line also clears the quote state); BlockRepeat rules
        #    are also checked at every newline
        if c == "\n":
            out.extend(self._end_line(plan, view))
            for index in plan.windowed_rules:
                if isinstance(self._rule(index), BlockRepeat):
                    out.extend(self._check(index, view))
        else:
            view.pending += c
        # 5. throttle
        for index in plan.windowed_rules:
            every = self._rule(index).every_bytes  # type: ignore[attr-defined]
            if view.bytes >= view.next_check[index]:
                out.extend(self._check(index, view))
                view.next_check[index] = (view.bytes // every + 1) * every
        return out

    def _segment_char(self, plan: _ViewPlan, view: _ViewState, c: str) -> None:
        prev = view.seg_text[-1:]
        before = view.seg_text[-2:-1]       # a list number ("12. ") does not end a sentence
        view.seg_text += c
        view.tail_gap += 1
        if (c == "\n" or c in _CJK_SENTENCE_END
                or (prev and prev in _SENTENCE_END and not "0" <= before <= "9"
                    and c.isspace())):
            self._end_segment(plan, view)

    def _end_segment(self, plan: _ViewPlan, view: _ViewState) -> None:
        """The pending segment is complete: keep it when it holds a word character."""
        raw = view.seg_text
        view.seg_text = ""
        stripped = raw.strip()
        if not raw or not any(_is_word_char(ch) for ch in stripped):
            return
        # lengths and letters count up to 65535 (the native engine keeps them in 16 bits)
        letters, wide = _letters(stripped), _wide(stripped)
        # a short segment's number jumps when it is more than 1 away from those of the last two
        # segments that had one (a counter moves by 0 or 1; two back: it alternates with
        # another line): a list of identifiers
        number = _first_number(stripped)
        jump = False
        if number is not None:
            jump = (min(letters, 65535) << wide < JUMP_LETTERS and bool(view.prev_numbers)
                    and all(abs(number - v) > 1 for v in view.prev_numbers))
            view.prev_numbers = [number, *view.prev_numbers[:1]]
        view.segments.append(_Segment(stripped, _skeleton(stripped), min(view.tail_gap, 65535),
                                      min(len(raw), 65535), min(letters, 65535), wide,
                                      self._ruleset._options.mask_code_fences
                                      and view.inside_fence,
                                      _numbers(stripped, letters), number, jump))
        view.tail_gap = 0
        view.seg_serial += 1
        if len(view.segments) > plan.segments:
            view.segments.popleft()

    def _word_char(self, plan: _ViewPlan, view: _ViewState, c: str) -> None:
        if _is_word_char(c):
            if not view.word:
                view.word_start = view.chars - 1
                view.word_gap = view.gap_mark
                view.gap_mark = False
            view.word += c
        else:
            self._end_word(plan, view)
            if c == "\n":
                view.line_words = 0
            elif _list_separator(c):
                view.gap_mark = True

    def _end_word(self, plan: _ViewPlan, view: _ViewState) -> None:
        word = view.word
        if not word:
            return
        view.word = ""
        if self._ruleset._options.mask_code_fences and view.inside_fence:
            return
        if plan.tail_words:
            view.tail.append((_fold(word), view.word_start, _lexical(word), view.word_gap))
            view.tail_serial += 1
            if len(view.tail) > plan.tail_words:
                view.tail.popleft()
        cap = plan.words
        view.words.append(_fold(word))
        view.word_gaps.append(view.word_gap)
        view.word_starts.append(view.word_start)
        view.word_serial += 1
        view.line_words += 1
        if len(view.words) > cap:
            view.words.popleft()
            view.word_gaps.popleft()
        if len(view.word_starts) > 8:
            view.word_starts.popleft()

    def _end_pieces(self, plan: _ViewPlan, view: _ViewState) -> None:
        """A channel switch or finish(): the pending word and segment end."""
        if plan.words:
            self._end_word(plan, view)
        if plan.segments and view.seg_text:
            self._end_segment(plan, view)

    def _match_phrases(self, plan: _ViewPlan, view: _ViewState, c: str) -> list[_Pending]:
        """Step 2: every phrase occurrence ending at ``c`` (the last character of
        ``view.recent``); per rule the longest, then the first declared."""
        candidates = plan.by_last_exact.get(c, ()) + plan.by_last_folded.get(_fold(c), ())
        if not candidates:
            return []
        recent = view.recent
        best: dict[int, _PhraseEntry] = {}
        for entry in candidates:
            size = len(entry.key)
            if size > len(recent):
                continue
            end = recent[-size:]
            if (_fold(end) if entry.folded else end) != entry.key:
                continue
            current = best.get(entry.rule_index)
            if current is None or (len(entry.phrase), -entry.position) > (
                    len(current.phrase), -current.position):
                best[entry.rule_index] = entry
        if not best:
            return []
        # An occurrence at this end position, for the list-line rule of suppress_quoted: it
        # makes a list line when one of its phrases starts right where the gap of whitespace
        # and separators (at least one) after the previous occurrence ended.
        if view.after_occurrence and view.gap_seps and any(
                view.gap_end == view.chars - len(entry.key) for entry in best.values()):
            view.list_line = True
        view.after_occurrence = True
        view.gap_seps = 0
        view.gap_end = None
        out: list[_Pending] = []
        for index in sorted(best):
            if not self._may_fire(index):
                continue
            rule = self._rule(index)
            phrase = best[index].phrase
            if not rule.suppresses_quoted:
                out.append(self._fire(index, view.chars, plan.name, phrase=phrase))
            elif not view.quoted and index not in view.kept:
                view.kept[index] = _Occurrence(view.chars, phrase)
        return out

    def _end_line(self, plan: _ViewPlan, view: _ViewState) -> list[_Pending]:
        """A line of the view is complete: decide its quoted candidates, then window it."""
        out: list[_Pending] = []
        if not view.list_line:
            for index in sorted(view.kept):
                if self._may_fire(index):
                    kept = view.kept[index]
                    out.append(self._fire(index, kept.offset, plan.name, phrase=kept.phrase))
        view.kept = {}
        view.clear_quote_state()
        stripped = view.pending.strip()
        view.pending = ""
        options = self._ruleset._options
        if options.mask_code_fences:
            if _FENCE_LINE.fullmatch(stripped):
                view.inside_fence = not view.inside_fence
                return out
            if view.inside_fence:
                return out
        if len(stripped) < options.min_line_chars:
            return out
        if not any(_is_word_char(ch) for ch in stripped[:EVIDENCE_LINE_CHARS]):
            return out      # a structure line (border, divider, blank art) never counts
        view.window.append(stripped)
        if len(view.window) > options.line_window:
            view.window.popleft()
        return out

    def _check(self, index: int, view: _ViewState) -> list[_Pending]:
        """Run windowed rule ``index`` on its view now (if it may still fire)."""
        if not self._may_fire(index):
            return []
        rule = self._rule(index)
        check, reads = _DETECTORS[rule.detector]
        if reads == "tail":
            evidence = check(rule, view.recent)
        elif reads == "tail+fence":
            fenced = self._ruleset._options.mask_code_fences and view.inside_fence
            evidence = check(rule, view.recent, fenced)
        elif reads in ("segments", "words", "word-tail"):
            # checked only when a segment (word) was kept since this rule's previous check
            serial = (view.seg_serial if reads == "segments" else view.word_serial
                      if reads == "words" else view.tail_serial)
            if view.seen_serial.get(index, 0) == serial:
                return []
            view.seen_serial[index] = serial
            evidence = check(rule, view)
        else:
            evidence = check(rule, list(view.window))
        if evidence is None:
            return []
        return [self._fire(index, view.chars, rule.channel, **evidence)]


class _Busy:
    """Refuses concurrent use of one watcher (RuntimeError) instead of corrupting it."""

    __slots__ = ("_lock",)

    def __init__(self, lock: threading.Lock) -> None:
        self._lock = lock

    def __enter__(self) -> None:
        if not self._lock.acquire(blocking=False):
            raise RuntimeError(BUSY_MESSAGE)

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


class Recorder:
    """A watched reply's recorder, for any watcher (the native one uses
    ``contextcare._engine.Recorder``): feeds the watcher, keeps the text of every delta per
    channel, and hands detections to ``on_fire``."""

    def __init__(self, watcher: Any, on_fire: Callable[[tuple[Detection, ...]], Any]) -> None:
        if not callable(on_fire):
            raise ArgumentTypeError(f"on_fire must be callable, got {type(on_fire).__name__}")
        self._feed = watcher.feed
        self._on_fire = on_fire
        self._closed: str | None = None
        self._chunks: dict[str, list[str]] = {"text": [], "reasoning": []}

    def feed(self, text: str, /, channel: str = "text") -> Any:
        """Feed the watcher and keep the delta; ``None`` when nothing fired, else
        ``on_fire(detections)``."""
        check_feed_channel(channel)
        check_text(text)
        if self._closed is not None:
            raise RuntimeError(self._closed)
        found = self._feed(text, channel)
        self._chunks[channel].append(text)
        return self._on_fire(tuple(found)) if found else None

    def close(self, message: str) -> None:
        """From now on ``feed`` raises ``RuntimeError(message)``; the kept text stays."""
        self._closed = message

    def text(self, channel: str) -> str:
        """All text fed on ``channel`` ("text" or "reasoning")."""
        return "".join(self._chunks[check_feed_channel(channel)])


def _in_rule_order(pending: list[_Pending]) -> list[Detection]:
    """Detections that fired at the same character (or switch, or finish) in rule order."""
    return [detection for _, detection in sorted(pending, key=lambda item: item[0])]


# --------------------------------------------------------------------------- windowed detectors
# Each takes the window (oldest line first) and returns the evidence fields, or None.

def _ranked(lines: list[str]) -> list[tuple[str, int]]:
    """Distinct lines with their counts, most frequent first; ties: the line whose last
    occurrence is the most recent comes first."""
    counts = Counter(lines)
    last = {line: i for i, line in enumerate(lines)}
    order = sorted(counts, key=lambda line: (counts[line], last[line]), reverse=True)
    return [(line, counts[line]) for line in order]


def _longest_run(lines: list[str]) -> int:
    best = run = 0
    for i, line in enumerate(lines):
        run = run + 1 if i and line == lines[i - 1] else 1
        best = max(best, run)
    return best


def _line_repeat(rule: LineRepeat, window: list[str]) -> dict[str, Any] | None:
    total = len(window)
    if total < rule.min_lines:
        return None
    line, top = _ranked(window)[0]
    run = _longest_run(window)
    ratio = top / total
    by_count = top >= rule.min_count and ratio >= rule.min_ratio
    by_run = rule.min_run > 0 and run >= rule.min_run
    if not (by_count or by_run):
        return None
    return {"line": line[:EVIDENCE_LINE_CHARS], "count": top, "total": total, "ratio": ratio,
            "run": run}


def _line_cycle(rule: LineCycle, window: list[str]) -> dict[str, Any] | None:
    total = len(window)
    if total < rule.min_lines:
        return None
    short = [line for line in window if len(line) <= rule.max_line_chars]
    # Ranking only the short lines keeps the tie-break of the whole window: a short line's
    # last occurrence is the same in both lists, and only relative order matters.
    cycle = _ranked(short)[:rule.top]
    covered = sum(count for _, count in cycle)
    ratio = covered / total
    if ratio < rule.cover_ratio:
        return None
    return {"cycle": tuple(line for line, _ in cycle), "count": covered, "total": total,
            "ratio": ratio}


def _filler_lines(rule: FillerLines, window: list[str]) -> dict[str, Any] | None:
    total = len(window)
    count = sum(1 for line in window
                if len(line) <= rule.max_line_chars and any(ch in rule.fillers for ch in line))
    if count < rule.min_count or count / total < rule.min_ratio:
        return None
    return {"count": count, "total": total, "ratio": count / total}


def _prefix(line: str, delimiters: str, max_prefix_chars: int) -> str | None:
    for i, ch in enumerate(line[:max_prefix_chars]):
        if ch in delimiters:
            return line[:i + 1]
    return None


def _prefix_monotony(rule: PrefixMonotony, window: list[str]) -> dict[str, Any] | None:
    total = len(window)
    if total < rule.min_lines:
        return None
    prefixes = [p for p in (_prefix(line, rule.delimiters, rule.max_prefix_chars)
                            for line in window) if p is not None]
    if not prefixes:
        return None
    prefix, count = _ranked(prefixes)[0]
    ratio = count / total
    if count < rule.min_count or ratio < rule.min_ratio:
        return None
    return {"prefix": prefix, "count": count, "total": total, "ratio": ratio}


def _periodic_suffix_len(s: str, p: int) -> int:
    """Length of the longest suffix of ``s`` with period ``p`` (``s[i] == s[i+p]`` inside it).

    A suffix of length ``L >= p`` has period ``p`` exactly when ``s[n-L : n-p]`` equals
    ``s[n-L+p : n]``; the property holds for every shorter suffix too, so binary search works.
    """
    n = len(s)
    if n <= p:
        return n
    lo, hi = p, n           # lo is periodic; find the largest periodic length in [lo, hi]
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if s[n - mid:n - p] == s[n - mid + p:]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _readable(unit: str) -> str:
    """The rotation of a periodic unit that starts at a line start: after its first newline
    (counted circularly, so a unit ending in a newline stays as it is); without a newline, at its
    first word start (a non-whitespace character after whitespace); else the unit as it is."""
    p = len(unit)
    for j in range(p):
        if unit[j - 1] == "\n":
            return unit[j:] + unit[:j]
    for j in range(p):
        if unit[j - 1].isspace() and not unit[j].isspace():
            return unit[j:] + unit[:j]
    return unit


def _tail_repeat(rule: TailRepeat, recent: str, fenced: bool) -> dict[str, Any] | None:
    s = recent[-rule.window_chars:]
    for p in range(1, min(rule.max_period, len(s)) + 1):
        length = _periodic_suffix_len(s, p)
        if length < rule.min_chars or length // p < rule.min_repeats:
            continue
        unit = s[-p:]
        if any(_is_word_char(ch) for ch in unit):
            if fenced and "\n" in unit:
                return None     # inside a code fence a unit of lines is BlockRepeat's
            unit = _readable(unit)
            return {"unit": unit[:EVIDENCE_LINE_CHARS], "period": p, "repeats": length // p}
    return None



def _structure_flood(rule: StructureFlood, recent: str) -> dict[str, Any] | None:
    if len(recent) < rule.min_chars:
        return None
    tail = recent[-rule.min_chars:]
    if any(_is_word_char(c) for c in tail):
        return None
    n = len(tail)
    if rule.max_period and not any(all(tail[k] == tail[k + p] for k in range(n - p))
                                   for p in range(1, rule.max_period + 1)):
        return None         # not one short unit repeated
    line = ""
    for piece in reversed(tail.split("\n")):
        if piece.strip():
            line = piece.strip()[:EVIDENCE_LINE_CHARS]
            break
    return {"line": line, "total": rule.min_chars}


def _quote(view: _ViewState, back: int) -> str | None:
    """The view's text from ``back`` characters before its end (None when not kept)."""
    if back > QUOTE_CHARS or back > view.chars:
        return None
    return view.quote[len(view.quote) - back:]


def _block_repeat(rule: BlockRepeat, view: _ViewState) -> dict[str, Any] | None:
    segs = list(view.segments)
    n = len(segs)

    def key(i: int, numeric: bool) -> object:
        if not rule.near:
            return segs[i].exact
        return segs[i].near_key() if numeric else segs[i].skeleton

    fenced = n > 0 and segs[-1].fenced
    for p in range(1, min(rule.max_period, n // rule.min_repeats) + 1):
        # near: a unit of numeric segments only (data rows) is compared with their numbers
        numeric = rule.near and all(s.numbers is not None for s in segs[n - p:])
        span = (rule.min_repeats - 1) * p
        if any(key(n - 1 - i, numeric) != key(n - 1 - i - p, numeric) for i in range(span)):
            continue
        # near: copies whose numbers jump (half of the numbered segments or more) are a list
        # of identifiers (bug numbers, links); a counter's line never jumps
        if rule.near:
            copies = segs[n - rule.min_repeats * p:]
            numbered = sum(1 for s in copies if s.number is not None)
            if numbered and 2 * sum(s.jump for s in copies) >= numbered:
                return None
        # the smallest period with min_repeats copies decides: the unit must hold enough
        # letters and its run enough characters (a larger period would repeat the same text)
        unit = segs[n - p:]
        if sum(s.letters for s in unit) < rule.min_letters * p:
            return None
        i = span
        while n - 1 - i - p >= 0 and key(n - 1 - i, numeric) == key(n - 1 - i - p, numeric):
            i += 1
        length = i + p                      # segments of the periodic run
        if sum(s.gap << s.wide for s in segs[n - length:]) < rule.min_chars:
            return None
        # in a code fence the run also needs fence_letters letters
        if fenced and sum(s.letters << s.wide for s in segs[n - length:]) < rule.fence_letters:
            return None
        # and a short unit one copy more (a runaway recursion's traceback shows its frame
        # three times)
        if fenced and 2 <= p <= FENCE_SHORT_UNIT and length < (rule.min_repeats + 1) * p:
            return None
        chars = sum(s.gap for s in unit)
        start = n - length
        first = n - p + (start - (n - p)) % p
        line = ""
        end_back = view.tail_gap + sum(s.gap for s in segs[first + 1:])
        for g in range(first, n):
            if g > first:
                end_back -= segs[g].gap
            text = _quote(view, end_back + segs[g].raw)
            if text is not None:
                line = text[:segs[g].raw].strip()[:EVIDENCE_LINE_CHARS]
                break
        return {"line": line, "period": p, "repeats": length // p, "total": chars}
    return None


def _segment_repeat(rule: SegmentRepeat, view: _ViewState) -> dict[str, Any] | None:
    segs = list(view.segments)
    if len(segs) < rule.window:
        return None
    last = segs[len(segs) - rule.window:]
    counts: dict[tuple[str, str | None], int] = {}
    newest: dict[tuple[str, str | None], int] = {}  # key -> its newest index (0 = newest)
    for k, seg in enumerate(reversed(last)):
        if (seg.letters << seg.wide < rule.min_letters or (seg.fenced and not rule.fences)
                or seg.jump):
            continue
        nk = seg.near_key()
        counts[nk] = counts.get(nk, 0) + 1
        newest.setdefault(nk, k)
    ranked = sorted(counts, key=lambda sk: (-counts[sk], newest[sk]))
    covered = sum(counts[sk] for sk in ranked[:rule.top])
    if covered < rule.min_count:
        return None
    rev = list(reversed(last))
    # one of the top skeletons must be long enough: short labels flipping are an answer key
    if max(rev[newest[sk]].letters << rev[newest[sk]].wide
           for sk in ranked[:rule.top]) < rule.top_letters:
        return None
    k = newest[ranked[0]]
    back = view.tail_gap + sum(s.gap for s in rev[:k]) + rev[k].raw
    text = _quote(view, back)
    line = text[:rev[k].raw].strip()[:EVIDENCE_LINE_CHARS] if text is not None else ""
    return {"line": line, "count": covered, "total": rule.window}


#: Characters that make the gap between two words a list gap (VocabCollapse), besides the
#: arrows U+2190-U+21FF.
_LIST_SEPARATORS = frozenset(",;|/>\u3001\uff0c\uff1b")


def _list_separator(c: str) -> bool:
    return c in _LIST_SEPARATORS or "\u2190" <= c <= "\u21ff"


def _lexical(word: str) -> bool:
    return sum(1 for c in word if not "0" <= c <= "9") >= 2


def _vocab_collapse(rule: VocabCollapse, view: _ViewState) -> dict[str, Any] | None:
    if len(view.words) < rule.words:
        return None
    if rule.one_line and view.line_words < rule.words:
        return None         # not all on the current line
    # a list, not a collapse: half of the gaps between them (the gap before each word but the
    # oldest) or more hold a list separator (Heads, Tails, Tails, ...; up → up → left)
    marked = sum(list(view.word_gaps)[len(view.word_gaps) - rule.words + 1:])
    if 4 * marked >= 3 * (rule.words - 1):
        return None
    last = list(view.words)[-rule.words:]
    distinct = len(set(last))
    if distinct > rule.max_distinct:
        return None
    # a window of mostly numbers and one-letter cells (a 0/1 grid, a spaced DNA sequence) is
    # data, not a collapse: at least half its words must be lexical (two letters or more, a
    # letter being a word character other than an ASCII digit)
    if 2 * sum(1 for w in last if _lexical(w)) < rule.words:
        return None
    start = view.word_starts[0]
    text = _quote(view, view.chars - start)
    line = text[:EVIDENCE_LINE_CHARS] if text is not None else ""
    return {"line": line, "count": distinct, "total": rule.words}


def _word_repeat(rule: WordRepeat, view: _ViewState) -> dict[str, Any] | None:
    words = list(reversed(view.tail))       # newest first
    n = len(words)
    reps = rule.min_repeats
    for p in range(1, min(rule.max_period, n // reps) + 1):
        span = (reps - 1) * p
        if any(words[i][0] != words[i + p][0] for i in range(span)):
            continue
        # the smallest period with min_repeats copies decides
        if sum(1 for w in words[:p] if w[2]) < rule.min_words:
            return None
        # a list, not a loop: half of the gaps before the last span words or more hold a list
        # separator
        if 2 * sum(1 for w in words[:span] if w[3]) >= span:
            return None
        i = span
        while i + p < n and words[i][0] == words[i + p][0]:
            i += 1
        length = i + p
        if words[0][1] - words[length - 1][1] < rule.min_chars:
            return None
        # the quote: the unit's first word aligned to the start of the run, in the copy before
        # the newest words
        q = p + (length - 1 - p) % p
        text = _quote(view, view.chars - words[q][1])
        line = text[:EVIDENCE_LINE_CHARS] if text is not None else ""
        return {"line": line, "period": p, "repeats": length // p,
                "total": words[0][1] - words[p][1]}
    return None


#: The windowed detectors by ``Rule.detector``: the check and what it reads, ``"window"`` (the
#: lines of the view's window), ``"tail"`` (the text since the barrier, ``recent``; with
#: ``"tail+fence"`` also whether the view is inside a code fence, with masking on),
#: ``"segments"``, ``"words"`` or ``"word-tail"`` (the view's state: its kept segments, words
#: or word tail).
_DETECTORS: dict[str, tuple[Callable[..., dict[str, Any] | None], str]] = {
    "line-repeat": (_line_repeat, "window"),
    "line-cycle": (_line_cycle, "window"),
    "filler-lines": (_filler_lines, "window"),
    "prefix-monotony": (_prefix_monotony, "window"),
    "tail-repeat": (_tail_repeat, "tail+fence"),
    "block-repeat": (_block_repeat, "segments"),
    "vocab-collapse": (_vocab_collapse, "words"),
    "segment-repeat": (_segment_repeat, "segments"),
    "structure-flood": (_structure_flood, "tail"),
    "word-repeat": (_word_repeat, "word-tail"),
}
