"""The memory folder: loading and saving it (the user's file is never lost), the folder check
and its findings, and the scaffold of a new folder."""

from __future__ import annotations

import errno
import hashlib
import os
import re
import secrets
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Literal

from .._checks import check_lang as _check_lang
from ..errors import ArgumentTypeError, ArgumentValueError
from .anchors import (
    _DIARY_NAME,
    _TOKEN_WARN,
    ANCHOR_FILE,
    DEFAULT_CAP,
    DIARY_DIR,
    EMOTIONS_FILE,
    LIST_TOKEN_BUDGET,
    NOTES_FILE,
    Anchor,
    AnchorFileChangedError,
    AnchorList,
    Lang,
    MemoryDecodeError,
    _check_cap,
    _check_encodable,
    _estimate_tokens,
    _norm,
    _parse,
    _scan,
    _shown,
    _split_lines,
    _strip_marker,
)

__all__ = [
    "Finding",
    "MemoryFolder",
    "TagUse",
    "load",
    "load_diaries",
    "save",
    "check",
    "scaffold",
]


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
        raise ArgumentTypeError(f"directory must be a path, got {type(directory).__name__}")
    path = Path(directory)
    if not path.is_dir():
        raise ArgumentValueError(f"directory {str(path)!r} is not a directory")
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
        raise ArgumentTypeError(f"directory must be a path, got {type(directory).__name__}")
    if not isinstance(anchors, AnchorList):
        raise ArgumentTypeError(f"anchors must be an AnchorList, got {type(anchors).__name__}")
    if not isinstance(overwrite, bool):
        raise ArgumentTypeError(f"overwrite must be a bool, got {type(overwrite).__name__}")
    data = _check_encodable(anchors.render(), "anchors")
    folder = Path(directory)
    if not folder.is_dir():
        raise ArgumentValueError(f"directory {str(folder)!r} is not a directory")
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
        raise ArgumentTypeError(f"directory must be a path, got {type(directory).__name__}")
    root = Path(directory)
    created: list[Path] = []
    if not root.exists():
        root.mkdir(parents=True)
        created.append(root)
    elif not root.is_dir():
        raise ArgumentValueError(f"directory {str(root)!r} exists and is not a directory")
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
