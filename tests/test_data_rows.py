"""Data rows are not near-variant loops (docs/semantics.md, numeric segments): rows from one
template whose numbers are the content stay quiet in both engines, while a counter — alone or
written twice — still makes lines copies, and a block with a numeric line in it still loops."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

import contextcare as cc
from contextcare import reference
from contextcare.presets import DEFAULT_OPTIONS, default_rules

NEAR_RULES = {"near-lines", "near-flip", "near-cycle", "near-repeat", "near-repeat-long", "near-recurring"}


def _engines() -> list:  # type: ignore[type-arg]
    return [cc.Ruleset(default_rules(), **DEFAULT_OPTIONS),
            reference.Ruleset(default_rules(), **DEFAULT_OPTIONS)]


def _found(rs, text: str, seed: int = 0) -> list[tuple[str, str, int]]:  # type: ignore[no-untyped-def]
    rng = random.Random(seed)
    ends, at = [], 0
    while at < len(text):
        at = min(len(text), at + rng.randint(1, 4))
        ends.append(at)
    return [(d.rule, d.action, d.offset) for d in rs.replay(text, ends)]


# rows a user asks for: numbers that change independently of the row's counter
DATA: dict[str, Callable[[random.Random, int], str]] = {
    "bank statement": lambda r, i: f"2024-0{r.randint(1, 9)}-{r.randint(10, 28)}  Card payment  "
                                   f"-{r.randint(3, 300)}.{r.randint(10, 99)} EUR",
    "benchmark runs": lambda r, i: f"run {i}: {r.randint(900, 1200)} req/s, p99 {r.randint(8, 40)} ms",
    "sensor log": lambda r, i: f"sensor-{r.randint(1, 4)} reading {r.uniform(18, 25):.2f} C at "
                               f"{r.randint(0, 23):02d}:{r.randint(0, 59):02d}",
    "verbose forecast": lambda r, i: f"Day {i}: maximum temperature {r.randint(10, 30)} degrees, "
                                     f"minimum temperature {r.randint(-5, 9)} degrees",
    "match results": lambda r, i: f"In round {i}, the home team scored {r.randint(0, 5)} goals "
                                  f"and the visitors scored {r.randint(0, 5)}.",
    "coordinates": lambda r, i: f"- Point {i}: ({r.uniform(-90, 90):.4f}, {r.uniform(-180, 180):.4f})",
    "population": lambda r, i: f"{r.choice(['Lyon', 'Oslo', 'Kyiv', 'Lima'])}: {r.randint(1, 9)},"
                               f"{r.randint(100, 999)},{r.randint(100, 999)} people",
    "chinese sales": lambda r, i: f"{i}月销售额：{r.randint(100, 999)}万元，同比增长{r.randint(1, 30)}%",
}


@pytest.mark.parametrize("name", sorted(DATA))
def test_rows_whose_numbers_are_the_content_are_not_loops(name: str) -> None:
    rng = random.Random(name)
    text = "Here they are:\n\n" + "".join(DATA[name](rng, i) + "\n" for i in range(1, 61))
    for rs in _engines():
        found = _found(rs, text)
        assert not [f for f in found if f[1] == "abort"], (type(rs).__module__, found)
        assert not [f for f in found if f[0] in NEAR_RULES], (type(rs).__module__, found)


LOOPS: dict[str, Callable[[int], str]] = {
    # a step counter, every other number the same
    "calculation": lambda k: f"Step {k + 3}: 12 * 3 = 36, so the total is still 36. Let me check.",
    # the counter written twice (a real SmolLM2 table row)
    "counter twice": lambda k: f"| TypeORM{k + 2} | TypeORM{k + 2} | 2017 |",
    "retry": lambda k: f"Retry {k + 1} of 10 after 30 s: connection refused",
}


@pytest.mark.parametrize("name", sorted(LOOPS))
def test_a_counter_still_makes_numeric_lines_copies(name: str) -> None:
    text = "Working on it.\n" + "".join(LOOPS[name](k) + "\n" for k in range(40))
    for rs in _engines():
        aborts = [f for f in _found(rs, text) if f[1] == "abort"]
        assert aborts and aborts[0][0] in NEAR_RULES, (type(rs).__module__, aborts)


def test_a_block_with_a_numeric_line_is_still_a_near_variant() -> None:
    # the assert line is numeric and its numbers change; the block's other lines carry the text,
    # so the block is compared by skeletons (a test generator looping)
    unit = ("def test_case_{k}():\n    calc = Calculator()\n"
            "    assert calc.add({k}, {k1}) == {s}\n\n")
    body = "".join(unit.format(k=k, k1=k + 1, s=2 * k + 1) for k in range(1, 40))
    text = "Here are the tests.\n\n```python\n" + body + "```\n"
    for rs in _engines():
        aborts = [f for f in _found(rs, text) if f[1] == "abort"]
        assert aborts and aborts[0][0] == "near-repeat-long", (type(rs).__module__, aborts)


def test_numeric_rows_still_repeat_exactly() -> None:
    # numbers are compared, not ignored: the same data row again and again is a loop
    row = "2024-03-05,AAPL,185.23,186.11,1200300\n"
    text = "date,ticker,open,close,volume\n" + row * 30
    for rs in _engines():
        aborts = [f for f in _found(rs, text) if f[1] == "abort"]
        assert aborts, type(rs).__module__


@pytest.mark.parametrize(("segment", "numbers"), [
    ("2024-03-05,AAPL,185.23", "03,05,185,23"),        # three runs or more: numeric
    ("Step 14: x = 3 + 4 = 7", "3,4,7"),
    ("| TypeORM10 | TypeORM10 | 2017 |", "2017"),        # runs equal to the first are left out
    ("v1.1.1 ok", ""),
    ("Page 3: 412 words", "412"),                        # two runs, few letters: numeric
    ("Item 5: the price is 42 dollars", None),           # two runs, 16 letters or more: text
    ("Step 14: let me check the caller again.", None),   # one run: text
    ("第3天：最高气温23度，最低气温1度", "23,1"),
])
def test_which_segments_are_numeric(segment: str, numbers: str | None) -> None:
    got = reference._numbers(segment, reference._letters(segment))  # noqa: SLF001
    assert got == numbers


# ---- native = reference on data rows and counters (hypothesis) ---------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from conftest import feed_all, pieces  # noqa: E402

_ROW_WORDS = ("Day", "total", "run", "ok", "伊兰", "loss", "Step", "the caller", "de", "x")


@st.composite
def _row_texts(draw: st.DrawFn) -> str:
    """Lines from a few templates whose digit slots are a counter (the same value in every slot
    of that role on a line), a fixed number or a number drawn from a small pool, with words
    between them: later numbers that repeat, differ from or equal the first, by construction and
    by chance."""
    slot = st.one_of(st.sampled_from(_ROW_WORDS), st.sampled_from(["#c", "#f", "#r"]))
    templates = draw(st.lists(st.lists(slot, min_size=1, max_size=6), min_size=1, max_size=3))
    pool = draw(st.lists(st.sampled_from(["0", "1", "7", "12", "2024", "007"]), min_size=1,
                         max_size=4))
    fixed = draw(st.sampled_from(pool))
    base = draw(st.integers(0, 20))
    sep = draw(st.sampled_from([" ", ", ", ": ", "-", ""]))
    lines = []
    for k in range(draw(st.integers(8, 40))):
        t = templates[draw(st.integers(0, len(templates) - 1))] if draw(st.booleans()) \
            else templates[0]
        value = {"#c": str(base + k // draw(st.sampled_from([1, 1, 2]))), "#f": fixed}
        parts = [value.get(p) or (draw(st.sampled_from(pool)) if p == "#r" else p) for p in t]
        lines.append(sep.join(parts))
    return "\n".join(lines) + "\n"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_row_texts(), seed=st.integers(0, 2**32 - 1),
       near_block=st.builds(lambda per, rep: cc.BlockRepeat("b", near=True, max_period=per,
                                                            min_repeats=rep, min_chars=20),
                            st.integers(1, 4), st.integers(2, 4)),
       segrep=st.builds(lambda w, top: cc.SegmentRepeat("s", window=w, top=top, min_count=w,
                                                        min_letters=0, every_bytes=16),
                        st.integers(3, 10), st.integers(1, 3)))
def test_numeric_segments_native_equals_reference(text, seed, near_block, segrep) -> None:  # type: ignore[no-untyped-def]
    rules = [near_block, segrep]
    events = [("text", p) for p in pieces(text, random.Random(seed))]
    native = feed_all(cc.Ruleset(rules).watcher(), events)
    assert native == feed_all(reference.Ruleset(rules).watcher(), events)
    whole = feed_all(cc.Ruleset(rules).watcher(), [("text", text)])
    assert native == whole


# ---- answer keys: a counter and one short word of two ------------------------------------------

@pytest.mark.parametrize("words", [("True", "False"), ("Pass", "Fail"), ("Correct", "Wrong"),
                                   ("passed", "failed")])
def test_an_answer_key_is_not_a_flip(words: tuple[str, str]) -> None:
    rng = random.Random("".join(words))
    text = "Answers:\n\n" + "".join(f"{i}. {rng.choice(words)}\n" for i in range(1, 51))
    for rs in _engines():
        assert not [f for f in _found(rs, text) if f[1] == "abort"], type(rs).__module__


def test_a_sentence_flipping_one_word_still_stops() -> None:
    rng = random.Random(3)
    text = "Checking.\n" + "".join(
        f"Let me check the {rng.choice(['caller', 'callee'])} again, it looks wrong.\n"
        for _ in range(30))
    for rs in _engines():
        # (three equal lines in a row may stop it earlier, through block-repeat)
        aborts = [f for f in _found(rs, text) if f[1] == "abort"]
        assert "near-flip" in {f[0] for f in aborts}, (type(rs).__module__, aborts)


# lists of identifiers: one short template, a number that jumps (bug numbers, links, PRs)
IDENTIFIERS: dict[str, Callable[[random.Random, int], str]] = {
    "issue links": lambda r, i: f"- https://github.com/acme/api/issues/{r.randint(100, 9999)}",
    "bug tracker": lambda r, i: f"* https://crbug.com/aomedia/{2000 + i * 37 + r.randint(0, 30)}",
    "pull requests": lambda r, i: f"- [{'x' if i % 3 else ' '}] Review pull request #{100 + 7 * i}",
    "bug list": lambda r, i: f"{433400 + i * 3 + r.randint(0, 1)}  FreeBSD support, part {i}",
    "tickets": lambda r, i: f"Closes JIRA-{r.randint(1000, 9999)}",
    "chinese tickets": lambda r, i: f"工单{r.randint(1000, 9999)}：已关闭",
}


@pytest.mark.parametrize("name", sorted(IDENTIFIERS))
def test_a_list_of_identifiers_is_not_a_loop(name: str) -> None:
    rng = random.Random(name)
    text = "The related items:\n\n" + "".join(IDENTIFIERS[name](rng, i) + "\n"
                                             for i in range(1, 41))
    results = []
    for rs in _engines():
        found = _found(rs, text)
        assert not [f for f in found if f[1] == "abort"], (type(rs).__module__, found)
        results.append(found)
    assert results[0] == results[1]


# a counter moves by 0 or 1, or alternates with another numbered line; a sentence around a
# number that wanders is long: all still loops
COUNTERS: dict[str, Callable[[int], str]] = {
    "counter": lambda i: f"- https://github.com/acme/api/issues/{1200 + i}",
    "constant": lambda i: "Retrying the request to https://api.example.com/v2/items/7731",
    "countdown": lambda i: f"Closes JIRA-{5000 - i}",
    "alternating": lambda i: f"Attempt {i} failed.\nStatus code 503 from node {40 + i}.",
    "wandering year": lambda i: f"In {1948 + i * 3 - i % 2}, the first computer, UNIVAC II, was "
                                f"completed at Harvard University.",
}


@pytest.mark.parametrize("name", sorted(COUNTERS))
def test_a_counter_or_a_wandering_sentence_is_still_a_loop(name: str) -> None:
    text = ("We read the configuration and check every key against the schema.\n\n"
            + "".join(COUNTERS[name](i) + "\n" for i in range(1, 41)))
    results = []
    for rs in _engines():
        found = _found(rs, text)
        assert [f for f in found if f[1] == "abort"], (type(rs).__module__, found)
        results.append(found)
    assert results[0] == results[1]
