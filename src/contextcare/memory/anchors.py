"""The Oft-told anchors and the anchor file's format: one anchor (its text, date and lineage),
the list as a Markdown file, and the edits the library makes to it."""

from __future__ import annotations

import hashlib
import math
import os
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from pathlib import Path
from typing import Literal

from ..errors import ArgumentTypeError, ArgumentValueError, ContextCareError

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
    "parse_anchor",
    "MemoryFileError",
    "MemoryDecodeError",
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
        raise ArgumentTypeError(f"{name} must be a datetime.date, got {type(today).__name__}")
    return today


def _check_cap(cap: object) -> int:
    if isinstance(cap, bool) or not isinstance(cap, int):
        raise ArgumentTypeError(f"cap must be an int, got {type(cap).__name__}")
    if not 1 <= cap <= MAX_CAP:
        raise ArgumentValueError(f"cap must be in [1, {MAX_CAP}], got {cap}")
    return cap


def _check_encodable(text: str, name: str) -> bytes:
    """``text`` as UTF-8; a lone surrogate (which no UTF-8 file can hold) is a ``ArgumentValueError``
    naming the argument, the line and the character."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        line = text.count("\n", 0, exc.start) + 1
        column = exc.start - (text.rfind("\n", 0, exc.start) + 1) + 1
        where = f"line {line}, character {column}" if "\n" in text else f"character {column}"
        raise ArgumentValueError(
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
        raise ArgumentTypeError(f"text must be a str, got {type(text).__name__}")
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
            raise ArgumentTypeError(f"text must be a str, got {type(text).__name__}")
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




def _shown(anchors: AnchorList) -> list[str]:
    """The lines in view as the model sees them: each anchor line as :func:`_uncomment` shows it
    (comments taken out), with a plain ``- `` marker."""
    infos = _scan(anchors.lines)
    return ["- " + _strip_marker(infos[a.lineno - 1].visible if 0 < a.lineno <= len(infos)
                                 else _uncomment([a.text])[0].visible) for a in anchors.in_view]
