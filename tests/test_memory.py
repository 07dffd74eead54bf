"""Memory anchors (the "Oft-told" list): parsing and byte-exact write-back, recall counting,
the forgetting curve and its worked examples, admission and sinking, the injected block and its
re-injection policy, the folder check, the scaffold and the two command bodies."""

from __future__ import annotations

import math
import re
import shutil
from collections.abc import Mapping
from datetime import date, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextcare import cli
from contextcare import memory as m
from contextcare.errors import ArgumentTypeError, ArgumentValueError

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "memory"
TODAY = date(2026, 9, 20)


def day(n: int) -> date:
    """The day ``n`` days before TODAY."""
    return TODAY - timedelta(days=n)


def note(handle: str, own: date, detail: str = "x") -> str:
    return f"- {handle} · {detail} → `{own.isoformat()}` 起"


def file_of(view: list[str], sunk: list[str] | None = None) -> str:
    text = "# 常被提起 · Oft-told\n\n" + "".join(line + "\n" for line in view)
    if sunk is not None:
        text += "\n## 沉底 · Sunk\n\n" + "".join(line + "\n" for line in sunk)
    return text


def stripped(text: str) -> list[str]:
    return [line.rstrip("\r\n") for line in text.split("\n") if line.rstrip("\r\n")]


# --------------------------------------------------------------------------- the curve

def test_worked_examples_of_the_note() -> None:
    assert m.stability(3) == 8
    assert round(m.weight(3, 6), 2) == 0.47
    assert m.weight(3, 6) == pytest.approx(math.exp(-0.75))
    assert m.stability(2) == 4
    assert round(m.weight(2, 1), 2) == 0.78
    assert m.weight(0, 0) == 1.0


@pytest.mark.parametrize(("n", "t", "expected"), [
    # Reference table of ofttold-spec.md §4 (rounded there to 4 places).
    (0, 1, 0.3679), (0, 3, 0.0498), (1, 1, 0.6065), (1, 6, 0.0498), (2, 10, 0.0821),
    (3, 3, 0.6873), (3, 10, 0.2865), (3, 30, 0.0235), (4, 6, 0.6873), (4, 30, 0.1534),
    (5, 10, 0.7316), (5, 30, 0.3916),
])
def test_reference_table(n: int, t: int, expected: float) -> None:
    assert m.weight(n, t) == pytest.approx(expected, abs=6e-5)


def test_curve_guards() -> None:
    assert m.stability(40) == m.stability(30) == 2.0 ** 30
    assert m.weight(0, 10) == pytest.approx(4.54e-5, rel=1e-3)
    with pytest.raises(ArgumentValueError, match="t must be >= 0"):
        m.weight(1, -1)
    with pytest.raises(ArgumentValueError, match="n must be >= 0"):
        m.stability(-1)
    with pytest.raises(ArgumentTypeError, match="n must be an int"):
        m.stability(True)
    assert m.days_since(date(2026, 9, 1), date(2026, 9, 7)) == 6
    assert m.days_since(date(2026, 10, 1), date(2026, 9, 7)) == 0  # future own date: t = 0


# --------------------------------------------------------------------------- one line

def test_parse_note_with_one_character_handle() -> None:
    a = m.parse_anchor("- 猫 · 叫小橘 → `2026-09-01` 起")
    assert (a.handle, a.kind, a.own_date) == ("猫", "note", date(2026, 9, 1))
    assert a.title == "猫 · 叫小橘"
    assert a.short_handle and a.probe == "猫 · 叫小橘"


def test_parse_diary_anchor() -> None:
    a = m.parse_anchor("- `2026-09-03` 搬家计划 · 十月底")
    assert (a.handle, a.kind, a.own_date, a.title) == (
        "搬家计划", "diary", date(2026, 9, 3), "搬家计划 · 十月底")
    b = m.parse_anchor("* 搬家计划 2026-09-03 · 十月底")  # a bare date in the middle
    assert (b.kind, b.own_date, b.title) == ("diary", date(2026, 9, 3), "搬家计划 · 十月底")


@pytest.mark.parametrize("line", [
    "- 猫·叫小橘→`2026-09-01`起",
    "*   猫  ·  叫小橘   ->  2026-09-01   起   ",
    "1. 猫 · 叫小橘 → 2026-09-01 起",
    "猫 · 叫小橘 → `2026-09-01` 起 <!-- adopted from the shelter -->",
])
def test_parse_tolerates_spacing_markers_and_comments(line: str) -> None:
    a = m.parse_anchor(line)
    assert (a.handle, a.kind, a.own_date) == ("猫", "note", date(2026, 9, 1))
    assert "2026" not in a.title and "起" not in a.title and "shelter" not in a.title


def test_stamp_wins_over_dates_in_the_detail_and_the_last_stamp_counts() -> None:
    a = m.parse_anchor("- Marathon · race on 2026-12-06 → `2026-10-12` 起")
    assert (a.kind, a.own_date) == ("note", date(2026, 10, 12))
    assert a.title == "Marathon · race on 2026-12-06"
    b = m.parse_anchor("- a → `2026-01-01` 起 · b → `2026-02-01` 起")
    assert b.own_date == date(2026, 2, 1)


def test_only_the_first_middle_dot_makes_the_handle() -> None:
    assert m.parse_anchor("- Rust rewrite · parser · lifetimes").handle == "Rust rewrite"
    assert m.parse_anchor("- no dot at all").handle == "no dot at all"


def test_undated_and_impossible_dates() -> None:
    a = m.parse_anchor("- 睡眠 · 最近总是两点以后才睡")
    assert (a.kind, a.own_date, a.bad_date) == ("undated", None, "")
    b = m.parse_anchor("- 睡眠 · x → `2026-02-30` 起")
    assert (b.kind, b.own_date, b.bad_date) == ("undated", None, "2026-02-30")


def test_tags() -> None:
    a = m.parse_anchor(
        "- Thesis · C# port, issue #12, see a.com/x#frag (#anxious) #担心 → `2026-11-01` 起")
    assert a.tags == ("anxious", "担心")


# --------------------------------------------------------------------------- the file

MESSY = (
    "\ufeff# 我的记忆\n"
    "Some intro text.\n"
    "\n"
    "##   常被提起 · Oft-told   ##\n"
    "<!-- one anchor per list item\n"
    "- 不是锚点 · inside a comment → `2026-01-01` 起\n"
    "-->\n"
    "-   小橘   ·  家里的橘猫 → `2026-09-01`  起   \n"
    "  - nested detail: 怕吸尘器\n"
    "    continuation text\n"
    "* `2026-09-03`搬家计划·十月底 <!-- inline comment -->\n"
    "\n"
    "A paragraph between items.\n"
    "---\n"
    "- \n"
    "```\n"
    "- code · not an anchor → `2026-01-01` 起\n"
    "```\n"
    "1) Rust rewrite · parser\t→ `2026-09-10` 起\n"
    "### 小标题 (a subheading stays in the section)\n"
    "+ 睡眠 · 两点才睡\n"
    "\n"
    "## 沉底 · Sunk\n"
    "- Spanish lessons · streak → `2026-08-01` 起\n"
    "\n"
    "## Other\n"
    "- not an anchor · other section → `2026-01-01` 起"
)


def test_parse_messy_file() -> None:
    lst = m.AnchorList.parse(MESSY)
    assert [a.handle for a in lst.in_view] == ["小橘", "搬家计划", "Rust rewrite", "睡眠"]
    assert [a.handle for a in lst.sunk] == ["Spanish lessons"]
    assert lst.in_view[1].own_date == date(2026, 9, 3)
    assert lst.in_view[3].kind == "undated"
    first = lst.in_view[0]
    assert MESSY.split("\n")[first.lineno - 1] == first.text


@pytest.mark.parametrize("text", [
    MESSY, MESSY.replace("\n", "\r\n"), MESSY + "\n", "", "\n", "- 猫 · 叫小橘", "# 常被提起\n\n\n",
    "- a\r\n- b\n- c\r",
])
def test_round_trip_is_exact(text: str) -> None:
    assert m.AnchorList.parse(text).render() == text


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("-*+1.) \t\n\r#·→`起猫a2026<!->~沉底常被提起"))
               | st.characters(), max_size=300))
def test_round_trip_any_text(text: str) -> None:
    assert m.AnchorList.parse(text).render() == text


def test_headless_file_keeps_its_list_in_view_until_the_first_heading() -> None:
    lst = m.AnchorList.parse("- a · x → `2026-09-01` 起\n# Notes\n- b · y → `2026-09-01` 起\n")
    assert [a.handle for a in lst.in_view] == ["a"]
    assert lst.sunk == ()


# --------------------------------------------------------------------------- recalls

def test_mentions_count_once_per_day() -> None:
    a = m.parse_anchor("- `2026-09-01` 搬家计划 · 十月底")
    diaries = {
        date(2026, 9, 2): "搬家计划 搬家计划 搬家计划",
        date(2026, 9, 5): "和房东聊了搬家计划。",
        date(2026, 9, 6): "搬家的事还没定。",  # not the handle
    }
    days = m.recall_days(a, diaries, today=date(2026, 9, 10))
    assert days == {date(2026, 9, 2), date(2026, 9, 5)}


def test_one_character_handle_probes_the_whole_title() -> None:
    a = m.parse_anchor("- 猫 · 叫小橘 → `2026-09-01` 起")
    diaries = {date(2026, 9, 2): "猫又跑了。猫猫猫。", date(2026, 9, 3): "想起 猫  ·\n叫小橘 这行"}
    assert m.recall_days(a, diaries, today=date(2026, 9, 10)) == {date(2026, 9, 3)}


def test_recall_window_is_own_date_to_today() -> None:
    a = m.parse_anchor("- 搬家计划 · x → `2026-09-05` 起")
    diaries = {d: "搬家计划" for d in (date(2026, 9, 4), date(2026, 9, 5), date(2026, 9, 8),
                                     date(2026, 9, 11))}
    days = m.recall_days(a, diaries, today=date(2026, 9, 10))
    assert days == {date(2026, 9, 5), date(2026, 9, 8)}


def test_matching_folds_latin_case_and_width_but_not_cjk_variants() -> None:
    rust = m.parse_anchor("- Rust rewrite · parser → `2026-09-01` 起")
    move = m.parse_anchor("- 搬家计划 · x → `2026-09-01` 起")
    diaries = {date(2026, 9, 2): "ＲＵＳＴ   REWRITE went fine", date(2026, 9, 3): "搬家計劃（繁体）"}
    assert m.recall_days(rust, diaries, today=TODAY) == {date(2026, 9, 2)}
    assert m.recall_days(move, diaries, today=TODAY) == frozenset()


def test_worked_examples_through_the_diary() -> None:
    a = m.parse_anchor("- 小橘 · 家里的橘猫 → `2026-09-01` 起")
    diaries = {date(2026, 9, 2): "小橘", date(2026, 9, 4): "小橘。" * 10, date(2026, 9, 6): "小橘"}
    [w] = m.weigh([a], diaries, today=date(2026, 9, 7))
    assert (w.n, w.t, w.stability) == (3, 6, 8)
    assert round(w.weight or 0, 2) == 0.47
    b = m.parse_anchor("- 小橘 · 家里的橘猫 → `2026-09-06` 起")  # mentioned on its own day and the next
    [w] = m.weigh([b], diaries | {date(2026, 9, 7): "小橘"}, today=date(2026, 9, 7))
    assert (w.n, w.t, w.stability) == (2, 1, 4)
    assert round(w.weight or 0, 2) == 0.78


def test_diaries_must_be_dated_text() -> None:
    a = m.parse_anchor("- a · b → `2026-09-01` 起")
    with pytest.raises(ArgumentTypeError, match="diaries"):
        m.recall_days(a, {"2026-09-02": "a"}, today=TODAY)  # type: ignore[dict-item]
    with pytest.raises(ArgumentTypeError, match="today"):
        m.recall_days(a, {}, today="2026-09-02")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- admission

def recalls(mapping: Mapping[str, list[int]]) -> dict[date, str]:
    """Diary text per day: each handle is mentioned on the days (days before TODAY) given.
    (Handles here are two characters or more, so the handle itself is the probe.)"""
    out: dict[date, str] = {}
    for handle, days in mapping.items():
        for n in days:
            out[day(n)] = out.get(day(n), "") + f" {handle} "
    return out


def test_while_the_list_fits_nothing_is_weighed_or_moved(monkeypatch: pytest.MonkeyPatch) -> None:
    view = [note(f"h{i}", day(90 - 10 * i)) for i in range(7)]
    text = file_of(view, sunk=["- old · y → `2026-01-01` 起"])

    def no_ranking(*args: object, **kwargs: object) -> list[m.AnchorWeight]:
        raise AssertionError("weighed while the list had room")

    monkeypatch.setattr(m.curve, "weigh", no_ranking)
    result = m.admit(m.AnchorList.parse(text), "new · z", today=TODAY)
    assert result.sunk == () and not result.returned
    assert result.added.text == f"- new · z → `{TODAY.isoformat()}` 起"
    expected = text.replace(view[-1] + "\n", view[-1] + "\n" + result.added.text + "\n")
    assert result.anchors.render() == expected


def test_full_list_sinks_the_lowest_weight_and_moves_its_line_unchanged() -> None:
    # (handle, own date days ago, recall days) and the weight that follows:
    plan = {
        "ka": (2, []),          # n=0 t=2  R=e^-2    =0.135
        "kb": (10, [9, 5, 1]),  # n=3 t=10 R=e^-1.25 =0.287
        "kc": (6, [4]),         # n=1 t=6  R=e^-3    =0.0498  <- lowest
        "kd": (1, []),          # n=0 t=1  R=e^-1    =0.368
        "ke": (3, [2]),         # n=1 t=3  R=e^-1.5  =0.223
        "kf": (20, list(range(1, 20, 4))),  # n=5 t=20 R=e^-0.625=0.535
        "kg": (4, [3, 2]),      # n=2 t=4  R=e^-1    =0.368
        "kh": (0, []),          # n=0 t=0  R=1
    }
    view = [note(k, day(t), f"detail {k}") for k, (t, _) in plan.items()]
    diaries = recalls({k: v for k, (_, v) in plan.items()})
    before = m.AnchorList.parse(file_of(view, sunk=["- old · y → `2026-01-01` 起"]))
    result = m.admit(before, "- 新的 · 第九条", today=TODAY, diaries=diaries)
    [gone] = result.sunk
    assert gone.anchor.handle == "kc" and gone.n == 1 and gone.t == 6
    after = result.anchors
    assert [a.handle for a in after.in_view] == ["ka", "kb", "kd", "ke", "kf", "kg", "kh", "新的"]
    assert [a.text for a in after.sunk] == ["- old · y → `2026-01-01` 起", view[2]]
    expected = stripped(before.render()) + [result.added.text]
    assert sorted(stripped(after.render())) == sorted(expected)


@pytest.mark.parametrize(("plan", "expected"), [
    # Equal R (t/S = 1 in all three): the older own date sinks.
    ({"ka": (1, []), "kb": (2, [1]), "kc": (4, [3, 2])}, "kc"),
    # Equal R (t = 0) and equal date: the smaller n sinks.
    ({"ka": (0, [0]), "kb": (0, []), "kc": (0, [0])}, "kb"),
    # Everything equal: the earlier line sinks.
    ({"ka": (3, []), "kb": (3, []), "kc": (3, [])}, "ka"),
    # R below 1e-12 rounds to 0 (n=0: t=40 and t=30): then the older date, not the float, decides.
    ({"ka": (30, []), "kb": (40, []), "kc": (0, [])}, "kb"),
])
def test_tie_breaks(plan: dict[str, tuple[int, list[int]]], expected: str) -> None:
    view = [note(k, day(t)) for k, (t, _) in plan.items()]
    diaries = recalls({k: v for k, (_, v) in plan.items()})
    result = m.admit(m.AnchorList.parse(file_of(view)), "z · new", today=TODAY, cap=3,
                     diaries=diaries)
    assert [w.anchor.handle for w in result.sunk] == [expected]


def test_undated_anchor_sinks_first() -> None:
    view = [note("ka", day(30)), "- kb · no date", note("kc", day(40))]
    result = m.admit(m.AnchorList.parse(file_of(view)), "z", today=TODAY, cap=3)
    assert [w.anchor.handle for w in result.sunk] == ["kb"]


def test_a_line_that_leaves_and_returns_is_new() -> None:
    old = note("Spanish lessons", day(30), "streak")
    view = [note("a", day(1)), old]
    diaries = recalls({"Spanish lessons": [29, 20, 10], "a": [0]})
    first = m.admit(m.AnchorList.parse(file_of(view)), "b · x", today=TODAY, cap=2, diaries=diaries)
    assert [w.anchor.text for w in first.sunk] == [old]
    # The user brings the very same line back the next day.
    tomorrow = TODAY + timedelta(days=1)
    back = m.admit(first.anchors, old, today=tomorrow, cap=2, diaries=diaries)
    assert back.returned
    assert back.added.own_date == tomorrow and back.added.title == "Spanish lessons · streak"
    [w] = m.weigh([back.added], diaries, today=tomorrow)
    assert (w.n, w.t, w.weight) == (0, 0, 1.0)  # the three old recall days are gone
    assert old in [a.text for a in back.anchors.sunk]  # sinking was not deletion


def test_admit_refuses_to_touch_a_line_in_view() -> None:
    lst = m.AnchorList.parse(file_of([note("小橘", day(3))]))
    with pytest.raises(ArgumentValueError, match="already in view at line 3"):
        m.admit(lst, "  小橘 · 新说法", today=TODAY)


def test_admit_keeps_a_dated_line_as_written_and_stamps_an_undated_one() -> None:
    lst = m.AnchorList.parse(file_of([]))
    dated = m.admit(lst, "* `2026-09-18` 周末徒步 · 香山", today=TODAY)
    assert dated.added.text == "- `2026-09-18` 周末徒步 · 香山"
    assert dated.added.own_date == date(2026, 9, 18)
    plain = m.admit(dated.anchors, "睡眠 · 两点才睡", today=TODAY)
    assert plain.added.own_date == TODAY and plain.added.kind == "note"
    assert [a.handle for a in plain.anchors.in_view] == ["周末徒步", "睡眠"]


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"new": "a\nb"}, ArgumentValueError, "one line"),
    ({"new": "a <!-- x"}, ArgumentValueError, "comment"),
    ({"new": "  - "}, ArgumentValueError, "title"),
    ({"new": 3}, ArgumentTypeError, "new must be"),
    ({"new": "a", "cap": 0}, ArgumentValueError, r"cap must be in \[1, 32\]"),
    ({"new": "a", "cap": 33}, ArgumentValueError, "cap"),
    ({"new": "a", "cap": True}, ArgumentTypeError, "cap must be an int"),
])
def test_admit_argument_errors(kwargs: dict[str, object], error: type[Exception],
                               match: str) -> None:
    with pytest.raises(error, match=match):
        m.admit(m.AnchorList.parse(""), today=TODAY, **kwargs)  # type: ignore[arg-type]


def test_sinking_creates_the_sunk_section_and_moves_nested_details_along() -> None:
    text = ("# 常被提起\n"
            "- a · x → `2026-09-01` 起\n"
            "  - a detail\n"
            "  more about a\n"
            "- b · y → `2026-09-19` 起\n"
            "\n"
            "# Elsewhere\n"
            "tail text")
    result = m.admit(m.AnchorList.parse(text), "c", today=TODAY, cap=2)
    assert result.anchors.render() == (
        "# 常被提起\n"
        "- b · y → `2026-09-19` 起\n"
        f"- c → `{TODAY.isoformat()}` 起\n"
        "\n"
        "# Elsewhere\n"
        "tail text\n"
        "\n"
        "# 沉底 · Sunk\n"
        "\n"
        "- a · x → `2026-09-01` 起\n"
        "  - a detail\n"
        "  more about a\n")


def test_crlf_files_get_crlf_lines() -> None:
    text = file_of([note("a", day(9)), note("b", day(1))], sunk=[]).replace("\n", "\r\n")
    result = m.admit(m.AnchorList.parse(text), "c", today=TODAY, cap=2)
    rendered = result.anchors.render()
    assert "\n" not in rendered.replace("\r\n", "")
    assert [a.handle for a in result.anchors.sunk] == ["a"]


def test_an_over_full_list_is_brought_back_to_the_cap() -> None:
    view = [note(f"h{i}", day(i)) for i in range(10)]
    result = m.admit(m.AnchorList.parse(file_of(view)), "z", today=TODAY)
    assert [w.anchor.handle for w in result.sunk] == ["h9", "h8", "h7"]
    assert len(result.anchors.in_view) == 8


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from([
    "- 小橘 · 橘猫 → `2026-09-01` 起", "* `2026-09-10` 搬家 · 十月", "- undated · x", "text line",
    "", "<!-- c -->", "<!--", "-->", "  - nested", "## 常被提起", "## 沉底", "## other", "```",
    "- Rust · parser → `2026-08-01` 起", "   ",
]), max_size=25), st.integers(1, 4), st.sampled_from(["\n", "\r\n"]))
def test_admit_only_adds_one_line_and_moves_others(lines: list[str], cap: int, nl: str) -> None:
    text = nl.join(lines)
    before = m.AnchorList.parse(text)
    try:
        result = m.admit(before, "- 新 · 新的一行", today=TODAY, cap=cap)
    except ArgumentValueError as exc:  # the only refusal: the file's end is inside a comment or fence
        assert "unclosed" in str(exc)
        assert "<!--" in lines or "```" in lines
        return
    after = stripped(result.anchors.render())
    added = [result.added.text]
    if result.sunk and not any(i.section == "sunk" for i in m.anchors._scan(before.lines)):
        added += ["## 沉底 · Sunk", "# 沉底 · Sunk", "### 沉底 · Sunk"]
    remaining = list(after)
    for line in stripped(text) + [result.added.text]:
        remaining.remove(line)  # every old line is still there, unchanged
    assert all(line in added for line in remaining)
    assert result.added in result.anchors.in_view
    assert len(result.anchors.in_view) == max(len(before.in_view) + 1 - len(result.sunk), 1)


# --------------------------------------------------------------------------- injection

def test_injected_block_shows_the_view_in_list_order_with_status_and_check() -> None:
    lst = m.AnchorList.parse(file_of(
        ["- 小橘 · 橘猫 → `2026-09-01` 起 <!-- private -->", "- `2026-09-03` 搬家 · 十月"],
        sunk=["- Spanish · streak → `2026-08-01` 起"]))
    zh = m.injected_block(lst, today=TODAY, lang="zh").splitlines()
    assert zh[1:3] == ["- 小橘 · 橘猫 → `2026-09-01` 起", "- `2026-09-03` 搬家 · 十月"]
    assert "Spanish" not in "\n".join(zh) and "private" not in "\n".join(zh)
    assert "2/8" in zh[3] and "1" in zh[3] and "已满" not in zh[3]
    assert zh[4] == "检查：通过。"
    en = m.injected_block(lst, today=TODAY, cap=2, lang="en").splitlines()
    assert "2/2 in view, 1 sunk" in en[3] and "full" in en[3]
    assert en[4] == "Check: passed."


def test_injected_block_failed_tone_lists_errors_only() -> None:
    lst = m.AnchorList.parse(file_of([note("a", day(1))]))
    errors = [m.Finding("error", "unknown-tag", f"tag #t{i} unknown", f"标签 #t{i} 不在词表",
                        "f.md", i + 1) for i in range(7)]
    warning = m.Finding("warning", "short-handle", "short", "短")
    en = m.injected_block(lst, today=TODAY, findings=[warning, *errors], lang="en").splitlines()
    assert en[3].startswith("Check failed") and "do not rewrite" in en[3]
    assert en[4:9] == [f"- f.md:{i + 1}: tag #t{i} unknown" for i in range(5)]
    assert en[9] == "… and 2 more" and "short" not in "\n".join(en)
    zh = m.injected_block(lst, today=TODAY, findings=errors, lang="zh").splitlines()
    assert zh[4] == "- f.md:1: 标签 #t0 不在词表" and zh[-1] == "……另有 2 条"


def test_nothing_is_injected_for_an_empty_list() -> None:
    lst = m.AnchorList.parse(file_of([], sunk=["- old · y → `2026-01-01` 起"]))
    assert m.injected_block(lst, today=TODAY) == ""
    with pytest.raises(ArgumentValueError, match="lang"):
        m.injected_block(lst, today=TODAY, lang="fr")  # type: ignore[arg-type]


def run_session(policy: m.Reinjection, roles: list[str]) -> list[int]:
    """Indexes of the messages after which the list is injected (-1: session start)."""
    out = []
    if policy.due():
        policy.injected()
        out.append(-1)
    for i, role in enumerate(roles):
        policy.message(role)
        if policy.due():
            policy.injected()
            out.append(i)
    return out


def test_refresh_zero_injects_once_per_session() -> None:
    assert run_session(m.Reinjection(), ["user", "assistant"] * 50) == [-1]


def test_refresh_every_five_counted_messages() -> None:
    roles = ["user", "assistant", "tool", "tool", "assistant", "user", "system", "assistant"] * 3
    counted = [i for i, r in enumerate(roles) if r in ("user", "assistant")]
    assert len(counted) == 15
    assert run_session(m.Reinjection(5), roles) == [-1, counted[4], counted[9], counted[14]]
    policy = m.Reinjection(1)
    policy.injected()
    policy.message("user", own_notice=True)
    assert not policy.due()


@pytest.mark.parametrize(("value", "error"), [(-1, ArgumentValueError), (1.5, ArgumentTypeError),
                                              (True, ArgumentTypeError)])
def test_refresh_validation(value: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="refresh_after_messages"):
        m.Reinjection(value)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- the folder

@pytest.fixture
def folder(tmp_path: Path) -> Path:
    target = tmp_path / "memory"
    shutil.copytree(EXAMPLE, target)
    return target


def codes(path: Path) -> list[tuple[str, str]]:
    return [(f.level, f.code) for f in m.check(m.load(path))]


def test_example_folder_passes_the_check() -> None:
    text, ok = cli.memory_check_command(EXAMPLE)
    assert ok, text
    assert text.startswith("ok: 8 in view, 1 sunk, 7 diary day(s)")


def test_tag_outside_the_vocabulary_is_an_error(folder: Path) -> None:
    anchors = folder / "ofttold.md"
    text = anchors.read_text(encoding="utf-8").replace("#疲惫", "#烦躁")
    anchors.write_text(text, encoding="utf-8")
    lineno = text.split("\n").index(next(line for line in text.split("\n") if "#烦躁" in line)) + 1
    report, ok = cli.memory_check_command(folder)
    assert not ok
    assert f"error   ofttold.md:{lineno}: emotion tag #烦躁 is not in the emotion vocabulary" \
        in report


def test_vocabulary_forms_and_tags_in_comments(folder: Path) -> None:
    notes = folder / "notes.md"
    notes.write_text("- ran 10 km #Happy #ANXIOUS\n<!-- - #ignored -->\n- #疲惫 again\n",
                     encoding="utf-8")
    assert codes(folder) == []


def test_missing_vocabulary_section_is_an_error_even_without_tags(tmp_path: Path) -> None:
    (tmp_path / "ofttold.md").write_text(file_of([note("ka", day(1))]), encoding="utf-8")
    assert codes(tmp_path) == [("error", "no-vocabulary")]


def test_line_problems(tmp_path: Path) -> None:
    view = [note(f"h{i}", day(i)) for i in range(8)] + [
        "- 猫 · 叫小橘 → `2026-02-30` 起", "- h1 · again", note("kx", day(1)) + " #开心"]
    (tmp_path / "ofttold.md").write_text(file_of(view), encoding="utf-8")
    (tmp_path / "emotions.md").write_text("## Emotion vocabulary\n- 开心\n", encoding="utf-8")
    (tmp_path / "diary").mkdir()
    (tmp_path / "diary" / "2026-9-1.md").write_text("x", encoding="utf-8")
    (tmp_path / "diary" / "2026-09-01.md").write_text("x", encoding="utf-8")
    assert sorted(codes(tmp_path)) == sorted([
        ("error", "over-cap"), ("error", "bad-date"), ("warning", "short-handle"),
        ("error", "no-date"), ("warning", "duplicate-handle"), ("warning", "bad-diary-name"),
    ])
    assert m.check(m.load(tmp_path), cap=11) and ("error", "over-cap") not in [
        (f.level, f.code) for f in m.check(m.load(tmp_path), cap=11)]


def test_long_lines_warn_about_the_token_budget(tmp_path: Path) -> None:
    view = [note(f"话题{i}", day(1), "很长的细节" * 12) for i in range(8)]
    (tmp_path / "ofttold.md").write_text(file_of(view), encoding="utf-8")
    (tmp_path / "emotions.md").write_text("## 情绪词表\n- 开心\n", encoding="utf-8")
    assert codes(tmp_path) == [("warning", "over-budget")]


def test_check_command_on_a_non_folder(tmp_path: Path) -> None:
    report, ok = cli.memory_check_command(tmp_path / "missing")
    assert not ok and "not a directory" in report
    report, ok = cli.memory_check_command(tmp_path)
    assert not ok and "no ofttold.md" in report


def test_scaffold_creates_four_empty_shells_once(tmp_path: Path) -> None:
    root = tmp_path / "new"
    created = m.scaffold(root)
    assert {p.relative_to(tmp_path).as_posix() for p in created} == {
        "new", "new/ofttold.md", "new/emotions.md", "new/notes.md", "new/diary"}
    folder = m.load(root)
    assert folder.anchors.anchors == () and folder.diaries == {}
    assert folder.vocabulary == frozenset() and folder.tag_uses == ()
    assert not any(re.match(r"\s*[-*+] ", line) for p in root.glob("*.md")
                   for line in m.anchors._split_lines(p.read_text(encoding="utf-8"))
                   if not line.startswith(("<!--", " ")))
    text, ok = cli.memory_check_command(root)
    assert ok and "empty-vocabulary" not in text and "emotion vocabulary section is empty" in text
    (root / "ofttold.md").write_text("# mine\n", encoding="utf-8")
    assert m.scaffold(root) == []
    assert (root / "ofttold.md").read_text(encoding="utf-8") == "# mine\n"


def test_admit_into_a_scaffold_lands_in_the_oft_told_section(tmp_path: Path) -> None:
    m.scaffold(tmp_path)
    lst = m.load(tmp_path).anchors
    for i in range(3):
        lst = m.admit(lst, f"话题{i} · 细节", today=TODAY, cap=2).anchors
    m.save(tmp_path, lst)
    again = m.load(tmp_path).anchors
    assert [a.handle for a in again.in_view] == ["话题1", "话题2"]
    assert [a.handle for a in again.sunk] == ["话题0"]
    text = again.render()
    assert text.index("话题2") < text.index("## 沉底 · Sunk") < text.index("话题0")


def test_scaffold_refuses_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x", encoding="utf-8")
    with pytest.raises(ArgumentValueError, match="not a directory"):
        m.scaffold(tmp_path / "f")


def table(text: str) -> dict[str, list[str]]:
    rows = [re.split(r" {2,}", line.strip()) for line in text.splitlines()[3:-1]]
    return {row[0]: row[1:] for row in rows}


def test_rank_command_on_the_example() -> None:
    before = {p: p.read_bytes() for p in EXAMPLE.rglob("*") if p.is_file()}
    out = cli.memory_rank_command(EXAMPLE, today=date(2026, 11, 20))
    rows = table(out)
    # 小橘: own date 10-02; the diary names it on 10-05, 10-26 and twice on 11-15 -> n = 3, t = 49.
    assert rows["小橘"][:4] == ["2026-10-02", "3", "49", "8"]
    assert float(rows["小橘"][4]) == pytest.approx(math.exp(-49 / 8), abs=1e-4)
    # 周末徒步: its own day's diary says 香山徒步, not the handle -> n = 0, t = 12: lowest R.
    assert rows["周末徒步"][:4] == ["2026-11-08", "0", "12", "1"]
    assert rows["Spanish lessons"][-1] == "sunk"
    assert list(rows)[7] == "周末徒步"  # in view, strongest first: the weakest is last
    assert out.splitlines()[-1].endswith("the next new anchor sinks '周末徒步'.")
    assert {p: p.read_bytes() for p in EXAMPLE.rglob("*") if p.is_file()} == before


def test_rank_command_with_room(tmp_path: Path) -> None:
    m.scaffold(tmp_path)
    (tmp_path / "ofttold.md").write_text(file_of([note("a", day(2))]), encoding="utf-8")
    out = cli.memory_rank_command(tmp_path, today=TODAY)
    assert table(out)["a"] == [day(2).isoformat(), "0", "2", "1", f"{math.exp(-2):.4f}", "in view"]
    assert out.splitlines()[-1] == "1/8 in view, 0 sunk. The list has room: nothing sinks."
    with pytest.raises(ArgumentValueError, match="not a directory"):
        cli.memory_rank_command(tmp_path / "missing")


def test_admit_refuses_when_the_file_ends_inside_a_comment() -> None:
    text = "# 常被提起\n\n<!-- unfinished\n- ka · x → `2026-09-01` 起\n"
    with pytest.raises(ArgumentValueError, match="unclosed HTML comment"):
        m.admit(m.AnchorList.parse(text), "kb", today=TODAY)
    # With an anchor in view the new line goes right after it, before the comment: no problem.
    text = file_of([note("ka", day(1))]) + "<!-- unfinished\n"
    assert m.admit(m.AnchorList.parse(text), "kb", today=TODAY).added.handle == "kb"


def test_admit_on_the_example_sinks_what_rank_names(folder: Path) -> None:
    loaded = m.load(folder)
    result = m.admit(loaded.anchors, "Flu shot · booked for Saturday", today=date(2026, 11, 20),
                     diaries=loaded.diaries)
    assert [w.anchor.handle for w in result.sunk] == ["周末徒步"]
    assert [a.handle for a in result.anchors.sunk] == ["Spanish lessons", "周末徒步"]
    m.save(folder, result.anchors)
    assert cli.memory_check_command(folder)[1]
    assert m.load(folder).anchors.render() == result.anchors.render()
