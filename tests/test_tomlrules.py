"""Rules from TOML: same names and fields as the Python API, errors that say where."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextcare import (
    BlockRepeat,
    ContextAnxiety,
    SegmentRepeat,
    StructureFlood,
    FillerLines,
    LineCycle,
    LineRepeat,
    Marker,
    Phrases,
    PrefixMonotony,
    Ruleset,
    TailRepeat,
    TimeAnxiety,
    VocabCollapse,
    WordRepeat,
    default_rules,
)
from contextcare.errors import ContextCareError
from contextcare.presets import DEFAULT_OPTIONS
from contextcare.tomlrules import RULE_TYPES, RulesFileError, load_rules, loads_rules

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "rules.toml"


def test_every_rule_class_can_be_declared_with_its_python_fields() -> None:
    doc = '''
[[rules]]
type = "Phrases"
id = "p"
phrases = ["one", "two"]
channel = "text"
ignore_case = true

[[rules]]
type = "Marker"
id = "m"
token = "<<END>>"

[[rules]]
type = "TimeAnxiety"
lang = "en"
extra = ["clock is running"]

[[rules]]
type = "ContextAnxiety"
id = "ctx"
lang = ["zh"]
action = "record"

[[rules]]
type = "LineRepeat"
id = "lr"
min_ratio = 1

[[rules]]
type = "LineCycle"
id = "lc"
top = 2

[[rules]]
type = "FillerLines"
id = "fl"
fillers = "嗯好"

[[rules]]
type = "PrefixMonotony"
id = "pm"
delimiters = ":"

[[rules]]
type = "TailRepeat"
id = "tr"
max_period = 32

[[rules]]
type = "BlockRepeat"
id = "br"
near = true
min_repeats = 5

[[rules]]
type = "StructureFlood"
id = "sf"
min_chars = 300

[[rules]]
type = "SegmentRepeat"
id = "sr"
window = 20
top = 3

[[rules]]
type = "VocabCollapse"
id = "vc"
words = 120
one_line = true
action = "remind"

[[rules]]
type = "WordRepeat"
id = "wr"
max_period = 12
min_words = 3
'''
    rules, options = loads_rules(doc)
    assert rules == [
        Phrases("p", ("one", "two"), channel="text", ignore_case=True),
        Marker("m", "<<END>>"),
        TimeAnxiety(lang=("en",), extra=("clock is running",)),
        ContextAnxiety("ctx", lang=("zh",), action="record"),
        LineRepeat("lr", min_ratio=1.0),
        LineCycle("lc", top=2),
        FillerLines("fl", fillers="嗯好"),
        PrefixMonotony("pm", delimiters=":"),
        TailRepeat("tr", max_period=32),
        BlockRepeat("br", near=True, min_repeats=5),
        StructureFlood("sf", min_chars=300),
        SegmentRepeat("sr", window=20, top=3),
        VocabCollapse("vc", words=120, one_line=True, action="remind"),
        WordRepeat("wr", max_period=12, min_words=3),
    ]
    assert {type(r).__name__ for r in rules} == set(RULE_TYPES)
    assert options == {}  # without defaults = true: the Ruleset constructor's defaults


def test_defaults_replace_in_place_and_append_the_rest() -> None:
    rules, options = loads_rules('''
defaults = true
[options]
line_window = 60

[[rules]]
type = "LineRepeat"
id = "line-cycle"
min_count = 20
min_lines = 20

[[rules]]
type = "Marker"
id = "stop"
token = "STOP"
''')
    expected = default_rules()
    position = [r.id for r in expected].index("line-cycle")
    expected[position] = LineRepeat("line-cycle", min_count=20, min_lines=20)
    assert rules == expected + [Marker("stop", "STOP")]
    assert options == {**DEFAULT_OPTIONS, "line_window": 60}


def test_loaded_rules_compile_and_fire(tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text('''
[options]
min_line_chars = 1

[[rules]]
type = "Phrases"
id = "apology"
phrases = ["sorry"]
channel = "text"
action = "remind"
''', encoding="utf-8")
    rules, options = load_rules(path)
    watcher = Ruleset(rules, **options).watcher()
    fired = list(watcher.feed("I am so", channel="text")) + list(watcher.feed(" sorry."))
    assert [(d.rule, d.action, d.phrase, d.offset) for d in fired] == [
        ("apology", "remind", "sorry", len("I am so sorry"))]


def test_the_example_rules_file_loads_and_its_marker_fires() -> None:
    rules, options = load_rules(EXAMPLE)
    ids = [r.id for r in rules]
    assert ids[: len(default_rules())] == [r.id for r in default_rules()]
    assert "leaked-stop-marker" in ids
    watcher = Ruleset(rules, **options).watcher()
    fired = list(watcher.feed("Done. <<END-OF-", channel="text"))
    fired += watcher.feed("TURN>>", channel="text")
    assert [(d.rule, d.action) for d in fired] == [("leaked-stop-marker", "abort")]


@pytest.mark.parametrize(("doc", "parts"), [
    ('[[rules]]\ntype = "Regex"\nid = "x"\n',
     ["rules[0]", "id 'x'", "'type'", "Phrases", "'Regex'"]),
    ('[[rules]]\nid = "x"\n', ["rules[0]", "missing field 'type'"]),
    ('[[rules]]\ntype = "LineRepeat"\nid = "x"\nmin_ration = 0.5\n',
     ["rules[0]", "id 'x'", "no field 'min_ration'", "min_ratio"]),
    ('[[rules]]\ntype = "Phrases"\nid = "x"\n', ["rules[0]", "needs field 'phrases'"]),
    ('[[rules]]\ntype = "LineRepeat"\nphrases = ["a"]\n', ["no field 'phrases'"]),
    ('[[rules]]\ntype = "LineRepeat"\nmin_count = 3\n', ["needs field 'id'"]),
    ('[[rules]]\ntype = "Marker"\nid = "a"\ntoken = "t"\n'
     '[[rules]]\ntype = "LineRepeat"\nid = "b"\nmin_ratio = 1.5\n',
     ["rules[1]", "id 'b'", "min_ratio", "(0, 1]", "1.5"]),
    ('[[rules]]\ntype = "Phrases"\nid = "x"\nphrases = "one"\n',
     ["id 'x'", "phrases must be a sequence of str"]),
    ('[[rules]]\ntype = "Marker"\nid = "x"\ntoken = "t"\nchannel = "answer"\n',
     ["id 'x'", "channel must be one of"]),
    ('[[rules]]\ntype = "Marker"\nid = "x"\ntoken = "t"\n'
     '[[rules]]\ntype = "Marker"\nid = "x"\ntoken = "u"\n', ["duplicate rule id 'x'"]),
    ('[options]\nline_window = 20\n[[rules]]\ntype = "LineRepeat"\nid = "x"\n',
     ["min_lines must be at most line_window (20)"]),
    ('[options]\nline_window = 0\n[[rules]]\ntype = "Marker"\nid = "x"\ntoken = "t"\n',
     ["options: line_window must be in [1,"]),
    ('[options]\nwindow = 3\n', ["options has no field 'window'", "line_window"]),
    ('rule = []\n', ["unknown top-level key 'rule'"]),
    ('defaults = "yes"\n', ["defaults must be true or false"]),
    ('rules = 3\n', ["rules must be an array of tables"]),
    ('rules = [1]\n', ["rules[0]: must be a table"]),
    ('', ["declares no rules"]),
    ('[[rules]\n', ["not valid TOML"]),
])
def test_errors_name_the_file_rule_and_field(doc: str, parts: list[str]) -> None:
    with pytest.raises(RulesFileError) as info:
        loads_rules(doc, source="team.toml")
    message = str(info.value)
    assert message.startswith("team.toml: ")
    for part in parts:
        assert part in message
    assert isinstance(info.value, ContextCareError) and isinstance(info.value, ValueError)


def test_load_rules_reports_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(RulesFileError, match=r"missing\.toml: cannot read"):
        load_rules(tmp_path / "missing.toml")
    bad = tmp_path / "latin1.toml"
    bad.write_bytes(b'# caf\xe9\n')
    with pytest.raises(RulesFileError, match=r"latin1\.toml: not valid UTF-8"):
        load_rules(bad)
