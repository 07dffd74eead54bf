"""Hardening: the engine in a serving process must not crash, leak or corrupt state.

What this file adds to the differential suite (``test_differential.py``):

* property tests over *hostile* input — every code point including lone surrogates, NUL, ``\\r``,
  U+2028/U+2029, emoji sequences, megabyte deltas — with phrases drawn from that same input and
  rule parameters drawn from anywhere (valid or not): only documented errors, native = reference
  after every call of an arbitrary call sequence (feed / finish / reset / copy / tail), and split
  invariance;
* memory: RSS stays flat over millions of deltas and hundreds of thousands of watchers;
* threads: real concurrency (deltas large enough that the GIL is released), misuse of one watcher
  from two threads for every mutating method, and ``replay`` running in parallel;
* pickle and ``copy()`` over generated rulesets and streams;
* regression tests for what the fuzzers and sanitizers found (at the end).

The long versions of the memory tests are marked ``slow``; ``docs/hardening.md`` has their figures.
"""

from __future__ import annotations

import copy as _copy
import gc
import os
import pickle
import random
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import contextcare as cc
import contextcare._engine as native
import contextcare.reference as ref
from contextcare.detection import Detection
from contextcare.errors import ArgumentTypeError, RuleTypeError, RuleValueError
from contextcare.presets import DEFAULT_OPTIONS
from contextcare.rules import (
    ContextAnxiety,
    FillerLines,
    LineCycle,
    LineRepeat,
    Marker,
    Phrases,
    PrefixMonotony,
    Rule,
    TailRepeat,
    TimeAnxiety,
)

from conftest import feed_all, pieces  # type: ignore[attr-defined]

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

#: Every code point, lone surrogates (category Cs) included.
ANY_CHAR = st.characters(exclude_categories=())
#: Characters and snippets that have broken text code before: line and paragraph separators the
#: engines must *not* treat as newlines, NUL, BOM, both halves of a surrogate pair fed alone, a
#: ZWJ emoji sequence, the last code point, fences, quotes and separators of ``suppress_quoted``.
SPECIALS = (
    "\x00", "\r", "\r\n", "\n", "\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\u3000",
    "\ud800", "\udbff", "\udc00", "\udfff", "\ud83d", "\ude00", "😀", "👩\u200d👩\u200d👧",
    "\ufeff", "\U0010ffff", "```\n", "~~~python\n", "`", '"', "“", "”", "「", "」", "|", ",",
    "，", "、", "做。\n", "same line\n", "the ",
)
CHANNELS = ("text", "reasoning")


@st.composite
def hostile_texts(draw: st.DrawFn, max_parts: int = 30) -> str:
    """Arbitrary code points mixed with :data:`SPECIALS` and repeated units (so that the windowed
    rules see loops made of hostile characters too)."""
    parts = draw(st.lists(st.one_of(
        st.text(ANY_CHAR, max_size=8),
        st.sampled_from(SPECIALS),
        st.tuples(st.text(ANY_CHAR, min_size=1, max_size=4) | st.sampled_from(SPECIALS),
                  st.integers(2, 30)).map(lambda t: t[0] * t[1]),
    ), max_size=max_parts))
    return "".join(parts)


@st.composite
def hostile_events(draw: st.DrawFn, max_events: int = 8) -> list[tuple[str, str]]:
    return draw(st.lists(st.tuples(st.sampled_from(CHANNELS), hostile_texts()),
                         min_size=1, max_size=max_events))


@st.composite
def phrase_lists(draw: st.DrawFn, corpus: str) -> list[str]:
    """1-4 phrases: pieces of ``corpus`` (so that they occur, straddling deltas and switches),
    arbitrary strings and special characters."""
    sources = [st.text(ANY_CHAR, min_size=1, max_size=6), st.sampled_from(SPECIALS)]
    if corpus:
        start = st.integers(0, len(corpus) - 1)
        sources.append(start.flatmap(lambda i: st.integers(i + 1, min(len(corpus), i + 12)).map(
            lambda j: corpus[i:j])))
    return draw(st.lists(st.one_of(*sources), min_size=1, max_size=4))


_ACTIONS = st.sampled_from(("abort", "remind", "record"))
_VIEWS = st.sampled_from(("text", "reasoning", "combined"))
_RATIOS = st.sampled_from((0.01, 0.2, 0.5, 1.0))
_EVERY = st.integers(1, 64) | st.just(1 << 32)


@st.composite
def hostile_rulesets(draw: st.DrawFn, corpus: str = "") -> tuple[list[Rule], dict[str, Any]]:
    """A valid ruleset whose phrases, fillers and delimiters come from hostile text."""
    window = draw(st.integers(1, 24))
    small = st.integers(1, min(window, 8))
    rules: list[Rule] = []
    for i in range(draw(st.integers(1, 6))):
        rid = f"r{i}"
        common: dict[str, Any] = {"channel": draw(_VIEWS), "action": draw(_ACTIONS), "once": draw(st.booleans())}
        kind = draw(st.integers(0, 8))
        if kind == 0:
            rules.append(Phrases(rid, draw(phrase_lists(corpus)), ignore_case=draw(st.booleans()),
                                 suppress_quoted=draw(st.booleans()), **common))
        elif kind == 1:
            rules.append(Marker(rid, draw(phrase_lists(corpus))[0],
                                ignore_case=draw(st.booleans()), **common))
        elif kind == 2:
            anxiety = draw(st.sampled_from((TimeAnxiety, ContextAnxiety)))
            rules.append(anxiety(rid, extra=tuple(draw(phrase_lists(corpus))),
                                 lang=draw(st.sampled_from(("zh", "en", ("zh", "en")))),
                                 suppress_quoted=draw(st.booleans()), **common))
        elif kind == 3:
            rules.append(LineRepeat(rid, min_lines=draw(small), min_count=draw(small),
                                    min_ratio=draw(_RATIOS), min_run=draw(st.integers(0, window)),
                                    every_bytes=draw(_EVERY), **common))
        elif kind == 4:
            rules.append(LineCycle(rid, max_line_chars=draw(st.integers(1, 40)),
                                   min_lines=draw(small), top=draw(st.integers(1, 64)),
                                   cover_ratio=draw(_RATIOS), every_bytes=draw(_EVERY), **common))
        elif kind == 5:
            rules.append(FillerLines(rid, fillers=draw(st.text(ANY_CHAR, min_size=1, max_size=6)),
                                     max_line_chars=draw(st.integers(1, 40)),
                                     min_count=draw(small), min_ratio=draw(_RATIOS),
                                     every_bytes=draw(_EVERY), **common))
        elif kind == 6:
            rules.append(PrefixMonotony(
                rid, delimiters=draw(st.text(ANY_CHAR, min_size=1, max_size=6)),
                max_prefix_chars=draw(st.integers(1, 8)), min_lines=draw(small),
                min_count=draw(small), min_ratio=draw(_RATIOS), every_bytes=draw(_EVERY),
                **common))
        else:
            w = draw(st.integers(2, 200))
            rules.append(TailRepeat(rid, window_chars=w, max_period=draw(st.integers(1, w // 2)),
                                    min_repeats=draw(st.integers(2, min(w, 6))),
                                    min_chars=draw(st.integers(2, w)), every_bytes=draw(_EVERY),
                                    **common))
    options = {"line_window": window, "min_line_chars": draw(st.integers(1, 5)),
               "evidence_chars": draw(st.integers(0, 80)),
               "mask_code_fences": draw(st.booleans())}
    return rules, options


def outcome(call: Callable[[], Any]) -> Any:
    """The value of ``call()``, or the exception it raised as ``(type, message)``, so that the two
    engines' behaviour can be compared whatever it is."""
    try:
        return call()
    except Exception as exc:  # noqa: BLE001 - compared, then checked against the documented set
        return (type(exc), str(exc))


def is_error(value: Any) -> bool:
    return isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], type) \
        and issubclass(value[0], BaseException)


# ---------------------------------------------------------------------- arbitrary call sequences

Op = tuple[Any, ...]
_OPS = st.one_of(  # feed is listed twice: half of the calls are feeds
    st.tuples(st.just("feed"), st.integers(0, 3), st.sampled_from(CHANNELS), hostile_texts()),
    st.tuples(st.just("feed"), st.integers(0, 3), st.sampled_from(CHANNELS), hostile_texts()),
    st.tuples(st.just("finish"), st.integers(0, 3)),
    st.tuples(st.just("reset"), st.integers(0, 3)),
    st.tuples(st.just("copy"), st.integers(0, 3)),
    st.tuples(st.just("tail"), st.integers(0, 3), st.none() | st.integers(0, 100)),
)


def apply(watcher: Any, op: Op) -> Any:
    name = op[0]
    if name == "feed":
        return watcher.feed(op[3], op[2])
    if name == "finish":
        return watcher.finish()
    if name == "reset":
        return watcher.reset()
    return watcher.tail(op[2])


@SETTINGS
@given(data=st.data())
def test_arbitrary_call_sequences_agree_and_raise_only_documented_errors(
        data: st.DataObject) -> None:
    """Native and reference watchers driven by the same call sequence — including copies that are
    then driven apart — return the same values, raise the same errors (only the documented
    ``RuntimeError`` of a feed after finish), and report the same ``fired``/``finished``/tail.

    A copy that shared state with its original would diverge from the reference, which deep-copies.
    """
    ops = data.draw(st.lists(_OPS, min_size=1, max_size=25))
    corpus = "".join(op[3] for op in ops if op[0] == "feed")
    rules, options = data.draw(hostile_rulesets(corpus))
    pairs = [(native.Ruleset(rules, **options).watcher(), ref.Ruleset(rules, **options).watcher())]
    for op in ops:
        i = op[1] % len(pairs)
        if op[0] == "copy":
            if len(pairs) < 4:
                pairs.append((pairs[i][0].copy(), pairs[i][1].copy()))
            continue
        got = outcome(partial(apply, pairs[i][0], op))
        want = outcome(partial(apply, pairs[i][1], op))
        assert got == want, op
        if is_error(got):
            assert got[0] is RuntimeError and op[0] == "feed" and pairs[i][0].finished, got
        for n, r in pairs:
            assert n.fired == r.fired and n.finished == r.finished and n.tail() == r.tail()
    for n, r in pairs:
        assert n.finish() == r.finish()


# ---------------------------------------------------------------------- split invariance

@SETTINGS
@given(events=hostile_events(), data=st.data())
def test_hostile_text_native_equals_reference_and_any_split_agrees(
        events: list[tuple[str, str]], data: st.DataObject) -> None:
    corpus = "".join(text for _, text in events)
    rules, options = data.draw(hostile_rulesets(corpus))
    rng = random.Random(data.draw(st.integers(0, 2**32 - 1)))
    split = [(ch, p) for ch, text in events for p in pieces(text, rng, 1, 5)]

    def run(module: ModuleType, evs: list[tuple[str, str]]) -> tuple[list[Detection], str]:
        w = module.Ruleset(rules, **options).watcher()
        return feed_all(w, evs), w.tail()

    whole = run(native, events)
    assert run(native, split) == whole
    assert run(ref, split) == whole


@SETTINGS
@given(text=hostile_texts(), data=st.data())
def test_hostile_replay_equals_reference_replay(text: str, data: st.DataObject) -> None:
    rules, options = data.draw(hostile_rulesets(text))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=10)))
    channel = data.draw(st.sampled_from(CHANNELS))
    splits = [*cuts, len(text)]
    assert native.Ruleset(rules, **options).replay(text, splits, channel=channel) == \
        ref.Ruleset(rules, **options).replay(text, splits, channel=channel)


def megabyte(unit: str, size: int = 1 << 20) -> str:
    unit = unit or "x"
    return (unit * (size // len(unit) + 1))[:size]


@settings(max_examples=6, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(unit=hostile_texts(max_parts=12), data=st.data())
def test_megabyte_deltas_are_split_invariant(unit: str, data: st.DataObject) -> None:
    """A 1 MiB delta (scanned with the GIL released) gives what the same text gives as many small
    deltas and as a replay with random splits."""
    text = megabyte(unit)
    rules, options = data.draw(hostile_rulesets(unit))
    rs = native.Ruleset(rules, **options)
    w = rs.watcher()
    whole = [*w.feed(text, "text"), *w.finish()]
    rng = random.Random(data.draw(st.integers(0, 2**32 - 1)))
    cuts = sorted(rng.sample(range(len(text)), 40)) + [len(text)]
    assert rs.replay(text, cuts) == whole
    chunked = rs.watcher()
    out: list[Detection] = []
    prev = 0
    for end in cuts:
        out.extend(chunked.feed(text[prev:end], "text"))
        prev = end
    out.extend(chunked.finish())
    assert out == whole and chunked.tail() == w.tail()


def test_large_hostile_delta_native_equals_reference() -> None:
    """150 000 code points in one delta (past the GIL-release threshold) through the default
    rules: the same detections as the reference."""
    rng = random.Random(5)
    parts = [rng.choice(SPECIALS) for _ in range(4000)]
    parts += ["same line\n" * 60, "the " * 400]
    rng.shuffle(parts)
    text = megabyte("".join(parts), 150_000)
    rules = cc.default_rules()
    got = native.Ruleset(rules, **DEFAULT_OPTIONS).replay(text, channel="reasoning")
    assert got, "the trace holds loops; the default rules must fire"
    assert got == ref.Ruleset(rules, **DEFAULT_OPTIONS).replay(text, channel="reasoning")


@pytest.mark.slow
def test_megabyte_hostile_delta_native_equals_reference() -> None:
    rng = random.Random(6)
    text = megabyte("".join(rng.choice(SPECIALS) for _ in range(20000)) + "the " * 500)
    rules = cc.default_rules()
    for channel in CHANNELS:
        assert native.Ruleset(rules, **DEFAULT_OPTIONS).replay(text, channel=channel) == \
            ref.Ruleset(rules, **DEFAULT_OPTIONS).replay(text, channel=channel)


# ---------------------------------------------------------------------- arbitrary rule parameters

_ANY_VALUE = st.one_of(
    st.integers(-(1 << 70), 1 << 70), st.integers(-3, 70), st.floats(allow_nan=True),
    st.booleans(), st.none(), st.text(ANY_CHAR, max_size=5), st.binary(max_size=3),
    st.lists(st.text(ANY_CHAR, max_size=3), max_size=3), st.sampled_from(CHANNELS + ("combined",)),
)
_FIELDS: dict[type[Rule], tuple[str, ...]] = {
    Phrases: ("phrases", "channel", "action", "ignore_case", "suppress_quoted", "once"),
    Marker: ("token", "channel", "ignore_case", "once"),
    TimeAnxiety: ("lang", "extra", "channel", "suppress_quoted"),
    LineRepeat: ("min_lines", "min_count", "min_ratio", "min_run", "every_bytes", "once"),
    LineCycle: ("max_line_chars", "min_lines", "top", "cover_ratio", "every_bytes"),
    FillerLines: ("fillers", "max_line_chars", "min_count", "min_ratio", "every_bytes"),
    PrefixMonotony: ("delimiters", "max_prefix_chars", "min_lines", "min_count", "min_ratio"),
    TailRepeat: ("max_period", "min_repeats", "min_chars", "window_chars", "every_bytes"),
}
_REQUIRED: dict[type[Rule], dict[str, Any]] = {Phrases: {"phrases": ["x"]}, Marker: {"token": "x"}}


@SETTINGS
@given(data=st.data())
def test_arbitrary_rule_parameters_fail_only_with_documented_errors(data: st.DataObject) -> None:
    """Any value in any rule field either builds a rule or raises RuleTypeError/RuleValueError;
    any option value likewise; both engines accept or refuse the same rule lists the same way."""
    rules: list[Any] = []
    for i in range(data.draw(st.integers(0, 4))):
        cls = data.draw(st.sampled_from(sorted(_FIELDS, key=lambda c: c.__name__)))
        kwargs = {"id": f"id{i % 3}", **_REQUIRED.get(cls, {})}
        kwargs.update({name: data.draw(_ANY_VALUE) for name in
                       data.draw(st.lists(st.sampled_from(_FIELDS[cls]), max_size=3,
                                          unique=True))})
        try:
            rules.append(cls(**kwargs))
        except (RuleTypeError, RuleValueError):
            continue
    options: dict[str, Any] = {name: data.draw(_ANY_VALUE | st.integers(0, 100)) for name in data.draw(st.lists(
        st.sampled_from(("line_window", "min_line_chars", "evidence_chars", "mask_code_fences")),
        max_size=2, unique=True))}
    built = outcome(lambda: native.Ruleset(rules, **options))
    oracle = outcome(lambda: ref.Ruleset(rules, **options))
    if is_error(built):
        assert built[0] in (RuleTypeError, RuleValueError), built
        assert built == oracle
    else:
        assert not is_error(oracle), oracle
        text = data.draw(hostile_texts())
        assert built.replay(text) == oracle.replay(text)


# ---------------------------------------------------------------------- pickle and copy

@SETTINGS
@given(events=hostile_events(max_events=4), data=st.data())
def test_pickled_ruleset_detects_the_same(events: list[tuple[str, str]],
                                          data: st.DataObject) -> None:
    rules, options = data.draw(hostile_rulesets("".join(t for _, t in events)))
    rs = native.Ruleset(rules, **options)
    protocol = data.draw(st.integers(0, pickle.HIGHEST_PROTOCOL))
    back = pickle.loads(pickle.dumps(rs, protocol=protocol))
    assert type(back) is native.Ruleset
    assert back.rules == rs.rules and back.options == rs.options and repr(back) == repr(rs)
    for clone in (back, _copy.copy(rs), _copy.deepcopy(rs)):
        assert feed_all(clone.watcher(), events) == feed_all(rs.watcher(), events)


@SETTINGS
@given(events=hostile_events(), data=st.data())
def test_copy_at_any_point_continues_identically(events: list[tuple[str, str]],
                                                 data: st.DataObject) -> None:
    """Copy a watcher at any point of a stream (even after finish), feed the rest to both: each
    gives what one uninterrupted watcher gives, and feeding one does not affect the other."""
    rules, options = data.draw(hostile_rulesets("".join(t for _, t in events)))
    rs = native.Ruleset(rules, **options)
    control = feed_all(rs.watcher(), events)
    cut = data.draw(st.integers(0, len(events)))
    w = rs.watcher()
    head = feed_all(w, events[:cut], finish=False)
    twin = w.copy()
    assert twin.tail() == w.tail() and twin.fired == w.fired
    rest = feed_all(w, events[cut:])
    assert head + rest == control
    assert head + feed_all(twin, events[cut:]) == control
    # a copy of a finished watcher is finished too, and reset() revives it alone
    done = w.copy()
    assert done.finished
    with pytest.raises(RuntimeError, match="finish"):
        done.feed("x", "text")
    done.reset()
    assert not done.finished and w.finished
    assert feed_all(done, events) == control


def test_watcher_is_not_picklable_but_copyable() -> None:
    w = native.Ruleset([Phrases("p", ["ab"])]).watcher()
    w.feed("a")
    with pytest.raises(TypeError, match="copy"):
        pickle.dumps(w)
    assert [d.offset for d in w.copy().feed("b")] == [2]


# ---------------------------------------------------------------------- memory (RSS)

def rss_bytes() -> int:
    """Resident set size of this process, from /proc (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


#: RSS is read from /proc, and means nothing under AddressSanitizer, whose quarantine keeps freed
#: memory resident on purpose (tools/sanitize.sh sets CONTEXTCARE_SANITIZED).
linux_only = pytest.mark.skipif(
    not os.path.exists("/proc/self/statm") or bool(os.environ.get("CONTEXTCARE_SANITIZED")),
    reason="RSS is read from /proc and is meaningless under ASan")

#: A stream that keeps every part of the engine busy: new distinct lines (the line window and its
#: hashes churn), a phrase hit now and then, CJK and emoji (multi-byte throttle counting).
LOOP_TEXT = "".join(f"step {i}: 看一下 😀 hurry up {i % 7}\n" for i in range(997))


def feed_deltas(w: Any, n: int) -> None:
    text, size = LOOP_TEXT, len(LOOP_TEXT)
    for i in range(n):
        w.feed(text[i % size])


def churn_watchers(rs: Any, n: int) -> None:
    for i in range(n):
        w = rs.watcher()
        w.feed(LOOP_TEXT[i % 500:i % 500 + 40], "reasoning")
        if i % 3 == 0:
            w.copy().finish()


def rss_growth(work: Callable[[int], None], n: int) -> tuple[int, int]:
    """RSS growth over ``n`` units of work after a warm-up of ``n // 10`` (which lets the
    allocators reach their steady state); returns ``(growth, rss_after_warmup)``."""
    work(n // 10)
    gc.collect()
    before = rss_bytes()
    work(n)
    gc.collect()
    return rss_bytes() - before, before


MIB = 1 << 20


@linux_only
def test_rss_flat_over_two_million_deltas() -> None:
    rs = cc.Ruleset([*cc.default_rules(), Phrases("hurry", ["hurry up"], once=False)],
                    **DEFAULT_OPTIONS)
    w = rs.watcher()
    growth, _ = rss_growth(lambda n: feed_deltas(w, n), 2_000_000)
    assert growth < 2 * MIB, growth


@linux_only
def test_rss_flat_over_two_hundred_thousand_watchers() -> None:
    rs = cc.default_ruleset()
    growth, _ = rss_growth(lambda n: churn_watchers(rs, n), 200_000)
    assert growth < 2 * MIB, growth


@linux_only
def test_rss_flat_over_rulesets_built_and_refused() -> None:
    """Building rulesets — and failing to, at the automaton-size limit of the C core — frees
    everything each time."""
    rng = random.Random(2)
    alphabet = [chr(c) for c in range(33, 127)] + [chr(c) for c in range(0xA1, 0x100)]
    # ~400 000 trie states: over the automaton limit, lowered to 4 MiB here (a testing hook) so
    # that the refusal comes after a large part of the build
    refused = [Phrases("p", ["".join(rng.choices(alphabet, k=22)) for _ in range(30000)])]

    def work(n: int) -> None:
        for i in range(n):
            native.Ruleset(cc.default_rules(), **DEFAULT_OPTIONS).watcher().feed("hurry\n" * 3)
            if i % 50 == 0:
                with pytest.raises(RuleValueError, match="automaton"):
                    native.Ruleset(refused)

    old = native._automaton_limits(max_bytes=4 << 20)
    try:
        growth, _ = rss_growth(work, 200)
    finally:
        native._automaton_limits(*old)
    assert growth < 4 * MIB, growth


@pytest.mark.slow
@linux_only
def test_rss_flat_over_ten_million_deltas_long() -> None:
    rs = cc.default_ruleset()
    w = rs.watcher()
    growth, base = rss_growth(lambda n: feed_deltas(w, n), 10_000_000)
    print(f"\n10M deltas: RSS {base / MIB:.1f} MiB, growth {growth / 1024:.0f} KiB")
    assert growth < 2 * MIB, growth


@pytest.mark.slow
@linux_only
def test_rss_flat_over_a_million_watchers_long() -> None:
    rs = cc.default_ruleset()
    growth, base = rss_growth(lambda n: churn_watchers(rs, n), 1_000_000)
    print(f"\n1M watchers: RSS {base / MIB:.1f} MiB, growth {growth / 1024:.0f} KiB")
    assert growth < 2 * MIB, growth


# ---------------------------------------------------------------------- threads

#: Deltas longer than the native engine's GIL-release threshold (64 Ki code points), so that
#: threads really run inside the C core at the same time.
BIG = 70_000


def big_trace(seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    blocks = ["We parse the file and check every key, one by one.\n", "先检查配置，再运行测试。\n",
              "看起来时间不够了。\n", "running out of context\n", "same line\n" * 40,
              "the " * 200, "（输出。）\n**做。**\ngo.\n" * 12, "嗯，继续。\n" * 15]
    events = []
    for _ in range(6):
        text = "".join(rng.choice(blocks) for _ in range(BIG // 20))
        events.append((rng.choice(CHANNELS), text[:rng.randint(BIG, BIG + 30_000)]))
    return events


def run_threads(n: int, target: Callable[[int], None]) -> None:
    threads = [threading.Thread(target=target, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_eight_threads_with_big_deltas_match_single_thread() -> None:
    """One Ruleset, 8 threads, two watchers each, fed alternately with GIL-releasing deltas."""
    rs = cc.default_ruleset()
    traces = [big_trace(s) for s in range(16)]
    expected = [feed_all(rs.watcher(), t) for t in traces]
    assert any(expected), "the traces hold loops; the default rules must fire"
    got: list[list[Detection]] = [[] for _ in traces]

    def work(i: int) -> None:
        mine = (2 * i, 2 * i + 1)
        watchers = {k: rs.watcher() for k in mine}
        for step in range(6):
            for k in mine:
                ch, text = traces[k][step]
                got[k].extend(watchers[k].feed(text, ch))
        for k in mine:
            got[k].extend(watchers[k].finish())

    run_threads(8, work)
    assert got == expected


def test_parallel_replay_matches_serial() -> None:
    rs = cc.default_ruleset()
    texts = ["".join(t for _, t in big_trace(s)) for s in range(8)]
    expected = [rs.replay(t, channel="reasoning") for t in texts]
    got: list[Any] = [None] * 8
    run_threads(8, lambda i: got.__setitem__(i, rs.replay(texts[i], channel="reasoning")))
    assert got == expected


def test_replay_releases_the_gil() -> None:
    """While one thread is inside ``replay`` of a long trace, the main thread keeps running
    Python code. If the replay held the GIL, the main thread could not run a single bytecode
    between the start and the end of the C call; the test counts its loop iterations in the
    middle half of that call (robust to a loaded machine, where rates would be noisy)."""
    rs = cc.default_ruleset()
    text = megabyte("We check every key of the file. 先检查配置。\n", 8 << 20)
    span: list[float] = []
    done = threading.Event()

    def replay() -> None:
        span.append(time.perf_counter())
        rs.replay(text)
        span.append(time.perf_counter())
        done.set()

    stamps: list[float] = []
    n = 0
    t = threading.Thread(target=replay)
    t.start()
    while not done.is_set():
        n += 1
        if n & 255 == 0:
            stamps.append(time.perf_counter())
    t.join()
    start, end = span
    quarter = (end - start) / 4
    inside = sum(1 for s in stamps if start + quarter < s < end - quarter)
    assert inside >= 10, (inside, len(stamps), end - start)


MISUSE: dict[str, Callable[[Any], Any]] = {
    "feed": lambda w: w.feed("x", "text"),
    "finish": lambda w: w.finish(),
    "reset": lambda w: w.reset(),
    "copy": lambda w: w.copy(),
}


@pytest.mark.parametrize("method", list(MISUSE))
def test_every_mutating_call_from_a_second_thread_raises_and_corrupts_nothing(
        method: str) -> None:
    """While one thread is inside ``feed`` (GIL released), any mutating call on the same watcher
    from another thread raises RuntimeError. Afterwards the watcher is exactly where an
    undisturbed watcher fed the same deltas would be, and goes on like it."""
    rs = cc.Ruleset([Phrases("p", ["needle"], once=False), *cc.default_rules()],
                    **DEFAULT_OPTIONS)
    big = "hay stack\n" * 500_000 + "needle"
    control = rs.watcher()
    expected = control.feed(big, "text")
    for _ in range(20):
        w = rs.watcher()
        started = threading.Event()
        result: list[tuple[Detection, ...]] = []

        def feed_big(w: Any = w, started: threading.Event = started,
                     result: list[tuple[Detection, ...]] = result) -> None:
            started.set()
            result.append(w.feed(big, "text"))

        t = threading.Thread(target=feed_big)
        t.start()
        started.wait()
        time.sleep(0.005)
        try:
            MISUSE[method](w)
        except RuntimeError as exc:
            assert "another thread" in str(exc)
            raised = True
        else:
            raised = False  # the call slipped in before or after the feed: try another round
        t.join()
        if raised:
            break
    else:
        pytest.fail("the second thread never overlapped the feed; make the delta longer")
    assert result == [expected]
    assert w.tail() == control.tail() and w.fired == control.fired and not w.finished
    rest = "same line\n" * 50
    assert w.feed(rest) == control.feed(rest)
    assert w.finish() == control.finish()


def test_tail_from_a_second_thread_during_feed_is_refused_or_exact() -> None:
    """Found under tools/sanitize.sh: ``tail()`` does not check that the watcher is busy, so
    during a concurrent ``feed`` it reads the tail ring while the C core writes it. Under ASan it
    returned ``'\ubebe' * 12`` (ASan's fill byte for fresh malloc memory: uninitialised heap);
    in the window where the ring buffer is set but its capacity is not yet, the modulo in
    ``cc_ring_last`` divides by zero (SIGFPE). Contract (SPEC: a Watcher used from two threads at
    once raises RuntimeError): tail() called while another thread is inside feed() raises
    RuntimeError like every other method, and never returns text that was not fed."""
    rs = cc.Ruleset([Phrases("p", ["needle"])], evidence_chars=300)
    big = "hay stack 😀\n" * 100_000
    allowed = set(big)
    bad: list[str] = []
    refused = 0
    for _ in range(10):
        w = rs.watcher()
        t = threading.Thread(target=lambda w=w: w.feed(big, "text"))
        t.start()
        while t.is_alive():
            try:
                tail = w.tail()
            except RuntimeError as exc:
                assert "another thread" in str(exc)
                refused += 1
                continue
            if not set(tail) <= allowed:
                bad.append(tail)
        t.join()
        assert w.tail() == big[-300:]
    assert not bad, f"tail() returned text never fed: {bad[:3]!r}"
    assert refused, "tail() during a concurrent feed() must raise RuntimeError"


# ---------------------------------------------------------------------- regressions

def test_float_splits_are_refused_by_both_engines() -> None:
    """Found by the bad-input table: the reference silently truncated float offsets
    (``int(1.5)``) where the native engine raises RuleTypeError, so the two engines disagreed on
    which calls are valid. Offsets are code-point counts: a float is a caller's mistake."""
    for module in (native, ref):
        rs = module.Ruleset([Phrases("p", ["abc"])])
        with pytest.raises(ArgumentTypeError, match="splits"):
            rs.replay("abc", [1.5, 3.0])


@pytest.mark.parametrize("module", [native, ref], ids=["native", "reference"])
@pytest.mark.parametrize("char", ["\x00", "\x01", "\x1b", "\x7f"])
def test_ascii_control_characters_are_not_word_characters(module: ModuleType, char: str) -> None:
    """Found by test_hostile_text_native_equals_reference_and_any_split_agrees (input
    ``TailRepeat(window_chars=2, max_period=1, min_repeats=2, min_chars=2)`` fed ``"\\x1b\\x1b"``):
    docs/semantics.md says that below U+0080 only ASCII letters and digits are word characters,
    and the native engine does not fire, but the reference took the C0 controls and DEL (which
    are neither whitespace nor in its punctuation ranges) for word characters and fired."""
    rs = module.Ruleset([TailRepeat("t", window_chars=8, max_period=1, min_repeats=2,
                                    min_chars=2, every_bytes=1)])
    assert rs.replay(char * 10) == []
    assert [d.unit for d in rs.replay("a" * 10)] == ["a"]


def test_bytes_are_not_splits() -> None:
    """Found by test_bad_input.py: the native ``replay`` takes any 1-d integer buffer as
    ``splits``, so ``replay("abc", b"\\x03")`` reads the bytes as offsets and succeeds, while the
    reference refuses bytes with RuleTypeError ("splits must be a sequence of int offsets, got
    bytes"). The spec accepts bytes only where the API says so; a numpy integer array is the
    documented buffer form."""
    for module in (native, ref):
        rs = module.Ruleset([Phrases("p", ["abc"])])
        with pytest.raises(ArgumentTypeError, match="splits"):
            rs.replay("abc", b"\x03")


@pytest.mark.parametrize("module", [native, ref], ids=["native", "reference"])
def test_suppress_quoted_phrase_made_of_gap_characters(module: ModuleType) -> None:
    """Found by tools/fuzz.sh (crash-5d9c8989…, while the list-line rule was being changed in
    one engine and not yet in the other): a suppress_quoted phrase that itself consists of a
    quote and a separator, ``”、``. docs/semantics.md: in ``a”、b”、`` the gap after the first
    occurrence (end 3) ends at ``b`` (offset 3), and the next occurrence starts at 4, so this is
    no list line and the first occurrence fires at 3. In ``”、,”、,`` the gap after the first
    occurrence (end 2) never ends before the second one, so no phrase starts where it ended:
    again no list line, the first occurrence fires at 2."""
    rs = module.Ruleset([Phrases("r0", ["”、"], channel="text", suppress_quoted=True,
                                 once=False)])
    assert [(d.offset, d.phrase) for d in rs.replay("a”、b”、")] == [(3, "”、")]
    assert [(d.offset, d.phrase) for d in rs.replay("”、,”、,")] == [(2, "”、")]
    # a phrase made of gap characters never starts where a gap ended: no list line ...
    assert [d.offset for d in rs.replay("”、 , ”、")] == [2]
    # ... while ordinary phrases with only a separator between them make one
    listing = module.Ruleset([Phrases("r0", ["”、", "ab"], channel="text",
                                      suppress_quoted=True)])
    assert listing.replay("ab, ab") == [] and [d.offset for d in listing.replay("ab ab")] == [2]


def test_fuzz_harness_runs_clean_on_random_inputs() -> None:
    """tools/fuzz_engine.py decodes any bytes into a scenario and finds both engines in
    agreement: run it on seeded random inputs so that the harness cannot rot unnoticed."""
    pytest.importorskip("atheris")
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "tools" / "fuzz_engine.py"
    spec = importlib.util.spec_from_file_location("fuzz_engine", path)
    assert spec is not None and spec.loader is not None
    harness = importlib.util.module_from_spec(spec)
    sys.modules["fuzz_engine"] = harness      # dataclasses look their module up there
    try:
        spec.loader.exec_module(harness)
    finally:
        del sys.modules["fuzz_engine"]
    rng = random.Random(8)
    ops = 0
    for _ in range(300):
        scenario = harness.decode(rng.randbytes(rng.randint(0, 400)))
        ops += len(scenario.ops)
        harness.run(scenario)
    assert ops > 300, "the decoder should turn random bytes into real call sequences"
