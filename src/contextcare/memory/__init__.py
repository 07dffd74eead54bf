"""Memory anchors: the "Oft-told" (常被提起) list and its forgetting curve.

A memory folder keeps a short list of the things a user keeps coming back to. The list is shown to
the model every session, so it must stay short (at most ``cap`` = 8 lines in view, about 283
tokens). When a new anchor wants in and the list is full, arithmetic decides which line sinks, not
a question to the user or the model:

* an anchor's weight is ``R = exp(-t / S)`` with ``S = 2 ** n`` days, where ``t`` is the number of
  days since the anchor's own date and ``n`` the number of distinct days on which the diary
  mentioned it after that date;
* the anchor with the lowest ``R`` sinks: its line moves, unchanged, from the Oft-told section to
  the Sunk section of the same file. Sinking is not deletion; no user line is ever rewritten;
* while the list has room nothing is ranked or reordered; R is never used for display.

Folder layout (what :func:`scaffold` creates)::

    DIR/ofttold.md     "# 常被提起 · Oft-told" (the list in view) and "## 沉底 · Sunk"
    DIR/emotions.md    "## 情绪词表 · Emotion vocabulary": the allowed #tags
    DIR/notes.md       free notes an anchor can point to
    DIR/diary/         one file per day, YYYY-MM-DD.md

Anchor lines (one anchor per top-level list item; the handle is the text before the first ``·``)::

    - 猫 · 叫小橘，三岁 → `2026-09-01` 起           a note: its own date is the 起 stamp
    - `2026-09-03` 搬家计划 · 十月底前搬完           a diary anchor: its own date is the diary date
    - Deadline dread · Monday reviews #anxious → `2026-09-05` 起

Decisions where the design note is silent (each one is tested in ``tests/test_memory.py``):

* A recall day is a diary day ``d`` with ``own date <= d <= today`` whose text contains the probe.
  The own date counts when that day's diary names the anchor: the note's second worked example
  (two recall days, own date one day ago) needs it. Days before the own date never count, so a
  line that sinks and returns, getting a new own date, starts again from n = 0 by itself.
* The probe is the handle, or the whole title when the handle is one code point or empty; both
  sides are compared after NFKC, case folding and whitespace collapsing (Latin letters are
  case-insensitive, CJK is exact).
* ``t`` is the whole-day difference ``today - own date``, clamped at 0 (a future date gives t = 0);
  ``S = 2 ** min(n, 30)``.
* Sink order: lowest R (rounded to 1e-12) first, then the older own date, then the smaller n, then
  the earlier line. An anchor without a readable date has no weight and sinks before any dated
  one; ``check`` reports it as an error so it does not stay that way.
* An emotion tag is written ``#tag`` (after whitespace or an opening bracket, not starting with a
  digit), and must be listed in a vocabulary section somewhere in the folder's top-level ``.md``
  files. A missing section is an error even when no tag is used yet.
* List items indented by two or more spaces are details of the anchor above and move with it.
  List items inside HTML comments and code fences are not anchors.
* Text inside an HTML comment never leaves the file: one stripping step (``_uncomment``) feeds the
  scanner, the parser, the injected block and the check. A comment opened on an anchor line and
  closed on a later line belongs to that anchor.
* Identity (a line already in view, a sunk line returning) uses the recall probe.
* :func:`save` is atomic and refuses to overwrite an edit made since :func:`load`
  (``overwrite=True`` on purpose). ``docs/memory.md`` says what is written and what never is.
"""

from __future__ import annotations

from .anchors import (
    ANCHOR_FILE,
    DEFAULT_CAP,
    DIARY_DIR,
    EMOTIONS_FILE,
    LIST_TOKEN_BUDGET,
    MAX_CAP,
    NOTES_FILE,
    Anchor,
    AnchorFileChangedError,
    AnchorList,
    MemoryDecodeError,
    MemoryFileError,
    parse_anchor,
)
from .block import injected_block
from .curve import (
    Admission,
    AnchorWeight,
    Reinjection,
    admit,
    days_since,
    recall_days,
    sink_order,
    stability,
    weigh,
    weight,
)
from .folder import (
    Finding,
    MemoryFolder,
    TagUse,
    check,
    load,
    load_diaries,
    save,
    scaffold,
)

__all__ = [
    "DEFAULT_CAP",
    "MAX_CAP",
    "LIST_TOKEN_BUDGET",
    "ANCHOR_FILE",
    "EMOTIONS_FILE",
    "NOTES_FILE",
    "DIARY_DIR",
    "Anchor",
    "AnchorList",
    "AnchorWeight",
    "Admission",
    "Finding",
    "MemoryFolder",
    "Reinjection",
    "TagUse",
    "parse_anchor",
    "stability",
    "weight",
    "days_since",
    "recall_days",
    "weigh",
    "sink_order",
    "admit",
    "injected_block",
    "load",
    "load_diaries",
    "save",
    "check",
    "scaffold",
    "MemoryFileError",
    "MemoryDecodeError",
    "AnchorFileChangedError",
]
