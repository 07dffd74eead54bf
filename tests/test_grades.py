"""Context grades: the formulas, half-up rounding, grading, and when the model is told."""

from __future__ import annotations

import math

import pytest

from contextcare.context.grades import (
    COLOURS,
    FATIGUE_GRADES,
    Status,
    StatusTracker,
    grade_index,
    measure,
    round_half_up,
    status_colours,
    status_text,
)
from contextcare.errors import ArgumentTypeError, ArgumentValueError

# The worked-example table of the original (context-care reference §4.3), defaults throughout.
WORKED_EXAMPLES = [
    # load, retained, capacity, fatigue, fatigue grade, wakefulness, wakefulness grade
    (0, 0, 10000, 0.0, "normal", 0.0, "low"),
    (8000, 4000, 10000, 100.0, "very-high", 100.0, "high"),  # wakefulness 109.5 capped
    (4000, 100, 10000, 35.4, "elevated", 17.3, "low"),
    (2000, 1000, 10000, 12.5, "normal", 54.8, "normal"),
    (3600, 1200, 10000, 30.2, "elevated", 60.0, "elevated"),
    (5400, 2000, 10000, 55.5, "elevated", 77.5, "elevated"),
    (128000, 100000, 1000000, 6.4, "normal", 54.8, "normal"),
    (400000, 300000, 1000000, 35.4, "elevated", 94.9, "high"),
]


@pytest.mark.parametrize(("load", "retained", "capacity", "fatigue", "fgrade", "wake", "wgrade"),
                         WORKED_EXAMPLES)
def test_worked_examples(load: int, retained: int, capacity: int, fatigue: float, fgrade: str,
                         wake: float, wgrade: str) -> None:
    status = measure(load, retained, capacity)
    assert status == Status(fatigue, wake, fgrade, wgrade, True)


@pytest.mark.parametrize("capacity", [None, 0, -5, math.nan, math.inf])
def test_unknown_capacity_is_uncalibrated_without_numbers(capacity: float | None) -> None:
    status = measure(1234, 567, capacity)
    assert status == Status(None, None, "uncalibrated", "uncalibrated", False)


def test_rounding_is_half_up_like_the_original() -> None:
    # 29.95 is stored just below the tie, so Python's round() goes down; the original's
    # Math.round(v*10)/10 sees exactly 299.5 and goes up.
    assert round(29.95, 1) == 29.9
    assert round_half_up(29.95) == 30.0
    assert round_half_up(0.05) == 0.1
    assert round_half_up(12.44) == 12.4


def test_grade_follows_the_rounded_value() -> None:
    # exponent 1, budget 0.5·10000 = 5000: raw fatigue = 100·1497.5/5000 = 29.95 → 30.0, elevated.
    status = measure(1497.5, 0, 10000, budget_ratio=0.5, exponent=1)
    assert status.fatigue == 30.0
    assert status.fatigue_grade == "elevated"
    # Just below: raw 29.94 stays normal.
    below = measure(1497.0, 0, 10000, budget_ratio=0.5, exponent=1)
    assert below.fatigue == 29.9 and below.fatigue_grade == "normal"


@pytest.mark.parametrize(("value", "index"), [
    (0.0, 0), (29.9, 0), (30.0, 1), (59.9, 1), (60.0, 2), (84.9, 2), (85.0, 3), (100.0, 3),
])
def test_grade_cut_points(value: float, index: int) -> None:
    assert grade_index(value) == index


def test_threshold_loads_from_the_reference() -> None:
    # Fatigue reaches 30 at load ≈ 0.3585·C and 85 at ≈ 0.7179·C (reference §4.1).
    assert measure(3580, 0, 10000).fatigue_grade == "normal"
    assert measure(3590, 0, 10000).fatigue_grade == "elevated"
    assert measure(7170, 0, 10000).fatigue_grade == "high"
    assert measure(7185, 0, 10000).fatigue_grade == "very-high"
    # Wakefulness reaches 30 at retained = 0.03·C.
    assert measure(0, 299, 10000).wakefulness_grade == "low"
    assert measure(0, 300, 10000).wakefulness_grade == "normal"


def test_infinite_load_caps_at_100() -> None:
    assert measure(math.inf, 0, 1000).fatigue == 100.0


@pytest.mark.parametrize(("kwargs", "error", "word"), [
    ({"load": -1}, ArgumentValueError, "load"),
    ({"load": math.nan}, ArgumentValueError, "load"),
    ({"retained": "10"}, ArgumentTypeError, "retained"),
    ({"load": True}, ArgumentTypeError, "load"),
    ({"capacity": "10000"}, ArgumentTypeError, "capacity"),
    ({"budget_ratio": 1.0}, ArgumentValueError, "budget_ratio"),
    ({"wakefulness_ratio": 0}, ArgumentValueError, "wakefulness_ratio"),
    ({"exponent": 0}, ArgumentValueError, "exponent"),
    ({"exponent": math.inf}, ArgumentValueError, "exponent"),
])
def test_bad_arguments_name_the_argument(kwargs: dict[str, object], error: type[Exception],
                                         word: str) -> None:
    args: dict[str, object] = {"load": 1, "retained": 1, "capacity": 100}
    args.update(kwargs)
    with pytest.raises(error, match=word):
        measure(**args)  # type: ignore[arg-type]


def test_colours_as_data() -> None:
    assert status_colours(measure(0, 0, 10000)) == ("green", "orange")
    assert status_colours(measure(8000, 4000, 10000)) == ("red", "green")
    assert status_colours(measure(5400, 2000, 10000)) == ("blue", "teal")
    assert status_colours(measure(1, 1, None)) == ("grey", "grey")
    # The two hex values the original named.
    assert COLOURS["blue"] == "#3b82f6" and COLOURS["teal"] == "#14b8a6"


def _status(fatigue: float, wakefulness: float = 50.0) -> Status:
    return Status(fatigue, wakefulness, FATIGUE_GRADES[grade_index(fatigue)],
                  ("low", "normal", "elevated", "high")[grade_index(wakefulness)], True)


def test_first_sample_notifies_with_numbers_in_metadata_only() -> None:
    tracker = StatusTracker()
    notice = tracker.update(_status(35.2, 67.3))
    assert notice is not None
    assert "elevated" in notice.text
    assert not any(char.isdigit() for char in notice.text)  # no figures, no countdown
    assert notice.metadata["fatigue"] == 35.2 and notice.metadata["wakefulness"] == 67.3
    assert notice.metadata["fatigue_grade"] == "elevated"


def test_numeric_change_within_a_grade_is_silent_and_a_grade_change_is_not() -> None:
    tracker = StatusTracker()
    assert tracker.update(_status(35.2)) is not None
    assert tracker.update(_status(59.9)) is None  # both elevated
    assert tracker.last_status == _status(59.9)
    notice = tracker.update(_status(60.0))  # high
    assert notice is not None and "high" in notice.text
    assert tracker.update(_status(60.0)) is None


def test_wakefulness_grade_change_notifies() -> None:
    tracker = StatusTracker()
    tracker.update(_status(10.0, 50.0))
    assert tracker.update(_status(10.0, 61.0)) is not None


def test_outcome_is_always_reported_but_not_repeated() -> None:
    tracker = StatusTracker()
    tracker.update(_status(20.0))
    notice = tracker.update(_status(20.0), outcome="older history summarized")
    assert notice is not None and "older history summarized" in notice.text
    assert notice.metadata["outcome"] == "older history summarized"
    # The state did not move: the outcome line alone is no reason to speak again.
    assert tracker.update(_status(20.0)) is None


def test_reset_makes_the_next_sample_a_first_sample() -> None:
    tracker = StatusTracker()
    tracker.update(_status(20.0))
    tracker.reset()
    assert tracker.update(_status(20.0)) is not None


def test_four_advice_levels_are_distinct_and_uncalibrated_uses_normal_advice() -> None:
    texts = [status_text(_status(value)) for value in (10.0, 40.0, 70.0, 90.0)]
    advice = ["\n".join(text.splitlines()[2:]) for text in texts]
    assert len(set(advice)) == 4
    assert [len(a.splitlines()) for a in advice] == [1, 1, 2, 3]
    uncalibrated = status_text(measure(1, 1, None))
    assert "not known" in uncalibrated and "Do not guess" in uncalibrated
    assert uncalibrated.endswith(advice[0])


def test_chinese_text_and_rest_tool() -> None:
    text = status_text(_status(40.0), lang="zh", rest_tool="context_rest")
    assert text.startswith("上下文疲劳：升高；唤醒值：正常。")
    assert "context_rest" in text
    assert "context_rest" in status_text(_status(90.0), rest_tool="context_rest")
    assert "context_rest" not in status_text(_status(90.0))


def test_tracker_rejects_bad_options() -> None:
    with pytest.raises(ArgumentValueError, match="lang"):
        StatusTracker("fr")  # type: ignore[arg-type]
    with pytest.raises(ArgumentTypeError, match="outcome"):
        StatusTracker().update(_status(1.0), outcome=3)  # type: ignore[arg-type]
    with pytest.raises(ArgumentTypeError, match="status"):
        StatusTracker().update({"fatigue": 1})  # type: ignore[arg-type]
