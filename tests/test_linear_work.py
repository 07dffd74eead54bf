"""Work per hit does not grow with the number of hits of one call (issue 17, item 1).

The hits of one ``feed``/``replay`` step are put in (position, rule) order in C. That used to be
an insertion sort over the whole list: each hit of the combined view walked back past every hit
of the channel's view, so a hit-dense delta cost (hits x hits) - ``replay("x" * 100_000)`` with
two one-character ``once=False`` rules took 33 s. These tests assert the *complexity* through a
test hook of the native watcher, ``_sort_comparisons()`` (comparisons spent ordering hits so
far), never a wall-clock time; the timings are in ``benchmarks/bench_hits.py``.
"""

from __future__ import annotations

import random

from conftest import stream
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import contextcare as cc
from contextcare import reference


def _per_hit(rs: cc.Ruleset, text: str, channel: str = "text") -> tuple[int, float, list]:
    """Feed ``text`` as ONE delta, then finish; (hits, comparisons per hit, detections)."""
    w = rs.watcher()
    got = list(w.feed(text, channel)) + list(w.finish())
    return len(got), w._sort_comparisons() / max(len(got), 1), got


def _two_views(text_rule: str = "x", combined_rule: str = "x") -> cc.Ruleset:
    return cc.Ruleset([cc.Phrases("t", [text_rule], channel="text", once=False),
                       cc.Phrases("c", [combined_rule], channel="combined", once=False)])


def test_one_delta_of_many_hits_costs_a_constant_per_hit() -> None:
    # the case: every character is a hit of the text view and of the combined view
    rs = _two_views()
    small = _per_hit(rs, "x" * 2_000)
    big = _per_hit(rs, "x" * 100_000)
    assert small[0] == 4_000 and big[0] == 200_000
    # about 3 comparisons per hit (group scan, run scan, one merge); the insertion sort spent
    # ~n/2 per hit: 50 000 here
    assert big[1] <= 4
    assert big[1] <= small[1] + 0.01


def test_one_delta_is_ordered_like_small_deltas_and_the_reference() -> None:
    rs = _two_views()
    text = "x" * 3_000
    one = rs.replay(text)
    # at one position, the order of the rules: t then c
    assert [(d.offset, d.rule) for d in one[:4]] == [(1, "t"), (1, "c"), (2, "t"), (2, "c")]
    assert one == rs.replay(text, list(range(7, len(text), 7)) + [len(text)])
    ref = reference.Ruleset(list(rs.rules))
    assert one == ref.replay(text)


def test_replay_of_many_hits_equals_feeding_them() -> None:
    rs = _two_views("ab", "b")
    text = "ab" * 20_000
    assert rs.replay(text) == stream(rs, text, lo=1, hi=4)


_ALPHABET = "abAB\n`\"“”"
_phrase = st.text(alphabet="abAB", min_size=1, max_size=3)
_rule = st.builds(
    lambda i, phrases, channel, fold, quoted: cc.Phrases(
        f"r{i}", phrases, channel=channel, once=False, ignore_case=fold,
        suppress_quoted=quoted),
    st.integers(0, 10**6), st.lists(_phrase, min_size=1, max_size=4, unique=True),
    st.sampled_from(["text", "reasoning", "combined"]), st.booleans(), st.booleans())


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(rules=st.lists(_rule, min_size=1, max_size=6, unique_by=lambda r: r.id),
       unit=st.text(alphabet=_ALPHABET, min_size=1, max_size=9),
       channel=st.sampled_from(["text", "reasoning"]), seed=st.integers(0, 2**32))
def test_work_per_hit_does_not_grow_with_the_hits(rules: list[cc.Phrases], unit: str,
                                                  channel: str, seed: int) -> None:
    """Any phrase rules reporting every occurrence, any repeated unit, one big delta: the
    comparisons per hit at 16x the text are no more than at 1x (plus rounding), and the
    detections are those of the reference."""
    rs = cc.Ruleset(rules)
    rng = random.Random(seed)
    noise = "".join(rng.choice(_ALPHABET) for _ in range(rng.randrange(0, 5)))
    small_text = (noise + unit * (600 // len(unit) + 1))[:600]
    big_text = (noise + unit * (9_600 // len(unit) + 1))[:9_600]
    small_hits, small_cost, small_got = _per_hit(rs, small_text, channel)
    big_hits, big_cost, _ = _per_hit(rs, big_text, channel)
    assert small_got == reference.Ruleset(rules).replay(small_text, channel=channel)
    if small_hits >= 50:
        # O(h log h) would add ~log2(16) = 4 per hit, the old insertion sort ~16x
        assert big_cost <= small_cost + 0.5, (small_hits, small_cost, big_hits, big_cost)
    # a bound by the rule set alone: group scan and run scan, then log2 of the hits one
    # position can hold (<= one per phrase) and of the views' stretches
    per_position = sum(len(r.phrases) for r in rules) + 1
    assert big_cost <= 4 + 2 * per_position.bit_length() + 4
