"""Code inside fences repeats on purpose: a short line several times (an argument list of
``NULL,``, three equal asserts), a table whose entries differ only by their numbers. The default
rules must let that through and still stop a model that loops inside a fence (a comment or a
class repeated: what SmolLM2 really does, tests/data). BlockRepeat's ``fence_letters`` and
SegmentRepeat's ``fences`` (docs/semantics.md) make the difference."""

from __future__ import annotations

import os
import sysconfig

import pytest

import contextcare as cc
from contextcare import reference
from contextcare.presets import DEFAULT_OPTIONS, default_rules
from contextcare.rules import RuleTypeError, RuleValueError


def _engines() -> list[object]:
    return [cc.Ruleset(default_rules(), **DEFAULT_OPTIONS),
            reference.Ruleset(default_rules(), **DEFAULT_OPTIONS)]


def _aborts(rs, text: str) -> list[tuple[str, int]]:  # type: ignore[no-untyped-def]
    ends = list(range(3, len(text), 3)) + [len(text)]
    return [(d.rule, d.offset) for d in rs.replay(text, ends) if d.action == "abort"]


def _fenced(body: str) -> str:
    return "Here is the code you asked for.\n\n```python\n" + body + "```\n\nThat is all.\n"


LEGIT_CODE = {
    "argument list": "lib.call(\n" + "    backend._ffi.NULL,\n" * 4 + ")\n",
    "equal asserts": "def test_lock(self):\n" + "    self.assertEqual(lock.acquire(), True)\n" * 3,
    "writes": "for _ in range(3):\n    pass\n" + "tr.write(b'data')\n" * 5,
    "colour table": "COLORS = {\n" + "".join(f'    "gray{i}": {200 + i},\n' for i in range(40)) + "}\n",
    "key map": "KEYS = {\n" + "".join(f"    _curses.KEY_F{i}: 'kf{i}',\n" for i in range(1, 25))
               + "}\n",
}


@pytest.mark.parametrize("name", sorted(LEGIT_CODE))
def test_code_that_repeats_on_purpose_is_not_stopped(name: str) -> None:
    text = _fenced(LEGIT_CODE[name])
    for rs in _engines():
        assert _aborts(rs, text) == [], type(rs).__module__


def test_the_same_table_outside_a_fence_is_a_near_variant_loop() -> None:
    # what keeps the fenced key map quiet is the fence, not the table's shape: outside one, a
    # counter written twice per line (`KEY_F7: 'kf7'`) is a near-variant loop
    text = "Here are the values.\n\n" + LEGIT_CODE["key map"]
    for rs in _engines():
        rules = {rule for rule, _ in _aborts(rs, text)}
        near = {"near-lines", "near-flip", "near-cycle", "near-repeat-long"}
        assert rules & near, type(rs).__module__


def test_a_numeric_table_is_data_inside_or_outside_a_fence() -> None:
    # `"gray7": 207,` rows: two numbers, few letters, the second one changing with the first is
    # content, not a counter (docs/semantics.md, numeric segments)
    for text in ("Here are the values.\n\n" + LEGIT_CODE["colour table"],
                 _fenced(LEGIT_CODE["colour table"])):
        for rs in _engines():
            assert _aborts(rs, text) == [], type(rs).__module__


COMMENT = "# Each job has a `jobs` attribute that contains a list of jobs.\n"


def test_a_comment_looping_in_a_fence_is_stopped_at_its_third_copy() -> None:
    start = len(_fenced("")) - len("```\n\nThat is all.\n")
    text = _fenced(COMMENT * 20)
    for rs in _engines():
        found = _aborts(rs, text)
        assert found and found[0][0] == "block-repeat"
        assert start + 3 * len(COMMENT) <= found[0][1] < start + 4 * len(COMMENT)


def test_a_short_code_line_looping_in_a_fence_is_still_stopped() -> None:
    text = _fenced("    backend._ffi.NULL,\n" * 60)
    for rs in _engines():
        found = _aborts(rs, text)
        assert found, type(rs).__module__
        # later than a comment: more copies are needed to hold 100 letters
        assert found[0][1] > len(_fenced("")) + 4 * len("    backend._ffi.NULL,\n")


def test_a_class_repeated_with_a_counter_in_a_fence_is_stopped() -> None:
    body = "".join(f'class MyClass{i}:\n    def method{i}(self):\n        return "Method {i}"\n\n'
                   for i in range(1, 40))
    for rs in _engines():
        assert _aborts(rs, _fenced(body)), type(rs).__module__


def test_fences_count_only_with_fence_masking_on() -> None:
    # without mask_code_fences a fence is ordinary text: the asserts count as they did
    options = dict(DEFAULT_OPTIONS, mask_code_fences=False)
    text = _fenced(LEGIT_CODE["equal asserts"])
    assert _aborts(cc.Ruleset(default_rules(), **options), text)
    assert not _aborts(cc.Ruleset(default_rules(), **DEFAULT_OPTIONS), text)


def test_bad_fence_parameters_name_the_field() -> None:
    with pytest.raises(RuleValueError, match="fence_letters"):
        cc.BlockRepeat("b", fence_letters=-1)
    with pytest.raises(RuleTypeError, match="fence_letters"):
        cc.BlockRepeat("b", fence_letters=True)  # type: ignore[arg-type]
    with pytest.raises(RuleTypeError, match="fences"):
        cc.SegmentRepeat("s", fences="no")  # type: ignore[arg-type]


#: Standard-library modules the default rules stop: generated tables of one entry repeated (a
#: charmap's undefined slots, a terminal key map), the kind of text a loop also is.
KNOWN_TABLES = {"encodings/iso8859_6.py", "encodings/iso8859_8.py", "curses/has_key.py"}


def _stdlib_modules() -> list[str]:
    root = sysconfig.get_paths()["stdlib"]
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in ("site-packages", "dist-packages",
                                                      "__pycache__", "test", "tests",
                                                      "idlelib", "lib2to3"))
        out.extend(os.path.relpath(os.path.join(folder, f), root)
                   for f in sorted(files) if f.endswith(".py"))
    return out


def test_the_standard_library_in_fences_is_not_stopped() -> None:
    """Real code, written by people: every module of the standard library outside its test
    suites, fenced as a model would answer with it, through the default rules."""
    modules = _stdlib_modules()
    if len(modules) < 200:
        pytest.skip("the standard library's sources are not installed here")
    root = sysconfig.get_paths()["stdlib"]
    rs = cc.Ruleset(default_rules(), **DEFAULT_OPTIONS)
    stopped = []
    for name in modules:
        try:
            with open(os.path.join(root, name), encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            continue
        if any(d.action == "abort" for d in rs.replay(_fenced(text))):
            stopped.append(name.replace(os.sep, "/"))
    assert set(stopped) <= KNOWN_TABLES
