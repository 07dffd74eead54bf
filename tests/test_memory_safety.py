"""The user's memory file is never lost and never leaked (issue 20).

* ``save`` is atomic: a fault at any point (the disk filling after any number of bytes, a failed
  fsync, chmod or replace, an unencodable text, a wrong argument) leaves the original file byte for
  byte as it was, and leaves no temporary file behind; a save that returns has written the text.
* ``save`` refuses to overwrite an edit the user made after the list was loaded.
* Text inside an HTML comment never reaches the injected block, a handle, a title or a finding,
  however the comment is laid out; one stripping step serves the parser, the scanner, the block
  and the check.
* Files that are not UTF-8 give an error naming the file and the byte offset; the command line
  exits 2 with ``path: reason``.
* Identity of anchors (already in view, returning from Sunk) uses the same probe as recalls.
"""

from __future__ import annotations

import errno
import os
import pickle
import re
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from datetime import date, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from contextcare import cli
from contextcare import memory as m
from contextcare.errors import ArgumentTypeError, ArgumentValueError, ContextCareError

TODAY = date(2026, 9, 20)

ORIGINAL = (
    "# 常被提起 · Oft-told\r\n"
    "\r\n"
    "- 小橘 · 家里的橘猫 → `2026-09-01` 起\r\n"
    "- `2026-09-03` 搬家计划 · 十月底前搬完\r\n"
    "\r\n"
    "## 沉底 · Sunk\r\n"
    "- Spanish lessons · streak → `2026-08-01` 起"
)


def folder_with(tmp_path: Path, text: str = ORIGINAL, name: str = "mem") -> Path:
    root = tmp_path / name
    root.mkdir()
    (root / m.ANCHOR_FILE).write_bytes(text.encode("utf-8"))
    return root


def leftovers(root: Path) -> list[str]:
    """Files in the folder other than the anchor file (a temporary file left behind)."""
    return sorted(p.name for p in root.iterdir() if p.name != m.ANCHOR_FILE)


# --------------------------------------------------------------------------- 1. atomic save

@pytest.mark.parametrize("bad", ["a str", None, [], ["- a"], 42, b"- a"])
def test_save_refuses_a_wrong_argument_before_opening_any_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: object) -> None:
    root = folder_with(tmp_path)

    def no_open(*args: object, **kwargs: object) -> None:
        raise AssertionError("a file was opened")

    monkeypatch.setattr("builtins.open", no_open)
    monkeypatch.setattr(os, "open", no_open)
    with pytest.raises(ArgumentTypeError, match="anchors must be an AnchorList"):
        m.save(root, bad)  # type: ignore[arg-type]
    with pytest.raises(ArgumentTypeError, match="directory must be a path"):
        m.save(bad if not isinstance(bad, str) else 3, m.AnchorList.parse(""))  # type: ignore[arg-type]
    with pytest.raises(ArgumentTypeError, match="overwrite must be a bool"):
        m.save(root, m.AnchorList.parse(""), overwrite=bad)  # type: ignore[arg-type]
    monkeypatch.undo()
    assert (root / m.ANCHOR_FILE).read_bytes() == ORIGINAL.encode("utf-8")
    assert leftovers(root) == []


def admitted(root: Path) -> m.AnchorList:
    """The folder's list with one anchor more, as a host would build it."""
    return m.admit(m.load(root).anchors, "Rust rewrite · 解析器 · lifetimes", today=TODAY).anchors


@pytest.mark.skipif(sys.platform != "linux", reason="needs RLIMIT_FSIZE and SIGXFSZ (Linux)")
def test_disk_full_after_every_number_of_bytes_leaves_the_original(tmp_path: Path) -> None:
    """A real fault, not a mock: the file size limit makes the kernel refuse every byte past the
    k-th, for every k up to the length of the new text (CJK characters are cut in the middle)."""
    import resource
    import signal

    root = folder_with(tmp_path)
    new = admitted(root)
    data = new.render().encode("utf-8")
    assert len(data) > len(new.render())  # multi-byte characters: cut points inside them too
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    try:
        for k in range(len(data) + 1):
            resource.setrlimit(resource.RLIMIT_FSIZE, (k, hard))
            try:
                m.save(root, new)
            except OSError as exc:
                failed = exc
            else:
                failed = None
            finally:
                resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
            if k < len(data):
                assert failed is not None and failed.errno == errno.EFBIG, k
                assert (root / m.ANCHOR_FILE).read_bytes() == ORIGINAL.encode("utf-8"), k
            else:
                assert failed is None
                assert (root / m.ANCHOR_FILE).read_bytes() == data
            assert leftovers(root) == [], k
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old_handler)


@pytest.fixture
def short_writes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """``os.write`` writes at most 3 bytes per call (as a pipe or a full disk may)."""
    calls: list[int] = []
    real = os.write

    def write(fd: int, data: bytes | memoryview) -> int:
        calls.append(len(data))
        return real(fd, bytes(data[:3]))

    monkeypatch.setattr(os, "write", write)
    yield calls


def test_short_writes_still_write_everything(tmp_path: Path,
                                            short_writes: list[int]) -> None:
    root = folder_with(tmp_path)
    new = admitted(root)
    m.save(root, new)
    assert (root / m.ANCHOR_FILE).read_bytes() == new.render().encode("utf-8")
    assert len(short_writes) > 10


def failing(after: int, error: int = errno.ENOSPC) -> Callable[[int, bytes], int]:
    """An ``os.write`` that accepts ``after`` bytes in all, then fails like a full disk."""
    real = os.write
    budget = [after]

    def write(fd: int, data: bytes | memoryview) -> int:
        if budget[0] <= 0:
            raise OSError(error, os.strerror(error))
        n = real(fd, bytes(data[: budget[0]]))
        budget[0] -= n
        return n

    return write


def test_write_failing_after_every_number_of_characters(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    root = folder_with(tmp_path)
    new = admitted(root)
    text = new.render()
    data = text.encode("utf-8")
    cuts = {len(text[:i].encode("utf-8")) for i in range(len(text) + 1)} | set(range(len(data)))
    for after in sorted(cuts):
        monkeypatch.setattr(os, "write", failing(after))
        if after < len(data):
            with pytest.raises(OSError, match="No space left"):
                m.save(root, new)
            assert (root / m.ANCHOR_FILE).read_bytes() == ORIGINAL.encode("utf-8"), after
        else:
            m.save(root, new)
            assert (root / m.ANCHOR_FILE).read_bytes() == data
        monkeypatch.undo()
        assert leftovers(root) == [], after


@pytest.mark.parametrize("step", ["fsync", "replace", "chmod", "close"])
def test_a_failing_step_leaves_the_original(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            step: str) -> None:
    root = folder_with(tmp_path)
    new = admitted(root)
    real = getattr(os, step)

    def broken(*args: object, **kwargs: object) -> object:
        if step == "close":
            real(*args, **kwargs)  # really close, then report the (deferred) write error
        raise OSError(errno.EIO, f"simulated {step} failure")

    monkeypatch.setattr(os, step, broken)
    with pytest.raises(OSError, match=f"simulated {step} failure"):
        m.save(root, new)
    monkeypatch.undo()
    assert (root / m.ANCHOR_FILE).read_bytes() == ORIGINAL.encode("utf-8")
    assert leftovers(root) == []


def test_an_unencodable_text_is_refused_before_writing(tmp_path: Path) -> None:
    root = folder_with(tmp_path)
    bad = m.AnchorList.parse(ORIGINAL + "\r\n- b \ud800 · y\r\n")
    with pytest.raises(ArgumentValueError, match=r"anchors: line 8, character 5 is U\+D800.*UTF-8"):
        m.save(root, bad, overwrite=True)
    assert (root / m.ANCHOR_FILE).read_bytes() == ORIGINAL.encode("utf-8")
    assert leftovers(root) == []


def test_admit_refuses_a_lone_surrogate() -> None:
    lst = m.AnchorList.parse(ORIGINAL)
    with pytest.raises(ArgumentValueError, match=r"new: .*U\+D800.*cannot be written"):
        m.admit(lst, "b \ud800 · y", today=TODAY)
    with pytest.raises(ArgumentValueError, match=r"U\+DFFF"):
        m.admit(lst, m.parse_anchor("- \udfff x · y"), today=TODAY)


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
def test_save_keeps_the_permission_bits_and_a_symlink(tmp_path: Path) -> None:
    root = folder_with(tmp_path)
    path = root / m.ANCHOR_FILE
    path.chmod(0o640)
    new = admitted(root)
    m.save(root, new)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert path.read_bytes().decode("utf-8") == new.render()
    # A symlinked anchor file (a dotfiles repository) stays a link; its target gets the text.
    real = tmp_path / "dotfiles" / "ofttold.md"
    real.parent.mkdir()
    path.replace(real)
    path.symlink_to(real)
    newer = m.admit(m.load(root).anchors, "Flu shot · Saturday", today=TODAY).anchors
    m.save(root, newer)
    assert path.is_symlink() and real.read_bytes().decode("utf-8") == newer.render()
    assert leftovers(root) == []
    # A new file gets the usual mode (0o666 less the umask), not a temporary file's 0o600.
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    mask = os.umask(0o022)
    try:
        m.save(fresh, m.AnchorList.parse("# 常被提起\n"))
    finally:
        os.umask(mask)
    assert stat.S_IMODE((fresh / m.ANCHOR_FILE).stat().st_mode) == 0o644


def test_save_into_a_missing_directory_names_it(tmp_path: Path) -> None:
    with pytest.raises(ArgumentValueError, match="not a directory"):
        m.save(tmp_path / "missing", m.AnchorList.parse(""))
    assert not (tmp_path / "missing").exists()


# --------------------------------------------------------------------------- 2. change detection

def test_an_edit_between_load_and_save_is_not_overwritten(tmp_path: Path) -> None:
    root = folder_with(tmp_path)
    path = root / m.ANCHOR_FILE
    loaded = m.load(root)
    edited = ORIGINAL.replace("家里的橘猫", "家里的橘猫，今天打了疫苗")
    path.write_bytes(edited.encode("utf-8"))  # the user, in an editor, while the host runs
    new = m.admit(loaded.anchors, "Flu shot · Saturday", today=TODAY).anchors
    with pytest.raises(m.AnchorFileChangedError) as info:
        m.save(root, new)
    assert isinstance(info.value, ContextCareError) and isinstance(info.value, ValueError)
    assert str(info.value).startswith(f"{path}: ") and "overwrite=True" in str(info.value)
    assert path.read_bytes() == edited.encode("utf-8")
    assert leftovers(root) == []
    # On purpose:
    m.save(root, new, overwrite=True)
    assert path.read_bytes() == new.render().encode("utf-8")


def test_same_size_same_mtime_edit_is_still_detected(tmp_path: Path) -> None:
    root = folder_with(tmp_path)
    path = root / m.ANCHOR_FILE
    before = path.stat()
    loaded = m.load(root)
    path.write_bytes(ORIGINAL.replace("十月底", "九月底").encode("utf-8"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size
    with pytest.raises(m.AnchorFileChangedError):
        m.save(root, m.admit(loaded.anchors, "x · y", today=TODAY).anchors)


def test_a_host_may_save_after_every_admit_or_only_at_the_end(tmp_path: Path) -> None:
    root = folder_with(tmp_path)
    lst = m.load(root).anchors
    for i in range(4):
        lst = m.admit(lst, f"话题{i} · 细节", today=TODAY, cap=3).anchors
        if i % 2:
            m.save(root, lst)  # saves of a list derived from what is on disk are fine
    m.save(root, lst)
    assert m.load(root).anchors.render() == lst.render()
    # ... but an older list cannot be saved over the newer file.
    stale = m.admit(m.AnchorList.parse(ORIGINAL), "旧的 · x", today=TODAY).anchors
    with pytest.raises(m.AnchorFileChangedError, match="changed since"):
        m.save(root, stale)


def test_a_list_not_read_from_the_file_does_not_replace_it(tmp_path: Path) -> None:
    root = folder_with(tmp_path)
    other = m.AnchorList.parse("# 常被提起\n- 别的 · x → `2026-09-01` 起\n")
    with pytest.raises(m.AnchorFileChangedError):
        m.save(root, other)
    assert (root / m.ANCHOR_FILE).read_bytes() == ORIGINAL.encode("utf-8")
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    m.save(fresh, other)  # no file there: nothing to lose
    assert (fresh / m.ANCHOR_FILE).read_text(encoding="utf-8") == other.render()
    m.save(fresh, other)  # the same text again: nothing changes


def test_errors_pickle() -> None:
    for exc in (m.AnchorFileChangedError(Path("/x/ofttold.md"), "changed"),
                m.MemoryDecodeError(Path("/x/notes.md"), "not UTF-8", 7)):
        back = pickle.loads(pickle.dumps(exc))
        assert type(back) is type(exc) and str(back) == str(exc) and back.path == exc.path
    assert m.MemoryDecodeError(Path("n.md"), "r", 7).offset == 7


# --------------------------------------------------------------------------- 3. comments

SPLIT_COMMENT = (
    "# 常被提起 · Oft-told\n"
    "\n"
    "- `2026-09-01` 小橘 <!-- 私密\n"
    "-->\n"
    "- 猫 <!-- 秘密的\n"
    "名字 --> · 叫阿黄 → `2026-09-02` 起\n"
)


def test_a_comment_opened_on_an_anchor_line_stays_in_the_file() -> None:
    lst = m.AnchorList.parse(SPLIT_COMMENT)
    first, second = lst.in_view
    assert (first.handle, first.title, first.own_date) == ("小橘", "小橘", date(2026, 9, 1))
    assert second.handle == "猫" and "秘密" not in second.title
    block = m.injected_block(lst, today=TODAY)
    assert "私密" not in block and "秘密" not in block and "- `2026-09-01` 小橘\n" in block
    assert lst.render() == SPLIT_COMMENT
    # The handle is 小橘, so a diary that names 小橘 counts.
    [w, _] = m.weigh(lst.in_view, {date(2026, 9, 5): "今天小橘又跳上桌子"}, today=TODAY)
    assert w.n == 1


def test_comments_never_reach_the_findings(tmp_path: Path) -> None:
    (tmp_path / m.ANCHOR_FILE).write_text(
        SPLIT_COMMENT + "- 睡 <!-- 私密\n--> · 少\n- x <!-- 私密 #私密情绪\n-->\n",
        encoding="utf-8")
    (tmp_path / m.EMOTIONS_FILE).write_text("## 情绪词表\n- 开心\n", encoding="utf-8")
    findings = m.check(m.load(tmp_path))
    assert {f.code for f in findings} >= {"short-handle", "no-date"}
    for f in findings:
        assert "私密" not in f.en + f.zh and "秘密" not in f.en + f.zh
    report, _ = cli.memory_check_command(tmp_path)
    rank = cli.memory_rank_command(tmp_path, today=TODAY)
    assert "私密" not in report + rank


def test_one_line_parse_drops_an_unclosed_comment() -> None:
    a = m.parse_anchor("- 小橘 · 橘猫 <!-- 私密，下面还有")
    assert (a.handle, a.title) == ("小橘", "小橘 · 橘猫")


# --------------------------------------------------------------------------- 4. errors name the file

@pytest.mark.parametrize("where", ["ofttold.md", "emotions.md", "notes.md", "diary/2026-09-02.md"])
def test_a_file_that_is_not_utf8_is_named_with_its_byte_offset(tmp_path: Path, where: str,
                                                              capsys: pytest.CaptureFixture[str]
                                                              ) -> None:
    m.scaffold(tmp_path)
    bad = tmp_path / where
    bad.write_bytes("# 常被提起\n- 小橘".encode() + b" \xff\xfe x\n")
    offset = len("# 常被提起\n- 小橘 ".encode())
    with pytest.raises(m.MemoryDecodeError) as info:
        m.load(tmp_path)
    exc = info.value
    assert isinstance(exc, ContextCareError) and isinstance(exc, UnicodeError)
    assert isinstance(exc, ValueError) and exc.path == bad and exc.offset == offset
    assert str(exc).startswith(f"{bad}: ") and f"byte {offset}" in str(exc)
    if where.startswith("diary/"):
        with pytest.raises(m.MemoryDecodeError, match=re.escape(str(bad))):
            m.load_diaries(tmp_path)
    report, ok = cli.memory_check_command(tmp_path)  # documented to return a report: it does
    assert not ok and report == f"error: {exc}\n"
    with pytest.raises(m.MemoryDecodeError):
        cli.memory_rank_command(tmp_path, today=TODAY)

    from contextcare.cli import main
    for action in ("check", "rank"):
        assert main(["memory", action, str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert f"{bad}: " in err and f"byte {offset}" in err and "Traceback" not in err
        assert "codec can't decode" not in err


# --------------------------------------------------------------------------- 5. tags

def test_a_tag_right_before_the_stamp_is_read_as_the_parser_reads_it(tmp_path: Path) -> None:
    (tmp_path / m.ANCHOR_FILE).write_text(
        "# 常被提起\n- 睡眠 · 两点才睡 #疲惫→`2026-09-12`起\n", encoding="utf-8")
    (tmp_path / m.EMOTIONS_FILE).write_text("## 情绪词表\n- 疲惫\n", encoding="utf-8")
    folder = m.load(tmp_path)
    assert folder.anchors.in_view[0].tags == ("疲惫",)
    assert [(u.lineno, u.tag) for u in folder.tag_uses] == [(2, "疲惫")]
    assert m.check(folder) == []


# --------------------------------------------------------------------------- 6. identity

def test_a_short_handle_is_identified_by_its_title() -> None:
    text = ("# 常被提起\n- 小橘 · x → `2026-09-01` 起\n\n## 沉底\n- 猫 · 叫小橘 → `2026-08-01` 起\n")
    result = m.admit(m.AnchorList.parse(text), "`2026-09-18` 猫 · 邻居家的黑猫", today=TODAY)
    assert not result.returned
    assert result.added.own_date == date(2026, 9, 18) and result.added.kind == "diary"
    back = m.admit(result.anchors, "猫 · 叫小橘", today=TODAY)
    assert back.returned and back.added.own_date == TODAY
    with pytest.raises(ArgumentValueError, match="already in view"):
        m.admit(back.anchors, "猫 · 叫小橘", today=TODAY)


def test_two_different_empty_handles_are_two_anchors(tmp_path: Path) -> None:
    lst = m.AnchorList.parse("# 常被提起\n")
    lst = m.admit(lst, "· 早上跑步", today=TODAY).anchors
    lst = m.admit(lst, "· 晚上读书", today=TODAY).anchors
    assert [a.title for a in lst.in_view] == ["· 早上跑步", "· 晚上读书"]
    (tmp_path / m.ANCHOR_FILE).write_text(lst.render(), encoding="utf-8")
    assert "duplicate-handle" not in {f.code for f in m.check(m.load(tmp_path))}


# --------------------------------------------------------------------------- 7. host inputs

def test_host_inputs_of_the_wrong_type_are_refused() -> None:
    policy = m.Reinjection()
    with pytest.raises(ArgumentTypeError, match="role must be a str, got int"):
        policy.message(42)  # type: ignore[arg-type]
    with pytest.raises(ArgumentTypeError, match="own_notice must be a bool"):
        policy.message("user", own_notice="yes")  # type: ignore[arg-type]
    with pytest.raises(ArgumentTypeError, match="diaries must be a mapping"):
        m.admit(m.AnchorList.parse(""), "a · b", today=TODAY,
                diaries="not a mapping")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- properties

#: Characters that appear only inside comments: none of them may leave the file.
SECRET = "秘Ω"
_WORDS = ["小橘", "搬家", "Rust", "睡眠", "猫", "a", "Deadline dread", "跑步", "书"]
_word = st.sampled_from(_WORDS)
_visible = st.text(st.sampled_from(list("abc 猫橘家 ·-#,，")), max_size=6)
_secret = st.text(st.sampled_from(list(SECRET + " #·-")), min_size=1, max_size=6).map(
    lambda s: SECRET[0] + s)
_nl = st.sampled_from(["\n", "\r\n"])


@st.composite
def _anchor_line(draw: st.DrawFn) -> str:
    handle = draw(st.sampled_from(["", *_WORDS]))
    detail = draw(_visible)
    tag = draw(st.sampled_from(["", " #疲惫", " #开心", "#焦虑"]))
    days = draw(st.integers(0, 60))
    own = (TODAY - timedelta(days=days)).isoformat()
    body = draw(st.sampled_from([
        f"{handle} · {detail}{tag} → `{own}` 起", f"`{own}` {handle} · {detail}{tag}",
        f"{handle}{tag}→`{own}`起", f"{handle} · {detail}",
    ]))
    return draw(st.sampled_from(["- ", "* ", "1. "])) + body


@st.composite
def anchor_files(draw: st.DrawFn) -> str:
    """An anchor file as users write them: headings, lines, details, comments in every layout."""
    nl = draw(_nl)
    out: list[str] = []

    def item() -> None:
        line = draw(_anchor_line())
        layout = draw(st.integers(0, 5))
        if layout == 1:
            line += f" <!-- {draw(_secret)} -->"
        elif layout == 2:  # a comment opened on the anchor line, closed later
            line += f" <!-- {draw(_secret)}"
            out.append(line)
            out.extend(draw(st.lists(_secret, max_size=2)))
            line = draw(st.sampled_from(["-->", f"{draw(_secret)} -->"]))
        elif layout == 3:
            out.append(line)
            line = "  - " + draw(_visible) + draw(st.sampled_from(["", f"<!--{draw(_secret)}-->"]))
        out.append(line)

    if draw(st.booleans()):
        out.append("# 常被提起 · Oft-told")
    for _ in range(draw(st.integers(0, 7))):
        kind = draw(st.integers(0, 6))
        if kind <= 3:
            item()
        elif kind == 4:
            out.append("")
        elif kind == 5:
            out += ["<!--", draw(_secret), f"- {draw(_word)} {draw(_secret)} → `2026-09-01` 起",
                    "-->"]
        else:
            out.append(f"<!-- {draw(_secret)} --> " + draw(_visible))
    if draw(st.booleans()):
        out += ["", "## 沉底 · Sunk"]
        for _ in range(draw(st.integers(0, 3))):
            item()
    text = nl.join(out) + (nl if out and draw(st.booleans()) else "")
    return ("\ufeff" if draw(st.booleans()) else "") + text


@st.composite
def histories(draw: st.DrawFn) -> list[tuple[int, str, dict[date, str]]]:
    """Days of use: each adds one line (new or a returning one) with the diary so far."""
    steps = []
    diaries: dict[date, str] = {}
    for i in range(draw(st.integers(1, 6))):
        when = TODAY + timedelta(days=i * draw(st.integers(0, 3)))
        for _ in range(draw(st.integers(0, 3))):  # diary days, some of them backfilled
            d = when - timedelta(days=draw(st.integers(0, 10)))
            diaries[d] = diaries.get(d, "") + " " + " ".join(draw(st.lists(_word, max_size=3)))
        new = draw(st.one_of(_anchor_line(), st.builds(lambda w, v: f"{w} · {v}", _word, _visible)))
        steps.append((i, new, dict(diaries)))
    return steps


def lines_of(text: str) -> list[str]:
    return text.split("\n")


def assert_no_secret(*texts: str) -> None:
    for text in texts:
        assert not set(SECRET) & set(text), text


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(anchor_files(), histories(), st.integers(1, 5))
def test_months_of_use_keep_every_user_line_and_every_secret(
        text: str, history: list[tuple[int, str, dict[date, str]]], cap: int) -> None:
    lst = m.AnchorList.parse(text)
    assert lst.render() == text
    bom = text.startswith("\ufeff")  # stays at the start of the file, whatever lines move
    user_lines = lines_of(text.removeprefix("\ufeff"))
    added: list[str] = []
    vocabulary = frozenset({"疲惫", "开心"})
    for i, new, diaries in history:
        today = TODAY + timedelta(days=i)
        try:
            result = m.admit(lst, new, today=today, cap=cap, diaries=diaries)
        except ArgumentValueError as exc:
            assert re.search("already in view|unclosed|must have a title", str(exc)), exc
            continue
        lst = result.anchors
        added.append(result.added.text)
        rendered = lst.render()
        assert m.AnchorList.parse(rendered).render() == rendered
        # Every user line is still there, byte for byte with its line ending; only the very
        # last line of the file may gain the line ending it lacked, when something comes after.
        assert rendered.startswith("\ufeff") == bom and rendered.count("\ufeff") == bom
        remaining = lines_of(rendered.removeprefix("\ufeff"))
        for index, line in enumerate(user_lines):
            if line in remaining:
                remaining.remove(line)
            else:
                assert index == len(user_lines) - 1 and line + "\r" in remaining, line
                remaining.remove(line + "\r")
        for line in added:
            remaining.remove(line + ("\r" if lst.newline == "\r\n" else ""))
        assert all(not r.strip("\r") or "沉底 · Sunk" in r for r in remaining), remaining
        # Nothing inside a comment leaves the file.
        block = m.injected_block(lst, today=today, cap=cap)
        folder = m.MemoryFolder(Path("."), True, lst, diaries, vocabulary, (), ())
        findings = m.check(folder, cap=cap)
        assert_no_secret(block, *(a.handle + a.title + "".join(a.tags) for a in lst.anchors),
                         *(f.en + f.zh for f in findings),
                         m.injected_block(lst, today=today, cap=cap, findings=findings, lang="en"))
        assert len(lst.in_view) <= max(cap, len(m.AnchorList.parse(text).in_view))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=anchor_files(), new=_anchor_line())
def test_load_admit_save_load_round_trips_on_disk(text: str, new: str) -> None:
    with tempfile.TemporaryDirectory() as name:
        round_trip_on_disk(Path(name), text, new)


def round_trip_on_disk(root: Path, text: str, new: str) -> None:
    (root / m.ANCHOR_FILE).write_bytes(text.encode("utf-8"))
    (root / m.EMOTIONS_FILE).write_text("## 情绪词表\n- 疲惫 / 开心\n", encoding="utf-8")
    folder = m.load(root)
    assert folder.anchors.render() == text
    try:
        lst = m.admit(folder.anchors, new, today=TODAY).anchors
    except ArgumentValueError:
        assume(False)
        return
    m.save(root, lst)
    assert (root / m.ANCHOR_FILE).read_bytes() == lst.render().encode("utf-8")
    again = m.load(root)
    assert again.anchors == lst
    assert_no_secret(cli.memory_check_command(root)[0], cli.memory_rank_command(root, today=TODAY),
                     *(u.tag for u in again.tag_uses))
