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

import errno
import hashlib
import math
import os
import re
import secrets
import stat
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from pathlib import Path
from typing import Literal

from .errors import ContextCareError, RuleTypeError, RuleValueError

__all__ = [
    "DEFAULT_CAP", "MAX_CAP", "LIST_TOKEN_BUDGET", "ANCHOR_FILE", "EMOTIONS_FILE", "NOTES_FILE",
    "DIARY_DIR", "Anchor", "AnchorList", "AnchorWeight", "Admission", "Finding", "MemoryFolder",
    "Reinjection", "TagUse", "parse_anchor", "stability", "weight", "days_since", "recall_days",
    "weigh",
    "sink_order", "admit", "injected_block", "load", "load_diaries", "save", "check", "scaffold",
    "rank_command", "check_command", "MemoryFileError", "MemoryDecodeError",
    "AnchorFileChangedError",
]

#: Most anchors in view (the design note's cap).
DEFAULT_CAP = 8
#: Largest cap accepted.
MAX_CAP = 32
#: What a full list of 8 short lines costs, in tokens, per the design note.
LIST_TOKEN_BUDGET = 283
#: ``check`` warns when the lines in view are estimated above this many tokens.
_TOKEN_WARN = LIST_TOKEN_BUDGET * 3 // 2
#: Stability of an anchor never recalled, in days (S = base * 2**n).
_BASE_STABILITY_DAYS = 1.0
#: Recall doublings beyond this do not change S (keeps 2**n finite and R meaningful).
_MAX_DOUBLINGS = 30
#: Versions of a list (the text first read, then the latest admits) ``save`` accepts on disk.
_MAX_LINEAGE = 64

ANCHOR_FILE = "ofttold.md"
EMOTIONS_FILE = "emotions.md"
NOTES_FILE = "notes.md"
DIARY_DIR = "diary"

_MIDDLE_DOT = "\u00b7"
_DATE = r"\d{4}-\d{2}-\d{2}"
#: ``→ `YYYY-MM-DD` 起`` (also ``->``, with or without the backticks and spaces).
_STAMP = re.compile(rf"(?:→|->)\s*`?({_DATE})`?\s*起")
#: The first date on a diary line, with its backticks and the spaces around it.
_DIARY_DATE = re.compile(rf"\s*(`?)(?<!\d)({_DATE})(?!\d)\1\s*")
#: A list item. ``indent`` decides top level (0–1 spaces) versus nested detail.
_ITEM = re.compile(r"^(?P<indent>[ \t]*)(?P<marker>[-*+]|\d{1,9}[.)])(?:[ \t]+(?P<body>.*))?$")
_THEMATIC_BREAK = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
#: An emotion tag: ``#`` after whitespace or an opening bracket, not followed by a digit.
_TAG = re.compile(
    r"(?<![^\s(（\[【])#(?!\d)([^\s#·,，、。.；;:：!！?？()（）\[\]【】<>\"'`]+)"
)
_DIARY_NAME = re.compile(rf"^({_DATE})\.md$")

Kind = Literal["diary", "note", "undated"]
Place = Literal["view", "sunk"]
Lang = Literal["zh", "en"]
_Section = Literal["view", "sunk", "vocabulary", "other"]


# --------------------------------------------------------------------------- errors

class MemoryFileError(ContextCareError, ValueError):
    """A file of a memory folder cannot be used as it is. ``str(error)`` is ``"path: reason"``;
    the parts are :attr:`path` and :attr:`reason`."""

    def __init__(self, path: str | os.PathLike[str], reason: str, *details: object) -> None:
        super().__init__(Path(path), reason, *details)
        self.path = Path(path)
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class MemoryDecodeError(MemoryFileError, UnicodeError):
    """A file of a memory folder is not UTF-8. :attr:`offset` is the byte offset of the first
    byte that cannot be decoded (it is also in the message, with its line)."""

    def __init__(self, path: str | os.PathLike[str], reason: str, offset: int) -> None:
        super().__init__(path, reason, offset)
        self.offset = offset


class AnchorFileChangedError(MemoryFileError):
    """:func:`save` refused to replace the anchor file: it no longer holds the text the list was
    read from (someone edited it since :func:`load`), so writing would lose that edit."""


# --------------------------------------------------------------------------- small helpers

def _norm(text: str) -> str:
    """Matching form: NFKC, case folded, whitespace runs collapsed to one space, trimmed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _check_today(today: object, name: str = "today") -> date:
    if isinstance(today, datetime):
        return today.date()
    if not isinstance(today, date):
        raise RuleTypeError(f"{name} must be a datetime.date, got {type(today).__name__}")
    return today


def _check_cap(cap: object) -> int:
    if isinstance(cap, bool) or not isinstance(cap, int):
        raise RuleTypeError(f"cap must be an int, got {type(cap).__name__}")
    if not 1 <= cap <= MAX_CAP:
        raise RuleValueError(f"cap must be in [1, {MAX_CAP}], got {cap}")
    return cap


def _check_lang(lang: object) -> Lang:
    if lang == "zh":
        return "zh"
    if lang == "en":
        return "en"
    raise RuleValueError(f"lang must be 'zh' or 'en', got {lang!r}")


def _check_encodable(text: str, name: str) -> bytes:
    """``text`` as UTF-8; a lone surrogate (which no UTF-8 file can hold) is a ``RuleValueError``
    naming the argument, the line and the character."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        line = text.count("\n", 0, exc.start) + 1
        column = exc.start - (text.rfind("\n", 0, exc.start) + 1) + 1
        where = f"line {line}, character {column}" if "\n" in text else f"character {column}"
        raise RuleValueError(
            f"{name}: {where} is U+{ord(text[exc.start]):04X}, a lone surrogate, which cannot be"
            " written as UTF-8") from None


def _strip_marker(text: str) -> str:
    """The text of a list item without its marker; other text unchanged (both trimmed)."""
    match = _ITEM.match(text.strip())
    if match and not _THEMATIC_BREAK.match(text):
        return (match.group("body") or "").strip()
    return text.strip()


def _estimate_tokens(text: str) -> int:
    """A rough token count: one per wide (CJK) character, one per four other characters."""
    wide = sum(1 for ch in text if unicodedata.east_asian_width(ch) in "WF")
    return wide + math.ceil((len(text) - wide) / 4)


# --------------------------------------------------------------------------- one anchor

@dataclass(frozen=True)
class Anchor:
    """One anchor line, parsed. The line itself (:attr:`text`, without its line ending and
    without a byte-order mark) is never changed by this module. ``title``, ``handle`` and the
    date are read from the line with its HTML comments taken out, so nothing written inside a
    comment ever reaches them.

    ``lineno`` is the 1-based line in the anchor file (0 for an anchor that is not in a file);
    ``place`` says whether the line is in view (Oft-told section) or sunk; ``bad_date`` holds an
    impossible date such as ``2026-02-30`` that was written where a date belongs; ``tail`` is what
    a note has after its ``起`` stamp (not part of the title, but shown, so its tags count).
    """

    text: str
    title: str
    handle: str
    own_date: date | None
    kind: Kind
    lineno: int = 0
    place: Place = "view"
    bad_date: str = ""
    tail: str = ""

    @property
    def short_handle(self) -> bool:
        """True when the handle is one code point or empty, so the whole title is the probe."""
        return len(self.handle) <= 1

    @property
    def probe(self) -> str:
        """The normalised text searched for in the diary when counting recalls."""
        return _norm(self.title if self.short_handle else self.handle)

    @property
    def tags(self) -> tuple[str, ...]:
        """The ``#tags`` in the title (and in the tail after a stamp), without the ``#``, in
        order."""
        return tuple(_TAG.findall(self.title)) + tuple(_TAG.findall(self.tail))


def parse_anchor(text: str, *, lineno: int = 0, place: Place = "view") -> Anchor:
    """Parse one anchor line (the list marker is optional).

    Own date: the last ``→ `YYYY-MM-DD` 起`` stamp makes a note dated by the stamp, and the title
    is the text before its arrow; otherwise the first ``YYYY-MM-DD`` on the line makes a diary
    anchor, and that date (with its backticks) is taken out of the title; otherwise the anchor is
    undated. The handle is the title up to the first ``·``, trimmed. HTML comments are not part
    of the anchor: a comment that opens on the line and does not close there hides the rest of it.
    """
    if not isinstance(text, str):
        raise RuleTypeError(f"text must be a str, got {type(text).__name__}")
    raw = text.rstrip("\r\n").lstrip("\ufeff")
    return _parse(raw, _uncomment([raw])[0].visible, lineno, place)


def _parse(raw: str, visible: str, lineno: int, place: Place) -> Anchor:
    """The anchor of line ``raw`` as seen through :func:`_uncomment` (``visible``): the title,
    handle and date come from the visible text only; ``raw`` is kept as the anchor's text."""
    body = _strip_marker(visible)
    own: date | None = None
    bad = tail = ""
    kind: Kind = "undated"
    stamps = list(_STAMP.finditer(body))
    if stamps:
        last = stamps[-1]
        title, tail = body[: last.start()].strip(), body[last.end():].strip()
        kind, found = "note", last.group(1)
    else:
        first = _DIARY_DATE.search(body)
        found = first.group(2) if first else ""
        if first:
            kind = "diary"
            title = (body[: first.start()] + " " + body[first.end():]).strip()
        else:
            title = body
    if found:
        try:
            own = date.fromisoformat(found)
        except ValueError:
            kind, bad = "undated", found
    handle = title.split(_MIDDLE_DOT, 1)[0].strip()
    return Anchor(raw, title, handle, own, kind, lineno, place, bad, tail)


# --------------------------------------------------------------------------- the anchor file

@dataclass(frozen=True)
class _Line:
    kind: Literal["blank", "text", "heading", "item", "comment", "code"]
    section: _Section
    visible: str = ""       # the line as shown: see _uncomment
    level: int = 0          # heading level (1-6); 0 for other lines
    top: bool = False       # a list item at top level (indent < 2 columns)
    comment_from: int = -1  # for lines inside a multi-line comment: where the comment opened


def _digest(text: str) -> str:
    """The digest of a text as its UTF-8 file holds it (lone surrogates, which no UTF-8 file can
    hold, are digested as they are, so such a text never matches a file)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _derive(parent: AnchorList, text: str) -> AnchorList:
    """``text`` parsed as the next version of ``parent``: it inherits the parent's lineage."""
    child = AnchorList.parse(text)
    lineage = parent.lineage + child.lineage
    if len(lineage) > _MAX_LINEAGE:  # keep the text first read and the latest versions
        lineage = lineage[:1] + lineage[-(_MAX_LINEAGE - 1):]
    return replace(child, lineage=lineage)


def _split_lines(text: str) -> list[str]:
    """Lines with their ``\\n`` kept, so ``"".join`` gives the text back exactly."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _heading_class(title: str) -> _Section:
    key = _norm(title.lstrip("\ufeff"))
    if "沉底" in key or "sunk" in key:
        return "sunk"
    if "情绪词表" in key or "emotion vocabulary" in key:
        return "vocabulary"
    if "常被提起" in key or "oft-told" in key:
        return "view"
    return "other"


def _uncomment(lines: Sequence[str]) -> list[_Line]:
    """The one comment-stripping step: every reader of a memory file sees lines through it.

    Each line comes back with its ``visible`` text: the line without its line ending (and without
    a byte-order mark on the first line), with every HTML comment taken out. A comment may close on
    the line it opens on (it becomes one space), or on a later line: then the rest of the opening
    line, every line in between and the closing line up to its ``-->`` are hidden, and
    ``comment_from`` of the lines after the opening one names the line that opened it. A comment
    that never closes hides everything after its ``<!--``. Lines of a fenced code block are code,
    shown as written (``<!--`` in code is text). ``kind`` is ``"code"``, ``"comment"`` (a line
    inside a multi-line comment, or one that holds nothing but comments) or ``"text"`` for now;
    :func:`_scan` classifies the text lines further.
    """
    out: list[_Line] = []
    comment_from = -1
    fence = ""
    for index, line in enumerate(lines):
        raw = line.rstrip("\r\n")
        if index == 0:
            raw = raw.lstrip("\ufeff")
        if fence:
            if raw.strip().startswith(fence):
                fence = ""
            out.append(_Line("code", "other", visible=raw))
            continue
        opened = comment_from
        tail = raw
        if opened >= 0:
            close = raw.find("-->")
            if close < 0:
                out.append(_Line("comment", "other", comment_from=opened))
                continue
            comment_from, tail = -1, " " + raw[close + 3:]
        elif fence_match := _FENCE.match(raw):
            fence = fence_match.group(1)
            out.append(_Line("code", "other", visible=raw))
            continue
        visible = _COMMENT.sub(" ", tail)
        if "<!--" in visible:
            comment_from = index
            visible = visible.split("<!--", 1)[0]
        if opened >= 0:  # the closing line of a comment is part of it; what follows is shown
            out.append(_Line("comment", "other", visible=visible, comment_from=opened))
        elif not visible.strip() and "<!--" in raw:
            out.append(_Line("comment", "other", visible=visible))
        else:
            out.append(_Line("text", "other", visible=visible))
    return out


def _scan(lines: Sequence[str]) -> list[_Line]:
    """Classify every line (seen through :func:`_uncomment`) and assign it a section."""
    shapes: list[_Line] = []          # pass 1: kinds (sections filled in by pass 2)
    classes: list[_Section] = []      # the section a heading line names ("other" for the rest)
    for shape in _uncomment(lines):
        cls: _Section = "other"
        if shape.kind == "text":
            visible = shape.visible
            heading = _HEADING.match(visible)
            item = _ITEM.match(visible)
            if not visible.strip():
                shape = replace(shape, kind="blank")
            elif heading:
                cls = _heading_class((heading.group(2) or "").rstrip("#").strip())
                shape = replace(shape, kind="heading", level=len(heading.group(1)))
            elif item and item.group("body") and not _THEMATIC_BREAK.match(visible):
                top = len(item.group("indent").expandtabs(4)) < 2
                shape = replace(shape, kind="item", top=top)
        shapes.append(shape)
        classes.append(cls)
    has_view = "view" in classes
    section: _Section = "other" if has_view else "view"
    section_level = 0  # 0: the headless preamble, which any heading ends
    out: list[_Line] = []
    for shape, cls in zip(shapes, classes):
        if shape.kind == "heading" and (
                cls != "other" or section_level == 0 or shape.level <= section_level):
            section, section_level = cls, shape.level
        out.append(replace(shape, section=section))
    return out


@dataclass(frozen=True)
class AnchorList:
    """The anchor file, parsed, with every line kept byte for byte.

    :meth:`render` gives back exactly the text that was parsed. The only edits this module makes
    are :func:`admit`'s: insert one new line at the end of the Oft-told list, and move a sunk
    anchor's lines (unchanged) to the end of the Sunk section.

    ``lineage`` (not part of equality) holds digests of the texts this list descends from: the
    text it was parsed from, then one per :func:`admit`. :func:`save` replaces a file only when
    the file still holds one of them, so an edit made since the list was read is never lost.
    """

    lines: tuple[str, ...]
    anchors: tuple[Anchor, ...]
    lineage: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def parse(cls, text: str) -> AnchorList:
        """Parse the anchor file's text. Anchors are top-level list items of the Oft-told section
        (in view) and of the Sunk section (sunk); a file without an Oft-told heading keeps its
        list in view before its first heading."""
        if not isinstance(text, str):
            raise RuleTypeError(f"text must be a str, got {type(text).__name__}")
        lines = _split_lines(text)
        anchors = []
        for index, info in enumerate(_scan(lines)):
            if info.kind == "item" and info.top and info.section in ("view", "sunk"):
                place: Place = "view" if info.section == "view" else "sunk"
                raw = lines[index].rstrip("\r\n")
                raw = raw.lstrip("\ufeff") if index == 0 else raw
                anchors.append(_parse(raw, info.visible, index + 1, place))
        return cls(tuple(lines), tuple(anchors), (_digest(text),))

    def render(self) -> str:
        """The file's text."""
        return "".join(self.lines)

    @property
    def in_view(self) -> tuple[Anchor, ...]:
        """The anchors in the Oft-told section, in list order (the order they are injected in)."""
        return tuple(a for a in self.anchors if a.place == "view")

    @property
    def sunk(self) -> tuple[Anchor, ...]:
        """The anchors in the Sunk section, in file order."""
        return tuple(a for a in self.anchors if a.place == "sunk")

    @property
    def newline(self) -> str:
        """The file's line ending (from its first line), used for lines this module adds."""
        return "\r\n" if self.lines and self.lines[0].endswith("\r\n") else "\n"


def _block_end(lines: Sequence[str], infos: Sequence[_Line], start: int) -> int:
    """One past the last line of the anchor at ``start``: its nested details and any comment it
    opened belong to it."""
    end = start + 1
    while end < len(lines):
        info = infos[end]
        if info.kind == "comment" and info.comment_from >= start:
            end += 1
        elif (info.kind in ("text", "item", "code") and not info.top
              and lines[end][:1] in (" ", "\t") and info.section == infos[start].section):
            end += 1
        else:
            break
    return end


def _append_point(infos: Sequence[_Line], section: _Section) -> int | None:
    """Where a line joins the end of ``section``: after its last non-blank line (None if absent)."""
    last: int | None = None
    for index, info in enumerate(infos):
        if info.section == section and info.kind != "blank":
            last = index
    return None if last is None else last + 1


def _with_newline(lines: list[str], index: int, newline: str) -> None:
    """Make sure the line before ``index`` ends, so text can be inserted at ``index``."""
    if index > 0 and not lines[index - 1].endswith("\n"):
        lines[index - 1] += newline


def _lines_for_edit(anchors: AnchorList) -> tuple[list[str], str]:
    """The lines of ``anchors`` ready for an edit, and the byte-order mark taken off the first
    line (if any): :func:`_edited` puts it back at the start of the file, wherever lines moved."""
    lines = list(anchors.lines)
    bom = "\ufeff" if lines and lines[0].startswith("\ufeff") else ""
    if bom:
        lines[0] = lines[0][1:]
    return lines, bom


def _edited(anchors: AnchorList, lines: list[str], bom: str) -> AnchorList:
    if bom:
        lines[0] = bom + lines[0]
    return _derive(anchors, "".join(lines))


def _insert_in_view(anchors: AnchorList, line: str) -> AnchorList:
    lines, bom = _lines_for_edit(anchors)
    infos = _scan(lines)
    newline = anchors.newline
    view = anchors.in_view
    if view:
        at = _block_end(lines, infos, view[-1].lineno - 1)
    else:
        at = _append_point(infos, "view") or 0
    _with_newline(lines, at, newline)
    lines.insert(at, line + newline)
    return _edited(anchors, lines, bom)


def _move_to_sunk(anchors: AnchorList, anchor: Anchor) -> AnchorList:
    lines, bom = _lines_for_edit(anchors)
    infos = _scan(lines)
    newline = anchors.newline
    start = anchor.lineno - 1
    end = _block_end(lines, infos, start)
    block = lines[start:end]
    if not block[-1].endswith("\n"):
        block[-1] += newline
    del lines[start:end]
    infos = _scan(lines)
    at = _append_point(infos, "sunk")
    if at is None:
        levels = [i.level for i in infos if i.kind == "heading" and i.section == "view"]
        heading = "#" * (levels[0] if levels else 2) + " 沉底 · Sunk"
        at = len(lines)
        _with_newline(lines, at, newline)
        gap = [newline] if lines and lines[-1].strip() else []
        block = gap + [heading + newline, newline] + block
    _with_newline(lines, at, newline)
    lines[at:at] = block
    return _edited(anchors, lines, bom)


# --------------------------------------------------------------------------- the curve

def stability(n: int) -> float:
    """``S = 2 ** n`` days (base stability 1 day), doubling per distinct recall day, n capped at
    30."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise RuleTypeError(f"n must be an int, got {type(n).__name__}")
    if n < 0:
        raise RuleValueError(f"n must be >= 0, got {n}")
    return _BASE_STABILITY_DAYS * 2.0 ** min(n, _MAX_DOUBLINGS)


def weight(n: int, t: float) -> float:
    """``R = exp(-t / S)``: 1 on the anchor's own date, decaying slower the more often it came
    back. ``t`` is in days, ``>= 0``."""
    if isinstance(t, bool) or not isinstance(t, (int, float)):
        raise RuleTypeError(f"t must be a number of days, got {type(t).__name__}")
    if not t >= 0:
        raise RuleValueError(f"t must be >= 0 days, got {t}")
    return math.exp(-t / stability(n))


def days_since(own_date: date, today: date) -> int:
    """Whole calendar days from ``own_date`` to ``today``, 0 when ``own_date`` is in the future."""
    return max(0, (_check_today(today) - _check_today(own_date, "own_date")).days)


def _check_diaries(diaries: object) -> Mapping[date, str]:
    if not isinstance(diaries, Mapping):
        raise RuleTypeError(
            f"diaries must be a mapping of date to text, got {type(diaries).__name__}")
    for key, value in diaries.items():
        if not isinstance(key, date) or isinstance(key, datetime) or not isinstance(value, str):
            raise RuleTypeError(
                f"diaries must map datetime.date to str, got {type(key).__name__} -> "
                f"{type(value).__name__}")
    return diaries


def _recalls(anchor: Anchor, normalised: Mapping[date, str], today: date) -> frozenset[date]:
    probe = anchor.probe
    if not probe:
        return frozenset()
    since = anchor.own_date or date.min
    return frozenset(d for d, text in normalised.items() if since <= d <= today and probe in text)


def recall_days(anchor: Anchor, diaries: Mapping[date, str], *, today: date) -> frozenset[date]:
    """The days on which the diary mentions the anchor: days from its own date up to today whose
    text contains its probe. Any number of mentions on one day is one day."""
    today = _check_today(today)
    normalised = {d: _norm(text) for d, text in _check_diaries(diaries).items()}
    return _recalls(anchor, normalised, today)


@dataclass(frozen=True)
class AnchorWeight:
    """An anchor weighed on a given day. ``t``, ``stability`` and ``weight`` are None for an
    anchor without a readable date."""

    anchor: Anchor
    n: int
    t: int | None
    stability: float
    weight: float | None
    days: tuple[date, ...]

    def sort_key(self) -> tuple[float, date, int, int]:
        """Sink order: lowest R, then older own date, then smaller n, then earlier line."""
        r = -1.0 if self.weight is None else round(self.weight, 12)
        return (r, self.anchor.own_date or date.min, self.n, self.anchor.lineno)


def weigh(anchors: Iterable[Anchor], diaries: Mapping[date, str], *,
          today: date) -> list[AnchorWeight]:
    """Weigh each anchor on ``today`` against the diary, in the order given."""
    today = _check_today(today)
    normalised = {d: _norm(text) for d, text in _check_diaries(diaries).items()}
    out = []
    for anchor in anchors:
        days = _recalls(anchor, normalised, today)
        n = len(days)
        s = stability(n)
        if anchor.own_date is None:
            out.append(AnchorWeight(anchor, n, None, s, None, tuple(sorted(days))))
        else:
            t = days_since(anchor.own_date, today)
            out.append(AnchorWeight(anchor, n, t, s, weight(n, t), tuple(sorted(days))))
    return out


def sink_order(weights: Iterable[AnchorWeight]) -> list[AnchorWeight]:
    """The weights sorted so the first is the next to sink."""
    return sorted(weights, key=AnchorWeight.sort_key)


# --------------------------------------------------------------------------- admission

@dataclass(frozen=True)
class Admission:
    """What :func:`admit` did: the list after it, the line it added, the anchors it sank (none
    while the list had room) and whether the new line was a sunk line coming back."""

    anchors: AnchorList
    added: Anchor
    sunk: tuple[AnchorWeight, ...]
    returned: bool


def admit(anchors: AnchorList, new: str | Anchor, *, today: date, cap: int = DEFAULT_CAP,
          diaries: Mapping[date, str] | None = None) -> Admission:
    """Add one anchor to the Oft-told list.

    While the list has fewer than ``cap`` anchors in view, the new line is appended and nothing is
    weighed. When it is full, the anchor in view with the lowest weight (see :func:`sink_order`)
    sinks first: its line moves unchanged to the Sunk section. The new anchor is never the one
    that sinks.

    ``new`` is one line (list marker optional). An undated line is stamped ``→ `today` 起``. A line
    whose probe (see :attr:`Anchor.probe`: the handle, or the whole title when the handle is one
    character or empty) matches a sunk anchor's returns as new: it is written with today's stamp,
    so its date and its recall count restart; the old sunk line stays where it is. A probe already
    in view is an error (edit that line by hand; this function never rewrites a user's line).
    Identity and recall counting use the same probe.

    ``new`` must be text a UTF-8 file can hold (no lone surrogates such as ``"\\ud800"``).
    """
    if not isinstance(anchors, AnchorList):
        raise RuleTypeError(f"anchors must be an AnchorList, got {type(anchors).__name__}")
    today = _check_today(today)
    cap = _check_cap(cap)
    if diaries is not None:
        diaries = _check_diaries(diaries)
    text = new.text if isinstance(new, Anchor) else new
    if not isinstance(text, str):
        raise RuleTypeError(f"new must be a str or an Anchor, got {type(new).__name__}")
    _check_encodable(text, "new")
    if "\n" in text.strip() or "\r" in text.strip():
        raise RuleValueError("new must be one line: one anchor per list item")
    if "<!--" in text or "-->" in text:
        raise RuleValueError("new must not contain an HTML comment")
    incoming = parse_anchor(text)
    if not incoming.title:
        raise RuleValueError(f"new must have a title, got {text!r}")
    key = incoming.probe
    for anchor in anchors.in_view:
        if anchor.probe == key:
            what = "title" if incoming.short_handle else "handle"
            name = incoming.title if incoming.short_handle else incoming.handle
            raise RuleValueError(
                f"new: an anchor with {what} {name!r} is already in view at line "
                f"{anchor.lineno}; edit that line by hand")
    returned = any(a.probe == key for a in anchors.sunk)
    if returned or incoming.own_date is None:
        line = f"- {incoming.title} → `{today.isoformat()}` 起"
    else:
        line = "- " + _strip_marker(incoming.text)
    sunk: list[AnchorWeight] = []
    current = anchors
    while len(current.in_view) >= cap:  # more than once only for a list over its cap
        lowest = sink_order(weigh(current.in_view, diaries or {}, today=today))[0]
        sunk.append(lowest)
        current = _move_to_sunk(current, lowest.anchor)
    current = _insert_in_view(current, line)
    added = next((a for a in current.in_view if a.text == line), None)
    moved = [a.text for a in current.sunk]
    if added is None or any(w.anchor.text not in moved for w in sunk):
        raise RuleValueError(
            "anchors: an unclosed HTML comment or code fence hides the end of the anchor file;"
            " close it, then add the anchor")
    return Admission(current, added, tuple(sunk), returned)


# --------------------------------------------------------------------------- re-injection

class Reinjection:
    """When to inject the list into a session: once at its start, then again after every
    ``refresh_after_messages`` counted messages (0, the default, means never again).

    Counted messages are user and assistant messages; tool results, system messages and this
    plugin's own notices are not. Use: call :meth:`due` at each step boundary; when it is True,
    inject :func:`injected_block` and call :meth:`injected`.
    """

    COUNTED_ROLES = ("user", "assistant")

    def __init__(self, refresh_after_messages: int = 0) -> None:
        value = refresh_after_messages
        if isinstance(value, bool) or not isinstance(value, int):
            raise RuleTypeError(
                f"refresh_after_messages must be an int, got {type(value).__name__}")
        if value < 0:
            raise RuleValueError(f"refresh_after_messages must be >= 0 (0 = never), got {value}")
        self.refresh_after_messages = value
        self._injections = 0
        self._since = 0

    def message(self, role: str, *, own_notice: bool = False) -> None:
        """Count one message appended to the session (``role`` as in a chat message: ``"user"``,
        ``"assistant"``, ``"tool"``, ``"system"``, …)."""
        if not isinstance(role, str):
            raise RuleTypeError(f"role must be a str, got {type(role).__name__}")
        if not isinstance(own_notice, bool):
            raise RuleTypeError(f"own_notice must be a bool, got {type(own_notice).__name__}")
        if role in self.COUNTED_ROLES and not own_notice:
            self._since += 1

    def due(self) -> bool:
        """True when the list should be injected at this step boundary."""
        if self._injections == 0:
            return True
        n = self.refresh_after_messages
        return n > 0 and self._since >= n

    def injected(self) -> None:
        """Record that the list was injected now; the message counter restarts."""
        self._injections += 1
        self._since = 0


# --------------------------------------------------------------------------- findings

@dataclass(frozen=True)
class Finding:
    """One result of :func:`check`. An ``error`` makes the folder fail the check."""

    level: Literal["error", "warning"]
    code: str
    en: str
    zh: str
    file: str = ""
    lineno: int = 0

    def where(self) -> str:
        """``file:line`` (or just the file, or nothing)."""
        if not self.file:
            return ""
        return f"{self.file}:{self.lineno}" if self.lineno else self.file

    def text(self, lang: Lang = "en") -> str:
        """The finding as one line, with its place."""
        where = self.where()
        body = self.zh if _check_lang(lang) == "zh" else self.en
        return f"{where}: {body}" if where else body


@dataclass(frozen=True)
class TagUse:
    """One ``#tag`` written in a list item: the file, its 1-based line and the tag (no ``#``)."""

    file: str
    lineno: int
    tag: str


@dataclass(frozen=True)
class MemoryFolder:
    """A memory folder as read from disk by :func:`load`."""

    path: Path
    has_anchor_file: bool
    anchors: AnchorList
    diaries: Mapping[date, str]
    vocabulary: frozenset[str] | None
    tag_uses: tuple[TagUse, ...]
    stray_diary_files: tuple[str, ...]


def _read(path: Path) -> str:
    """The text of a memory file, exactly (line endings and a byte-order mark kept). A file that is
    not UTF-8 raises :class:`MemoryDecodeError` naming it, the byte offset and the line."""
    with open(path, "rb") as handle:
        data = handle.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        bad = data[exc.start:exc.end].hex(" ")
        raise MemoryDecodeError(
            path, f"not UTF-8 at byte {exc.start} (line {line}): {exc.reason} 0x{bad};"
            " save the file as UTF-8", exc.start) from None


def _diary_day(name: str) -> date | None:
    """The date a diary file name stands for, or None when it is not ``YYYY-MM-DD.md``."""
    match = _DIARY_NAME.match(name)
    try:
        return date.fromisoformat(match.group(1)) if match else None
    except ValueError:
        return None


def load_diaries(directory: str | os.PathLike[str]) -> dict[date, str]:
    """The diary of a memory folder: ``diary/YYYY-MM-DD.md`` files, by date (others skipped)."""
    folder = Path(directory) / DIARY_DIR
    out: dict[date, str] = {}
    if folder.is_dir():
        for path in sorted(folder.iterdir()):
            day = _diary_day(path.name)
            if day is not None and path.is_file():
                out[day] = _read(path).lstrip("\ufeff")
    return out


def _vocabulary_and_tags(files: Mapping[str, str]) -> tuple[frozenset[str] | None, list[TagUse]]:
    vocabulary: set[str] | None = None
    uses: list[TagUse] = []
    for name, text in files.items():
        lines = _split_lines(text)
        for index, info in enumerate(_scan(lines)):
            if info.section == "vocabulary":
                if info.kind == "heading":
                    vocabulary = vocabulary or set()
                elif info.kind in ("item", "text"):
                    words = re.split(r"[\s,，、/／;；]+", _strip_marker(info.visible))
                    vocabulary = (vocabulary or set()) | {
                        _norm(w.lstrip("#")) for w in words if w.lstrip("#")}
            elif info.kind == "item":  # tags as the parser reads them (a stamp is not a tag)
                item = _parse(lines[index].rstrip("\r\n"), info.visible, index + 1, "view")
                uses += [TagUse(name, index + 1, tag) for tag in item.tags]
    return (None if vocabulary is None else frozenset(vocabulary)), uses


def load(directory: str | os.PathLike[str]) -> MemoryFolder:
    """Read a memory folder: the anchor file, the diary, the vocabulary and every ``#tag`` used in
    a list item of its top-level ``.md`` files."""
    if not isinstance(directory, (str, os.PathLike)):
        raise RuleTypeError(f"directory must be a path, got {type(directory).__name__}")
    path = Path(directory)
    if not path.is_dir():
        raise RuleValueError(f"directory {str(path)!r} is not a directory")
    files = {p.name: _read(p) for p in sorted(path.glob("*.md")) if p.is_file()}
    has_anchor_file = ANCHOR_FILE in files
    anchors = AnchorList.parse(files.get(ANCHOR_FILE, ""))
    vocabulary, uses = _vocabulary_and_tags(files)
    diary_dir = path / DIARY_DIR
    diaries = load_diaries(path)
    stray = tuple(
        f"{DIARY_DIR}/{p.name}" for p in sorted(diary_dir.iterdir())
        if p.is_file() and _diary_day(p.name) is None
    ) if diary_dir.is_dir() else ()
    return MemoryFolder(path, has_anchor_file, anchors, diaries, vocabulary, tuple(uses), stray)


def save(directory: str | os.PathLike[str], anchors: AnchorList, *,
         overwrite: bool = False) -> Path:
    """Write ``anchors`` as the anchor file of a memory folder, byte for byte as rendered, in one
    atomic step; return the file's path.

    The text is checked and encoded first, then written to a temporary file in the same directory,
    flushed and fsynced, given the original's permission bits, and renamed over the original in
    one step (``os.replace``). On any failure (a full disk, a failed fsync or rename, text that
    UTF-8 cannot hold, a wrong argument) the original file is left exactly as it was and the
    temporary file is removed. A symlinked anchor file stays a link: its target is replaced.

    Change detection: the file is replaced only while it still holds a text ``anchors`` descends
    from (the text :func:`load` read, or one a previous ``save`` of this list's ancestors wrote).
    If someone edited the file in between, :class:`AnchorFileChangedError` is raised and nothing
    is written; load again and redo the change, or pass ``overwrite=True`` to replace the file
    anyway. A missing file is created (nothing can be lost).
    """
    if not isinstance(directory, (str, os.PathLike)):
        raise RuleTypeError(f"directory must be a path, got {type(directory).__name__}")
    if not isinstance(anchors, AnchorList):
        raise RuleTypeError(f"anchors must be an AnchorList, got {type(anchors).__name__}")
    if not isinstance(overwrite, bool):
        raise RuleTypeError(f"overwrite must be a bool, got {type(overwrite).__name__}")
    data = _check_encodable(anchors.render(), "anchors")
    folder = Path(directory)
    if not folder.is_dir():
        raise RuleValueError(f"directory {str(folder)!r} is not a directory")
    path = folder / ANCHOR_FILE
    target = Path(os.path.realpath(path))  # a symlink stays a link; its target is written
    if _unchanged_or_refuse(target, anchors, data, overwrite):
        return path
    try:
        mode: int | None = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = None
    temp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        if mode is not None:
            os.chmod(temp, mode)
        if _unchanged_or_refuse(target, anchors, data, overwrite):  # written meanwhile
            os.unlink(temp)
            return path
        os.replace(temp, target)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
    _fsync_directory(target.parent)
    return path


def _unchanged_or_refuse(target: Path, anchors: AnchorList, data: bytes, overwrite: bool) -> bool:
    """True when ``target`` already holds ``data`` (nothing to write); raise
    :class:`AnchorFileChangedError` when it holds a text ``anchors`` does not descend from."""
    try:
        with open(target, "rb") as handle:
            current = handle.read()
    except FileNotFoundError:
        return False
    if current == data:
        return True
    if overwrite or hashlib.sha256(current).hexdigest() in anchors.lineage:
        return False
    reason = ("changed since it was loaded" if anchors.lineage
              else "holds text this list was not read from")
    raise AnchorFileChangedError(
        target, f"{reason}; saving would lose that text. Load the folder again and redo the"
        " change, or save with overwrite=True to replace the file anyway")


def _write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` (``os.write`` may write less than asked)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(errno.EIO, "write wrote nothing")
        view = view[written:]


def _fsync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` durable (POSIX); best effort: the rename is done already."""
    if os.name != "posix":
        return
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def check(folder: MemoryFolder, *, cap: int = DEFAULT_CAP) -> list[Finding]:
    """Check a memory folder. Errors: no anchor file, no vocabulary section, a ``#tag`` outside
    the vocabulary, more than ``cap`` anchors in view, an anchor without a readable date.
    Warnings: a one-character handle, a duplicate handle in view, an empty vocabulary, a diary file
    with another name, a list in view estimated well above its token budget."""
    cap = _check_cap(cap)
    found: list[Finding] = []

    def add(level: Literal["error", "warning"], code: str, en: str, zh: str,
            file: str = "", lineno: int = 0) -> None:
        found.append(Finding(level, code, en, zh, file, lineno))

    if not folder.has_anchor_file:
        add("error", "no-anchor-file",
            f"no {ANCHOR_FILE}: not a memory folder (create one with `contextcare memory init`)",
            f"缺少 {ANCHOR_FILE}：这不是记忆文件夹（可用 `contextcare memory init` 建立）")
    if folder.vocabulary is None:
        add("error", "no-vocabulary",
            "no emotion vocabulary section (a heading such as `## 情绪词表 · Emotion vocabulary`"
            f" listing the allowed tags); {len(folder.tag_uses)} tag(s) in use cannot be checked",
            "缺少情绪词表一节（标题如 `## 情绪词表 · Emotion vocabulary`，下列可用的标签）；"
            f"{len(folder.tag_uses)} 个标签无从核对")
    else:
        allowed = sorted(folder.vocabulary)
        shown = ", ".join(allowed) or "none"
        if not allowed:
            add("warning", "empty-vocabulary", "the emotion vocabulary section is empty",
                "情绪词表一节是空的")
        for use in folder.tag_uses:
            if _norm(use.tag) not in folder.vocabulary:
                add("error", "unknown-tag",
                    f"emotion tag #{use.tag} is not in the emotion vocabulary (allowed: {shown})",
                    f"情绪标签 #{use.tag} 不在情绪词表中（可用：{'、'.join(allowed) or '无'}）",
                    use.file, use.lineno)
    view = folder.anchors.in_view
    if len(view) > cap:
        add("error", "over-cap", f"{len(view)} anchors in view, more than the cap of {cap}",
            f"在列 {len(view)} 条，超过上限 {cap} 条", ANCHOR_FILE)
    seen: dict[str, Anchor] = {}
    for anchor in folder.anchors.anchors:
        name = anchor.handle or anchor.title
        if anchor.bad_date:
            add("error", "bad-date", f"anchor {name!r} has an impossible date {anchor.bad_date}",
                f"锚点「{name}」的日期 {anchor.bad_date} 不存在", ANCHOR_FILE, anchor.lineno)
        elif anchor.own_date is None:
            add("error", "no-date",
                f"anchor {name!r} has no date: end it with → `YYYY-MM-DD` 起",
                f"锚点「{name}」没有日期：请在行尾加 → `YYYY-MM-DD` 起", ANCHOR_FILE, anchor.lineno)
        if anchor.short_handle:
            add("warning", "short-handle",
                f"handle {anchor.handle!r} is one character or empty; recalls are counted on the"
                " whole title", f"称呼「{anchor.handle}」只有一个字或为空，按整行标题统计提起次数",
                ANCHOR_FILE, anchor.lineno)
        if anchor.place == "view":
            key = anchor.probe  # what identifies an anchor is what its recalls are counted on
            if key in seen:
                add("warning", "duplicate-handle",
                    f"handle {anchor.handle!r} is also at line {seen[key].lineno}; both count the"
                    " same recalls", f"称呼「{anchor.handle}」与第 {seen[key].lineno} 行重复，"
                    "两行会计入同样的提起次数", ANCHOR_FILE, anchor.lineno)
            else:
                seen[key] = anchor
    for name in folder.stray_diary_files:
        add("warning", "bad-diary-name", f"{name} is not named YYYY-MM-DD.md, so it is not read",
            f"{name} 不是 YYYY-MM-DD.md 这样的文件名，不会被读取")
    tokens = _estimate_tokens("\n".join(_shown(folder.anchors)))
    if tokens > _TOKEN_WARN:
        add("warning", "over-budget",
            f"the lines in view are about {tokens} tokens; a full list should cost about"
            f" {LIST_TOKEN_BUDGET}", f"在列各行约 {tokens} 个 token；满列约 {LIST_TOKEN_BUDGET} 即可",
            ANCHOR_FILE)
    return found


# --------------------------------------------------------------------------- the injected block

_TEXTS: dict[str, dict[Lang, str]] = {
    "header": {
        "zh": "常被提起（用户一再回到的事，放在这里作背景；不是待办，不必逐条回应）",
        "en": "Oft-told: things this user keeps coming back to. Background for you, not a to-do"
              " list; there is no need to answer each line.",
    },
    "status": {
        "zh": "状态：在列 {k}/{cap}，沉底 {s} 条，按 {today} 计。",
        "en": "Status: {k}/{cap} in view, {s} sunk, as of {today}.",
    },
    "full": {
        "zh": "列表已满：再加一条时，权重最低的一条会沉底（留在文件里，不会删除）。",
        "en": "The list is full: adding one moves the lowest-weight line to Sunk (it stays in the"
              " file; nothing is deleted).",
    },
    "ok": {"zh": "检查：通过。", "en": "Check: passed."},
    "failed": {
        "zh": "检查未通过。以下问题要由用户修改，请告诉用户，不要替用户改写这些行：",
        "en": "Check failed. The user needs to fix the following; tell them, and do not rewrite"
              " their lines yourself:",
    },
    "more": {"zh": "……另有 {k} 条", "en": "… and {k} more"},
}

def _shown(anchors: AnchorList) -> list[str]:
    """The lines in view as the model sees them: each anchor line as :func:`_uncomment` shows it
    (comments taken out), with a plain ``- `` marker."""
    infos = _scan(anchors.lines)
    return ["- " + _strip_marker(infos[a.lineno - 1].visible if 0 < a.lineno <= len(infos)
                                 else _uncomment([a.text])[0].visible) for a in anchors.in_view]


#: Most error findings listed in the injected block.
_BLOCK_FINDINGS = 5


def injected_block(anchors: AnchorList, *, today: date, cap: int = DEFAULT_CAP,
                   findings: Sequence[Finding] = (), lang: Lang = "zh") -> str:
    """The text injected into the model's context: a header, the anchors in view in list order
    (comments removed, nothing reordered or filtered), a status line, and the check in one of two
    tones: a short "passed", or the errors and a plain request not to rewrite the user's lines.
    Empty (nothing to inject) when no anchor is in view."""
    today = _check_today(today)
    cap = _check_cap(cap)
    lang = _check_lang(lang)
    view = anchors.in_view
    if not view:
        return ""
    out = [_TEXTS["header"][lang]]
    out += _shown(anchors)
    status = _TEXTS["status"][lang].format(k=len(view), cap=cap, s=len(anchors.sunk),
                                           today=today.isoformat())
    if len(view) >= cap:
        status += (" " if lang == "en" else "") + _TEXTS["full"][lang]
    out.append(status)
    errors = [f for f in findings if f.level == "error"]
    if not errors:
        out.append(_TEXTS["ok"][lang])
    else:
        out.append(_TEXTS["failed"][lang])
        out += ["- " + f.text(lang) for f in errors[:_BLOCK_FINDINGS]]
        if len(errors) > _BLOCK_FINDINGS:
            out.append(_TEXTS["more"][lang].format(k=len(errors) - _BLOCK_FINDINGS))
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- scaffold

_SHELLS: dict[str, str] = {
    ANCHOR_FILE: (
        "# 常被提起 · Oft-told\n"
        "\n"
        "<!--\n"
        "One anchor per list item, at most 8 in view. The handle is the text before the first ·\n"
        "A note ends with its start date:   - {handle} · {detail} → `YYYY-MM-DD` 起\n"
        "A diary anchor starts with its date: - `YYYY-MM-DD` {handle} · {detail}\n"
        "When the list is full, the line with the lowest weight moves to Sunk.\n"
        "Nothing is deleted.\n"
        "-->\n"
        "\n"
        "## 沉底 · Sunk\n"
    ),
    EMOTIONS_FILE: (
        "# 情绪 · Emotions\n"
        "\n"
        "## 情绪词表 · Emotion vocabulary\n"
        "\n"
        "<!-- The emotion tags allowed in this folder, one list item each (a Chinese and an\n"
        "English form may share an item, separated by /). Anchors use them as #tag. -->\n"
    ),
    NOTES_FILE: (
        "# 笔记 · Notes\n"
        "\n"
        "<!-- Longer notes. An anchor line stays short and can point here. -->\n"
    ),
}


def scaffold(directory: str | os.PathLike[str]) -> list[Path]:
    """Create the shells of a memory folder: ``ofttold.md``, ``emotions.md``, ``notes.md`` and the
    ``diary/`` folder, each holding only headings and a comment on the format (no memory).

    Idempotent: what exists is left untouched. Returns the paths it created.
    """
    if not isinstance(directory, (str, os.PathLike)):
        raise RuleTypeError(f"directory must be a path, got {type(directory).__name__}")
    root = Path(directory)
    created: list[Path] = []
    if not root.exists():
        root.mkdir(parents=True)
        created.append(root)
    elif not root.is_dir():
        raise RuleValueError(f"directory {str(root)!r} exists and is not a directory")
    for name, text in _SHELLS.items():
        path = root / name
        if not path.exists():
            with open(path, "x", encoding="utf-8", newline="") as handle:
                handle.write(text)
            created.append(path)
    diary = root / DIARY_DIR
    if not diary.exists():
        diary.mkdir()
        created.append(diary)
    return created


# --------------------------------------------------------------------------- command-line bodies

def _width(text: str) -> int:
    return sum(0 if unicodedata.combining(ch) else
               2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _cell(text: str, width: int, right: bool = False) -> str:
    if _width(text) > width:
        while _width(text) > width - 1:
            text = text[:-1]
        text += "…"
    pad = " " * (width - _width(text))
    return pad + text if right else text + pad


def _format_weight(r: float | None) -> str:
    """R with four decimals, or three significant digits when it is below 0.001."""
    if r is None:
        return "-"
    return f"{r:.4f}" if r >= 0.001 or r == 0 else f"{r:.2e}"


def rank_command(directory: str | os.PathLike[str], *, today: date | None = None,
                 cap: int = DEFAULT_CAP) -> str:
    """The ranking table printed by ``contextcare memory rank DIR``: one row per anchor (in view
    first, strongest first; then sunk, in file order) with handle, own date, n, t, S, R and place,
    and a closing line that says what would sink next. Raises ``RuleValueError`` when DIR is not a
    directory."""
    day = date.today() if today is None else _check_today(today)
    cap = _check_cap(cap)
    folder = load(directory)
    weights = weigh(folder.anchors.anchors, folder.diaries, today=day)
    view = [w for w in weights if w.anchor.place == "view"]
    order = sink_order(view)
    rows = list(reversed(order)) + [w for w in weights if w.anchor.place == "sunk"]
    head = ("handle", "own date", "n", "t", "S", "R", "place")
    widths = (20, 10, 3, 4, 6, 8, 7)
    right = (False, False, True, True, True, True, False)

    def row(cells: Sequence[str]) -> str:
        return "  ".join(_cell(c, w, r) for c, w, r in zip(cells, widths, right)).rstrip()

    out = [f"Oft-told ranking of {folder.path} as of {day.isoformat()} (cap {cap})", row(head),
           row(["-" * w for w in widths])]
    for w in rows:
        a = w.anchor
        out.append(row([
            a.handle or a.title,
            a.own_date.isoformat() if a.own_date else "-",
            str(w.n),
            "-" if w.t is None else str(w.t),
            f"{w.stability:g}",
            _format_weight(w.weight),
            "in view" if a.place == "view" else "sunk",
        ]))
    summary = f"{len(view)}/{cap} in view, {len(weights) - len(view)} sunk."
    if not folder.has_anchor_file:
        summary = f"No {ANCHOR_FILE} here (create one with `contextcare memory init`)."
    elif len(view) >= cap:
        nxt = order[0].anchor
        summary += f" The list is full: the next new anchor sinks {nxt.handle or nxt.title!r}."
    else:
        summary += " The list has room: nothing sinks."
    out.append(summary)
    return "\n".join(out) + "\n"


def check_command(directory: str | os.PathLike[str], *, cap: int = DEFAULT_CAP,
                  on_unreadable: Literal["report", "raise"] = "report") -> tuple[str, bool]:
    """The report printed by ``contextcare memory check DIR`` and whether the folder passed (no
    errors; exit status 1 when it did not).

    A folder that cannot be read (not a directory, a file that is not UTF-8) gives the one-line
    report ``error: path: reason`` and False; with ``on_unreadable="raise"`` the error is raised
    instead (the command line does that, to exit with status 2)."""
    if on_unreadable not in ("report", "raise"):
        raise RuleValueError(f"on_unreadable must be 'report' or 'raise', got {on_unreadable!r}")
    try:
        folder = load(directory)
    except (RuleValueError, MemoryFileError) as exc:
        if on_unreadable == "raise":
            raise
        return f"error: {exc}\n", False
    findings = check(folder, cap=cap)
    errors = sum(1 for f in findings if f.level == "error")
    warnings = len(findings) - errors
    lines = [f"{f.level:<7} {f.text('en')}" for f in findings]
    if errors:
        lines.append(f"not ok: {errors} error(s), {warnings} warning(s)")
    else:
        a = folder.anchors
        lines.append(
            f"ok: {len(a.in_view)} in view, {len(a.sunk)} sunk, {len(folder.diaries)} diary"
            f" day(s), {len(folder.vocabulary or ())} vocabulary tag(s), {warnings} warning(s)")
    return "\n".join(lines) + "\n", errors == 0
