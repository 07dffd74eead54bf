"""Phrase sets of any size: the native automaton (dense rows for shallow states, a double-array
trie with failure links for the rest) against the pure-Python reference.

* Large random phrase sets (hypothesis, up to thousands of phrases drawn from small alphabets, so
  they share prefixes and suffixes and overlap in the text) give the same detections in both
  engines, whatever the split of the text into deltas.
* The whole generated differential suite runs again with the dense-row budget cut to the root
  alone, so every state but the root is a sparse one (small rulesets are all-dense by default).
* The compiled size follows the phrases (``Ruleset.memory``), the size limit is a clear
  ``RuleValueError``, and (``slow``) 100 000 phrases compile, match and agree with the reference.
"""

from __future__ import annotations

import itertools
import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from conftest import feed_all, pieces
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import rulesets, traces

import contextcare as cc
import contextcare.reference as ref
from contextcare import Phrases
from contextcare.errors import RuleValueError

native = pytest.importorskip("contextcare._engine")

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@contextmanager
def automaton_limits(dense_bytes: int | None = None,
                     max_bytes: int | None = None) -> Iterator[None]:
    old = native._automaton_limits(dense_bytes, max_bytes)
    try:
        yield
    finally:
        native._automaton_limits(*old)


ROOT_ONLY = 1  # a dense budget smaller than one row: only the root gets one
ALL_DENSE = 1 << 22  # as many dense rows as 16-bit entries allow (small alphabets: every state)

# Alphabets for random phrase sets: few letters (deep shared prefixes, many overlaps), case for
# ignore_case, CJK, an emoji and a lone surrogate, and the suppress_quoted specials.
ALPHABETS = (
    "ab",
    "abcAB ",
    "时间不够了吗",
    "aé时😀\udc80",
    'a"“”「」`\n ',
)


@st.composite
def phrase_sets(draw: st.DrawFn, max_size: int = 3000) -> tuple[str, list[str]]:
    alphabet = draw(st.sampled_from(ALPHABETS))
    n = draw(st.one_of(st.integers(1, 50), st.integers(500, max_size)))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = random.Random(seed)
    longest = draw(st.sampled_from((3, 6, 12)))
    phrases = ["".join(rng.choices(alphabet, k=rng.randint(1, longest))) for _ in range(n)]
    return alphabet, phrases


def split_rules(phrases: list[str], data: st.DataObject) -> list[Phrases]:
    """The phrases over one to three rules of random options (overlapping sets on purpose)."""
    k = data.draw(st.integers(1, 3))
    rules = []
    for i in range(k):
        part = phrases[i::k] or phrases[:1]
        if i and data.draw(st.booleans()):
            part = part + phrases[: data.draw(st.integers(0, 20))]  # shared phrases
        rules.append(Phrases(f"p{i}", part, once=data.draw(st.booleans()),
                             ignore_case=data.draw(st.booleans()),
                             suppress_quoted=data.draw(st.booleans()),
                             channel=data.draw(st.sampled_from(("text", "combined")))))
    return rules


def text_for(alphabet: str, phrases: list[str], rng: random.Random, size: int) -> str:
    parts: list[str] = []
    while sum(map(len, parts)) < size:
        parts.append(rng.choice(phrases) if rng.random() < 0.4
                     else "".join(rng.choices(alphabet + "x\n", k=rng.randint(1, 6))))
    return "".join(parts)


def run(module: object, rules: list[Phrases], events: list[tuple[str, str]]) -> object:
    w = module.Ruleset(rules).watcher()  # type: ignore[attr-defined]
    return feed_all(w, events)


@SETTINGS
@given(ps=phrase_sets(), data=st.data(),
       dense=st.sampled_from((None, ROOT_ONLY, 4096, ALL_DENSE)))
def test_large_phrase_sets_native_equals_reference(ps, data, dense):
    alphabet, phrases = ps
    rules = split_rules(phrases, data)
    rng = random.Random(data.draw(st.integers(0, 2**32 - 1)))
    text = text_for(alphabet, phrases, rng, data.draw(st.integers(0, 600)))
    events = [(rng.choice(("text", "text", "reasoning")), d) for d in pieces(text, rng)]
    with automaton_limits(dense_bytes=dense):
        got = run(cc, rules, events)
        whole = run(cc, rules, [("text", text)]) if text else []
    assert got == run(ref, rules, events)
    # any split: one delta gives what 1-4-character deltas give on one channel
    one_channel = [("text", d) for d in pieces(text, rng)]
    with automaton_limits(dense_bytes=dense):
        assert run(cc, rules, one_channel) == whole


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(spec=rulesets(), events=traces(), seed=st.integers(0, 2**32 - 1))
def test_sparse_states_equal_reference_on_the_generated_suite(spec, events, seed):
    """The generated differential suite with every state but the root sparse."""
    rules, options = spec
    rng = random.Random(seed)
    split = [(ch, p) for ch, text in events for p in pieces(text, rng)]
    with automaton_limits(dense_bytes=ROOT_ONLY):
        w = cc.Ruleset(rules, **options).watcher()
        got = feed_all(w, split), w.tail()
    w = ref.Ruleset(rules, **options).watcher()
    assert got == (feed_all(w, split), w.tail())


def test_dense_budget_changes_layout_not_results():
    rng = random.Random(5)
    phrases = ["".join(rng.choices("abcdefgh时间", k=rng.randint(2, 9))) for _ in range(2000)]
    text = text_for("abcdefgh时间", phrases, rng, 20000)
    results, sizes = [], []
    for dense in (ROOT_ONLY, 4096, None):
        with automaton_limits(dense_bytes=dense):
            rs = cc.Ruleset([Phrases("p", phrases, once=False)])
        sizes.append(rs.memory)
        results.append(rs.replay(text, list(range(1, len(text) + 1))))
    assert results[0] == results[1] == results[2]
    assert len(results[0]) > 1000
    assert sizes[0] < sizes[1] < sizes[2]


@pytest.mark.parametrize("alphabet", ["ab", 'a"“\n '])
def test_dense_rows_beyond_16_bit_entries(alphabet):
    """Dense rows hold 16-bit entries: a dense state without outputs names itself, anything else
    (a sparse state, a state with outputs, the target of a quote mark or line end) goes through
    the exit table, and the dense states and exits together stay within 65 536. A set of far
    more states than that over a tiny alphabet, with a budget for every row, gives what the
    all-sparse layout gives, and the reference."""
    rng = random.Random(11)
    phrases = list(dict.fromkeys("".join(rng.choices(alphabet, k=rng.randint(6, 16)))
                                 for _ in range(12_000)))
    rules = [Phrases("p", phrases[::2], once=False),
             Phrases("q", phrases[1::2], once=False, suppress_quoted=len(alphabet) > 2)]
    text = text_for(alphabet, phrases, rng, 6000)
    events = [("text", d) for d in pieces(text, rng)]
    results = []
    for dense in (ALL_DENSE, ROOT_ONLY):
        with automaton_limits(dense_bytes=dense):
            results.append(run(cc, rules, events))
    assert results[0] == results[1]
    assert len(results[0]) > 300
    assert results[0] == run(ref, rules, events)


def test_memory_follows_the_phrases_not_the_alphabet():
    """A set of many distinct characters (the dense table of every state would cost 4 bytes per
    class per state) compiles to about the size of its trie."""
    rng = random.Random(7)
    phrases = ["".join(chr(rng.randint(0x4E00, 0x9FA5)) for _ in range(rng.randint(2, 8)))
               for _ in range(5000)]
    rs = cc.Ruleset([Phrases("p", phrases)])
    chars = sum(map(len, phrases))
    assert rs.memory < 48 * chars + 2 * 2**20, rs.memory
    assert sys.getsizeof(rs) >= rs.memory
    w = rs.watcher()
    assert [d.phrase for d in w.feed("xx" + phrases[4321] + "yy")] == [phrases[4321]]


def test_memory_grows_linearly_with_the_set():
    rng = random.Random(3)
    phrases = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz ", k=rng.randint(8, 20)))
               for _ in range(20000)]
    small = cc.Ruleset([Phrases("p", phrases[:2000])]).memory
    large = cc.Ruleset([Phrases("p", phrases)]).memory
    # ten times the phrases, at most ~ten times the memory (plus the fixed dense budget)
    assert large < 10 * small + 2**20, (small, large)


def test_size_limit_is_a_clear_rule_value_error():
    rng = random.Random(2)
    phrases = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=22)) for _ in range(3000)]
    with automaton_limits(max_bytes=1 << 20):
        with pytest.raises(RuleValueError, match=r"phrase automaton would exceed 1 MiB"):
            cc.Ruleset([Phrases("p", phrases)])
        # a smaller set under the same limit compiles and works
        rs = cc.Ruleset([Phrases("p", phrases[:300])])
    assert rs.memory <= 1 << 20
    assert [d.phrase for d in rs.replay(f"..{phrases[299]}..")] == [phrases[299]]


def test_too_many_distinct_characters_is_a_clear_rule_value_error():
    phrases = [chr(0x20000 + i) for i in range(70000)]
    with pytest.raises(RuleValueError, match="distinct characters"):
        cc.Ruleset([Phrases("p", phrases)])


def _big_set(n: int) -> list[str]:
    rng = random.Random(16)
    out: dict[str, None] = {}
    words = ("check", "the", "file", "model", "stream", "reply", "token", "value", "error")
    while len(out) < n:
        if len(out) % 2:
            out["".join(chr(rng.randint(0x4E00, 0x9FA5)) for _ in range(rng.randint(2, 8)))] = None
        else:
            out[" ".join(rng.choice(words) + rng.choice(("", "s", "ed", "x")) for _ in
                         range(rng.randint(2, 4)))] = None
    return list(out)


@pytest.mark.slow
def test_100k_phrases_native_equals_reference():
    phrases = _big_set(100_000)
    rng = random.Random(1)
    rules = [Phrases("p", phrases[::2], once=False),
             Phrases("q", phrases[1::2] + phrases[:500:2], once=False, ignore_case=True)]
    text = text_for("the file 文件时间", phrases, rng, 10_000)
    events = [("text", d) for d in pieces(text, rng)]
    native_rs = cc.Ruleset(rules)
    assert native_rs.memory < 48 * 2**20
    got = feed_all(native_rs.watcher(), events)
    assert len(got) > 1000
    assert got == feed_all(ref.Ruleset(rules).watcher(), events)
    assert native_rs.replay(text) == got


@pytest.mark.parametrize("seed", range(4))
def test_replay_batches_equal_feeding_each_delta(seed):
    """``replay`` walks consecutive deltas in batches of ~4096 code points: on traces far longer
    than a batch, with detections on every side of the batch cuts (phrases reported at every
    occurrence, loops, quotes), it gives exactly what feeding each delta gives, and what the
    reference gives."""
    from strategies import FRAGMENTS, PHRASES

    rng = random.Random(seed)
    parts = [rng.choice(FRAGMENTS + PHRASES) * rng.choice((1, 1, 1, 8)) for _ in range(3000)]
    text = "".join(parts)
    assert len(text) > 5 * 4096
    rules = list(cc.default_rules()) + [
        Phrases("every", list(PHRASES), once=False, channel="reasoning"),
        Phrases("quoted", ["hurry up", "时间不够"], once=False, suppress_quoted=True,
                channel="combined"),
    ]
    from contextcare.presets import DEFAULT_OPTIONS

    native_rs = cc.Ruleset(rules, **DEFAULT_OPTIONS)
    deltas = pieces(text, rng)
    ends = list(itertools.accumulate(map(len, deltas)))
    got = native_rs.replay(text, ends, channel="reasoning")
    fed = feed_all(native_rs.watcher(), [("reasoning", d) for d in deltas])
    assert got == fed
    assert len(got) > 100
    reference = ref.Ruleset(rules, **DEFAULT_OPTIONS).replay(text, ends, channel="reasoning")
    assert got == reference
