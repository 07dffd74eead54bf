"""Rule declarations: what to look for, on which channel, and what to do when it is found.

A rule is an immutable value (a frozen dataclass). Its id, unique within a ruleset, is its first
positional argument; the phrases of :class:`Phrases` and the token of :class:`Marker` may follow
it positionally; every other field is keyword-only (``LineRepeat("x", min_count=5)``), so the
order of the fields is not part of the API. Rules are validated when they are constructed,
so a bad threshold fails at the line that wrote it, with a message that names the rule, the field
and the allowed range. Both engines (the native one and :mod:`contextcare.reference`) compile the
same rule objects and share the checks in this module.

Rule families:

* per-delta ("incremental") rules: :class:`Phrases`, :class:`Marker`, :class:`TimeAnxiety`,
  :class:`ContextAnxiety` — one Aho–Corasick automaton per channel view holds them all;
* throttled ("windowed") rules: :class:`LineRepeat`, :class:`LineCycle`, :class:`FillerLines`,
  :class:`PrefixMonotony`, :class:`TailRepeat`, :class:`BlockRepeat`, :class:`VocabCollapse`, :class:`WordRepeat`, … — checked at fixed stream positions, every
  ``every_bytes`` UTF-8 bytes of their view, and once more at ``finish()``.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import ClassVar, SupportsIndex

from . import _engine as _limits
from .errors import ArgumentTypeError, ArgumentValueError, RuleTypeError, RuleValueError

__all__ = [
    "CHANNELS", "FEED_CHANNELS", "ACTIONS", "Rule", "Phrases", "Marker", "TimeAnxiety",
    "ContextAnxiety", "LineRepeat", "LineCycle", "FillerLines", "PrefixMonotony", "TailRepeat",
    "BlockRepeat", "VocabCollapse", "WordRepeat", "RulesetOptions", "check_rules", "DEFAULT_FILLERS",
    "DEFAULT_DELIMITERS",
    "MAX_PHRASE_CHARS", "MAX_PHRASES", "MAX_PHRASE_BYTES", "EVIDENCE_LINE_CHARS",
    "RULE_TYPES", "KINDS", "MAX_BLOCK_SEGMENTS", "MAX_SEGMENT_EVERY_BYTES", "QUOTE_CHARS",
]

#: Channel views a rule can watch. ``combined`` receives both fed channels in arrival order.
CHANNELS = ("text", "reasoning", "combined")
#: Channels ``Watcher.feed`` accepts.
FEED_CHANNELS = ("text", "reasoning")
#: What a detection asks the caller to do. ``record`` only reports (audits, scans).
ACTIONS = ("abort", "remind", "record")

# The limits are the C core's (csrc/engine.h), read through the compiled module so that the two
# languages cannot disagree; the core rejects a spec outside them on its own as well.
#: Longest phrase, in code points.
MAX_PHRASE_CHARS: int = _limits.MAX_PHRASE_CHARS
#: Most phrases in one ruleset (all rules together).
MAX_PHRASES: int = _limits.MAX_PHRASES
#: Most UTF-8 bytes of all phrases of one ruleset together.
MAX_PHRASE_BYTES: int = _limits.MAX_PHRASE_BYTES
#: Line evidence keeps this many leading code points of a line.
EVIDENCE_LINE_CHARS: int = _limits.EVIDENCE_CHARS
#: BlockRepeat and VocabCollapse quote their evidence from the last this many characters.
QUOTE_CHARS = 1024

#: Filler characters: single CJK acknowledgement and function
#: words that degenerate reasoning repeats on short lines (``做。``, ``好。``, ``嗯，简洁。``).
DEFAULT_FILLERS = "做好嗯对行是的了啊呢吧哦噢呃唔嘛额诶哈呀喔欸嘞咯"
#: Delimiters that end a line prefix for :class:`PrefixMonotony` (``嗯，`` ``Step:``).
DEFAULT_DELIMITERS = "，,：:、"

_MAX_COUNT: int = _limits.MAX_COUNT
_MAX_EVERY_BYTES: int = _limits.MAX_EVERY_BYTES


# --------------------------------------------------------------------------- validation helpers

def _who(rule: object) -> str:
    if isinstance(rule, RulesetOptions):
        return "Ruleset"
    return f"{type(rule).__name__}({getattr(rule, 'id', '?')!r})"


def _type_error(rule: object, name: str, expected: str, value: object) -> RuleTypeError:
    return RuleTypeError(f"{_who(rule)}: {name} must be {expected}, got {type(value).__name__}")


def _int(rule: object, name: str, lo: int, hi: int) -> None:
    value = getattr(rule, name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _type_error(rule, name, "an int", value)
    if not lo <= value <= hi:
        raise RuleValueError(f"{_who(rule)}: {name} must be in [{lo}, {hi}], got {value}")


def _ratio(rule: object, name: str) -> None:
    value = getattr(rule, name)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _type_error(rule, name, "a number", value)
    if not (math.isfinite(value) and 0 < value <= 1):
        raise RuleValueError(f"{_who(rule)}: {name} must be a ratio in (0, 1], got {value!r}")
    object.__setattr__(rule, name, float(value))


def _bool(rule: object, name: str) -> None:
    value = getattr(rule, name)
    if not isinstance(value, bool):
        raise _type_error(rule, name, "a bool", value)


def _choice(rule: object, name: str, choices: tuple[str, ...]) -> None:
    value = getattr(rule, name)
    if not isinstance(value, str):
        raise _type_error(rule, name, "a str", value)
    if value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise RuleValueError(f"{_who(rule)}: {name} must be one of {allowed}, got {value!r}")


def _text(rule: object, name: str, max_chars: int) -> None:
    value = getattr(rule, name)
    if not isinstance(value, str):
        raise _type_error(rule, name, "a str", value)
    if not value:
        raise RuleValueError(f"{_who(rule)}: {name} must not be empty")
    if len(value) > max_chars:
        raise RuleValueError(
            f"{_who(rule)}: {name} must be at most {max_chars} characters, got {len(value)}")


def _common(rule: Rule) -> None:
    if not isinstance(rule.id, str):
        raise RuleTypeError(f"{type(rule).__name__}: id must be a str, got {type(rule.id).__name__}")
    if not rule.id or rule.id != rule.id.strip() or len(rule.id) > 200:
        raise RuleValueError(
            f"{type(rule).__name__}: id must be 1-200 characters without surrounding whitespace,"
            f" got {rule.id!r}")
    _choice(rule, "channel", CHANNELS)
    _choice(rule, "action", ACTIONS)
    _bool(rule, "once")


def _windowed(rule: Rule) -> None:
    _common(rule)
    _int(rule, "every_bytes", 1, _MAX_EVERY_BYTES)


def _phrase_tuple(rule: object, name: str, value: object) -> tuple[str, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise _type_error(rule, name, "a sequence of str", value)
    items = tuple(value)
    if not items:
        raise RuleValueError(f"{_who(rule)}: {name} must hold at least one phrase")
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise RuleTypeError(
                f"{_who(rule)}: {name}[{i}] must be a str, got {type(item).__name__}")
        if not item:
            raise RuleValueError(f"{_who(rule)}: {name}[{i}] must not be empty")
        if len(item) > MAX_PHRASE_CHARS:
            raise RuleValueError(
                f"{_who(rule)}: {name}[{i}] must be at most {MAX_PHRASE_CHARS} characters,"
                f" got {len(item)}")
    return items


# --------------------------------------------------------------------------- rules

class Rule:
    """Base of all rules.

    Each rule class declares, once, what the rest of the package needs to know about its kind
    (the engines, the notices and the command line loop over these declarations):

    * ``kind`` - the name its detections carry (``Detection.kind``);
    * ``detector`` - the engine detector it compiles to (phrase-like rules share ``"phrases"``);
    * ``windowed`` - checked at throttle points (else per character);
    * ``evidence`` - the ``Detection`` fields its detections fill, in order;
    * ``engine_fields`` - its fields copied, under the same names, into the engine's rule spec
      (``cc_rule_spec`` in csrc/engine.h; a str field becomes a set of code points);
    * ``window_counts`` - its fields that count lines of the window (at most ``line_window``);
    * ``topic`` - what a notice about it talks of: ``"loop"``, ``"time-anxiety"``,
      ``"context-anxiety"`` or ``"other"``.
    """

    kind: ClassVar[str]
    detector: ClassVar[str]
    windowed: ClassVar[bool]
    evidence: ClassVar[tuple[str, ...]]
    engine_fields: ClassVar[tuple[str, ...]] = ()
    window_counts: ClassVar[tuple[str, ...]] = ()
    topic: ClassVar[str] = "other"
    id: str
    channel: str
    action: str
    once: bool

    def phrase_list(self) -> tuple[str, ...]:
        """The phrases this rule matches (empty for line and tail rules)."""
        return ()

    def engine_spec(self) -> dict[str, object]:
        """The rule as the engine's rule spec: detector, view, flags and ``engine_fields``."""
        spec: dict[str, object] = {
            "detector": self.detector, "view": self.channel, "once": self.once,
            "ignore_case": self.ignores_case, "suppress_quoted": self.suppresses_quoted,
        }
        for name in self.engine_fields:
            spec[name] = getattr(self, name)
        return spec

    @property
    def ignores_case(self) -> bool:
        return bool(getattr(self, "ignore_case", False))

    @property
    def suppresses_quoted(self) -> bool:
        return bool(getattr(self, "suppress_quoted", False))


@dataclass(frozen=True, slots=True)
class Phrases(Rule):
    """Fires when any of ``phrases`` occurs in the channel view.

    Matches straddle deltas. The occurrence that ends first fires (ties: the longest phrase);
    evidence is the phrase as declared and ``offset`` its end offset. ``ignore_case`` folds ASCII
    letters only. ``suppress_quoted`` ignores mentions: an occurrence after an unclosed backtick or
    quote (``"`` ``“`` ``「``) on its line, or on a line holding two or more phrase occurrences with
    ``|``, ``,``, ``，`` or ``、`` between them; such rules decide at the end of the line.
    """

    kind: ClassVar[str] = "phrase"
    detector: ClassVar[str] = "phrases"
    windowed: ClassVar[bool] = False
    evidence: ClassVar[tuple[str, ...]] = ("phrase",)

    id: str
    phrases: Sequence[str]
    _: KW_ONLY
    channel: str = "combined"
    action: str = "remind"
    ignore_case: bool = False
    suppress_quoted: bool = False
    once: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "phrases", _phrase_tuple(self, "phrases", self.phrases))
        _common(self)
        _bool(self, "ignore_case")
        _bool(self, "suppress_quoted")

    def phrase_list(self) -> tuple[str, ...]:
        return tuple(self.phrases)


@dataclass(frozen=True, slots=True)
class Marker(Rule):
    """Fires when ``token`` occurs (one phrase; for stop markers such as ``<<END>>``)."""

    kind: ClassVar[str] = "marker"
    detector: ClassVar[str] = "phrases"
    windowed: ClassVar[bool] = False
    evidence: ClassVar[tuple[str, ...]] = ("phrase",)

    id: str
    token: str
    _: KW_ONLY
    channel: str = "combined"
    action: str = "abort"
    ignore_case: bool = False
    once: bool = True

    def __post_init__(self) -> None:
        _text(self, "token", MAX_PHRASE_CHARS)
        _common(self)
        _bool(self, "ignore_case")

    def phrase_list(self) -> tuple[str, ...]:
        return (self.token,)


def _langs(rule: object, value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        value = (value,)
    if isinstance(value, (bytes, bytearray)) or not isinstance(value, Iterable):
        raise _type_error(rule, "lang", "a str or a sequence of str", value)
    langs = tuple(value)
    if not langs:
        raise RuleValueError(f"{_who(rule)}: lang must name at least one of 'zh', 'en'")
    for i, lang in enumerate(langs):
        if not isinstance(lang, str):  # a wrong type is a TypeError, not a wrong value
            raise _type_error(rule, f"lang[{i}]", "'zh' or 'en'", lang)
        if lang not in ("zh", "en"):
            raise RuleValueError(f"{_who(rule)}: lang must be 'zh' or 'en', got {lang!r}")
    return tuple(dict.fromkeys(langs))


@dataclass(frozen=True, slots=True)
class _Anxiety(Rule):
    detector: ClassVar[str] = "phrases"
    windowed: ClassVar[bool] = False
    evidence: ClassVar[tuple[str, ...]] = ("phrase",)
    vocabulary: ClassVar[str]

    id: str
    _: KW_ONLY
    lang: str | Sequence[str] = ("zh", "en")
    extra: Sequence[str] = ()
    channel: str = "reasoning"
    action: str = "remind"
    suppress_quoted: bool = True
    once: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "lang", _langs(self, self.lang))
        if isinstance(self.extra, (str, bytes)) or not isinstance(self.extra, Iterable):
            raise _type_error(self, "extra", "a sequence of str", self.extra)
        extra = tuple(self.extra)
        object.__setattr__(self, "extra", _phrase_tuple(self, "extra", extra) if extra else ())
        _common(self)
        _bool(self, "suppress_quoted")

    @property
    def ignore_case(self) -> bool:
        return True

    def phrase_list(self) -> tuple[str, ...]:
        from .vocab import phrases_for

        return tuple(dict.fromkeys(phrases_for(self.vocabulary, tuple(self.lang))
                                   + tuple(self.extra)))


@dataclass(frozen=True, slots=True)
class TimeAnxiety(_Anxiety):
    """Reasoning that treats time as a threat ("running out of time", ``时间不够``).

    Phrases from :mod:`contextcare.vocab` in the languages of ``lang`` (plus ``extra``), matched
    case-insensitively (ASCII), on the reasoning channel, quoted mentions suppressed.
    """

    kind: ClassVar[str] = "time-anxiety"
    topic: ClassVar[str] = "time-anxiety"
    vocabulary: ClassVar[str] = "time"

    id: str = "time-anxiety"


@dataclass(frozen=True, slots=True)
class ContextAnxiety(_Anxiety):
    """Reasoning that treats the context window as a threat ("context is almost full")."""

    kind: ClassVar[str] = "context-anxiety"
    topic: ClassVar[str] = "context-anxiety"
    vocabulary: ClassVar[str] = "context"

    id: str = "context-anxiety"


@dataclass(frozen=True, slots=True)
class LineRepeat(Rule):
    """The same line over and over, over the window of the last ``line_window`` lines.

    Fires when the window holds at least ``min_lines`` lines and either the most frequent line
    occurs ``min_count`` times and makes up ``min_ratio`` of the window, or (``min_run`` > 0) the
    longest run of identical consecutive lines reaches ``min_run``.
    """

    kind: ClassVar[str] = "line-repeat"
    detector: ClassVar[str] = "line-repeat"
    windowed: ClassVar[bool] = True
    evidence: ClassVar[tuple[str, ...]] = ("line", "count", "total", "ratio", "run")
    engine_fields: ClassVar[tuple[str, ...]] = (
        "every_bytes", "min_lines", "min_count", "min_ratio", "min_run")
    window_counts: ClassVar[tuple[str, ...]] = ("min_lines", "min_count", "min_run")
    topic: ClassVar[str] = "loop"

    id: str
    _: KW_ONLY
    min_lines: int = 30
    min_count: int = 30
    min_ratio: float = 0.35
    min_run: int = 12
    every_bytes: int = 300
    channel: str = "combined"
    action: str = "abort"
    once: bool = True

    def __post_init__(self) -> None:
        _windowed(self)
        _int(self, "min_lines", 1, _MAX_COUNT)
        _int(self, "min_count", 1, _MAX_COUNT)
        _ratio(self, "min_ratio")
        _int(self, "min_run", 0, _MAX_COUNT)


@dataclass(frozen=True, slots=True)
class LineCycle(Rule):
    """A short cycle of short lines: the ``top`` most frequent lines of at most ``max_line_chars``
    characters cover ``cover_ratio`` of a window of at least ``min_lines`` lines."""

    kind: ClassVar[str] = "line-cycle"
    detector: ClassVar[str] = "line-cycle"
    windowed: ClassVar[bool] = True
    evidence: ClassVar[tuple[str, ...]] = ("cycle", "count", "total", "ratio")
    engine_fields: ClassVar[tuple[str, ...]] = (
        "every_bytes", "max_line_chars", "min_lines", "top", "cover_ratio")
    window_counts: ClassVar[tuple[str, ...]] = ("min_lines",)
    topic: ClassVar[str] = "loop"

    id: str
    _: KW_ONLY
    max_line_chars: int = 8
    min_lines: int = 24
    top: int = 3
    cover_ratio: float = 0.6
    every_bytes: int = 300
    channel: str = "combined"
    action: str = "remind"
    once: bool = True

    def __post_init__(self) -> None:
        _windowed(self)
        _int(self, "max_line_chars", 1, EVIDENCE_LINE_CHARS)
        _int(self, "min_lines", 1, _MAX_COUNT)
        _int(self, "top", 1, _limits.MAX_CYCLE_TOP)
        _ratio(self, "cover_ratio")


@dataclass(frozen=True, slots=True)
class FillerLines(Rule):
    """Filler murmurs: lines of at most ``max_line_chars`` characters holding a character of
    ``fillers`` number at least ``min_count`` and make up ``min_ratio`` of the window."""

    kind: ClassVar[str] = "filler-lines"
    detector: ClassVar[str] = "filler-lines"
    windowed: ClassVar[bool] = True
    evidence: ClassVar[tuple[str, ...]] = ("count", "total", "ratio")
    engine_fields: ClassVar[tuple[str, ...]] = (
        "every_bytes", "fillers", "max_line_chars", "min_count", "min_ratio")
    window_counts: ClassVar[tuple[str, ...]] = ("min_count",)
    topic: ClassVar[str] = "loop"

    id: str
    _: KW_ONLY
    fillers: str = DEFAULT_FILLERS
    max_line_chars: int = 6
    min_count: int = 5
    min_ratio: float = 0.4
    every_bytes: int = 300
    channel: str = "combined"
    action: str = "remind"
    once: bool = True

    def __post_init__(self) -> None:
        _text(self, "fillers", _limits.MAX_FILLERS)
        object.__setattr__(self, "fillers", "".join(dict.fromkeys(self.fillers)))
        _windowed(self)
        _int(self, "max_line_chars", 1, EVIDENCE_LINE_CHARS)
        _int(self, "min_count", 1, _MAX_COUNT)
        _ratio(self, "min_ratio")


@dataclass(frozen=True, slots=True)
class PrefixMonotony(Rule):
    """Lines that all open the same way: the prefix of a line is its text up to and including the
    first of ``delimiters`` when that prefix is at most ``max_prefix_chars`` characters long. The
    most common prefix needs ``min_count`` lines and ``min_ratio`` of a window of ``min_lines``."""

    kind: ClassVar[str] = "prefix-monotony"
    detector: ClassVar[str] = "prefix-monotony"
    windowed: ClassVar[bool] = True
    evidence: ClassVar[tuple[str, ...]] = ("prefix", "count", "total", "ratio")
    engine_fields: ClassVar[tuple[str, ...]] = (
        "every_bytes", "delimiters", "max_prefix_chars", "min_lines", "min_count", "min_ratio")
    window_counts: ClassVar[tuple[str, ...]] = ("min_lines", "min_count")
    topic: ClassVar[str] = "loop"

    id: str
    _: KW_ONLY
    delimiters: str = DEFAULT_DELIMITERS
    max_prefix_chars: int = 3
    min_lines: int = 10
    min_count: int = 10
    min_ratio: float = 0.5
    every_bytes: int = 300
    channel: str = "combined"
    action: str = "remind"
    once: bool = True

    def __post_init__(self) -> None:
        _text(self, "delimiters", _limits.MAX_DELIMITERS)
        object.__setattr__(self, "delimiters", "".join(dict.fromkeys(self.delimiters)))
        _windowed(self)
        _int(self, "max_prefix_chars", 1, _limits.MAX_PREFIX_CHARS)
        _int(self, "min_lines", 1, _MAX_COUNT)
        _int(self, "min_count", 1, _MAX_COUNT)
        _ratio(self, "min_ratio")


@dataclass(frozen=True, slots=True)
class TailRepeat(Rule):
    """The end of the view is one unit repeated back to back, newlines or not.

    Looks at the last ``window_chars`` characters (since the last channel switch, for the combined
    view). Fires for the shortest period ``p <= max_period`` such that the tail is periodic with
    period ``p`` over at least ``min_chars`` characters and ``min_repeats`` whole units, and the
    unit holds a word character (units of only whitespace, punctuation, symbols or box drawing —
    dividers, table borders — never count). With ``mask_code_fences``, inside a code fence a unit
    that holds a newline is left to BlockRepeat (its fence conditions let a traceback's three
    repeated frames pass); a flood without newlines still fires there. Evidence: ``unit`` (first
    40 characters), ``period`` and ``repeats`` (whole units inside the checked window).
    """

    kind: ClassVar[str] = "tail-repeat"
    detector: ClassVar[str] = "tail-repeat"
    windowed: ClassVar[bool] = True
    evidence: ClassVar[tuple[str, ...]] = ("unit", "period", "repeats")
    engine_fields: ClassVar[tuple[str, ...]] = (
        "every_bytes", "window_chars", "max_period", "min_repeats", "min_chars")
    topic: ClassVar[str] = "loop"

    id: str
    _: KW_ONLY
    max_period: int = 256
    min_repeats: int = 3
    min_chars: int = 240
    window_chars: int = 768
    every_bytes: int = 300
    channel: str = "combined"
    action: str = "abort"
    once: bool = True

    def __post_init__(self) -> None:
        _windowed(self)
        _int(self, "window_chars", 2, _limits.MAX_WINDOW_CHARS)
        _int(self, "max_period", 1, self.window_chars // 2)
        _int(self, "min_repeats", 2, self.window_chars)
        _int(self, "min_chars", 2, self.window_chars)


@dataclass(frozen=True, slots=True)
class StructureFlood(Rule):
    """The last ``min_chars`` characters of the view hold no word character: a flood of
    punctuation, symbols, box drawing or whitespace (``# `` on 300 lines, ``----`` without end,
    blank lines). Such lines never count for the line rules, so this is what sees them.

    With ``max_period`` (0 by default: no condition) those ``min_chars`` characters must also be
    one unit of at most ``max_period`` characters repeated (``# \n`` or ``.`` again and again):
    ASCII art and a table's borders without words are not periodic for that long, so such a rule
    can abort. Looks at the text since the last channel switch (combined view), inside code
    fences too. Evidence: ``line`` (the last line of the flood that is not blank, stripped, 40
    characters) and ``total`` (``min_chars``).
    """

    kind: ClassVar[str] = "structure-flood"
    detector: ClassVar[str] = "structure-flood"
    windowed: ClassVar[bool] = True
    evidence: ClassVar[tuple[str, ...]] = ("line", "total")
    engine_fields: ClassVar[tuple[str, ...]] = ("every_bytes", "min_chars", "max_period")
    topic: ClassVar[str] = "loop"

    id: str
    _: KW_ONLY
    min_chars: int = 600
    max_period: int = 0
    every_bytes: int = 1024
    channel: str = "combined"
    action: str = "remind"
    once: bool = True

    def __post_init__(self) -> None:
        _windowed(self)
        _int(self, "min_chars", 2, _limits.MAX_WINDOW_CHARS)
        _int(self, "max_period", 0, self.min_chars - 1)


#: Most segments a view keeps for its BlockRepeat rules (max_period x min_repeats).
MAX_BLOCK_SEGMENTS: int = _limits.MAX_BLOCK_SEGMENTS
#: Largest every_bytes of a BlockRepeat or VocabCollapse rule: the view reads the characters since
#: its previous check back from its text ring, which holds at least this many.
MAX_SEGMENT_EVERY_BYTES: int = _limits.MAX_SEGMENT_EVERY_BYTES


@dataclass(frozen=True, slots=True)
class BlockRepeat(Rule):
    """A block of text repeated back to back: 1 to ``max_period`` segments, ``min_repeats`` times.

    The view is cut into *segments*: a segment ends after a newline, after whitespace that
    follows ``.`` ``!`` ``?`` or ``;`` (not preceded by a digit: ``12. `` numbers a list
    item), and after ``。`` ``！`` ``？`` ``；`` — so lines, and the sentences of a paragraph
    without newlines. Segments without a word character (blank lines,
    borders, ``}``) are left out. Fires when the last ``min_repeats x p`` segments are one unit of
    ``p`` segments repeated, for the smallest such ``p``, when that unit holds at least
    ``min_letters`` letters (word characters other than ASCII digits) per segment on average —
    so ``# x # = #``, ``| row # | # |`` or a cycle of two-character lines never counts — and the
    whole periodic run at the end of the view spans at least ``min_chars`` characters (those of a
    segment whose first letter is at U+3040 or above — kana, CJK, Hangul — count twice: a
    15-character Chinese line carries what a 30-character English one does). Inside
    code fences too. With ``near=True`` segments are compared by their
    *skeleton* (digit runs -> ``#``, ASCII letters lower-cased, whitespace runs -> one space),
    so ``Step 14: ...`` / ``Step 15: ...`` or a class repeated with a counter count as copies.
    A *numeric* segment — a data row: three digit runs or more, or two and fewer than 16
    letters (``2024-03-05,AAPL,185.2``, ``Epoch 3/40 - loss: 0.41``) — also keeps its numbers
    after the first (those equal to the first left out: ``TypeORM10 | TypeORM10``), and a unit
    made only of numeric segments repeats only when those numbers do: the rows of a table differ
    by their data, a loop by its counter. Copies in which half of the numbered segments or more
    *jump* (a short line whose first number is more than 1 away from those of the two numbered
    segments before it: ``- https://github.com/acme/api/issues/4821``, a bug list) are a list of
    identifiers, not a loop.
    Inside a code fence (with the ``mask_code_fences`` option on: the newest segment lies in a
    fence) the periodic run must also hold ``fence_letters`` letters (kana, CJK and Hangul count
    twice): code repeats short lines on purpose (an argument list of ``NULL,``, three equal
    asserts, a table of ``"gray30": 239,`` entries), so there a short line needs more copies than
    a repeated comment or a repeated class; and there a unit of two or three segments needs
    ``min_repeats + 1`` copies (a runaway recursion's traceback shows its frame three times).
    Evidence: ``line`` (the first segment of the unit, from its start, 40 characters),
    ``period`` (segments per copy), ``repeats`` (copies in view), ``total`` (characters per copy).
    """

    kind: ClassVar[str] = "block-repeat"
    detector: ClassVar[str] = "block-repeat"
    windowed: ClassVar[bool] = True
    evidence: ClassVar[tuple[str, ...]] = ("line", "period", "repeats", "total")
    engine_fields: ClassVar[tuple[str, ...]] = (
        "every_bytes", "near", "max_period", "min_repeats", "min_chars", "min_letters",
        "fence_letters")
    topic: ClassVar[str] = "loop"

    id: str
    _: KW_ONLY
    near: bool = False
    max_period: int = 128
    min_repeats: int = 3
    min_chars: int = 60
    min_letters: int = 4
    fence_letters: int = 0
    every_bytes: int = 128
    channel: str = "combined"
    action: str = "abort"
    once: bool = True

    def __post_init__(self) -> None:
        _windowed(self)
        _bool(self, "near")
        _int(self, "max_period", 1, _limits.MAX_BLOCK_PERIOD)
        _int(self, "min_repeats", 2, _limits.MAX_BLOCK_REPEATS)
        _int(self, "min_chars", 1, _MAX_COUNT)
        _int(self, "min_letters", 0, _MAX_COUNT)
        _int(self, "every_bytes", 1, MAX_SEGMENT_EVERY_BYTES)
        _int(self, "fence_letters", 0, _MAX_COUNT)
        if self.max_period * self.min_repeats > MAX_BLOCK_SEGMENTS:
            raise RuleValueError(
                f"{_who(self)}: max_period x min_repeats must be at most {MAX_BLOCK_SEGMENTS},"
                f" got {self.max_period} x {self.min_repeats}")


@dataclass(frozen=True, slots=True)
class VocabCollapse(Rule):
    """Output collapsed onto a handful of words: among the last ``words`` words of the view at
    most ``max_distinct`` distinct ones (ASCII letters folded to lower case), at least half of
    them lexical (two letters or more, a letter being a word character other than an ASCII
    digit): a grid of ``0``/``1`` cells or a spaced DNA sequence is data, not a collapse; and
    fewer than three quarters of the gaps between them (the gap before each word but the oldest,
    since the previous word ended) may hold a list separator (``, ; | / >``, ``、，；`` or an
    arrow U+2190-U+21FF): a line of coin flips ``Heads, Tails, Tails, …`` or moves
    ``up → left → up …`` is a list, not a collapse.

    With ``one_line=True`` the words must also all be on the current line: kept since the view's
    last newline or channel switch. A collapse runs on without newlines, legitimate text with few
    words rarely does, so such a rule can judge on fewer words (``vocab-collapse-line`` of the
    defaults: 32).

    A word is a maximal run of word characters (ASCII letters and digits; above U+0080 any
    character that is not whitespace, general punctuation, symbols or CJK punctuation). Words
    inside code fences are left out when the ruleset masks fences. Evidence: ``count`` (distinct
    words), ``total`` (``words``), ``line`` (the text from the start of the eighth-to-last word,
    40 characters).
    """

    kind: ClassVar[str] = "vocab-collapse"
    detector: ClassVar[str] = "vocab-collapse"
    windowed: ClassVar[bool] = True
    evidence: ClassVar[tuple[str, ...]] = ("line", "count", "total")
    engine_fields: ClassVar[tuple[str, ...]] = ("every_bytes", "words", "max_distinct",
                                                "one_line")
    topic: ClassVar[str] = "loop"

    id: str
    _: KW_ONLY
    words: int = 80
    max_distinct: int = 8
    one_line: bool = False
    every_bytes: int = 128
    channel: str = "combined"
    action: str = "abort"
    once: bool = True

    def __post_init__(self) -> None:
        _windowed(self)
        _int(self, "words", 2, _limits.MAX_VOCAB_WORDS)
        _int(self, "max_distinct", 1, self.words - 1)
        _bool(self, "one_line")
        _int(self, "every_bytes", 1, MAX_SEGMENT_EVERY_BYTES)


@dataclass(frozen=True, slots=True)
class SegmentRepeat(Rule):
    """Near-variant segments that keep coming back, in any order: among the last ``window``
    segments (as BlockRepeat cuts them), the ``top`` most frequent *skeletons* cover at least
    ``min_count`` segments.

    A skeleton is BlockRepeat's (digit runs -> ``#``, ASCII letters lower-cased, whitespace runs
    -> one space), so ``Retrying (attempt 7).`` / ``(attempt 8).`` are one skeleton, and a line
    whose changing word takes a few values (``has`` / ``had``), a numbered list of a few names
    cycling or a retry line with other lines between all leave few skeletons covering many
    segments. With ``top_letters``, one of the ``top`` skeletons must also hold that many letters
    (CJK twice): an answer key of ``12. True`` / ``13. False`` flips two short labels, a loop
    flips a word in a sentence or alternates a line with a short one. A numeric segment (a data
    row, see BlockRepeat) is grouped by its skeleton and its
    numbers after the first, so the rows of a price list or a forecast stay apart; a segment
    whose number jumps (see BlockRepeat: a list of identifiers) never counts. Segments with
    fewer than ``min_letters`` letters (word characters other than ASCII
    digits; twice as many when the first letter is kana, CJK or Hangul) never count, so ``| row # | # |``, ``# x # = #`` or a
    counter stay quiet. Inside code fences too, unless ``fences`` is false (with the
    ``mask_code_fences`` option on): then segments inside a fence never count either: a table of
    ``"gray30": 239,`` or ``KEY_F12: 'kf12',`` entries is code, not a loop. Evidence: ``line``
    (the newest segment of the most
    frequent skeleton, from its start, 40 characters), ``count`` (segments covered), ``total``
    (``window``).
    """

    kind: ClassVar[str] = "segment-repeat"
    detector: ClassVar[str] = "segment-repeat"
    windowed: ClassVar[bool] = True
    evidence: ClassVar[tuple[str, ...]] = ("line", "count", "total")
    engine_fields: ClassVar[tuple[str, ...]] = (
        "every_bytes", "window", "top", "min_count", "min_letters", "fences", "top_letters")
    topic: ClassVar[str] = "loop"

    id: str
    _: KW_ONLY
    window: int = 16
    top: int = 2
    min_count: int = 16
    min_letters: int = 4
    fences: bool = True
    top_letters: int = 0
    every_bytes: int = 128
    channel: str = "combined"
    action: str = "abort"
    once: bool = True

    def __post_init__(self) -> None:
        _windowed(self)
        _int(self, "window", 1, MAX_BLOCK_SEGMENTS)
        _int(self, "top", 1, _limits.MAX_CYCLE_TOP)
        _int(self, "min_count", 1, self.window)
        _int(self, "min_letters", 0, _MAX_COUNT)
        _bool(self, "fences")
        _int(self, "top_letters", 0, _MAX_COUNT)
        _int(self, "every_bytes", 1, MAX_SEGMENT_EVERY_BYTES)


@dataclass(frozen=True, slots=True)
class WordRepeat(Rule):
    """The tail of the view is a unit of 1 to ``max_period`` words repeated ``min_repeats`` times
    back to back, checked every ``every_bytes`` bytes: it catches a short loop as soon as its
    last copy's words are written, mid-line, without waiting for the line to end.

    Words are VocabCollapse's (maximal runs of word characters, ASCII letters folded to lower
    case; those inside code fences are left out when the ruleset masks fences: code repeats word
    sequences legitimately, and ``x == y`` / ``x != y`` are the same words); what lies between
    words (spaces, punctuation, newlines) is not compared. Fires for the smallest ``p`` whose
    last ``(min_repeats - 1) x p`` words each equal the word ``p`` before them, when the unit
    (the last ``p`` words) holds at least ``min_words`` lexical words (two letters or more, a
    letter being a word character other than an ASCII digit; with the default 2, ``0, 0, 0``,
    ``a b a b`` or a one-word refrain such as ``ha ha ha`` never count), the whole periodic run spans at least ``min_chars`` characters
    (from the start of its first word to the start of the newest), and fewer than half of the
    gaps before the last ``(min_repeats - 1) x p`` words hold a list separator (``, ; | / >``,
    ``、，；`` or an arrow: ``Heads, Tails, Heads, Tails`` is a list). Evidence: ``line`` (40
    characters from the start of the unit's first word, aligned to where the run starts),
    ``period`` (words per copy), ``repeats`` (copies in the run), ``total`` (characters per copy).
    """

    kind: ClassVar[str] = "word-repeat"
    detector: ClassVar[str] = "word-repeat"
    windowed: ClassVar[bool] = True
    evidence: ClassVar[tuple[str, ...]] = ("line", "period", "repeats", "total")
    engine_fields: ClassVar[tuple[str, ...]] = (
        "every_bytes", "max_period", "min_repeats", "min_chars", "min_words")
    topic: ClassVar[str] = "loop"

    id: str
    _: KW_ONLY
    max_period: int = 20
    min_repeats: int = 3
    min_chars: int = 80
    min_words: int = 2
    every_bytes: int = 16
    channel: str = "combined"
    action: str = "abort"
    once: bool = True

    def __post_init__(self) -> None:
        _windowed(self)
        _int(self, "max_period", 1, _limits.MAX_WORD_PERIOD)
        _int(self, "min_repeats", 2, _limits.MAX_BLOCK_REPEATS)
        _int(self, "min_chars", 1, _MAX_COUNT)
        _int(self, "min_words", 0, _limits.MAX_WORD_PERIOD)
        _int(self, "every_bytes", 1, MAX_SEGMENT_EVERY_BYTES)
        if self.max_period * self.min_repeats > _limits.MAX_WORD_TAIL:
            raise RuleValueError(
                f"{_who(self)}: max_period x min_repeats must be at most {_limits.MAX_WORD_TAIL},"
                f" got {self.max_period} x {self.min_repeats}")


#: Every rule class, in the order the documentation lists them. A new rule kind is added here
#: (and in the engines: see README, "Architecture").
RULE_TYPES: tuple[type[Rule], ...] = (
    Phrases, Marker, TimeAnxiety, ContextAnxiety, LineRepeat, LineCycle, FillerLines,
    PrefixMonotony, TailRepeat, StructureFlood, BlockRepeat, SegmentRepeat, VocabCollapse,
    WordRepeat,
)
#: The rule class of each detection kind.
KINDS: dict[str, type[Rule]] = {cls.kind: cls for cls in RULE_TYPES}


# --------------------------------------------------------------------------- ruleset options

@dataclass(frozen=True, slots=True)
class RulesetOptions:
    """Options shared by every rule of a ruleset (validated here for both engines)."""

    line_window: int = 80
    min_line_chars: int = 3
    evidence_chars: int = 600
    mask_code_fences: bool = False

    def __post_init__(self) -> None:
        _int(self, "line_window", 1, _MAX_COUNT)
        _int(self, "min_line_chars", 1, MAX_PHRASE_CHARS)
        _int(self, "evidence_chars", 0, _limits.MAX_TAIL_CHARS)
        _bool(self, "mask_code_fences")


def check_rules(rules: object, options: RulesetOptions) -> tuple[Rule, ...]:
    """Validate a rule sequence against the ruleset options; return it as a tuple.

    Checks what a single rule cannot know: unique ids, thresholds that the line window can reach,
    and the limits on the phrase set.
    """
    if isinstance(rules, (str, bytes, Rule)) or not isinstance(rules, Iterable):
        raise RuleTypeError(
            f"Ruleset: rules must be a sequence of rules, got {type(rules).__name__}")
    out = tuple(rules)
    seen: set[str] = set()
    n_phrases = 0
    n_bytes = 0
    for i, rule in enumerate(out):
        if not isinstance(rule, Rule):
            raise RuleTypeError(f"Ruleset: rules[{i}] must be a rule, got {type(rule).__name__}")
        if rule.id in seen:
            raise RuleValueError(f"Ruleset: duplicate rule id {rule.id!r} (rules[{i}])")
        seen.add(rule.id)
        for name in rule.window_counts:
            value = getattr(rule, name)
            if value > options.line_window:
                raise RuleValueError(
                    f"{_who(rule)}: {name} must be at most line_window"
                    f" ({options.line_window}), got {value}; it could never be reached")
        phrases = rule.phrase_list()
        n_phrases += len(phrases)
        n_bytes += sum(len(p.encode("utf-8", "surrogatepass")) for p in phrases)
    if n_phrases > MAX_PHRASES:
        raise RuleValueError(
            f"Ruleset: rules hold {n_phrases} phrases; at most {MAX_PHRASES} are supported")
    if n_bytes > MAX_PHRASE_BYTES:
        raise RuleValueError(
            f"Ruleset: the phrases of all rules take {n_bytes} UTF-8 bytes; at most"
            f" {MAX_PHRASE_BYTES} are supported")
    return out


#: The errors both engines raise for misuse of a watcher (RuntimeError), worded once.
FINISHED_MESSAGE = "feed() after finish(); call reset() to start a new attempt"
BUSY_MESSAGE = ("this Watcher is in use by another thread; a Watcher belongs to one stream and"
                " one thread at a time")


def check_feed_channel(channel: object) -> str:
    if not isinstance(channel, str):
        raise ArgumentTypeError(f"channel must be a str, got {type(channel).__name__}")
    if channel not in FEED_CHANNELS:
        raise ArgumentValueError(f"channel must be 'text' or 'reasoning', got {channel!r}")
    return channel


def check_text(text: object, name: str = "text") -> str:
    if not isinstance(text, str):
        raise ArgumentTypeError(f"{name} must be a str, got {type(text).__name__}")
    return text


def check_splits(splits: Iterable[SupportsIndex] | None, length: int) -> list[int]:
    """Validate delta end offsets for ``replay`` (the pure-Python form; the native engine checks
    the same conditions in C): integers (``operator.index``), non-decreasing, within
    ``[0, length]``, the last equal to ``length``."""
    if splits is None:
        return [length] if length else []
    if isinstance(splits, (str, bytes)) or not isinstance(splits, Iterable):
        raise ArgumentTypeError(
            f"splits must be a sequence of int offsets, got {type(splits).__name__}")
    ends: list[int] = []
    for i, item in enumerate(splits):
        try:
            if getattr(getattr(item, "dtype", None), "kind", "") == "b":
                raise TypeError  # a numpy bool: numpy < 2.3 only warns in operator.index
            ends.append(operator.index(item))
        except TypeError:
            raise ArgumentTypeError(
                f"splits[{i}] must be an int, got {type(item).__name__}") from None
    prev = 0
    for i, end in enumerate(ends):
        if end < prev or end > length:
            raise ArgumentValueError(
                f"splits must be non-decreasing offsets in [0, len(text) = {length}];"
                f" splits[{i}] = {end} follows {prev}")
        prev = end
    if (ends[-1] if ends else 0) != length:
        raise ArgumentValueError(
            f"splits must end at len(text) = {length}, got {ends[-1] if ends else 'no splits'}")
    return ends
