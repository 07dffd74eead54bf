"""The C contract (csrc/engine.h) and the table of rule kinds (Rule class declarations).

``cc_ruleset_new`` checks every limit itself and reports the status, the index of the failing
rule or phrase and the field; ``_engine._compile_specs`` hands it raw specs that the Python
validation would refuse, so these tests reach the C checks.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import contextcare as cc
from contextcare import _engine, notices, rules
from contextcare.detection import EVIDENCE_FIELDS
from contextcare.errors import RuleValueError

GOOD = {
    "line-repeat": {"detector": "line-repeat", "view": "combined", "every_bytes": 300,
                    "min_lines": 30, "min_count": 30, "min_ratio": 0.35, "min_run": 12},
    "line-cycle": {"detector": "line-cycle", "view": "combined", "every_bytes": 300,
                   "max_line_chars": 8, "min_lines": 24, "top": 3, "cover_ratio": 0.6},
    "filler-lines": {"detector": "filler-lines", "view": "combined", "every_bytes": 300,
                     "fillers": "好嗯", "max_line_chars": 6, "min_count": 5, "min_ratio": 0.4},
    "prefix-monotony": {"detector": "prefix-monotony", "view": "combined", "every_bytes": 300,
                        "delimiters": "，:", "max_prefix_chars": 3, "min_lines": 10,
                        "min_count": 10, "min_ratio": 0.5},
    "tail-repeat": {"detector": "tail-repeat", "view": "combined", "every_bytes": 300,
                    "window_chars": 768, "max_period": 256, "min_repeats": 3, "min_chars": 240},
}

# (detector, field, a value outside the C limit)
BAD = [
    ("line-cycle", "top", _engine.MAX_CYCLE_TOP + 1),
    ("line-cycle", "top", 0),
    ("line-cycle", "max_line_chars", _engine.EVIDENCE_CHARS + 1),
    ("line-cycle", "cover_ratio", 1.5),
    ("line-cycle", "cover_ratio", float("nan")),
    ("line-repeat", "min_lines", 0),
    ("line-repeat", "min_count", _engine.MAX_COUNT + 1),
    ("line-repeat", "min_run", _engine.MAX_COUNT + 1),
    ("line-repeat", "min_ratio", 0.0),
    ("line-repeat", "every_bytes", 0),
    ("line-repeat", "every_bytes", _engine.MAX_EVERY_BYTES + 1),
    ("filler-lines", "max_line_chars", 0),
    ("filler-lines", "fillers", "好" * (_engine.MAX_FILLERS + 1)),
    ("prefix-monotony", "max_prefix_chars", _engine.MAX_PREFIX_CHARS + 1),
    ("prefix-monotony", "delimiters", "，" * (_engine.MAX_DELIMITERS + 1)),
    ("tail-repeat", "window_chars", _engine.MAX_WINDOW_CHARS + 1),
    ("tail-repeat", "max_period", 385),  # > window_chars / 2
    ("tail-repeat", "min_repeats", 1),
    ("tail-repeat", "min_chars", 769),  # > window_chars
]


def _spec(detector: str, **change: Any) -> dict[str, Any]:
    return {**GOOD[detector], **change}


@pytest.mark.parametrize("detector", sorted(GOOD))
def test_good_specs_compile(detector: str) -> None:
    _engine._compile_specs([_spec(detector)])


@pytest.mark.parametrize(("detector", "field", "value"), BAD)
def test_c_rejects_out_of_range_limit_with_status_and_index(detector: str, field: str,
                                                            value: Any) -> None:
    specs = [GOOD["line-repeat"], GOOD["tail-repeat"], _spec(detector, **{field: value})]
    with pytest.raises(RuleValueError) as info:
        _engine._compile_specs(specs)
    err = info.value
    assert err.status == "limit"  # type: ignore[attr-defined]
    assert err.rule_index == 2  # type: ignore[attr-defined]
    assert err.phrase_index is None  # type: ignore[attr-defined]
    assert err.field == field  # type: ignore[attr-defined]
    assert f"rules[2]: {field} must be" in str(err)


def test_python_validation_refuses_what_the_hook_lets_through() -> None:
    # the same out-of-range top, through the public path, never reaches C
    with pytest.raises(RuleValueError, match=r"top must be in \[1, 64\]"):
        rules.LineCycle("c", top=65)


def test_c_rejects_a_phrase_over_the_limit_with_its_index() -> None:
    phrase_rule = {"detector": "phrases", "view": "text"}
    long = "x" * (_engine.MAX_PHRASE_CHARS + 1)
    with pytest.raises(RuleValueError) as info:
        _engine._compile_specs([phrase_rule, phrase_rule], [("ok",), ("fine", long)])
    err = info.value
    assert (err.status, err.rule_index, err.phrase_index) == (  # type: ignore[attr-defined]
        "limit", 1, 2)


def test_c_rejects_inconsistent_specs() -> None:
    with pytest.raises(RuleValueError) as info:  # phrases on a windowed rule
        _engine._compile_specs([GOOD["line-repeat"]], [("x",)])
    assert info.value.status == "invalid"  # type: ignore[attr-defined]
    with pytest.raises(RuleValueError) as info:
        _engine._compile_specs([{"detector": "phrases", "view": "text"}], [("",)])
    assert info.value.status == "invalid"  # type: ignore[attr-defined]


def test_c_rejects_out_of_range_options() -> None:
    # options are validated in Python first; a spec can still be checked through the hook
    with pytest.raises(RuleValueError, match="line_window"):
        _engine._compile_specs([GOOD["line-repeat"]], line_window=0)


def test_limits_are_the_c_numbers() -> None:
    assert rules.EVIDENCE_LINE_CHARS == _engine.EVIDENCE_CHARS == 40
    assert rules.MAX_PHRASE_CHARS == _engine.MAX_PHRASE_CHARS
    assert rules.MAX_PHRASES == _engine.MAX_PHRASES
    assert rules.MAX_PHRASE_BYTES == _engine.MAX_PHRASE_BYTES
    assert _engine.MAX_CYCLE_TOP == 64 and _engine.MAX_PREFIX_CHARS == 8


# --------------------------------------------------------------------------- kinds table

@pytest.mark.parametrize("rule_type", rules.RULE_TYPES, ids=lambda t: t.kind)
def test_each_rule_class_declares_its_kind(rule_type: type[rules.Rule]) -> None:
    fields = {f.name for f in dataclasses.fields(rule_type)}  # type: ignore[arg-type]
    assert rules.KINDS[rule_type.kind] is rule_type
    assert set(rule_type.evidence) <= set(EVIDENCE_FIELDS)
    assert set(rule_type.engine_fields) <= fields
    assert set(rule_type.window_counts) <= fields
    assert rule_type.detector in _engine._DETECTORS  # type: ignore[attr-defined]
    assert rule_type.topic in ("loop", "time-anxiety", "context-anxiety", "other")
    assert rule_type.kind in notices._EN_EVIDENCE and rule_type.kind in notices._ZH_EVIDENCE


LOOPY = "\n".join(["同一行反复出现。"] * 60 + ["嗯，第" + str(i) for i in range(70)]
                  + ["（输出。）", "**做。**", "go."] * 30 + ["好。", "嗯。"] * 20) + "\n"


@pytest.mark.parametrize("engine", ["native", "reference"])
def test_detections_carry_exactly_their_declared_evidence(engine: str) -> None:
    from contextcare import reference

    chosen = [
        cc.LineRepeat("lr", min_run=0), cc.LineCycle("lc"), cc.FillerLines("fl"),
        cc.PrefixMonotony("pm"), cc.TailRepeat("tr"), cc.Phrases("ph", ["反复"]),
        cc.Marker("mk", "go."), cc.BlockRepeat("br"), cc.VocabCollapse("vc", words=20),
    ]
    ruleset = (cc.Ruleset if engine == "native" else reference.Ruleset)(chosen)
    found = ruleset.replay(LOOPY + "ab" * 200, channel="reasoning")
    kinds = set()
    for d in found:
        assert tuple(d.evidence()) == tuple(
            f for f in EVIDENCE_FIELDS if f in rules.KINDS[d.kind].evidence), d
        kinds.add(d.kind)
    assert kinds == {r.kind for r in chosen}


@pytest.mark.parametrize("rule_type", rules.RULE_TYPES, ids=lambda t: t.kind)
def test_rule_fields_after_the_defining_ones_are_keyword_only(rule_type: type[rules.Rule]) -> None:
    positional = [f.name for f in dataclasses.fields(rule_type)  # type: ignore[arg-type]
                  if not f.kw_only]
    assert positional == {"phrase": ["id", "phrases"], "marker": ["id", "token"]}.get(
        rule_type.kind, ["id"])


def test_thresholds_cannot_be_given_by_position() -> None:
    with pytest.raises(TypeError, match="positional"):
        rules.LineRepeat("x", 5, 5)  # type: ignore[misc]
