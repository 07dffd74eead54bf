"""Wrong types and out-of-range values: every rule field, every Ruleset option, every argument.

Each row says what is built, the error class expected (the contextcare subclasses of TypeError /
ValueError) and the name the message must contain, so a user can tell which field to fix.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

import contextcare

from contextcare.errors import (
    ArgumentTypeError,
    ArgumentValueError,
    ContextCareError,
    RuleTypeError,
    RuleValueError,
)
from contextcare.rules import (
    ContextAnxiety,
    FillerLines,
    LineCycle,
    LineRepeat,
    Marker,
    Phrases,
    PrefixMonotony,
    TailRepeat,
    TimeAnxiety,
)

TE, VE = RuleTypeError, RuleValueError
ATE, AVE = ArgumentTypeError, ArgumentValueError
Row = tuple[str, Callable[[], object], type[Exception], str]


def rows(ctor: Callable[..., object], *args: Any,
         cases: list[tuple[dict[str, Any], type[Exception], str]]) -> list[Row]:
    name = getattr(ctor, "__name__", "rule")
    out: list[Row] = []
    for kwargs, exc, field in cases:
        label = f"{name}-{'-'.join(f'{k}={v!r}'[:30] for k, v in kwargs.items())}"
        out.append((label, functools.partial(ctor, *args, **kwargs), exc, field))
    return out


COMMON: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"channel": "answer"}, VE, "channel"),
    ({"channel": 1}, TE, "channel"),
    ({"action": "stop"}, VE, "action"),
    ({"action": None}, TE, "action"),
    ({"once": None}, TE, "once"),
    ({"once": 1}, TE, "once"),
]

RULE_ROWS: list[Row] = [
    *rows(Phrases, "p", cases=[
        ({"phrases": "abc"}, TE, "phrases"),
        ({"phrases": 5}, TE, "phrases"),
        ({"phrases": b"abc"}, TE, "phrases"),
        ({"phrases": [1]}, TE, "phrases[0]"),
        ({"phrases": ["ok", b"x"]}, TE, "phrases[1]"),
        ({"phrases": []}, VE, "phrases"),
        ({"phrases": [""]}, VE, "phrases[0]"),
        ({"phrases": ["x" * 4097]}, VE, "phrases[0]"),
        ({"phrases": ["x"], "ignore_case": 1}, TE, "ignore_case"),
        ({"phrases": ["x"], "suppress_quoted": "yes"}, TE, "suppress_quoted"),
        *[({"phrases": ["x"], **kw}, exc, f) for kw, exc, f in COMMON],
    ]),
    ("Phrases-id-int", lambda: Phrases(5, ["x"]), TE, "id"),  # type: ignore[arg-type]
    ("Phrases-id-empty", lambda: Phrases("", ["x"]), VE, "id"),
    ("Phrases-id-padded", lambda: Phrases(" x", ["x"]), VE, "id"),
    ("Phrases-id-too-long", lambda: Phrases("x" * 201, ["x"]), VE, "id"),
    *rows(Marker, "m", cases=[
        ({"token": ""}, VE, "token"),
        ({"token": 5}, TE, "token"),
        ({"token": "x" * 4097}, VE, "token"),
        ({"token": "x", "ignore_case": 0}, TE, "ignore_case"),
        *[({"token": "x", **kw}, exc, f) for kw, exc, f in COMMON],
    ]),
    *rows(TimeAnxiety, cases=[
        ({"lang": "fr"}, VE, "lang"),
        ({"lang": ["zh", "de"]}, VE, "lang"),
        ({"lang": []}, VE, "lang"),
        ({"lang": 5}, TE, "lang"),
        ({"lang": ["zh", 5]}, TE, "lang[1]"),  # was a ValueError (issue 17)
        ({"lang": [["zh"]]}, TE, "lang[0]"),
        ({"lang": b"zh"}, TE, "lang"),
        ({"extra": "abc"}, TE, "extra"),
        ({"extra": [""]}, VE, "extra[0]"),
        ({"extra": [3]}, TE, "extra[0]"),
        ({"suppress_quoted": 1}, TE, "suppress_quoted"),
        *COMMON,
    ]),
    *rows(ContextAnxiety, cases=[
        ({"lang": "ja"}, VE, "lang"),
        ({"extra": ["x" * 4097]}, VE, "extra[0]"),
        ({"channel": "speech"}, VE, "channel"),
    ]),
    *rows(LineRepeat, "r", cases=[
        ({"min_lines": 0}, VE, "min_lines"),
        ({"min_lines": 1.5}, TE, "min_lines"),
        ({"min_lines": True}, TE, "min_lines"),
        ({"min_lines": 65536}, VE, "min_lines"),
        ({"min_count": 0}, VE, "min_count"),
        ({"min_count": "30"}, TE, "min_count"),
        ({"min_ratio": 0}, VE, "min_ratio"),
        ({"min_ratio": 1.5}, VE, "min_ratio"),
        ({"min_ratio": -0.1}, VE, "min_ratio"),
        ({"min_ratio": float("nan")}, VE, "min_ratio"),
        ({"min_ratio": float("inf")}, VE, "min_ratio"),
        ({"min_ratio": "0.5"}, TE, "min_ratio"),
        ({"min_ratio": True}, TE, "min_ratio"),
        ({"min_run": -1}, VE, "min_run"),
        ({"min_run": None}, TE, "min_run"),
        ({"every_bytes": 0}, VE, "every_bytes"),
        ({"every_bytes": (1 << 32) + 1}, VE, "every_bytes"),
        ({"every_bytes": 300.0}, TE, "every_bytes"),
        *COMMON,
    ]),
    *rows(LineCycle, "c", cases=[
        ({"max_line_chars": 0}, VE, "max_line_chars"),
        ({"max_line_chars": 41}, VE, "max_line_chars"),
        ({"min_lines": 0}, VE, "min_lines"),
        ({"top": 0}, VE, "top"),
        ({"top": 65}, VE, "top"),
        ({"top": 2.0}, TE, "top"),
        ({"cover_ratio": 0.0}, VE, "cover_ratio"),
        ({"cover_ratio": 1.01}, VE, "cover_ratio"),
        ({"cover_ratio": None}, TE, "cover_ratio"),
        ({"every_bytes": -5}, VE, "every_bytes"),
    ]),
    *rows(FillerLines, "f", cases=[
        ({"fillers": ""}, VE, "fillers"),
        ({"fillers": 5}, TE, "fillers"),
        ({"fillers": ["做"]}, TE, "fillers"),
        ({"fillers": "x" * 257}, VE, "fillers"),
        ({"max_line_chars": 41}, VE, "max_line_chars"),
        ({"min_count": 0}, VE, "min_count"),
        ({"min_ratio": 2}, VE, "min_ratio"),
    ]),
    *rows(PrefixMonotony, "m", cases=[
        ({"delimiters": ""}, VE, "delimiters"),
        ({"delimiters": None}, TE, "delimiters"),
        ({"delimiters": "," * 65}, VE, "delimiters"),
        ({"max_prefix_chars": 0}, VE, "max_prefix_chars"),
        ({"max_prefix_chars": 9}, VE, "max_prefix_chars"),
        ({"min_lines": 0}, VE, "min_lines"),
        ({"min_count": 0}, VE, "min_count"),
        ({"min_ratio": -0.1}, VE, "min_ratio"),
    ]),
    *rows(TailRepeat, "t", cases=[
        ({"window_chars": 1}, VE, "window_chars"),
        ({"window_chars": 65537}, VE, "window_chars"),
        ({"window_chars": "768"}, TE, "window_chars"),
        ({"window_chars": 100}, VE, "max_period"),     # default max_period 256 > 100 // 2
        ({"max_period": 0}, VE, "max_period"),
        ({"max_period": 385}, VE, "max_period"),       # > 768 // 2
        ({"min_repeats": 1}, VE, "min_repeats"),
        ({"min_repeats": 769}, VE, "min_repeats"),
        ({"min_chars": 1}, VE, "min_chars"),
        ({"window_chars": 100, "max_period": 50, "min_chars": 101}, VE, "min_chars"),
        ({"every_bytes": 0}, VE, "every_bytes"),
        *COMMON,
    ]),
]


def _assert_names(excinfo: pytest.ExceptionInfo[BaseException], field: str) -> None:
    assert re.search(rf"(?<![\w\[]){re.escape(field)}(?![\w])", str(excinfo.value)), (
        f"message does not name {field!r}: {excinfo.value}")


@pytest.mark.parametrize(("build", "exc", "field"), [r[1:] for r in RULE_ROWS],
                         ids=[r[0] for r in RULE_ROWS])
def test_rule_errors(build: Callable[[], object], exc: type[Exception], field: str) -> None:
    with pytest.raises(exc) as excinfo:
        build()
    assert isinstance(excinfo.value, ContextCareError)
    _assert_names(excinfo, field)


def test_valid_rules_construct() -> None:
    # Boundaries that are allowed (the rows above sit just outside them).
    LineRepeat("r", min_ratio=1, min_run=0, every_bytes=1 << 32)
    LineCycle("c", max_line_chars=40, top=64, cover_ratio=1.0)
    PrefixMonotony("m", max_prefix_chars=8)
    TailRepeat("t", window_chars=2, max_period=1, min_repeats=2, min_chars=2)
    Phrases("p", ("x" * 4096,))
    assert TimeAnxiety(lang="zh").lang == ("zh",)
    assert LineRepeat("r", min_ratio=1).min_ratio == 1.0


# ---------------------------------------------------------------------- Ruleset

OPTION_ROWS: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"line_window": 0}, VE, "line_window"),
    ({"line_window": 65536}, VE, "line_window"),
    ({"line_window": "80"}, TE, "line_window"),
    ({"line_window": 80.0}, TE, "line_window"),
    ({"min_line_chars": 0}, VE, "min_line_chars"),
    ({"min_line_chars": 2.0}, TE, "min_line_chars"),
    ({"evidence_chars": -1}, VE, "evidence_chars"),
    ({"evidence_chars": 65537}, VE, "evidence_chars"),
    ({"evidence_chars": None}, TE, "evidence_chars"),
    ({"mask_code_fences": 1}, TE, "mask_code_fences"),
    ({"mask_code_fences": "yes"}, TE, "mask_code_fences"),
]


@pytest.mark.parametrize(("kwargs", "exc", "field"), OPTION_ROWS,
                         ids=[f"{k}={v!r}" for kw, _, _ in OPTION_ROWS for k, v in kw.items()])
def test_ruleset_option_errors(engine: ModuleType, kwargs: dict[str, Any], exc: type[Exception],
                               field: str) -> None:
    with pytest.raises(exc) as excinfo:
        engine.Ruleset([Phrases("p", ["x"])], **kwargs)
    _assert_names(excinfo, field)


RULES_ROWS: list[tuple[str, Callable[[], list[Any] | Any], dict[str, Any], type[Exception], str]] = [
    ("not-a-sequence", lambda: 5, {}, TE, "rules"),
    ("a-string", lambda: "abc", {}, TE, "rules"),
    ("a-single-rule", lambda: LineRepeat("r"), {}, TE, "rules"),
    ("not-a-rule", lambda: [Phrases("p", ["x"]), 5], {}, TE, "rules[1]"),
    ("a-dict", lambda: [{"id": "p"}], {}, TE, "rules[0]"),
    ("duplicate-ids", lambda: [Phrases("same", ["x"]), LineRepeat("same")], {}, VE, "same"),
    ("min-lines-above-window", lambda: [LineRepeat("r")], {"line_window": 20}, VE, "min_lines"),
    ("min-count-above-window",
     lambda: [FillerLines("f", min_count=25)], {"line_window": 20}, VE, "min_count"),
    ("min-run-above-window",
     lambda: [LineRepeat("r", min_lines=10, min_count=10, min_run=30)], {"line_window": 20}, VE,
     "min_run"),
    ("cycle-min-lines-above-window",
     lambda: [LineCycle("c")], {"line_window": 20}, VE, "min_lines"),
    ("prefix-min-count-above-window",
     lambda: [PrefixMonotony("m", min_lines=5, min_count=9)], {"line_window": 8}, VE,
     "min_count"),
]


@pytest.mark.parametrize(("rules", "kwargs", "exc", "field"), [r[1:] for r in RULES_ROWS],
                         ids=[r[0] for r in RULES_ROWS])
def test_ruleset_rules_errors(engine: ModuleType, rules: Callable[[], Any],
                              kwargs: dict[str, Any], exc: type[Exception], field: str) -> None:
    with pytest.raises(exc) as excinfo:
        engine.Ruleset(rules(), **kwargs)
    assert field in str(excinfo.value)


def test_duplicate_id_message(engine: ModuleType) -> None:
    with pytest.raises(VE, match="duplicate"):
        engine.Ruleset([Phrases("same", ["x"]), LineRepeat("same")])


def test_thresholds_at_line_window_are_fine(engine: ModuleType) -> None:
    rs = engine.Ruleset([LineRepeat("r", min_lines=20, min_count=20, min_run=20)], line_window=20)
    assert rs.replay("same\n" * 20)[0].count == 20


def test_options_are_keyword_only(engine: ModuleType) -> None:
    with pytest.raises(TypeError):
        engine.Ruleset([], 80)
    with pytest.raises(TypeError):
        engine.Ruleset([], window=80)
    with pytest.raises(TypeError):
        engine.Ruleset(rules=[])


# ---------------------------------------------------------------------- feed / replay / tail

def _watcher(engine: ModuleType) -> Any:
    return engine.Ruleset([Phrases("p", ["abc"])]).watcher()


# Arguments of calls are not rules: their errors are ArgumentTypeError / ArgumentValueError.
CALL_ROWS: list[tuple[str, Callable[[Any], object], type[Exception], str]] = [
    ("feed-bytes", lambda w: w.feed(b"abc"), ATE, "text"),
    ("feed-none", lambda w: w.feed(None), ATE, "text"),
    ("feed-int", lambda w: w.feed(5), ATE, "text"),
    ("feed-channel-combined", lambda w: w.feed("abc", "combined"), AVE, "channel"),
    ("feed-channel-case", lambda w: w.feed("abc", channel="Text"), AVE, "channel"),
    ("feed-channel-int", lambda w: w.feed("abc", 5), ATE, "channel"),
    ("feed-channel-none", lambda w: w.feed("abc", None), ATE, "channel"),
    ("tail-str", lambda w: w.tail("3"), ATE, "n"),
    ("tail-float", lambda w: w.tail(2.0), ATE, "n"),
    ("tail-bool", lambda w: w.tail(True), ATE, "n"),
    ("tail-negative", lambda w: w.tail(-1), AVE, "n"),
    ("replay-bytes", lambda w: w.ruleset.replay(b"abc"), ATE, "text"),
    ("replay-splits-int", lambda w: w.ruleset.replay("abc", 5), ATE, "splits"),
    ("replay-splits-decreasing", lambda w: w.ruleset.replay("abc", [2, 1, 3]), AVE, "splits"),
    ("replay-splits-short", lambda w: w.ruleset.replay("abc", [1]), AVE, "splits"),
    ("replay-splits-beyond", lambda w: w.ruleset.replay("abc", [4]), AVE, "splits"),
    ("replay-splits-negative", lambda w: w.ruleset.replay("abc", [-1, 3]), AVE, "splits"),
    ("replay-splits-empty", lambda w: w.ruleset.replay("abc", []), AVE, "splits"),
    ("replay-channel", lambda w: w.ruleset.replay("abc", channel="combined"), AVE, "channel"),
    ("replay-channel-int", lambda w: w.ruleset.replay("abc", channel=1), ATE, "channel"),
]


@pytest.mark.parametrize(("call", "exc", "field"), [r[1:] for r in CALL_ROWS],
                         ids=[r[0] for r in CALL_ROWS])
def test_argument_errors(engine: ModuleType, call: Callable[[Any], object],
                         exc: type[Exception], field: str) -> None:
    w = _watcher(engine)
    w.feed("ab")
    with pytest.raises(exc) as excinfo:
        call(w)
    _assert_names(excinfo, field)
    # A refused call changes nothing: the phrase still completes at its offset.
    (d,) = w.feed("c")
    assert d.offset == 3 and w.tail() == "abc"


def test_errors_are_builtin_subclasses() -> None:
    assert issubclass(RuleTypeError, TypeError) and issubclass(RuleValueError, ValueError)
    with pytest.raises(ValueError):
        LineRepeat("r", min_ratio=0)
    with pytest.raises(TypeError):
        LineRepeat("r", min_lines="1")


#: The fields each rule class needs to be built (everything else has a default).
_REQUIRED: dict[type, dict[str, Any]] = {
    Phrases: {"id": "p", "phrases": ["x"]}, Marker: {"id": "m", "token": "x"},
    TimeAnxiety: {}, ContextAnxiety: {}, LineRepeat: {"id": "r"}, LineCycle: {"id": "c"},
    FillerLines: {"id": "f"}, PrefixMonotony: {"id": "m"}, TailRepeat: {"id": "t"},
}


@pytest.mark.parametrize("cls", list(_REQUIRED), ids=lambda c: c.__name__)
def test_a_wrong_type_is_a_type_error_in_every_field(cls: type) -> None:
    """The class of the ``lang=['zh', 5]`` defect: in no field of any rule is a value of a type
    the field never takes (an object, a list holding one, a list holding an int) reported as a
    wrong *value*."""
    for field in dataclasses.fields(cls):
        if not field.init:
            continue
        for bad in (object(), [object()], ["zh", 5]):
            with pytest.raises(RuleTypeError) as excinfo:
                cls(**{**_REQUIRED[cls], field.name: bad})
            assert field.name in str(excinfo.value), excinfo.value


def test_errors_are_named_for_what_failed() -> None:
    assert issubclass(RuleTypeError, ArgumentTypeError) and issubclass(ArgumentTypeError, TypeError)
    assert issubclass(RuleValueError, ArgumentValueError)
    assert issubclass(ArgumentValueError, ValueError)
    w = contextcare.Ruleset([Phrases("p", ["abc"])]).watcher()
    with pytest.raises(ArgumentValueError) as arg:  # a call's argument, not a rule
        w.feed("abc", "combined")
    assert not isinstance(arg.value, RuleValueError)
    with pytest.raises(RuleValueError):  # a rule's field
        Phrases("p", [])
