"""Context grades: fatigue (request load) and wakefulness (retained history), and when to say so.

Two figures describe a conversation's context, both in [0, 100] with one decimal:

* **fatigue** — how heavy the next request is against a budget of the window:
  ``min(100, 100 · (load / (budget_ratio · capacity)) ** exponent)``; convex, so it stays low for
  a long time and rises steeply near the budget;
* **wakefulness** — how much history the model still holds, against a third of the window:
  ``min(100, 100 · sqrt(retained / (wakefulness_ratio · capacity)))``; high retention is not a
  danger, it is what the model can still see.

Values are rounded to one decimal **half up** (29.95 → 30.0) and graded from the rounded value at
30 / 60 / 85. Without a known capacity there is nothing to measure against: the status is
*uncalibrated* and carries no numbers (inventing one would be worse than saying nothing).

:class:`StatusTracker` decides when the model hears about it. The model-visible text carries grade
names and advice only, never the numbers (a number that creeps up every request reads like a
countdown and costs context without information); the numbers travel in the notice's ``metadata``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from .._checks import check_lang as _check_lang
from .._checks import check_open_ratio as _open_ratio
from ..errors import ArgumentTypeError, ArgumentValueError
from ..marker import own_message

__all__ = [
    "Status", "Notice", "StatusTracker", "measure", "round_half_up", "grade_index",
    "status_text", "status_colours", "FATIGUE_GRADES", "WAKEFULNESS_GRADES", "UNCALIBRATED",
    "GRADE_CUTS", "FATIGUE_COLOURS", "WAKEFULNESS_COLOURS", "UNCALIBRATED_COLOUR", "COLOURS",
]

#: Fatigue grade names, lowest first.
FATIGUE_GRADES = ("normal", "elevated", "high", "very-high")
#: Wakefulness grade names, lowest first.
WAKEFULNESS_GRADES = ("low", "normal", "elevated", "high")
#: The grade of both figures when the capacity is unknown.
UNCALIBRATED = "uncalibrated"
#: A rounded value at or above a cut point is in the next grade.
GRADE_CUTS = (30.0, 60.0, 85.0)

#: Colour tokens a UI can use, with a concrete hex value for each.
COLOURS = {
    "green": "#22c55e",
    "blue": "#3b82f6",
    "orange": "#f97316",
    "red": "#ef4444",
    "teal": "#14b8a6",
    "grey": "#9ca3af",
}
#: Colour of each fatigue grade: load is a warning sign, so it goes green → red.
FATIGUE_COLOURS = dict(zip(FATIGUE_GRADES, ("green", "blue", "orange", "red")))
#: Colour of each wakefulness grade: low retention is the warning, high retention is good.
WAKEFULNESS_COLOURS = dict(zip(WAKEFULNESS_GRADES, ("orange", "blue", "teal", "green")))
#: Colour of an uncalibrated figure.
UNCALIBRATED_COLOUR = "grey"

Lang = Literal["en", "zh"]


def round_half_up(value: float) -> float:
    """Round to one decimal, ties upward: ``floor(value · 10 + 0.5) / 10``.

    Python's ``round(29.95, 1)`` gives 29.9 (the binary value is just below the tie and ``round``
    honours that); JavaScript's ``Math.round(v · 10) / 10`` gives 30.0 because ``29.95 · 10`` is
    exactly 299.5 in binary. Grades follow the rounded value, so the difference moves a figure
    across a grade boundary; this function rounds as ``Math.round`` does.
    """
    return math.floor(value * 10 + 0.5) / 10


def grade_index(value: float) -> int:
    """0–3: how many of the cut points 30 / 60 / 85 the (rounded) value reaches."""
    return sum(1 for cut in GRADE_CUTS if value >= cut)


@dataclass(frozen=True, slots=True)
class Status:
    """One measurement: both figures (or ``None``), their grades, and whether it is calibrated."""

    fatigue: float | None
    wakefulness: float | None
    fatigue_grade: str
    wakefulness_grade: str
    calibrated: bool

    def to_dict(self) -> dict[str, Any]:
        """The status as plain data (what a notice's ``metadata`` carries)."""
        return {
            "fatigue": self.fatigue,
            "wakefulness": self.wakefulness,
            "fatigue_grade": self.fatigue_grade,
            "wakefulness_grade": self.wakefulness_grade,
            "calibrated": self.calibrated,
        }


def _number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ArgumentTypeError(f"{name} must be a number, got {type(value).__name__}")
    if math.isnan(value) or value < 0:
        raise ArgumentValueError(f"{name} must be a number >= 0, got {value}")
    return float(value)


def measure(
    load: float,
    retained: float,
    capacity: float | None,
    *,
    budget_ratio: float = 0.8,
    wakefulness_ratio: float = 1 / 3,
    exponent: float = 1.5,
) -> Status:
    """Grade a conversation's context.

    ``load`` is the token count of the next request (everything the model will read: system
    prompt, tool definitions, history, incoming messages); ``retained`` is the history the model
    still holds verbatim; ``capacity`` is the usable context window. A ``capacity`` that is
    ``None``, not finite, or ≤ 0 gives an uncalibrated status with ``None`` figures. ``load`` and
    ``retained`` must be finite or infinite numbers ≥ 0 (an infinite load simply caps at 100).
    """
    load = _number("load", load)
    retained = _number("retained", retained)
    budget_ratio = _open_ratio("budget_ratio", budget_ratio)
    wakefulness_ratio = _open_ratio("wakefulness_ratio", wakefulness_ratio)
    if isinstance(exponent, bool) or not isinstance(exponent, (int, float)):
        raise ArgumentTypeError(f"exponent must be a number, got {type(exponent).__name__}")
    if not (math.isfinite(exponent) and exponent > 0):
        raise ArgumentValueError(f"exponent must be a finite number > 0, got {exponent}")
    if capacity is not None and (isinstance(capacity, bool)
                                 or not isinstance(capacity, (int, float))):
        raise ArgumentTypeError(f"capacity must be a number or None, got {type(capacity).__name__}")
    if capacity is None or not math.isfinite(capacity) or capacity <= 0:
        return Status(None, None, UNCALIBRATED, UNCALIBRATED, False)
    fatigue = round_half_up(min(100.0, 100.0 * (load / (budget_ratio * capacity)) ** exponent))
    wakefulness = round_half_up(
        min(100.0, 100.0 * math.sqrt(retained / (wakefulness_ratio * capacity)))
    )
    return Status(
        fatigue,
        wakefulness,
        FATIGUE_GRADES[grade_index(fatigue)],
        WAKEFULNESS_GRADES[grade_index(wakefulness)],
        True,
    )


def status_colours(status: Status) -> tuple[str, str]:
    """Colour tokens ``(fatigue, wakefulness)`` for a UI; look up hex values in :data:`COLOURS`."""
    if not status.calibrated:
        return UNCALIBRATED_COLOUR, UNCALIBRATED_COLOUR
    return FATIGUE_COLOURS[status.fatigue_grade], WAKEFULNESS_COLOURS[status.wakefulness_grade]


# --------------------------------------------------------------------------- model-visible text

_LABELS: dict[str, dict[str, str]] = {
    "en": {
        "normal": "normal", "elevated": "elevated", "high": "high", "very-high": "very high",
        "low": "low", UNCALIBRATED: "not measured",
    },
    "zh": {
        "normal": "正常", "elevated": "升高", "high": "高", "very-high": "非常高",
        "low": "低", UNCALIBRATED: "未测量",
    },
}

_TEXT: dict[str, dict[str, str]] = {
    "en": {
        "grades": "Context fatigue: {fatigue}; wakefulness: {wakefulness}.",
        "basis": "These grades estimate the size of the next request and of the history you still "
                 "hold. They are not a deadline and say nothing about time.",
        "uncalibrated": "The context capacity of this request is not known, so there is nothing "
                        "to measure against. Do not guess a figure.",
        "outcome": "Compaction outcome: {outcome}",
    },
    "zh": {
        "grades": "上下文疲劳：{fatigue}；唤醒值：{wakefulness}。",
        "basis": "这两个等级估计的是下一次请求的大小和你仍保留的历史量，不是截止时间，也与时间无关。",
        "uncalibrated": "这次请求的上下文容量未知，没有可以比较的基准。请不要自行猜测数值。",
        "outcome": "压缩结果：{outcome}",
    },
}

#: Advice lines by fatigue grade (an uncalibrated status gets the ``normal`` advice).
_ADVICE: dict[str, dict[str, tuple[str, ...]]] = {
    "en": {
        "normal": ("Carry on with the task as usual.",),
        "elevated": (
            "The load is rising. When you reach a natural stopping point, write down what "
            "matters and then consider {rest}.",
        ),
        "high": (
            "Older parts of the conversation are getting harder to keep in view. If you hold "
            "findings that are not written down yet, record them first, then {rest_now}.",
            "A short summary keeps the threads that matter; it costs less than carrying the "
            "whole history.",
        ),
        "very-high": (
            "Further work at this load is unlikely to pay off. If you are in the middle of a "
            "step, finish it, save what matters, then {rest_now}.",
            "Before compacting, record the goal, the verified results, the open work and the "
            "key paths or identifiers.",
            "After compacting, check the summary against what you know before relying on it.",
        ),
    },
    "zh": {
        "normal": ("照常继续当前任务。",),
        "elevated": ("负载正在上升。到了自然的停顿点时，先记下要紧的内容，再考虑{rest}。",),
        "high": (
            "较早的对话内容越来越难以兼顾。如果有尚未记下的发现，先把它们记下来，再{rest_now}。",
            "一份简短的摘要能保住要紧的线索，比带着全部历史继续更省。",
        ),
        "very-high": (
            "在这样的负载下继续工作很难有收益。如果正处在某一步中间，先完成这一步，保存要紧的内容，再{rest_now}。",
            "压缩之前，记下目标、已验证的结果、未完成的工作以及关键路径或标识。",
            "压缩之后，先把摘要与你所知道的核对一遍，再依赖它。",
        ),
    },
}


def _rest_words(lang: str, rest_tool: str | None) -> dict[str, str]:
    if lang == "zh":
        if rest_tool:
            return {"rest": f"调用 {rest_tool} 整理上下文", "rest_now": f"调用 {rest_tool} 整理上下文"}
        return {"rest": "压缩较早的历史", "rest_now": "压缩较早的历史"}
    if rest_tool:
        return {"rest": f"calling {rest_tool}", "rest_now": f"call {rest_tool}"}
    return {"rest": "compacting the older history", "rest_now": "compact the older history"}


def status_text(
    status: Status, *, lang: Lang = "en", outcome: str | None = None,
    rest_tool: str | None = None,
) -> str:
    """The model-visible status: grade line, basis, [uncalibrated line], [outcome], advice.

    Never contains the numeric figures. ``rest_tool`` names the compaction tool the host exposes
    (for example ``"context_rest"``); without it the advice speaks of compaction in general.
    """
    if not isinstance(status, Status):
        raise ArgumentTypeError(f"status must be a Status, got {type(status).__name__}")
    lang_key = _check_lang(lang)
    if outcome is not None and not isinstance(outcome, str):
        raise ArgumentTypeError(f"outcome must be a str or None, got {type(outcome).__name__}")
    labels, text = _LABELS[lang_key], _TEXT[lang_key]
    lines = [text["grades"].format(fatigue=labels[status.fatigue_grade],
                                   wakefulness=labels[status.wakefulness_grade]),
             text["basis"]]
    if not status.calibrated:
        lines.append(text["uncalibrated"])
    if outcome is not None and outcome.strip():
        lines.append(text["outcome"].format(outcome=outcome.strip()))
    advice_grade = status.fatigue_grade if status.calibrated else "normal"
    words = _rest_words(lang_key, rest_tool)
    lines.extend(line.format(**words) for line in _ADVICE[lang_key][advice_grade])
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class Notice:
    """A status notice for the model: ``text`` to append (as :meth:`to_message`) and ``metadata``
    to log.

    ``metadata`` holds the figures (``fatigue``, ``wakefulness``), grades, ``calibrated`` and the
    ``outcome`` (or ``None``); it is for the host and UIs, not for the model.
    """

    text: str
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_message(self, *, metadata: bool = False) -> dict[str, Any]:
        """The notice as the user-role message to append: ``{"role": "user", "content": text,
        "name": "contextcare"}`` — the ``name`` is the mark of every message contextcare writes,
        so the planner and the survey never count it as the user's words. ``metadata=True`` adds
        the ``metadata`` dict (for hosts that keep it; the OpenAI API rejects unknown keys)."""
        return own_message(self.text, metadata=self.metadata if metadata else None)


class StatusTracker:
    """Decides, sample by sample, whether the model should be told about its context.

    :meth:`update` returns a :class:`Notice` on the first sample, whenever there is an outcome to
    report, and whenever the model-visible text differs from the last text it was told; otherwise
    ``None``. A numeric change inside a grade (35.2 → 59.9, both *elevated*) says nothing new and
    is not reported.

    The comparison leaves the outcome line out: an outcome is a one-off event, so the sample after
    it is compared with the last state text, and a status that has not moved is not repeated just
    because the previous notice carried an outcome. (The original compared whole texts, which
    re-sent an unchanged status once after every compaction.)

    One tracker per conversation. Not thread-safe (a conversation's requests are sequential).
    """

    def __init__(self, lang: Lang = "en", *, rest_tool: str | None = None) -> None:
        self._lang: Lang = lang
        _check_lang(lang)
        if rest_tool is not None and not (isinstance(rest_tool, str) and rest_tool.strip()):
            raise ArgumentValueError(f"rest_tool must be a non-empty str or None, got {rest_tool!r}")
        self._rest_tool = rest_tool
        self._last_text: str | None = None
        self._last_status: Status | None = None

    @property
    def lang(self) -> str:
        """The language of the notices."""
        return self._lang

    @property
    def last_status(self) -> Status | None:
        """The most recent status given to :meth:`update` (``None`` before the first sample).

        This is the latest measurement, newer than the last notice, so it is the one to quote in
        a context-anxiety notice.
        """
        return self._last_status

    def reset(self) -> None:
        """Forget the past: the next sample is a first sample again."""
        self._last_text = None
        self._last_status = None

    def update(self, status: Status, outcome: str | None = None) -> Notice | None:
        """Record a sample; return the notice to append, or ``None`` if nothing new is to say."""
        if outcome is not None and not isinstance(outcome, str):
            raise ArgumentTypeError(f"outcome must be a str or None, got {type(outcome).__name__}")
        state_text = status_text(status, lang=self._lang, rest_tool=self._rest_tool)
        has_outcome = outcome is not None and bool(outcome.strip())
        first = self._last_text is None
        changed = state_text != self._last_text
        self._last_status = status
        if not (first or changed or has_outcome):
            return None
        self._last_text = state_text
        text = status_text(status, lang=self._lang, outcome=outcome, rest_tool=self._rest_tool)
        metadata = status.to_dict()
        metadata["outcome"] = outcome.strip() if outcome is not None and has_outcome else None
        return Notice(text, metadata)
