"""Bad input at the extremes: huge and empty phrase sets, megabyte phrases, absurd throttles and
thresholds, broken ``splits``, malformed trace lines.

``test_rule_errors.py`` checks that each rule field and argument names itself when it is wrong;
this file pushes sizes and values to their limits and beyond, and checks three things for every
row: the documented error (class and the name in its message), that nothing already fed is lost
(a watcher that was mid-stream when the bad call happened finishes its stream exactly as if the
call had never been made), and that the process stays healthy (a fresh ruleset still works).
"""

from __future__ import annotations

import array
import io
import json
import re
import subprocess
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import contextcare._engine as native
from contextcare import reference
from contextcare.errors import (
    ArgumentTypeError,
    ArgumentValueError,
    ContextCareError,
    RuleValueError,
    UninitialisedError,
)
from contextcare.guard import Guard
from contextcare.rules import (
    MAX_PHRASE_BYTES,
    MAX_PHRASE_CHARS,
    MAX_PHRASES,
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
from contextcare.streams import openai_parts, watch_openai
from contextcare.tomlrules import (
    MAX_TOML_DEPTH,
    RulesFileError,
    load_rules,
    loads_rules,
)
from contextcare.traces import Event, TraceFormatError, iter_events, scan

TE, VE = ArgumentTypeError, ArgumentValueError  # rule errors are subclasses
MB = "x" * (1 << 20)   # a 1 MiB phrase
INF: Any = float("inf")      # values of the wrong type, typed Any for the type checker
NP_INT: Any = np.int64(300)


def no_phrases() -> Any:
    """An empty generator (rules take any iterable of phrases)."""
    return iter([])


# ---------------------------------------------------------------------- the canary stream

CANARY_TEXT = "we hurry up\n" + "same line\n" * 12


def canary_rules(engine: ModuleType) -> Any:
    return engine.Ruleset([Phrases("hurry", ["hurry up"]),
                           LineRepeat("loop", min_lines=10, min_count=10, every_bytes=7)],
                          line_window=20)


@pytest.fixture
def canary(engine: ModuleType) -> Any:
    """A watcher half-way through :data:`CANARY_TEXT` when the bad call happens."""
    w = canary_rules(engine).watcher()
    w.feed(CANARY_TEXT[:20], "text")
    return w


def assert_canary_intact(engine: ModuleType, w: Any) -> None:
    """The canary finishes its stream exactly like an undisturbed watcher, and a fresh ruleset
    still works."""
    rest = [*w.feed(CANARY_TEXT[20:], "text"), *w.finish()]
    whole = canary_rules(engine).replay(CANARY_TEXT)
    assert [d.rule for d in whole] == ["hurry", "loop"], "the canary must fire to prove anything"
    assert rest == [d for d in whole if d.offset > 20]
    assert w.tail() == CANARY_TEXT[-600:]


# ---------------------------------------------------------------------- rules and rulesets

def many(n: int, length: int = 8) -> list[str]:
    return [f"{i:0{length}d}" for i in range(n)]


BuildRow = tuple[str, Callable[[ModuleType], object], type[Exception], str]

BUILD_ROWS: list[BuildRow] = [
    # phrase sets at and past their limits
    ("max-phrases-plus-one", lambda e: e.Ruleset(
        [Phrases("p", many(MAX_PHRASES)), Marker("m", "x")]), VE, "phrases"),
    ("1MiB-phrase", lambda e: e.Ruleset([Phrases("p", ["ok", MB])]), VE, "phrases[1]"),
    ("1MiB-marker", lambda e: e.Ruleset([Marker("m", MB)]), VE, "token"),
    ("1MiB-extra", lambda e: e.Ruleset([TimeAnxiety(extra=[MB])]), VE, "extra[0]"),
    ("1MiB-fillers", lambda e: e.Ruleset([FillerLines("f", fillers=MB)]), VE, "fillers"),
    ("1MiB-delimiters", lambda e: e.Ruleset([PrefixMonotony("m", delimiters=MB)]), VE,
     "delimiters"),
    ("phrase-bytes-over-16MiB", lambda e: e.Ruleset(
        [Phrases("p", [f"{i:04d}" + "é" * (MAX_PHRASE_CHARS - 4) for i in range(2100)])]), VE,
     "UTF-8 bytes"),
    ("phrase-bytes-over-16MiB-surrogates", lambda e: e.Ruleset(
        [Phrases(f"p{i}", [f"{i:04d}" + "\udc80" * (MAX_PHRASE_CHARS - 4)]) for i in range(1400)]),
     VE, "UTF-8 bytes"),
    # empty phrase lists
    ("empty-phrases", lambda e: e.Ruleset([Phrases("p", [])]), VE, "phrases"),
    ("empty-phrase", lambda e: e.Ruleset([Phrases("p", ["a", ""])]), VE, "phrases[1]"),
    ("empty-phrases-generator", lambda e: e.Ruleset([Phrases("p", no_phrases())]), VE,
     "phrases"),
    ("empty-marker", lambda e: e.Ruleset([Marker("m", "")]), VE, "token"),
    ("empty-lang", lambda e: e.Ruleset([ContextAnxiety(lang=())]), VE, "lang"),
    # duplicate ids, across kinds and with many rules
    ("duplicate-id-across-kinds", lambda e: e.Ruleset(
        [TailRepeat("x"), Phrases("y", ["a"]), FillerLines("x")]), VE, "'x'"),
    ("duplicate-default-ids", lambda e: e.Ruleset([TimeAnxiety(), TimeAnxiety(lang="en")]), VE,
     "time-anxiety"),
    ("duplicate-id-among-1000", lambda e: e.Ruleset(
        [Marker(f"m{i}", f"t{i}") for i in range(1000)] + [Marker("m500", "z")]), VE, "m500"),
    # absurd throttles
    ("every_bytes-2**32+1", lambda e: e.Ruleset([LineRepeat("r", every_bytes=(1 << 32) + 1)]),
     VE, "every_bytes"),
    ("every_bytes-2**64", lambda e: e.Ruleset([TailRepeat("t", every_bytes=1 << 64)]), VE,
     "every_bytes"),
    ("every_bytes-10**100", lambda e: e.Ruleset([LineCycle("c", every_bytes=10**100)]), VE,
     "every_bytes"),
    ("every_bytes--2**63", lambda e: e.Ruleset([FillerLines("f", every_bytes=-(1 << 63))]), VE,
     "every_bytes"),
    ("every_bytes-inf", lambda e: e.Ruleset([LineRepeat("r", every_bytes=INF)]), TE,
     "every_bytes"),
    ("every_bytes-numpy", lambda e: e.Ruleset([LineRepeat("r", every_bytes=NP_INT)]), TE,
     "every_bytes"),
    # out-of-range thresholds far past their limits (no OverflowError from a C conversion)
    ("min_lines-2**64", lambda e: e.Ruleset([LineRepeat("r", min_lines=1 << 64)]), VE,
     "min_lines"),
    ("min_count--2**64", lambda e: e.Ruleset([FillerLines("f", min_count=-(1 << 64))]), VE,
     "min_count"),
    ("top-10**30", lambda e: e.Ruleset([LineCycle("c", top=10**30)]), VE, "top"),
    ("window_chars-2**40", lambda e: e.Ruleset([TailRepeat("t", window_chars=1 << 40)]), VE,
     "window_chars"),
    ("min_ratio-1e308", lambda e: e.Ruleset([LineRepeat("r", min_ratio=1e308)]), VE,
     "min_ratio"),
    ("min_ratio-subnormal-negative", lambda e: e.Ruleset([LineRepeat("r", min_ratio=-5e-324)]),
     VE, "min_ratio"),
    ("line_window-2**64", lambda e: e.Ruleset([], line_window=1 << 64), VE, "line_window"),
    ("evidence_chars-2**64", lambda e: e.Ruleset([], evidence_chars=1 << 64), VE,
     "evidence_chars"),
    ("min_line_chars-huge", lambda e: e.Ruleset([], min_line_chars=10**18), VE, "min_line_chars"),
    ("min_lines-above-huge-window", lambda e: e.Ruleset(
        [LineRepeat("r", min_lines=65535, min_count=1)], line_window=65534), VE, "min_lines"),
    # wrong types at the ruleset level
    ("rules-None", lambda e: e.Ruleset(None), TE, "rules"),
    ("rules-dict", lambda e: e.Ruleset({"p": Phrases("p", ["a"])}), TE, "rules[0]"),
    ("rules-nested-list", lambda e: e.Ruleset([[Phrases("p", ["a"])]]), TE, "rules[0]"),
    ("rules-rule-class", lambda e: e.Ruleset([Phrases]), TE, "rules[0]"),
]


@pytest.mark.parametrize(("build", "exc", "name"), [r[1:] for r in BUILD_ROWS],
                         ids=[r[0] for r in BUILD_ROWS])
def test_bad_rulesets(engine: ModuleType, canary: Any, build: Callable[[ModuleType], object],
                      exc: type[Exception], name: str) -> None:
    with pytest.raises(exc) as excinfo:
        build(engine)
    assert isinstance(excinfo.value, ContextCareError)
    assert name in str(excinfo.value), excinfo.value
    assert_canary_intact(engine, canary)


def test_limits_themselves_are_accepted_and_work(engine: ModuleType) -> None:
    """Exactly MAX_PHRASES phrases, and phrases of MAX_PHRASE_CHARS code points (lone surrogates
    and NUL included) up to MAX_PHRASE_BYTES in all: accepted, and every one of them is found."""
    phrases = many(MAX_PHRASES)
    rs = engine.Ruleset([Phrases("p", phrases, once=False)])
    text = f"a{phrases[0]}b{phrases[-1]}c{phrases[31337]}"
    assert [d.phrase for d in rs.replay(text)] == [phrases[0], phrases[-1], phrases[31337]]

    unit = "\udc80\x00é"          # 3 + 1 + 2 UTF-8 bytes
    long = [f"{i:02d}" + unit * ((MAX_PHRASE_CHARS - 2) // 3) for i in range(12)]
    total = sum(len(p.encode("utf-8", "surrogatepass")) for p in long)
    assert all(len(p) <= MAX_PHRASE_CHARS for p in long) and total <= MAX_PHRASE_BYTES
    rs = engine.Ruleset([Phrases("p", long, once=False)])
    assert [d.phrase for d in rs.replay("--" + long[7] + long[11])] == [long[7], long[11]]


def test_automaton_size_limit_is_a_rule_value_error() -> None:
    """Phrases under both count and byte limits can still need an automaton larger than the
    native core allows (MAX_AUTOMATON_BYTES, 256 MiB per automaton, about 16 bytes a trie
    state): that is a RuleValueError naming the automaton, raised while building (never a
    MemoryError or a crash). The limit is lowered here (a testing hook) so that the test does
    not need a 16-million-state set. (The reference has no automaton and accepts them.)"""
    import random

    rng = random.Random(2)
    alphabet = [chr(c) for c in range(33, 127)] + [chr(c) for c in range(0xA1, 0x100)]
    phrases = ["".join(rng.choices(alphabet, k=22)) for _ in range(30000)]
    assert native.MAX_AUTOMATON_BYTES == 256 << 20
    old = native._automaton_limits(max_bytes=4 << 20)
    try:
        with pytest.raises(RuleValueError, match="automaton would exceed 4 MiB"):
            native.Ruleset([Phrases("p", phrases)])
        assert native.Ruleset([Phrases("p", phrases[:2000])]).replay(f"..{phrases[1999]}..")
    finally:
        native._automaton_limits(*old)
    # under the real limit the same set compiles, to a few MiB
    rs = native.Ruleset([Phrases("p", phrases)])
    assert 4 << 20 < rs.memory < 32 << 20
    assert [d.phrase for d in rs.replay(f"..{phrases[12345]}..")] == [phrases[12345]]


def test_every_bytes_at_its_limit_checks_only_at_finish(engine: ModuleType) -> None:
    """every_bytes = 2**32 is allowed: no stream of this test reaches it, so the rule is
    checked once, at finish(), and fires then with the full view as its offset."""
    rs = engine.Ruleset([LineRepeat("r", min_lines=5, min_count=5, every_bytes=1 << 32)])
    w = rs.watcher()
    assert w.feed("same line\n" * 10_000, "text") == ()
    (d,) = w.finish()
    assert d.rule == "r" and d.offset == 100_000


def test_duplicate_phrases_in_one_rule_report_the_first(engine: ModuleType) -> None:
    rs = engine.Ruleset([Phrases("p", ["ab", "AB", "ab"], ignore_case=True)])
    assert [(d.phrase, d.offset) for d in rs.replay("xAb")] == [("ab", 3)]


def test_ids_differing_in_case_are_distinct(engine: ModuleType) -> None:
    rs = engine.Ruleset([Marker("a", "x"), Marker("A", "y")])
    assert [d.rule for d in rs.replay("xy")] == ["a", "A"]


def test_empty_ruleset_and_generator_rules(engine: ModuleType) -> None:
    assert engine.Ruleset([]).replay("anything at all\n" * 100) == []
    rs = engine.Ruleset(r for r in [Marker("m", "x")])
    assert [d.rule for d in rs.replay("x")] == ["m"]


def test_empty_extra_list_means_no_extra_phrases() -> None:
    """Found with this table: extra=[] was refused ("must hold at least one phrase") while
    extra=() was fine; an empty list of *additional* phrases is no error."""
    assert TimeAnxiety(extra=[]).phrase_list() == TimeAnxiety().phrase_list()
    assert ContextAnxiety(extra=[]).phrase_list() == ContextAnxiety().phrase_list()


# ---------------------------------------------------------------------- calls on a watcher

CallRow = tuple[str, Callable[[Any], object], type[Exception], str]

CALL_ROWS: list[CallRow] = [
    ("feed-memoryview", lambda w: w.feed(memoryview(b"abc")), TE, "text"),
    ("feed-bytearray", lambda w: w.feed(bytearray(b"abc")), TE, "text"),
    ("feed-list-of-str", lambda w: w.feed(["a", "b"]), TE, "text"),
    ("feed-channel-bytes", lambda w: w.feed("abc", b"text"), TE, "channel"),
    ("feed-channel-padded", lambda w: w.feed("abc", " text"), VE, "channel"),
    ("feed-channel-nul", lambda w: w.feed("abc", "text\x00"), VE, "channel"),
    ("feed-1MiB-wrong-channel", lambda w: w.feed(MB, "answer"), VE, "channel"),
    ("tail-None-str", lambda w: w.tail("None"), TE, "n"),
    ("tail-huge-negative", lambda w: w.tail(-(1 << 70)), VE, "n"),
    ("tail-numpy-float", lambda w: w.tail(np.float64(3)), TE, "n"),
    ("replay-str-splits", lambda w: w.ruleset.replay("abc", "123"), TE, "splits"),
    ("replay-splits-with-None", lambda w: w.ruleset.replay("abc", [1, None, 3]), TE, "splits"),
    ("replay-splits-float", lambda w: w.ruleset.replay("abc", [1.0, 3.0]), TE, "splits"),
    ("replay-splits-2**70", lambda w: w.ruleset.replay("abc", [1 << 70]), VE, "splits"),
    ("replay-splits--2**70", lambda w: w.ruleset.replay("abc", [-(1 << 70), 3]), VE, "splits"),
    ("replay-splits-non-monotonic", lambda w: w.ruleset.replay("abcdef", [1, 4, 2, 6]), VE,
     "splits"),
    ("replay-splits-past-end-then-back", lambda w: w.ruleset.replay("abc", [5, 3]), VE,
     "splits"),
    ("replay-splits-numpy-decreasing",
     lambda w: w.ruleset.replay("abcdef", np.array([3, 2, 6], dtype=np.int32)), VE, "splits"),
    ("replay-splits-numpy-uint64-max",
     lambda w: w.ruleset.replay("abc", np.array([2**64 - 1], dtype=np.uint64)), VE, "splits"),
    ("replay-splits-numpy-float",
     lambda w: w.ruleset.replay("abc", np.array([1.0, 3.0])), TE, "splits"),
    ("replay-splits-1MiB-text-short",
     lambda w: w.ruleset.replay(MB, list(range(0, 1 << 20, 4096))), VE, "splits"),
]


@pytest.mark.parametrize(("call", "exc", "name"), [r[1:] for r in CALL_ROWS],
                         ids=[r[0] for r in CALL_ROWS])
def test_bad_calls(engine: ModuleType, canary: Any, call: Callable[[Any], object],
                   exc: type[Exception], name: str) -> None:
    with pytest.raises(exc) as excinfo:
        call(canary)
    assert isinstance(excinfo.value, ContextCareError)
    assert name in str(excinfo.value), excinfo.value
    assert_canary_intact(engine, canary)


def test_native_only_argument_forms() -> None:
    """Integer buffers are a native extension of ``splits``: 2-d and non-integer ones are refused
    with a message naming splits."""
    rs = native.Ruleset([Marker("m", "c")])
    with pytest.raises(ArgumentTypeError, match="splits"):
        rs.replay("abc", np.array([[1, 3]]))
    with pytest.raises(ArgumentTypeError, match="splits"):
        rs.replay("abc", np.array([True, True]))
    assert rs.replay("abc", np.array([1, 3], dtype=np.uint8))[0].offset == 3
    with pytest.raises(TypeError, match="watcher"):
        native.Watcher(rs)


def test_misuse_that_is_not_an_error_behaves(engine: ModuleType, canary: Any) -> None:
    """Odd but valid calls: a huge n for tail(), str subclasses, many empty deltas, a splits
    sequence of a million equal offsets."""
    class S(str):
        pass

    assert canary.tail(1 << 70) == canary.tail()
    assert canary.feed(S(""), S("reasoning")) == ()
    for _ in range(10_000):
        assert canary.feed("", "reasoning") == ()
    assert_canary_intact(engine, canary)
    rs = canary_rules(engine)
    text = "we hurry up"
    assert rs.replay(text, [0] * 1_000_000 + [len(text)]) == rs.replay(text)
    assert rs.replay(S(text), channel=S("reasoning")) == rs.replay(text, channel="reasoning")


def test_after_finish_every_call_is_defined(engine: ModuleType) -> None:
    w = canary_rules(engine).watcher()
    w.feed(CANARY_TEXT, "text")
    w.finish()
    for _ in range(3):
        with pytest.raises(RuntimeError, match="reset"):
            w.feed("x", "text")
        assert w.finish() == ()
    assert w.tail(5) == CANARY_TEXT[-5:] and w.copy().finished
    w.reset()
    assert [d.rule for d in [*w.feed(CANARY_TEXT), *w.finish()]] == ["hurry", "loop"]


# ---------------------------------------------------------------------- split arrays, both engines

def _gen_splits() -> Any:
    yield 2
    yield 6


#: ``replay("abcabc", splits)`` on both engines: accepted (the detections, checked equal) or the
#: error class. The engines must agree on every row, message included (issue 17: big-endian and
#: object arrays were refused by the native engine only, a strided uint64 array holding 2**63 gave
#: a bare OverflowError, and the uint64 maximum was reported as -1).
SplitRow = tuple[str, Callable[[], Any], "type[Exception] | None"]
SPLIT_ROWS: list[SplitRow] = [
    ("int64", lambda: np.array([2, 6]), None),
    ("int64-big-endian", lambda: np.array([2, 6], dtype=">i8"), None),
    ("int32-big-endian", lambda: np.array([2, 6], dtype=">i4"), None),
    ("object-array", lambda: np.array([2, 6], dtype=object), None),
    ("object-array-of-None", lambda: np.array([2, None], dtype=object), TE),
    ("strided-int64", lambda: np.array([2, 0, 6, 0])[::2], None),
    ("strided-uint64-2**63", lambda: np.array([2, 0, 2**63, 0], dtype=np.uint64)[::2], VE),
    ("uint64", lambda: np.array([2, 6], dtype=np.uint64), None),
    ("uint64-max", lambda: np.array([2**64 - 1], dtype=np.uint64), VE),
    ("uint64-max-last", lambda: np.array([2, 2**64 - 1], dtype=np.uint64), VE),
    ("uint8", lambda: np.array([2, 6], dtype=np.uint8), None),
    ("int32-decreasing", lambda: np.array([3, 2, 6], dtype=np.int32), VE),
    ("int64-negative", lambda: np.array([-1, 6]), VE),
    ("float64", lambda: np.array([2.0, 6.0]), TE),
    ("float16", lambda: np.array([6], dtype=np.float16), TE),
    ("bool-array", lambda: np.array([True, True]), TE),
    ("2-d", lambda: np.array([[2, 6]]), TE),
    ("array-i", lambda: array.array("i", [2, 6]), None),
    ("array-Q-max", lambda: array.array("Q", [2**64 - 1]), VE),
    ("memoryview-q", lambda: memoryview(array.array("q", [2, 6])), None),
    ("list-of-numpy-ints", lambda: [np.int64(2), np.uint64(6)], None),
    ("list-2**63", lambda: [2**63], VE),
    ("list-2**70", lambda: [2, 1 << 70], VE),
    ("list-float", lambda: [2.0, 6], TE),
    ("list-None", lambda: [2, None, 6], TE),
    ("list-nested", lambda: [[2], [6]], TE),
    ("tuple", lambda: (2, 6), None),
    ("range", lambda: range(1, 7), None),
    ("generator", _gen_splits, None),
    ("empty", lambda: [], VE),
    ("int", lambda: 6, TE),
    ("str", lambda: "26", TE),
    ("bytes", lambda: b"\x02\x06", TE),
]


def _replay_outcome(rs: Any, splits: Any) -> tuple[str, Any]:
    try:
        return "ok", rs.replay("abcabc", splits)
    except Exception as exc:  # noqa: BLE001 - the outcome is compared, whatever it is
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize(("make", "exc"), [r[1:] for r in SPLIT_ROWS],
                         ids=[r[0] for r in SPLIT_ROWS])
def test_split_arrays_same_on_both_engines(make: Callable[[], Any],
                                           exc: type[Exception] | None) -> None:
    rules = [Phrases("p", ["b"], once=False)]
    got = {name: _replay_outcome(engine.Ruleset(rules), make())
           for name, engine in (("native", native), ("reference", reference))}
    assert got["native"] == got["reference"]
    kind, value = got["native"]
    if exc is None:
        assert kind == "ok" and [d.offset for d in value] == [2, 5]
    else:
        assert kind == exc.__name__ and "splits" in value, value


def test_uint64_splits_are_reported_as_given() -> None:
    """The uint64 maximum used to be reported as ``splits[1] = -1``."""
    for engine in (native, reference):
        with pytest.raises(ArgumentValueError, match=r"splits\[1\] = 18446744073709551615 follows 2"):
            engine.Ruleset([Marker("m", "b")]).replay(
                "abcabc", np.array([2, 2**64 - 1], dtype=np.uint64))


# ---------------------------------------------------------------------- hostile TOML rules files

TomlRow = tuple[str, Callable[[], str], str]
TOML_ROWS: list[TomlRow] = [
    ("arrays-1000-deep", lambda: "x = " + "[" * 1000 + "]" * 1000, "nested"),
    ("arrays-33-deep", lambda: "x = " + "[" * 33 + "]" * 33, "nested"),
    ("inline-tables-1000-deep", lambda: "x = " + "{a = " * 1000 + "1" + "}" * 1000, "nested"),
    ("arrays-in-rules-1000-deep", lambda: '[[rules]]\ntype = "Phrases"\nid = "p"\nphrases = '
     + "[" * 1000 + '"x"' + "]" * 1000, "nested"),
    ("dotted-key-10000", lambda: ".".join(["a"] * 10_000) + " = 1", "dotted key"),
    ("dotted-header-10000", lambda: "[" + ".".join(["a"] * 10_000) + "]", "dotted key"),
    ("dotted-key-in-inline-table", lambda: "x = {" + ".".join(["a"] * 100) + " = 1}",
     "dotted key"),
    ("header-brackets-40-deep", lambda: "[" * 40 + "a" + "]" * 40, "nested"),
    ("over-4MiB", lambda: "# " + "x" * (4 << 20) + "\n", "4 MiB"),
    ("over-4MiB-in-utf8", lambda: "# " + "é" * (2 << 20) + "\n", "4 MiB"),
    ("unclosed-1000-deep", lambda: "x = " + "[" * 1000, "nested"),
]


@pytest.mark.parametrize(("make", "reason"), [r[1:] for r in TOML_ROWS],
                         ids=[r[0] for r in TOML_ROWS])
def test_hostile_toml_is_a_rules_file_error(make: Callable[[], str], reason: str,
                                            tmp_path: Any) -> None:
    """Nested 1 000 deep used to raise a bare RecursionError, a 10 000-part dotted key took 9 s:
    the size and depth limits are checked before parsing."""
    doc = make()
    with pytest.raises(RulesFileError, match=reason) as info:
        loads_rules(doc, source="hostile.toml")
    assert str(info.value).startswith("hostile.toml: ")
    path = tmp_path / "hostile.toml"
    path.write_text(doc, encoding="utf-8")
    with pytest.raises(RulesFileError, match=reason):
        load_rules(path)


def test_hostile_toml_at_the_cli_is_exit_2_and_one_line(tmp_path: Any,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from contextcare import cli

    path = tmp_path / "deep.toml"
    path.write_text("x = " + "[" * 1000 + "]" * 1000, encoding="utf-8")
    assert cli.main(["rules", "--rules", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: line 1: more than {MAX_TOML_DEPTH}" in err and "Traceback" not in err


def test_toml_limits_do_not_misjudge_strings_and_comments() -> None:
    """Brackets and dots inside strings and comments are text, not structure; the limits
    themselves are accepted."""
    deep = "[" * 40 + "{" * 40 + ".".join(["a"] * 40)
    phrases = [f'"{deep}"', f"'{deep}'", f'"""{deep}\n]]]"""""', f"'''{deep}'''",
               f'"\\"{deep}"']
    doc = (f"# {deep}\n[[rules]]  # {deep}\ntype = \"Phrases\"\nid = \"p\"\n"
           f"phrases = [{', '.join(phrases)}]\n")
    rules, _ = loads_rules(doc)
    assert rules[0].phrases == (deep, deep, deep + '\n]]]""', deep, '"' + deep)  # type: ignore[attr-defined]
    at_limit = "x = " + "[" * MAX_TOML_DEPTH + "]" * MAX_TOML_DEPTH + "\n"
    with pytest.raises(RulesFileError, match="Phrases has no field 'x'"):
        loads_rules(doc + at_limit)  # got past the shape check and the parser
    keys = ".".join(["a"] * MAX_TOML_DEPTH)
    with pytest.raises(RulesFileError, match="unknown top-level key 'a'"):
        loads_rules(f"{keys} = 1\n")


@settings(max_examples=300, deadline=None)
@given(doc=st.text(alphabet="[]{}.=,\"'#\n ab1", max_size=300), depth=st.integers(0, 600))
def test_any_toml_text_is_rules_or_a_rules_file_error(doc: str, depth: int) -> None:
    """The class guard: whatever the text (punctuation soup, after any nesting prefix),
    ``loads_rules`` returns rules or raises RulesFileError - nothing else escapes."""
    for text in (doc, "x = " + "[" * depth + doc, "[rules]\n" + "a." * depth + doc):
        try:
            loads_rules(text)
        except RulesFileError:
            pass


# ---------------------------------------------------------------------- hostile OpenAI chunks

def _chunk(content: str = "ok", **choice: Any) -> dict[str, Any]:
    return {"id": "c1", "choices": [{"index": 0, "delta": {"content": content}, **choice}]}


#: A malformed chunk, the error class and the field the message must name. Each row is read by
#: the stream filter (after a good chunk: ``chunk 1 (id 'c1')``), by ``openai_parts`` and, as a
#: JSON line, by the trace reader (a TraceFormatError at its line). ``choices=5`` and ``index=[1]``
#: used to raise bare TypeErrors from inside the filter (issue 17).
ChunkRow = tuple[str, Any, type[Exception], str]
CHUNK_ROWS: list[ChunkRow] = [
    ("choices-int", {"id": "c1", "choices": 5}, TE, "'choices'"),
    ("choices-str", {"id": "c1", "choices": "abc"}, TE, "'choices'"),
    ("choices-dict", {"id": "c1", "choices": {"0": {}}}, TE, "'choices'"),
    ("choice-int", {"id": "c1", "choices": [5]}, TE, "choices[0]"),
    ("choice-None", {"id": "c1", "choices": [_chunk()["choices"][0], None]}, TE, "choices[1]"),
    ("choice-list", {"id": "c1", "choices": [[]]}, TE, "choices[0]"),
    ("index-list", _chunk(index=[1]), TE, "'index'"),
    ("index-str", _chunk(index="1"), TE, "'index'"),
    ("index-float", _chunk(index=1.0), TE, "'index'"),
    ("index-bool", _chunk(index=True), TE, "'index'"),
    ("index-negative", _chunk(index=-1), VE, "'index'"),
    ("delta-int", _chunk(delta=5), TE, "'delta'"),
    ("delta-str", _chunk(delta="text"), TE, "'delta'"),
    ("delta-list", _chunk(delta=[{"content": "x"}]), TE, "'delta'"),
    ("content-list", _chunk(delta={"content": ["x"]}), TE, "'delta.content'"),
    ("content-int", _chunk(delta={"content": 5}), TE, "'delta.content'"),
]


@pytest.mark.parametrize(("bad", "exc", "field"), [r[1:] for r in CHUNK_ROWS],
                         ids=[r[0] for r in CHUNK_ROWS])
def test_hostile_chunks_name_the_chunk_and_field(bad: Any, exc: type[Exception],
                                                 field: str) -> None:
    guard = Guard(canary_rules(native))
    good, after = _chunk("we hurry"), _chunk(" up\n")
    w = watch_openai([good, bad, after], guard)
    assert next(w) is good
    with pytest.raises(exc) as info:
        next(w)
    assert isinstance(info.value, ContextCareError)
    assert "chunk 1 (id 'c1')" in str(info.value) and field in str(info.value), info.value
    # nothing of the bad chunk was fed; the filter goes on with the next chunk
    assert next(w) is after
    assert w.partial.text == "we hurry up\n"
    with pytest.raises(exc, match=re.escape(field)):
        openai_parts(bad)
    lines = [json.dumps(good), json.dumps(bad), json.dumps(after)]
    errors: list[TraceFormatError] = []
    events = list(iter_events(io.StringIO("\n".join(lines)), on_error=errors.append))
    assert [e.line for e in errors] == [2] and field in str(errors[0]), errors
    assert "".join(e.text for e in events) == "we hurry up\n"


def test_chunks_that_are_not_objects() -> None:
    w = watch_openai(["data: {}"], Guard(canary_rules(native)))
    with pytest.raises(ArgumentTypeError, match=r"chunk 0: must be a chat.completion.chunk .* got str"):
        next(w)


def test_lenient_chunk_fields_stay_accepted() -> None:
    """What real servers send and must not be refused: no or null choices, null index and
    delta, structured reasoning details, an empty reasoning_content beside reasoning, any
    finish_reason."""
    chunks = [{"id": "c1", "choices": None}, {"id": "c1"},
              {"id": "c1", "choices": [{"index": None, "delta": None}]},
              {"id": "c1", "choices": [{"delta": {"reasoning": [{"type": "summary"}],
                                                  "content": None}}]},
              {"id": "c1", "choices": [{"delta": {"reasoning_content": "", "reasoning": "r"}}]},
              {"id": "c1", "choices": [{"index": 0, "delta": {"content": "t"},
                                        "finish_reason": "stop"}]}]
    assert [p for c in chunks for p in openai_parts(c)] == [(0, "reasoning", "r"),
                                                            (0, "text", "t")]
    events = list(iter_events(io.StringIO("\n".join(json.dumps(c) for c in chunks if "choices"
                                                    in c))))
    assert [(e.type, e.text) for e in events] == [
        ("start", ""), ("reasoning-delta", "r"), ("text-delta", "t"), ("end", "")]


_JSON = st.recursive(st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False)
                     | st.text(max_size=3),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=8)
_FIELDS = st.sampled_from(["index", "delta", "finish_reason", "content", "reasoning",
                           "reasoning_content", "choices"])
_CHUNKISH = st.recursive(
    _JSON, lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(_FIELDS, inner, max_size=4), max_leaves=12)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(choices=_CHUNKISH)
def test_any_chunk_is_read_or_refused_with_a_named_error(choices: Any) -> None:
    """The class guard: any JSON in any chunk field gives text or an error of ours naming the
    field - in the stream filter and in the trace reader - never a bare TypeError."""
    chunk = {"id": "c1", "choices": choices}
    try:
        list(watch_openai([chunk], Guard(canary_rules(native))))
    except (ArgumentTypeError, ArgumentValueError) as exc:
        assert str(exc).startswith("chunk 0 (id 'c1'): ")
    try:
        list(iter_events(io.StringIO(json.dumps(chunk))))
    except TraceFormatError as exc:
        assert exc.line == 1


# ---------------------------------------------------------------------- uninitialised objects

# Run in a child process: a crash (SIGSEGV) there fails the test instead of killing pytest.
UNINIT_SCRIPT = r"""
import copy, json, pickle, sys, importlib
e = importlib.import_module(sys.argv[1])
from contextcare.rules import Phrases

BORING = {"__doc__", "__init__", "__new__", "__pyx_vtable__", "__module__", "__slots__"}
ARGS = {"feed": ("x",), "_feed_deltas": (["x"],), "_feed_tracked": ("x",), "_noop": ("x",),
        "_kept_text": ("text",), "_track": (print,), "replay": ("abc",),
        "__reduce_ex__": (2,)}

def outcome(f):
    try:
        value = f()
    except BaseException as exc:
        return [type(exc).__name__, str(exc)]
    return ["ok", repr(value)]

def walk(cls):
    names = [n for n in vars(cls) if n not in BORING
             and (not n.startswith("_") or n.startswith("__") or e.__name__.endswith("_engine"))]
    out = {}
    for name in sorted(names):
        obj = cls.__new__(cls)
        def call(obj=obj, name=name):
            attr = getattr(obj, name)
            if name == "__getattr__":  # the reference's: asked for a slot __init__ never set
                return attr(cls.__slots__[0])
            return attr(*ARGS.get(name, ())) if callable(attr) else attr
        out[name] = outcome(call)
    return out

class SubRuleset(e.Ruleset):
    def __init__(self, rules):  # forgets super().__init__
        self.mine = rules

class SubWatcher(e.Watcher):
    pass

blank = lambda: e.Ruleset.__new__(e.Ruleset)
extra = {
    "copy.copy": outcome(lambda: copy.copy(blank())),
    "copy.deepcopy": outcome(lambda: copy.deepcopy(blank())),
    "pickle.dumps": outcome(lambda: pickle.dumps(blank())),
    "sys.getsizeof": outcome(lambda: sys.getsizeof(blank())),
    "subclass.watcher": outcome(lambda: SubRuleset([Phrases("p", ["x"])]).watcher()),
    "subclass.replay": outcome(lambda: SubRuleset([Phrases("p", ["x"])]).replay("x")),
    "subclass.rules": outcome(lambda: SubRuleset([Phrases("p", ["x"])]).rules),
    "watcher-subclass.feed": outcome(lambda: SubWatcher.__new__(SubWatcher).feed("x")),
    "watcher-subclass.finish": outcome(lambda: SubWatcher.__new__(SubWatcher).finish()),
    "blank.watcher().feed": outcome(lambda: blank().watcher().feed("x")),
}
print(json.dumps({"Ruleset": walk(e.Ruleset), "Watcher": walk(e.Watcher), "extra": extra}))
"""

#: Entry points that may succeed on an uninitialised object (and what they must return), or
#: raise something else than UninitialisedError. Everything else must raise UninitialisedError.
UNINIT_ALLOWED = {
    "__repr__": ("ok", "uninitialised"),
    "__sizeof__": ("ok", ""),
    "sys.getsizeof": ("ok", ""),
    "Watcher.__reduce__": ("TypeError", "cannot be pickled"),  # true of every Watcher
}


@pytest.mark.parametrize("engine_name", ["contextcare._engine", "contextcare.reference"])
def test_uninitialised_objects_raise_never_crash(engine_name: str) -> None:
    """``Ruleset.__new__(Ruleset)``, ``Watcher.__new__(Watcher)``, subclasses that skip
    ``super().__init__``: every method and property, pickling and copying raise
    :class:`UninitialisedError` (a ``RuntimeError``) naming the class - they used to kill the
    process with SIGSEGV (issue 17). The walk covers every name the classes define, so a new
    entry point is checked as soon as it exists."""
    proc = subprocess.run([sys.executable, "-c", UNINIT_SCRIPT, engine_name],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, f"the child died ({proc.returncode}): {proc.stderr[-2000:]}"
    got = json.loads(proc.stdout)
    public = {"watcher", "replay", "rules", "options", "feed", "finish", "reset", "tail",
              "copy", "fired", "finished", "ruleset"}
    walked = set(got["Ruleset"]) | set(got["Watcher"])
    assert public <= walked
    rows = [(f"{cls}.{name}", result) for cls in ("Ruleset", "Watcher")
            for name, result in got[cls].items()] + list(got["extra"].items())
    for where, (kind, message) in rows:
        short = where.split(".", 1)[1] if where.startswith(("Ruleset.", "Watcher.")) else where
        allowed = UNINIT_ALLOWED.get(where) or UNINIT_ALLOWED.get(short)
        if allowed is not None:
            assert kind == allowed[0] and allowed[1] in message, (where, kind, message)
            continue
        assert kind == "UninitialisedError", (where, kind, message)
        assert "not initialised" in message
        # the message names the class of the uninitialised object
        named = "Watcher" if where.startswith(("Watcher.", "watcher-")) else "Ruleset"
        assert f"this {named}" in message or f"this Sub{named}" in message, (where, message)


def test_subclasses_that_initialise_work(engine: ModuleType) -> None:
    class Mine(engine.Ruleset):  # type: ignore[name-defined,misc]
        def __init__(self, rules: Any) -> None:
            super().__init__(rules, line_window=20)

    rs = Mine([Phrases("p", ["x"])])
    assert [d.rule for d in rs.replay("x")] == ["p"]
    assert [d.rule for d in rs.watcher().feed("x")] == ["p"]
    assert isinstance(engine.Ruleset.__new__(engine.Ruleset), engine.Ruleset)
    with pytest.raises(UninitialisedError, match="not initialised") as info:
        engine.Ruleset.__new__(engine.Ruleset).replay("x")
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, ContextCareError)


# ---------------------------------------------------------------------- malformed trace lines

def event_line(stream: str, kind: str, text: str = "") -> bytes:
    obj: dict[str, Any] = {"stream": stream, "type": kind}
    if kind.endswith("-delta"):
        obj["text"] = text
    return json.dumps(obj).encode()


_GOOD = st.builds(event_line, st.sampled_from(("s1", "s2")),
                  st.sampled_from(("start", "text-delta", "reasoning-delta", "end")),
                  st.text(st.characters(exclude_categories=()), max_size=20))
#: Lines that are malformed whatever their random part: invalid UTF-8, JSON that is not an
#: object, an object that is neither an event nor a chunk, bad field types, truncated JSON.
_BAD = st.one_of(
    st.binary(max_size=20).map(lambda b: b"\xff" + b.replace(b"\n", b"")),
    st.sampled_from((b"[]", b"1", b'"type"', b"null", b"{}", b"{", b'{"type": 5}',
                     b'{"type": "text-delta", "stream": "s"}',
                     b'{"type": "text-delta", "stream": [1], "text": "x"}',
                     b'{"type": "start", "stream": null}',
                     b'{"choices": 3, "id": "c"}', b'{"choices": [{"delta": 5}], "id": "c"}',
                     b"data: {oops", b"data: 17")),
    _GOOD.map(lambda line: line[:-1]),   # cut before its closing brace
    st.sampled_from(("unknown", "TEXT-DELTA", "")).map(
        lambda kind: json.dumps({"stream": "s", "type": kind, "text": "x"}).encode()),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(content=st.lists(_GOOD | _BAD, max_size=30))
def test_malformed_trace_lines_are_reported_and_nothing_else_is_lost(
        content: list[bytes]) -> None:
    """Each bad line is reported once, with its line number; every good line still gives its
    event, in order; without on_error the first bad line raises TraceFormatError."""
    data = b"\n".join(content) + b"\n"
    expected_events: list[Event] = []
    bad_lines: list[int] = []
    for n, line in enumerate(content, 1):
        try:
            expected_events += list(iter_events(io.BytesIO(line + b"\n")))
        except TraceFormatError:
            bad_lines.append(n)
    errors: list[TraceFormatError] = []
    got = list(iter_events(io.BytesIO(data), on_error=errors.append))
    assert [e.line for e in errors] == bad_lines
    assert [(e.stream, e.type, e.text) for e in got] == \
        [(e.stream, e.type, e.text) for e in expected_events]
    if bad_lines:
        with pytest.raises(TraceFormatError) as excinfo:
            list(iter_events(io.BytesIO(data)))
        assert excinfo.value.line == bad_lines[0]
    assert all(isinstance(r.detections, tuple) for r in scan(io.BytesIO(data),
                                                              on_error=lambda e: None))


@settings(max_examples=100, deadline=None)
@given(lines=st.lists(_BAD, min_size=1, max_size=10))
def test_lines_built_to_be_malformed_are(lines: list[bytes]) -> None:
    """The generator of bad lines above really makes bad lines (else the test above would check
    much less than it says)."""
    for line in lines:
        with pytest.raises(TraceFormatError):
            list(iter_events(io.BytesIO(line + b"\n")))


@settings(max_examples=200, deadline=None)
@given(raw=st.binary(max_size=200))
def test_arbitrary_bytes_raise_only_trace_format_error(raw: bytes) -> None:
    try:
        events = list(iter_events(io.BytesIO(raw)))
    except TraceFormatError:
        return
    scan(io.BytesIO(raw))
    assert all(isinstance(e, Event) for e in events)


# ---------------------------------------------------------------------- conversations (issue 19)
# The planner, the clear-mind survey and the reminder policy share one validator of the OpenAI
# chat format: each row is the documented error class and the name it must carry. After every
# row, the input it was given is unchanged and a valid conversation still plans and surveys.

from contextcare.context.mindmap import ClearError, ReminderPolicy, survey
from contextcare.context.planner import ConversationError, RestPlan, plan_clear, plan_rest

CE = ConversationError


def _conv(*extra: Any) -> list[Any]:
    return [{"role": "user", "content": "x" * 4000}, *extra, {"role": "user", "content": "go"}]


def _valid() -> list[Any]:
    return [{"role": "system", "content": "s"}, {"role": "user", "content": "task " * 2000},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c", "content": "ok"},
            {"role": "user", "content": "next"}]


def _surveyed_plan() -> Any:
    return survey(_valid()).validate_clear("first", "latest", "n" * 200, min_clear_tokens=1)


def _apply_to_surveyed(checkpoint_id: Any) -> object:
    """Survey a valid conversation and apply the clear to that same list."""
    messages = _valid()
    plan = survey(messages).validate_clear("first", "latest", "n" * 200, min_clear_tokens=1)
    return plan.apply(messages, checkpoint_id=checkpoint_id)


_BAD_MESSAGES: list[tuple[str, Any, type[Exception], str]] = [
    ("messages-str", "hello", TE, "messages"),
    ("messages-bytes", b"hello", TE, "messages"),
    ("messages-mapping", {"role": "user", "content": "x"}, TE, "messages"),
    ("messages-None", None, TE, "messages"),
    ("message-str", _conv("hello"), TE, "messages[1]"),
    ("message-None", _conv(None), TE, "messages[1]"),
    ("role-missing", _conv({"content": "x"}), CE, "messages[1].role"),
    ("role-None", _conv({"role": None, "content": "x"}), CE, "messages[1].role"),
    ("role-System", _conv({"role": "System", "content": "x"}), CE, "messages[1].role"),
    ("role-USER", _conv({"role": "USER", "content": "x"}), CE, "lower-case"),
    ("role-human", _conv({"role": "human", "content": "x"}), CE, "messages[1].role"),
    ("role-ai", _conv({"role": "ai", "content": "x"}), CE, "messages[1].role"),
    ("role-empty", _conv({"role": "", "content": "x"}), CE, "messages[1].role"),
    ("role-padded", _conv({"role": " user", "content": "x"}), CE, "messages[1].role"),
    ("role-int", _conv({"role": 1, "content": "x"}), TE, "messages[1].role"),
    ("content-int", _conv({"role": "user", "content": 5}), TE, "messages[1].content"),
    ("content-bool", _conv({"role": "user", "content": False}), TE, "messages[1].content"),
    ("content-float-inf", _conv({"role": "user", "content": INF}), TE, "messages[1].content"),
    ("content-dict", _conv({"role": "user", "content": {"text": "x"}}), TE,
     "messages[1].content"),
    ("content-bytes", _conv({"role": "user", "content": b"x"}), TE, "messages[1].content"),
    ("content-tuple", _conv({"role": "user", "content": ("x",)}), TE, "messages[1].content"),
    ("content-list-of-str", _conv({"role": "user", "content": ["x"]}), TE,
     "messages[1].content[0]"),
    ("content-part-text-int", _conv({"role": "user", "content": [{"type": "text", "text": 5}]}),
     TE, "messages[1].content[0].text"),
    ("content-part-text-missing", _conv({"role": "user", "content": [{"type": "text"}]}), TE,
     "messages[1].content[0].text"),
    ("content-part-untyped-no-text", _conv({"role": "user", "content": [{}]}), TE,
     "messages[1].content[0].text"),
    ("content-part-type-None", _conv({"role": "user", "content": [{"type": None}]}), TE,
     "messages[1].content[0].type"),
    ("content-part-type-empty", _conv({"role": "user", "content": [{"type": ""}]}), TE,
     "messages[1].content[0].type"),
    ("content-1MiB-part-then-bad", _conv({"role": "user", "content": [
        {"type": "text", "text": MB}, {"type": "text", "text": [MB]}]}), TE,
     "messages[1].content[1].text"),
    ("tool-content-int", _conv({"role": "assistant", "tool_calls": [
        {"id": "c", "function": {"name": "f"}}]}, {"role": "tool", "tool_call_id": "c",
                                                   "content": 3}), TE, "messages[2].content"),
    ("id-float", _conv({"role": "user", "content": "x", "id": 1.5}), TE, "messages[1]['id']"),
    ("id-bool", _conv({"role": "user", "content": "x", "id": True}), TE, "messages[1]['id']"),
    ("id-duplicate", [{"role": "user", "content": "a", "id": "m"},
                      {"role": "user", "content": "b", "id": "m"}], CE, "share the id 'm'"),
    ("id-equals-an-index", [{"role": "user", "content": "a", "id": 1},
                            {"role": "user", "content": "b"}], CE, "share the id 1"),
    ("tool_calls-dict", _conv({"role": "assistant", "tool_calls": {"id": "c"}}), CE,
     "'tool_calls' must be a list"),
    ("tool-call-without-id", _conv({"role": "assistant", "tool_calls": [{"function": {}}]}), CE,
     "string 'id'"),
    ("tool-result-unopened", _conv({"role": "tool", "tool_call_id": "nope", "content": "x"}), CE,
     "'nope'"),
    ("tool-result-no-call-id", _conv({"role": "tool", "content": "x"}), CE, "tool_call_id"),
]

_ENTRIES: dict[str, Callable[[Any], object]] = {
    "plan_rest": lambda m: plan_rest(m, capacity=1000),
    "plan_clear": lambda m: plan_clear(m),
    "survey": lambda m: survey(m),
    "apply": lambda m: _surveyed_plan().apply(m),
}

ConvRow = tuple[str, Callable[[], object], type[Exception], str]

CONVERSATION_ROWS: list[ConvRow] = [
    (f"{entry}-{name}", (lambda e=entry, m=messages: _ENTRIES[e](m)), exc, word)
    for name, messages, exc, word in _BAD_MESSAGES for entry in _ENTRIES
    # apply() checks the format before anything else; the tool structure of a list it was not
    # planned on is not its business (that list is refused as stale)
    if entry != "apply" or not name.startswith("tool")
] + [
    # planner arguments
    ("plan_rest-capacity-0", lambda: plan_rest(_valid(), capacity=0), VE, "capacity"),
    ("plan_rest-capacity--10**400", lambda: plan_rest(_valid(), capacity=-10**400), VE,
     "capacity"),
    ("plan_rest-capacity-float", lambda: plan_rest(_valid(), capacity=1e6), TE, "capacity"),
    ("plan_rest-capacity-inf", lambda: plan_rest(_valid(), capacity=INF), TE, "capacity"),
    ("plan_rest-capacity-numpy", lambda: plan_rest(_valid(), capacity=NP_INT), TE, "capacity"),
    ("plan_rest-capacity-str", lambda: plan_rest(_valid(), capacity="1000"), TE, "capacity"),
    ("plan_rest-retain_ratio-nan", lambda: plan_rest(_valid(), capacity=10,
                                                     retain_ratio=float("nan")), VE,
     "retain_ratio"),
    ("plan_rest-retain_ratio-1", lambda: plan_rest(_valid(), capacity=10, retain_ratio=1), VE,
     "retain_ratio"),
    ("plan_rest-min_fresh-0", lambda: plan_rest(_valid(), capacity=10, min_fresh_tokens=0), VE,
     "min_fresh_tokens"),
    ("plan_rest-min_fresh-float", lambda: plan_rest(_valid(), capacity=10,
                                                    min_fresh_tokens=1.0), TE,
     "min_fresh_tokens"),
    ("plan_rest-keep_latest_user-str", lambda: plan_rest(_valid(), capacity=10,
                                                         keep_latest_user="no"), TE,
     "keep_latest_user"),
    ("plan_rest-keep_latest_user-None", lambda: plan_rest(_valid(), capacity=10,
                                                          keep_latest_user=None), TE,
     "keep_latest_user"),
    ("plan_rest-is_own_notice-str", lambda: plan_rest(_valid(), capacity=10,
                                                      is_own_notice="name"), TE, "is_own_notice"),
    ("plan_clear-is_checkpoint-int", lambda: plan_clear(_valid(), is_checkpoint=1), TE,
     "is_checkpoint"),
    # survey arguments
    ("survey-turns-str", lambda: survey(_valid(), turns="12345"), TE, "turns"),
    ("survey-turns-short", lambda: survey(_valid(), turns=[1]), VE, "turns"),
    ("survey-turns-float", lambda: survey(_valid(), turns=[1, 1, 1, 1, 1.0]), TE, "turns[4]"),
    ("survey-pressure-negative", lambda: survey(_valid(), pressure_tokens=-1), VE,
     "pressure_tokens"),
    ("survey-pressure-float", lambda: survey(_valid(), pressure_tokens=1e3), TE,
     "pressure_tokens"),
    ("survey-is_own_notice-str", lambda: survey(_valid(), is_own_notice="x"), TE,
     "is_own_notice"),
    ("survey-render-lang", lambda: survey(_valid()).render(lang="fr"), VE, "lang"),
    ("validate_clear-min_clear_tokens-0", lambda: survey(_valid()).validate_clear(
        "first", "latest", "n" * 200, min_clear_tokens=0), VE, "min_clear_tokens"),
    ("validate_clear-start-float", lambda: survey(_valid()).validate_clear(
        1.5, "latest", "n" * 200), ClearError, "start"),
    ("validate_clear-end-None", lambda: survey(_valid()).validate_clear(
        "first", None, "n" * 200), ClearError, "end"),
    ("validate_clear-notes-bytes", lambda: survey(_valid()).validate_clear(
        "first", "latest", b"n" * 200, min_clear_tokens=1), ClearError, "notes"),
    ("apply-checkpoint_id-float", lambda: _apply_to_surveyed(1.5), TE, "checkpoint_id"),
    ("apply-checkpoint_id-bool", lambda: _apply_to_surveyed(False), TE, "checkpoint_id"),
    ("apply-checkpoint_id-taken", lambda: _apply_to_surveyed(0), VE, "checkpoint_id"),
    ("apply-to-another-list", lambda: _surveyed_plan().apply(_valid()), ClearError,
     "not the message surveyed"),
    # the reminder policy
    ("reminder-ratio-nan", lambda: ReminderPolicy(ratio=float("nan")), VE, "ratio"),
    ("reminder-ratio-str", lambda: ReminderPolicy(ratio="0.7"), TE, "ratio"),
    ("reminder-tokens--1", lambda: ReminderPolicy(tokens=-1), VE, "tokens"),
    ("reminder-steps-2**64-negative", lambda: ReminderPolicy(steps=-(1 << 64)), VE, "steps"),
    ("reminder-step_interval-bool", lambda: ReminderPolicy(step_interval=True), TE,
     "step_interval"),
    ("reminder-lang", lambda: ReminderPolicy(lang="fr"), VE, "lang"),
    ("reminder-check-window-negative", lambda: ReminderPolicy().check(10, -1, 1), VE, "window"),
    ("reminder-check-window--10**400", lambda: ReminderPolicy().check(10, -10**400, 1), VE,
     "window"),
    ("reminder-check-window-float", lambda: ReminderPolicy().check(10, 1e5, 1), TE, "window"),
    ("reminder-check-window-bool", lambda: ReminderPolicy().check(10, True, 1), TE, "window"),
    ("reminder-check-tokens-negative", lambda: ReminderPolicy().check(-1, None, 1), VE,
     "tokens"),
    ("reminder-check-tokens-float", lambda: ReminderPolicy().check(1.0, None, 1), TE, "tokens"),
    ("reminder-check-steps-negative", lambda: ReminderPolicy().check(1, None, -1), VE,
     "steps_in_turn"),
    ("reminder-check_message-window-negative",
     lambda: ReminderPolicy().check_message(10, -1, 1), VE, "window"),
]


@pytest.mark.parametrize(("call", "exc", "name"), [r[1:] for r in CONVERSATION_ROWS],
                         ids=[r[0] for r in CONVERSATION_ROWS])
def test_bad_conversations(call: Callable[[], object], exc: type[Exception], name: str) -> None:
    with pytest.raises(exc) as excinfo:
        call()
    assert isinstance(excinfo.value, ContextCareError)
    assert name in str(excinfo.value), excinfo.value
    # Healthy afterwards: a valid conversation still plans, surveys and clears.
    valid = _valid()
    assert isinstance(plan_rest(valid, capacity=100, min_fresh_tokens=100), RestPlan)
    plan = survey(valid).validate_clear("first", "latest", "n" * 200, min_clear_tokens=1)
    assert [m["role"] for m in plan.apply(valid)] == ["system", "user"]


def test_bad_conversation_rows_leave_their_input_unchanged() -> None:
    """A refused conversation is not modified (no partial normalisation)."""
    import copy

    for name, messages, _, _ in _BAD_MESSAGES:
        before = copy.deepcopy(messages)
        for entry in ("plan_rest", "plan_clear", "survey"):
            with pytest.raises(ContextCareError):
                _ENTRIES[entry](messages)
        assert messages == before, name


def test_huge_numbers_are_answers_not_overflows() -> None:
    """Values far past any real size are not errors: they give the answer the arithmetic
    gives (exactly, without an OverflowError from a float conversion)."""
    assert plan_rest(_valid(), capacity=10**400).code == "tail-covers-all"  # type: ignore[union-attr]
    text = ReminderPolicy().check(tokens=10**400, window=3, steps_in_turn=1)
    assert text is not None and "window" in text
    assert ReminderPolicy().check(tokens=1, window=10**400, steps_in_turn=1) is None
    assert survey(_valid(), pressure_tokens=10**400).render().startswith("Context map")
