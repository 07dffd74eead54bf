"""The default rules: what contextcare watches for when you do not say otherwise."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from .rules import (
    BlockRepeat,
    ContextAnxiety,
    FillerLines,
    LineCycle,
    LineRepeat,
    PrefixMonotony,
    Rule,
    SegmentRepeat,
    StructureFlood,
    TailRepeat,
    TimeAnxiety,
    VocabCollapse,
)

if TYPE_CHECKING:
    from ._engine import Ruleset

__all__ = ["default_rules", "default_ruleset", "DEFAULT_OPTIONS"]

#: Ruleset options of :func:`default_ruleset`. Lines of two characters count (real loop bodies
#: are ``好。`` and ``做。``), and fenced code never enters the line window.
DEFAULT_OPTIONS: Mapping[str, Any] = MappingProxyType({
    "line_window": 80,
    "min_line_chars": 2,
    "evidence_chars": 600,
    "mask_code_fences": True,
})


def default_rules() -> list[Rule]:
    """The default rules, abort rules first.

    Abort: ``line-repeat`` (30 of 80 lines and 35 %, or a run of 12), ``tail-repeat`` (a unit of up to 256 characters repeated back to back, newlines
    or not), ``block-repeat`` (a block of up to 128 lines or sentences repeated three times back
    to back, over at least 60 characters; inside code fences the copies must also hold 100 letters,
    and a unit of 2 or 3 lines needs a fourth copy),
    ``near-repeat-long`` (a unit of up to 32 lines repeated ten times with only its numbers
    changed; 300 letters inside fences), ``vocab-collapse``
    (80 words with at most 8 distinct ones, outside code fences), ``vocab-collapse-line`` (the
    same over 32 words all on the current line), ``near-lines`` (the last 12
    lines or sentences on one skeleton: a counter), ``near-flip`` (on at most 2 skeletons, one
    of them 8 letters or more: a word flipping in a sentence, a line and a short one alternating;
    an answer key of ``12. True`` / ``13. False`` is data),
    ``near-cycle`` (the last 60 on at most 6: short names cycling with a counter) and
    ``structure-loop`` (600 characters without a word character that repeat a unit of at most 4:
    ``# `` or ``.`` without end; art and tables are not periodic for that long). The
    near-variant rules (skeletons) do not look inside code fences: tables, enum members and
    generated cases repeat with only their numbers changed on purpose.
    Remind: ``near-repeat`` (a unit of up to 64 lines repeated four times with only its numbers
    changed), ``near-recurring`` (one skeleton on 10 of the last 32 lines, others between),
    ``structure-flood`` (600 characters without a word character),
    ``line-repeat-gentle`` (15 lines and 20 %),
    ``line-cycle``, ``filler-lines``, ``prefix-monotony``, ``time-anxiety`` and
    ``context-anxiety`` (reasoning channel only).

    Not included: :class:`~contextcare.rules.WordRepeat` (a unit of 1..20 words repeated three
    times, checked every 16 bytes: it stops a line loop at its third copy's last word, but its
    throttle costs about 12 % per fed delta and 30 % on replay; add it to the list to use it).

    Thresholds were set on ``benchmarks/quality.py`` (synthetic loop shapes, legitimate structured
    output and labelled replies of a real small model): every listed loop shape stopped, no
    legitimate text stopped.
    """
    return [
        LineRepeat("line-repeat"),
        TailRepeat("tail-repeat"),
        BlockRepeat("block-repeat", fence_letters=100),
        BlockRepeat("near-repeat-long", near=True, max_period=32, min_repeats=10, min_chars=600,
                    fence_letters=300),
        VocabCollapse("vocab-collapse"),
        VocabCollapse("vocab-collapse-line", words=32, one_line=True, every_bytes=128),
        SegmentRepeat("near-lines", window=12, top=1, min_count=12, every_bytes=256, fences=False),
        SegmentRepeat("near-flip", window=12, top=2, min_count=12, top_letters=8, every_bytes=256,
                      fences=False),
        SegmentRepeat("near-cycle", window=60, top=6, min_count=60, every_bytes=256, fences=False),
        StructureFlood("structure-loop", min_chars=600, max_period=4, every_bytes=256,
                       action="abort"),
        BlockRepeat("near-repeat", near=True, max_period=64, min_repeats=4, min_chars=200,
                    fence_letters=300, action="remind"),
        SegmentRepeat("near-recurring", window=32, top=1, min_count=10, min_letters=8,
                      every_bytes=1024, fences=False, action="remind"),
        StructureFlood("structure-flood"),
        LineRepeat("line-repeat-gentle", min_lines=30, min_count=15, min_ratio=0.2, min_run=0,
                   action="remind"),
        LineCycle("line-cycle"),
        FillerLines("filler-lines"),
        PrefixMonotony("prefix-monotony"),
        TimeAnxiety(),
        ContextAnxiety(),
    ]


def default_ruleset() -> Ruleset:
    """:func:`default_rules` compiled with :data:`DEFAULT_OPTIONS` (a native ``Ruleset``)."""
    from ._engine import Ruleset

    return Ruleset(default_rules(), **DEFAULT_OPTIONS)
