"""Issue 14: loops as models produce them — long blocks, near-variants, vocabulary collapse, loops
inside code fences — stopped by the default rules, legitimate structured output left alone, and
evidence a person can read. Both engines."""

from __future__ import annotations

import sys
from types import ModuleType

import pytest

import contextcare as cc
from contextcare import reference
from contextcare.errors import RuleTypeError, RuleValueError
from contextcare.presets import DEFAULT_OPTIONS, default_rules

ENGINES = {"native": cc, "reference": reference}
PROSE = ("We read the configuration and check every key against the schema.\n"
         "Then the parser is updated and the tests are run again.\n\n")


@pytest.fixture(params=sorted(ENGINES))
def engine(request: pytest.FixtureRequest) -> ModuleType:
    return ENGINES[request.param]


def _run(engine: ModuleType, text: str, step: int = 3) -> list[cc.Detection]:
    rs = engine.Ruleset(default_rules(), **DEFAULT_OPTIONS)
    w = rs.watcher()
    out: list[cc.Detection] = []
    for i in range(0, len(text), step):
        out.extend(w.feed(text[i:i + step]))
    out.extend(w.finish())
    return out


def _aborts(found: list[cc.Detection]) -> list[cc.Detection]:
    return [d for d in found if d.action == "abort"]


def test_a_long_block_repeated_is_stopped_and_quoted_by_its_first_line(engine: ModuleType) -> None:
    names = ("total", "width", "height", "margin", "border", "offset", "scale", "limit",
             "count", "depth", "weight", "price", "label", "title", "owner")
    block = "".join(f"    {a}_{b} = compute(row.{b}) + {a}\n" for a in names[:6] for b in names[6:11])
    assert block.count("\n") == 30
    found = _aborts(_run(engine, PROSE + "```python\n" + block * 4))
    assert found and found[0].rule == "block-repeat"
    d = found[0]
    assert d.period == 30 and d.repeats == 3
    # at the end of the third copy's last line
    assert d.offset == len(PROSE) + 10 + 3 * len(block)
    # a line of the block, from its start: the first one when it is within the last 1024
    # characters, else the first of the last copy that is (here a copy is 1 200 characters)
    assert d.line in {line.strip()[:40] for line in block.splitlines()}
    assert d.line == "width_weight = compute(row.weight) + wid"
    short = block.splitlines(keepends=True)[:12]
    d = _aborts(_run(engine, PROSE + "".join(short) * 4))[0]
    assert d.rule == "block-repeat" and d.period == 12
    assert d.line == "total_scale = compute(row.scale) + total"


def test_near_variants_with_a_counter_are_stopped(engine: ModuleType) -> None:
    # (ten lines that differ only in a number are a loop to the defaults, unrolled code too)
    text = PROSE + "".join(f"{k}. Ilan\n" for k in range(12, 101))
    found = _run(engine, text)
    first = _aborts(found)[0]
    # twelve copies of one skeleton: SegmentRepeat's near-lines stops it before BlockRepeat's
    # near-repeat-long (ten copies over 600 characters) would
    assert first.rule == "near-lines" and first.line.endswith(". Ilan")
    assert first.offset < len(PROSE) + 12 * len("12. Ilan\n") + 256
    classes = "".join(f"class MyClass{k}:\n    def get(self):\n        return {k}\n\n"
                      for k in range(2, 40))
    found = _aborts(_run(engine, PROSE + "```python\n" + classes))
    assert found and found[0].line.startswith("class MyClass")


def test_vocabulary_collapse_is_stopped(engine: ModuleType) -> None:
    import random

    rng = random.Random(14)
    words = ["items", "its", "itemsThe", "items,", "the"]
    text = PROSE + " ".join(rng.choice(words) for _ in range(400))
    found = _aborts(_run(engine, text))
    # on one line: the short rule stops it first
    assert found and found[0].rule == "vocab-collapse-line" and found[0].count <= 5


def _grid(rng: object, cells: str, rows: int, cols: int, sep: str = " ") -> str:
    return "\n".join(sep.join(rng.choice(cells) for _ in range(cols))  # type: ignore[attr-defined]
                     for _ in range(rows))


@pytest.mark.parametrize("make", [
    # a maze, an adjacency matrix or a bitmap of 0/1 cells outside a fence
    lambda rng: "The maze (1 = wall):\n" + _grid(rng, "01", 16, 16),
    lambda rng: "Adjacency matrix:\n" + "\n".join(
        "[" + _grid(rng, "01", 1, 12, ", ") + "]," for _ in range(12)),
    # a spaced DNA sequence, a board of one-letter cells
    lambda rng: "The sequence: " + _grid(rng, "ACGT", 1, 200) + ".",
    lambda rng: "Board:\n" + _grid(rng, "XO.", 12, 12),
], ids=["maze", "adjacency", "dna", "board"])
def test_a_grid_of_numbers_or_one_letter_cells_is_data_not_a_collapse(
        engine: ModuleType, make: object) -> None:
    import random

    text = make(random.Random(7))  # type: ignore[operator]
    assert not [d for d in _run(engine, text) if d.rule == "vocab-collapse"]


def test_a_collapse_on_one_line_is_stopped_before_eighty_words(
        engine: ModuleType) -> None:
    import random

    rng = random.Random(11)
    vocab = ["items", "its", "itemsThe", "the", "of", "items,"]
    words = [rng.choice(vocab) for _ in range(300)]
    text = PROSE + " ".join(words)
    found = _aborts(_run(engine, text))
    assert found and found[0].rule == "vocab-collapse-line"
    # 32 words kept, then at most 128 bytes to the next check (and the word ending there)
    at = found[0].offset - len(PROSE)
    assert at <= len(" ".join(words[:32])) + 128 + 9
    assert at < len(" ".join(words[:80]))
    assert found[0].count <= 8 and found[0].total == 32


def test_a_short_collapse_broken_by_newlines_waits_for_the_long_rule(engine: ModuleType) -> None:
    import random

    rng = random.Random(12)
    vocab = ["items", "its", "itemsThe", "the", "of"]
    # 20 words a line: never 32 on one line, so only the 80-word rule can stop it
    lines = [" ".join(rng.choice(vocab) for _ in range(20)) + "\n" for _ in range(10)]
    found = _aborts(_run(engine, PROSE + "".join(lines)))
    assert found and found[0].rule == "vocab-collapse"
    assert found[0].offset - len(PROSE) > len("".join(lines[:3]))


@pytest.mark.parametrize("sep", [", ", " | ", " / ", " → ", "、", "; "])
def test_a_line_of_draws_is_a_list_not_a_collapse(engine: ModuleType, sep: str) -> None:
    import random

    rng = random.Random(13)
    values = ["正面", "反面"] if sep == "、" else ["Heads", "Tails", "up", "down"]
    text = "The results: " + sep.join(rng.choice(values) for _ in range(150)) + ".\n\n" + PROSE
    assert not _aborts(_run(engine, text))
    # the same draws with plain spaces between them: a collapse
    plain = "The results: " + " ".join(rng.choice(values) for _ in range(150)) + ".\n"
    assert [d.rule for d in _aborts(_run(engine, plain))][:1] in (["vocab-collapse-line"],
                                                                   ["vocab-collapse"])


def test_a_collapse_counts_when_half_of_its_words_are_lexical(engine: ModuleType) -> None:
    import random

    rule = cc.VocabCollapse("vc", words=40, max_distinct=6, every_bytes=16)

    def fires(text: str) -> bool:
        w = engine.Ruleset([rule], **DEFAULT_OPTIONS).watcher()
        found = [d for i in range(0, len(text), 2) for d in w.feed(text[i:i + 2])]
        return bool(found + list(w.finish()))

    rng = random.Random(3)
    # one lexical word to one number: a collapse (2 words and 2 numbers, 4 distinct)
    half = " ".join(f"{rng.choice(['items', 'its'])} {rng.choice('12')}" for _ in range(40))
    assert fires(half)
    # one lexical word to two one-character cells: data
    third = " ".join(f"{rng.choice(['items', 'its'])} {rng.choice('12')} {rng.choice('xy')}"
                     for _ in range(40))
    assert not fires(third)
    # a letter plus digits is not lexical ("e4"), two letters with digits are ("ab12")
    assert not fires(" ".join(rng.choice(["e4", "d5"]) for _ in range(80)))
    assert fires(" ".join(rng.choice(["ab12", "cd34"]) for _ in range(80)))


@pytest.mark.parametrize("loop", [
    "```css\n" + "  background-color: #f2f2f2;\n" * 60,
    "```yaml\n" + "    # Run the tests on every push to the main branch\n" * 60,
    "```python\nx = " + "1" * 970,
])
def test_loops_inside_fences_are_stopped(engine: ModuleType, loop: str) -> None:
    assert _aborts(_run(engine, PROSE + loop))


def _traceback(path: str, func: str, call: str, copies: int) -> str:
    frame = f'  File "{path}", line 12, in {func}\n    {call}\n'
    return ("Traceback (most recent call last):\n"
            f'  File "{path}", line 40, in <module>\n    main()\n' + frame * copies)


@pytest.mark.parametrize(("path", "func", "call"), [
    ("main.py", "factorial", "return n * factorial(n - 1)"),
    ("/home/dev/project/app/services/tree.py", "walk_children",
     "return [self.walk_children(child) for child in node.children]"),
    ("C:\\work\\fib.py", "fib", "return fib(n - 1) + fib(n - 2)"),
])
def test_a_fenced_traceback_of_a_runaway_recursion_is_not_aborted(
        engine: ModuleType, path: str, func: str, call: str) -> None:
    # CPython prints a repeated frame three times, then "[Previous line repeated N more times]"
    tb = _traceback(path, func, call, 3)
    text = (PROSE + "Running it gives:\n\n```\n" + tb + "  [Previous line repeated 996 more "
            "times]\nRecursionError: maximum recursion depth exceeded\n```\n\n"
            "The base case is missing: return 1 when n <= 1.\n")
    assert _aborts(_run(engine, text)) == []


@pytest.mark.parametrize("unit", [
    '  File "main.py", line 12, in factorial\n    return n * factorial(n - 1)\n',
    "    total += item.price\n    log.info('running total %s', total)\n    count += 1\n",
])
def test_a_short_fenced_unit_is_stopped_at_its_fourth_copy(engine: ModuleType, unit: str) -> None:
    # inside a fence a unit of two or three lines needs one copy more; outside, three copies stop
    def first_abort(text: str) -> int | None:
        found = [d for d in _aborts(_run(engine, text)) if d.rule == "block-repeat"]
        return found[0].offset if found else None

    fenced = PROSE + "```python\n"
    assert first_abort(fenced + unit * 3) is None
    at = first_abort(fenced + unit * 4)
    assert at is not None and len(fenced + unit * 3) < at <= len(fenced + unit * 4)
    at = first_abort(PROSE + unit * 3)
    assert at is not None and at <= len(PROSE + unit * 3)
    # a one-line unit keeps fence_letters as its only extra condition
    line = "    # Run the tests on every push to the main branch\n"
    assert first_abort(fenced + line * 3) is not None


@pytest.mark.parametrize("split", [1, 3, 1000])
def test_tail_repeat_leaves_a_unit_of_lines_in_a_fence_to_block_repeat(
        engine: ModuleType, split: int) -> None:
    def fired(text: str, mask: bool = True) -> bool:
        rs = engine.Ruleset([cc.TailRepeat("t")], mask_code_fences=mask)
        w = rs.watcher()
        out = [d for i in range(0, len(text), split) for d in w.feed(text[i:i + split])]
        return bool(out + list(w.finish()))

    lines = "  File \"app.py\", line 3, in f\n    return f(n)\n" * 12
    assert not fired(PROSE + "```\n" + lines)
    assert fired(PROSE + "```\n" + lines, mask=False)
    assert fired(PROSE + lines)
    # a flood without newlines is still a loop inside a fence, and after the fence closes
    # a unit of lines is one again
    assert fired(PROSE + "```python\nx = " + "1" * 970)
    assert fired(PROSE + "```\nprint(1)\n```\n" + lines)


def test_an_ascii_table_with_a_border_after_every_row_is_not_aborted(engine: ModuleType) -> None:
    border = "+------+------------+"
    rows = [border] + [f"| {k:<4} | {k * 37 % 1000:<10} |\n{border}" for k in range(80)]
    assert _aborts(_run(engine, PROSE + "\n".join(rows) + "\n")) == []


@pytest.mark.parametrize("text", [
    "\n".join(str(k) for k in range(1, 400)),
    "\n".join(f"| {k} | {k * k} | {k % 7}.5 |" for k in range(1, 120)),
    "\n".join(f"{k} x 7 = {k * 7}" for k in range(1, 120)),
    "```csv\n" + "\n".join(f"{k},{k * 3},{k % 5}.{k % 9}" for k in range(200)) + "\n```",
])
def test_counting_tables_and_csv_stay_quiet(engine: ModuleType, text: str) -> None:
    assert _aborts(_run(engine, PROSE + text + "\n")) == []


def test_tail_repeat_quotes_its_unit_from_a_line_start(engine: ModuleType) -> None:
    found = _run(engine, "the same line again\n" * 40)
    units = [d.unit for d in found if d.kind == "tail-repeat"]
    assert units == ["the same line again\n"]


def test_structure_lines_never_count_as_repeated_lines(engine: ModuleType) -> None:
    rs = engine.Ruleset([cc.LineRepeat("lr", min_lines=5, min_count=5, min_ratio=0.5, min_run=5,
                                       every_bytes=1)])
    assert rs.replay("+-----+-----+\n" * 50 + "=====\n" * 50 + "---\n" * 50) == []
    assert rs.replay("| a | b |\n" * 6) != []


@pytest.mark.parametrize(("make", "field"), [
    (lambda: cc.BlockRepeat("b", max_period=0), "max_period"),
    (lambda: cc.BlockRepeat("b", max_period=2000), "max_period"),
    (lambda: cc.BlockRepeat("b", min_repeats=1), "min_repeats"),
    (lambda: cc.BlockRepeat("b", max_period=1024, min_repeats=8), "max_period x min_repeats"),
    (lambda: cc.BlockRepeat("b", every_bytes=5000), "every_bytes"),
    (lambda: cc.BlockRepeat("b", min_chars=0), "min_chars"),
    (lambda: cc.VocabCollapse("v", words=1), "words"),
    (lambda: cc.VocabCollapse("v", words=10, max_distinct=10), "max_distinct"),
])
def test_bad_parameters_name_the_field(make: object, field: str) -> None:
    with pytest.raises(RuleValueError, match=field):
        make()  # type: ignore[operator]


def test_bad_parameter_types_name_the_field() -> None:
    with pytest.raises(RuleTypeError, match="near"):
        cc.BlockRepeat("b", near=1)  # type: ignore[arg-type]
    with pytest.raises(RuleTypeError, match="words"):
        cc.VocabCollapse("v", words="80")  # type: ignore[arg-type]
    with pytest.raises(RuleTypeError, match="one_line"):
        cc.VocabCollapse("v", one_line=1)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- SegmentRepeat

def test_a_line_whose_changing_part_is_a_word_is_stopped(engine: ModuleType) -> None:
    # the real shape: a counter and a word that flips between two values, in no fixed order
    flips = "has had had has has had has had had had has has had has".split()
    text = PROSE + "".join(f"- Item {k + 3}: Pia {w} the value {k * 7}\n"
                           for k, w in enumerate(flips))
    found = _aborts(_run(engine, text))
    assert found and found[0].kind == "segment-repeat"
    assert found[0].line.startswith("- Item ")
    assert found[0].offset < len(text)


def test_numbered_short_chinese_names_cycling_are_stopped(engine: ModuleType) -> None:
    # from a real reply of SmolLM2: five names cycling with a counter, 3.8 ideographs a line
    names = ["移访", "杨杉万军", "北京韩苏博士", "宁苏卜榆", "千美容"]
    text = "以下是名单：\n" + "".join(f"{k + 13}. {names[k % 5]}\n" for k in range(88))
    found = _aborts(_run(engine, text))
    assert found and found[0].kind == "segment-repeat"
    assert found[0].offset < len(text) * 3 // 4     # the real reply ran on to 100


def test_a_near_variant_recurring_between_other_lines_gets_a_reminder(engine: ModuleType) -> None:
    others = [f"The {w} module was read and nothing else changed there.\n"
              for w in "parser lexer cache store index router queue pool driver shell".split()]
    text = PROSE + "".join(f"Retrying the build with the same flags (attempt {k + 2}).\n"
                           + others[k % len(others)] + others[(k * 3 + 1) % len(others)]
                           for k in range(14))
    found = [d for d in _run(engine, text) if d.rule == "near-recurring"]
    assert found and found[0].action == "remind" and found[0].count >= 10


@pytest.mark.parametrize("rows", [
    # a table whose rows change only their numbers, three letters a row
    "".join(f"| row {i} | {i * 7 % 13} |\n" for i in range(60)),
    # a schedule of weekdays: three letters a line never counts
    "".join(f"| {d} | 9:{i % 6}0 | 17:00 |\n" for i in range(8)
            for d in ("Mon", "Tue", "Wed", "Thu", "Fri")),
    # a timetable of six weeks: five day names cycling with their hours
    "".join(f"| {w} | {d} | {8 + w % 2}:00 | 17:00 |\n" for w in range(1, 7)
            for d in ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")),
    "".join(f"| {w} | {d} | {8 + w % 2}:00 | 17:00 |\n" for w in range(1, 7)
            for d in ("星期一", "星期二", "星期三", "星期四", "星期五")),
    # a templated listing whose numbers carry the content (numbers count as words: without
    # them these lines hold six words, a collapse to VocabCollapse)
    "".join(f"Item {i}: the value is {i * 37 % 101}, noted as {chr(65 + i % 26)}.\n"
            for i in range(60)),
    # test asserts: one word changes each line, always to a new one
    "".join(f'    assert is_valid("{w}_{v}")\n' for w in ("alpha", "beta", "gamma", "delta")
            for v in ("one", "two", "three", "four", "five", "six", "seven", "eight")),
])
def test_near_variants_of_distinct_items_are_not_aborted(engine: ModuleType, rows: str) -> None:
    assert _aborts(_run(engine, "Data:\n\n" + rows)) == []


def test_segment_repeat_evidence_and_its_sentences() -> None:
    rule = cc.SegmentRepeat("s", window=6, top=2, min_count=6)
    text = "".join(f"Checking {'left' if k % 3 else 'right'} side {k}.\n" for k in range(12))
    nat = cc.Ruleset([rule]).replay(text)
    ref = reference.Ruleset([rule]).replay(text)
    assert nat == ref and len(nat) == 1
    d = nat[0]
    assert (d.kind, d.count, d.total) == ("segment-repeat", 6, 6)
    assert d.line.startswith("Checking ")
    from contextcare.cli import format_evidence
    from contextcare.notices import describe
    assert "Checking" in describe(d, "en") and "6 of the last 6" in describe(d, "en")
    assert "Checking" in describe(d, "zh")
    assert "6 of the last 6" in format_evidence(d)


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"window": 0}, "window"),
    ({"window": 5000}, "window"),
    ({"top": 0}, "top"),
    ({"window": 8, "min_count": 9}, "min_count"),
    ({"min_count": 0}, "min_count"),
    ({"min_letters": -1}, "min_letters"),
    ({"top_letters": -1}, "top_letters"),
    ({"top_letters": 2**40}, "top_letters"),
    ({"every_bytes": 5000}, "every_bytes"),
])
def test_segment_repeat_bad_parameters_name_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(RuleValueError, match=field):
        cc.SegmentRepeat("s", **kwargs)


def test_segment_repeat_bad_types_name_the_field() -> None:
    with pytest.raises(RuleTypeError, match="window"):
        cc.SegmentRepeat("s", window="16")  # type: ignore[arg-type]
    with pytest.raises(RuleTypeError, match="top"):
        cc.SegmentRepeat("s", top=1.5)  # type: ignore[arg-type]
    with pytest.raises(RuleTypeError, match="top_letters"):
        cc.SegmentRepeat("s", top_letters="8")  # type: ignore[arg-type]


def test_segment_repeat_from_toml() -> None:
    from contextcare.tomlrules import loads_rules
    rules, _ = loads_rules('[[rules]]\ntype = "SegmentRepeat"\nid = "n"\nwindow = 8\n'
                           'top = 1\nmin_count = 6\ntop_letters = 8\n')
    assert rules == [cc.SegmentRepeat("n", window=8, top=1, min_count=6, top_letters=8)]


def test_top_letters_keeps_two_short_labels_quiet_but_not_a_line_and_a_short_one(
        engine: ModuleType) -> None:
    rule = cc.SegmentRepeat("s", window=8, top=2, min_count=8, top_letters=8, every_bytes=16)
    rs = engine.Ruleset([rule])
    key = "".join(f"{i}. {'True' if i % 3 else 'False'}\n" for i in range(1, 40))
    assert [d for d in rs.replay(key, list(range(1, len(key) + 1)))] == []
    loop = "".join(f"Error at line {i}.\nRetry.\n" for i in range(1, 20))
    assert [d.rule for d in rs.replay(loop, list(range(1, len(loop) + 1)))] == ["s"]


# --------------------------------------------------------------------------- StructureFlood

def test_a_flood_of_lines_without_words_is_stopped(engine: ModuleType) -> None:
    # from a real reply of SmolLM2: a YAML comment marker on 300 lines, no word character; it
    # repeats a unit of 3 characters, so structure-loop aborts (structure-flood reminds too)
    text = "```yaml\n# Kubernetes 20 containers\n\n" + "# \n" * 300
    found = _run(engine, text)
    loop = [d for d in found if d.rule == "structure-loop"]
    assert loop and loop[0].action == "abort" and (loop[0].line, loop[0].total) == ("#", 600)
    assert loop[0].offset <= len(text) - 300 * 3 + 600 + 256 + 3  # within a throttle step
    flood = [d for d in found if d.rule == "structure-flood"]
    assert flood and flood[0].action == "remind"
    assert (flood[0].line, flood[0].total) == ("#", 600)


@pytest.mark.parametrize("flood", [".", " ", "\n", "#\n", "# #\n", "-=\n", "…", "。"])
def test_a_short_unit_without_words_flooding_is_stopped(engine: ModuleType, flood: str) -> None:
    assert [d.rule for d in _aborts(_run(engine, PROSE + "Thinking" + flood * 1200))] == \
        ["structure-loop"]


@pytest.mark.parametrize("text", [
    # ASCII art: no word character over 600 characters, but no short period either
    "```\n" + (" /\\_/\\ \n( -.- )\n > ^ < \n/|   |\\\n(_|_|_)\n ~~~~~ \n" * 14) + "```\n",
    # an empty board drawn with box characters (a period of two lines)
    "\n".join(["+---+---+---+---+---+---+---+---+", "|   |   |   |   |   |   |   |   |"] * 14),
    # an empty three-column table of 80 rows: a period of 10 characters
    "| | | |\n|---|---|---|\n" + "|   | | |\n" * 80,
])
def test_art_and_empty_tables_only_get_the_reminder(engine: ModuleType, text: str) -> None:
    found = _run(engine, PROSE + text)
    assert _aborts(found) == []
    assert "structure-flood" in [d.rule for d in found]


def test_structure_loop_period_bound_and_errors(engine: ModuleType) -> None:
    def fires(text: str, max_period: int) -> bool:
        rs = engine.Ruleset([cc.StructureFlood("s", min_chars=40, max_period=max_period,
                                               every_bytes=8)])
        w = rs.watcher()
        return bool([d for i in range(0, len(text), 3) for d in w.feed(text[i:i + 3])]
                    + list(w.finish()))
    assert fires("x" + "-+" * 40, 2) and not fires("x" + "-+" * 40, 1)
    assert fires("x" + "<-->" * 20, 4) and not fires("x" + "<-->" * 20, 3)
    assert fires("x" + "<-->" * 20, 0)  # 0: no periodicity condition
    with pytest.raises(RuleValueError, match="max_period"):
        cc.StructureFlood("f", min_chars=40, max_period=40)
    with pytest.raises(RuleValueError, match="max_period"):
        cc.StructureFlood("f", max_period=-1)
    with pytest.raises(RuleTypeError, match="max_period"):
        cc.StructureFlood("f", max_period=2.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", [
    # an ASCII table: a border after every row, but the rows have words
    "".join(f"+------+------+\n| r{i}   | {i}    |\n" for i in range(80)),
    # a long divider between sections
    "Intro.\n" + "=" * 400 + "\nThe end.\n",
])
def test_structure_with_words_close_by_is_no_flood(engine: ModuleType, text: str) -> None:
    assert [d for d in _run(engine, text) if d.kind == "structure-flood"] == []


def test_structure_flood_bad_parameters_name_the_field() -> None:
    with pytest.raises(RuleValueError, match="min_chars"):
        cc.StructureFlood("f", min_chars=1)
    with pytest.raises(RuleValueError, match="every_bytes"):
        cc.StructureFlood("f", every_bytes=0)
    with pytest.raises(RuleTypeError, match="min_chars"):
        cc.StructureFlood("f", min_chars="600")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- WordRepeat

def _with_word_repeat(engine: ModuleType, **kwargs: object) -> object:
    return engine.Ruleset([*default_rules(), cc.WordRepeat("word-repeat", **kwargs)],
                          **DEFAULT_OPTIONS)


def _first(rs: object, text: str, step: int = 3) -> cc.Detection | None:
    w = rs.watcher()  # type: ignore[attr-defined]
    found: list[cc.Detection] = []
    for i in range(0, len(text), step):
        found.extend(w.feed(text[i:i + step]))
    found.extend(w.finish())
    return next((d for d in found if d.action == "abort"), None)


def test_word_repeat_stops_a_line_loop_before_its_third_copy_ends(engine: ModuleType) -> None:
    # a changing word (caller / callee) breaks exact line repeats; three equal copies in a row
    # are stopped at the third copy's last word, before its line ends, where the default rules
    # wait for the newline
    line = "Omar says the {} door is locked and nobody has the key.\n"
    text = PROSE + "".join(line.format(w) for w in ("caller", "callee", "caller", "callee",
                                                   "callee", "callee", "callee", "callee"))
    # the copies are read from any word: "door ... key. Omar says the callee" three times in a
    # row ends at the changing word of the third "callee" line
    sixth = text.index(line.format("callee") * 3) + 2 * len(line.format("callee"))
    det = _first(_with_word_repeat(engine), text)
    assert det is not None and det.rule == "word-repeat"
    assert sixth + len("Omar says the callee") < det.offset < sixth + len(line) - 1
    assert det.line.startswith("door is locked and nobody has the key.")
    assert det.period == 12 and det.repeats == 3
    default = _first(engine.Ruleset(default_rules(), **DEFAULT_OPTIONS), text)
    assert default is None or default.offset > det.offset


def test_word_repeat_reads_fenced_code_only_without_masking(engine: ModuleType) -> None:
    # (checked at every byte here: the third copy's last word ends at its ";")
    text = PROSE + "```css\n.btn {\n" + "  background-color: #f2f2f2;\n" * 3
    rule = cc.WordRepeat("w", every_bytes=1, min_chars=60)
    det = _first(engine.Ruleset([rule], mask_code_fences=False), text, step=1)
    assert det is not None and det.offset == len(text) - 1 and det.period == 3
    assert det.line.startswith("background-color: #f2f2f2;")
    # masked, code is left out: assertions differing only in an operator (``x == y`` /
    # ``x != y``) are the same words
    code = PROSE + "```python\n" + "".join(
        f"self.assertEqual(x {op} y, list(x) {op} list(y), (x, y))\n"
        for op in ("==", "!=", "<", "<=", ">", ">=")) + "```\n"
    assert _first(engine.Ruleset([rule], mask_code_fences=True), code, step=1) is None
    assert _first(engine.Ruleset([rule], mask_code_fences=False), code, step=1) is not None


@pytest.mark.parametrize("text", [
    "Here you go:\n\n" + ", ".join(["0"] * 300) + "\n",                 # a zero array
    "ha " * 200, "very " * 200, "la la la, " * 60,                       # one-word refrains
    "| - | - |\n" * 40, "</div>\n" * 60 + "</div></div></div>" * 30,      # structure
    "\n".join(f"{i}, {i * 2}, {i * 3}" for i in range(200)),             # counting, CSV
    "[" + ", ".join('{"id": %d, "name": "user%d"}' % (i, i) for i in range(80)) + "]",
    "heads, tails, heads, tails, " * 40,                                 # a list of draws
    "Flips: " + " / ".join(["heads", "tails"] * 80),
])
def test_word_repeat_leaves_legitimate_repetition_alone(engine: ModuleType, text: str) -> None:
    det = _first(_with_word_repeat(engine), text)
    assert det is None or det.rule != "word-repeat"


def test_word_repeat_aborts_no_clean_real_reply() -> None:
    # the labelled replies of the real model: none labelled clean is aborted by word-repeat
    import gzip
    import json
    import os

    data = os.path.join(os.path.dirname(__file__), "data")
    rs = _with_word_repeat(cc)
    aborted = []
    for name in ("smollm2-streams.jsonl.gz", "smollm2-heldout.jsonl.gz"):
        streams: dict[str, tuple[bool, list[str]]] = {}
        with gzip.open(os.path.join(data, name), "rt", encoding="utf-8") as f:
            for line in f:
                e = json.loads(line)
                if e["type"] == "start":
                    streams[e["stream"]] = (e["label"] == "loop", [])
                elif e["type"] == "text-delta":
                    streams[e["stream"]][1].append(e["text"])
        for sid, (loop, deltas) in streams.items():
            det = None if loop else _first(rs, "".join(deltas))
            if det is not None and det.rule == "word-repeat":
                aborted.append(sid)
    assert aborted == []


def test_word_repeat_evidence_is_the_same_in_both_engines() -> None:
    text = PROSE + "Wait, the caller returns None, let me look again, " * 4
    got = []
    for engine in (cc, reference):
        det = _first(engine.Ruleset([cc.WordRepeat("w", min_chars=40)]), text, step=1)
        assert det is not None
        got.append((det.offset, det.line, det.period, det.repeats, det.total))
    assert got[0] == got[1]
    # the run starts one word before the loop: PROSE ends with "again", as the unit does, and
    # the quote is aligned to where the run starts
    assert got[0][1].startswith("again, Wait, the caller") and got[0][2] == 9


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"max_period": 0}, "max_period"),
    ({"max_period": 300}, "max_period"),
    ({"min_repeats": 1}, "min_repeats"),
    ({"max_period": 256, "min_repeats": 5}, "max_period x min_repeats"),
    ({"min_chars": 0}, "min_chars"),
    ({"min_words": -1}, "min_words"),
    ({"min_words": 300}, "min_words"),
    ({"every_bytes": 5000}, "every_bytes"),
])
def test_word_repeat_bad_parameters_name_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(RuleValueError, match=field):
        cc.WordRepeat("w", **kwargs)


def test_word_repeat_bad_types_name_the_field() -> None:
    with pytest.raises(RuleTypeError, match="max_period"):
        cc.WordRepeat("w", max_period="20")  # type: ignore[arg-type]
    with pytest.raises(RuleTypeError, match="min_words"):
        cc.WordRepeat("w", min_words=1.5)  # type: ignore[arg-type]


def test_word_repeat_state_stays_small() -> None:
    # the budget: a watcher of the default rules holds at most 16 KiB; the opt-in word
    # tail (60 words of the default parameters, about 1 KiB) adds less than 2 KiB
    base = cc.Ruleset(default_rules(), **DEFAULT_OPTIONS).watcher()
    w = cc.Ruleset([*default_rules(), cc.WordRepeat("w")], **DEFAULT_OPTIONS).watcher()
    base.feed(PROSE * 20)
    w.feed(PROSE * 20)
    assert sys.getsizeof(base) <= 16 * 1024
    assert sys.getsizeof(w) - sys.getsizeof(base) <= 2 * 1024
