"""The texts a :class:`~contextcare.guard.Guard` sends to the model, in English and Chinese.

A notice is a user-role message appended at the tail of the next request. It comes in three
forms:

* ``remind`` — generation went on; the notice opens with a condition ("If you are weighing how
  much time is left: …"), so when the detection was a false positive the model reads a sentence
  that does not apply to it and loses nothing;
* ``continue`` — the reply was aborted and the guard auto-continues: the notice states as a fact
  that the *system* stopped the reply, not the model, names the evidence, and says what to do
  next. (Aborts state a fact rather than open with a condition: the stop did happen.)
* ``stopped`` — the reply was aborted and auto-continue is off or exhausted: the same explanation,
  saying that nothing was resumed; it reaches the model with the next request, whenever the host
  sends one.

Every notice names its evidence — the phrase, the line and its count, the cycle, the unit — taken
from the :class:`~contextcare.Detection` fields; a field the detection does not carry is left out
of the sentence, never filled with a made-up number. The context-anxiety notice quotes the latest
fatigue and wakefulness measurement when one was observed, says how old it is in model calls, and
otherwise says how to get one.

Texts are wrapped in ``<context-care>`` … ``</context-care>`` lines so the model can tell a system
notice from its user's words. :func:`render` gives the text; :func:`message` the OpenAI-format
message with a ``metadata`` dict for the host (strip it before sending to an API that rejects
unknown message fields: ``Guard.pending_notices(metadata=False)``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal, Protocol

from ._checks import check_lang
from .detection import Detection
from .errors import ArgumentTypeError, ArgumentValueError
from .marker import OWN_NAME
from .rules import KINDS as _RULE_KINDS

__all__ = [
    "LANGS", "FORMS", "KINDS", "StatusLike", "Measurement", "render", "describe", "message",
    "check_lang", "topic_of",
]

Lang = Literal["en", "zh"]
Form = Literal["remind", "continue", "stopped"]

#: Languages of the notice texts.
LANGS: tuple[Lang, ...] = ("en", "zh")
#: Notice forms: a reminder, an abort that auto-continues, an abort that does not.
FORMS: tuple[Form, ...] = ("remind", "continue", "stopped")
#: Detection kinds with their own wording: every rule kind (any other kind gets a generic
#: sentence). The wording of each is in the tables ``_EN_EVIDENCE`` and ``_ZH_EVIDENCE``.
KINDS: tuple[str, ...] = tuple(_RULE_KINDS)


def topic_of(d: Detection) -> str:
    """What the notice talks of: the rule class's ``topic`` ("other" for an unknown kind)."""
    rule_type = _RULE_KINDS.get(d.kind)
    return rule_type.topic if rule_type is not None else "other"


class StatusLike(Protocol):
    """What a notice reads from a measurement (:class:`contextcare.context.grades.Status` fits)."""

    @property
    def fatigue(self) -> float | None: ...

    @property
    def wakefulness(self) -> float | None: ...


class Measurement:
    """A status as the guard last saw it: the figures, their grades, and its age.

    ``age`` counts the model calls (``Guard.reply()``) started since the status was observed; the
    call in progress counts, so ``age == 1`` means "measured for this request".
    """

    __slots__ = ("fatigue", "wakefulness", "fatigue_grade", "wakefulness_grade", "age")

    def __init__(self, status: object, age: int = 0) -> None:
        self.fatigue = _finite(getattr(status, "fatigue", None))
        self.wakefulness = _finite(getattr(status, "wakefulness", None))
        self.fatigue_grade = _grade(getattr(status, "fatigue_grade", None))
        self.wakefulness_grade = _grade(getattr(status, "wakefulness_grade", None))
        self.age = age

    @property
    def has_figures(self) -> bool:
        """Both figures are finite numbers (a notice quotes none unless it can quote both)."""
        return self.fatigue is not None and self.wakefulness is not None

    def to_dict(self) -> dict[str, Any]:
        return {"fatigue": self.fatigue, "wakefulness": self.wakefulness,
                "fatigue_grade": self.fatigue_grade,
                "wakefulness_grade": self.wakefulness_grade, "age": self.age}


def _finite(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _grade(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _percent(ratio: float) -> str:
    return f"{math.floor(ratio * 100 + 0.5)}%"


def _number(value: float) -> str:
    return f"{value:.1f}"


_VISIBLE = str.maketrans({"\n": "\\n", "\r": "\\r", "\t": "\\t"})


def _show(text: str) -> str:
    """Evidence text as quoted in a notice: line breaks and tabs shown as ``\\n`` ``\\t``, so a
    unit that spans lines stays on one line of the notice."""
    return text.translate(_VISIBLE)


# --------------------------------------------------------------------------- English

_EN_WHERE = {"text": "your answer", "reasoning": "your reasoning", "combined": "your reply"}


def _en_phrase(d: Detection, where: str, share: str) -> str | None:
    return None if d.phrase is None else f'the phrase "{_show(d.phrase)}" in {where}'


def _en_marker(d: Detection, where: str, share: str) -> str | None:
    return None if d.phrase is None else f'the marker "{_show(d.phrase)}" in {where}'


def _en_line_repeat(d: Detection, where: str, share: str) -> str | None:
    if d.line is None:
        return None
    out = f'the line "{_show(d.line)}"'
    if d.count is not None and d.total is not None:
        out += f" {d.count} times among the last {d.total} lines of {where}"
        if d.ratio is not None:
            out += f" ({_percent(d.ratio)})"
    else:
        out += f" repeated in {where}"
    if d.run is not None and d.run > 1:
        out += f", {d.run} times in a row"
    return out


def _en_line_cycle(d: Detection, where: str, share: str) -> str | None:
    if not d.cycle:
        return None
    lines = [f'"{_show(line)}"' for line in d.cycle]
    listed = lines[0] if len(lines) == 1 else ", ".join(lines[:-1]) + " and " + lines[-1]
    out = f"the short lines {listed} taking turns"
    return out + (f", together {share}" if share else f" in {where}")


def _en_filler_lines(d: Detection, where: str, share: str) -> str | None:
    return f"{share} being short filler lines (a word or two of acknowledgement)" if share else None


def _en_prefix_monotony(d: Detection, where: str, share: str) -> str | None:
    if d.prefix is None:
        return None
    return (f'{share} opening with "{_show(d.prefix)}"' if share
            else f'line after line of {where} opening with "{_show(d.prefix)}"')


def _en_tail_repeat(d: Detection, where: str, share: str) -> str | None:
    if d.unit is None:
        return None
    times = f" {d.repeats} times" if d.repeats is not None else ""
    return f'the text "{_show(d.unit)}" repeated{times} back to back at the end of {where}'


_Wording = Callable[[Detection, str, str], "str | None"]

#: The evidence sentence of each kind: (detection, where, share) -> text, or None when the
#: detection lacks the fields the sentence needs.
def _en_block_repeat(d: Detection, where: str, share: str) -> str | None:
    if d.line is None or d.period is None:
        return None
    times = f" {d.repeats} times" if d.repeats is not None else ""
    size = f", {d.total} characters each" if d.total is not None else ""
    if d.period == 1:
        return (f'the line "{_show(d.line)}" repeated{times} back to back at the end of'
                f" {where}{size}")
    return (f'a block of {d.period} lines starting "{_show(d.line)}" repeated{times} back to'
            f" back at the end of {where}{size}")


def _en_segment_repeat(d: Detection, where: str, share: str) -> str | None:
    if d.count is None or d.total is None:
        return None
    quote = f' such as "{_show(d.line)}"' if d.line else ""
    return (f"{d.count} of the last {d.total} lines or sentences of {where} are the same few"
            f" lines with only a number or a word changed{quote}")


def _en_structure_flood(d: Detection, where: str, share: str) -> str | None:
    if d.total is None:
        return None
    quote = f' (lines such as "{_show(d.line)}")' if d.line else ""
    return f"the last {d.total} characters of {where} hold no word at all{quote}"


def _en_vocab_collapse(d: Detection, where: str, share: str) -> str | None:
    if d.count is None or d.total is None:
        return None
    quote = f' ("{_show(d.line)}")' if d.line else ""
    return f"only {d.count} different words among the last {d.total} words of {where}{quote}"


def _en_word_repeat(d: Detection, where: str, share: str) -> str | None:
    if d.period is None:
        return None
    times = f" {d.repeats} times" if d.repeats is not None else ""
    quote = f' starting "{_show(d.line)}"' if d.line else ""
    words = "word" if d.period == 1 else f"{d.period} words"
    size = f", {d.total} characters each" if d.total is not None else ""
    return f"the same {words}{quote} repeated{times} back to back at the end of {where}{size}"


_EN_EVIDENCE: dict[str, _Wording] = {
    "phrase": _en_phrase, "marker": _en_marker, "time-anxiety": _en_phrase,
    "context-anxiety": _en_phrase, "line-repeat": _en_line_repeat,
    "line-cycle": _en_line_cycle, "filler-lines": _en_filler_lines,
    "prefix-monotony": _en_prefix_monotony, "tail-repeat": _en_tail_repeat,
    "block-repeat": _en_block_repeat, "vocab-collapse": _en_vocab_collapse,
    "segment-repeat": _en_segment_repeat, "structure-flood": _en_structure_flood,
    "word-repeat": _en_word_repeat,
}


def _en_evidence(d: Detection) -> str:
    where = _EN_WHERE.get(d.channel, "your reply")
    share = ""
    if d.count is not None and d.total is not None:
        share = f"{d.count} of the last {d.total} lines of {where}"
        if d.ratio is not None:
            share += f" ({_percent(d.ratio)})"
    wording = _EN_EVIDENCE.get(d.kind)
    text = wording(d, where, share) if wording is not None else None
    return text if text is not None else f'the rule "{d.rule}" ({d.kind}) firing on {where}'


_EN_OPEN = {
    "time-anxiety": "If you are weighing how much time is left:",
    "context-anxiety": "If you are weighing how much context is left:",
    "loop": "If you notice that you are going round in circles:",
    "other": "If this is not what you meant to write:",
}

_EN_ADVICE = {
    "time-anxiety": (
        "No remaining-time budget has been given to you, so whether there is enough time has no"
        " answer here, and what follows from it (hurrying, skipping verification, doing the rest"
        " in bulk) does not follow. Deadlines, the current time or run limits that the user"
        " stated explicitly still hold; plan with those. Otherwise choose each next step by"
        " whether the current one is done and checked."),
    "context-anxiety": (
        "Context use is measured, not guessed. {measurement} Compaction, when it comes, is"
        " routine: recent history and a handoff note are kept, so there is no need to hurry or to"
        " prepare beyond keeping your notes current (goal, verified results, open work, key"
        " paths). Keep working with the same care, and judge a stopping point only by whether"
        " the work is done."),
    "loop": (
        "Repetition like this usually means the work has stalled, not that the task needs it."
        " Stop repeating: say in one sentence what you are trying to achieve and what blocks it,"
        " then take the next concrete step in different words. If the repetition is intended (a"
        " table, a list of similar items), ignore this note."),
    "other": "Check that the reply is still on track before you go on; if it is, ignore this note.",
}

_EN_AFTER_ABORT = {
    "loop": (
        "Do not write the repeated part again. If it was intended (a table, a list of similar"
        " items), give the rest in a compact form. If the loop comes back, first write down your"
        " progress (goal, what is done, the next step), then go on."),
    "other": "If that was not what you meant to write, check that the reply is on track.",
}


def _en_measurement(m: Measurement | None) -> str:
    if m is not None and m.has_figures:
        assert m.fatigue is not None and m.wakefulness is not None
        fat = f"fatigue {_number(m.fatigue)}%"
        if m.fatigue_grade:
            fat += f" ({m.fatigue_grade})"
        wake = f"wakefulness {_number(m.wakefulness)}%"
        if m.wakefulness_grade:
            wake += f" ({m.wakefulness_grade})"
        if m.age <= 1:
            when = "for this request"
        else:
            calls = "call" if m.age == 2 else "calls"
            when = f"{m.age - 1} model {calls} ago, so it may be out of date"
        return f"The latest measurement, taken {when}: {fat}, {wake}."
    if m is not None and "uncalibrated" in (m.fatigue_grade, m.wakefulness_grade):
        return ("The size of this model's context window is not known to the system, so there is"
                " no figure to report; do not estimate one.")
    return ("No measurement has been reported in this conversation yet: if you have a context"
            " status tool (such as context_status), call it; otherwise do not estimate, the"
            " system says when compaction is needed.")


def _en(d: Detection, form: Form, m: Measurement | None, stops: int | None) -> str:
    topic = topic_of(d)
    evidence = _en_evidence(d)
    advice = _EN_ADVICE[topic].replace("{measurement}", _en_measurement(m))
    if form == "remind":
        return f"{_EN_OPEN[topic]} the system saw {evidence}. {advice}"
    head = ("Your previous reply was stopped by the system while it was being generated; you did"
            f" not stop it yourself. Reason: the system saw {evidence}. What you had written is"
            " kept above, marked as interrupted.")
    after = _EN_AFTER_ABORT.get(topic, advice)
    if form == "continue":
        return f"{head} {after} Now continue the task from the last step that was done correctly."
    if stops is not None and stops > 1:
        why = f" because replies were stopped {stops} times in a row"
    else:
        why = ""
    return (f"{head} The system did not resume it automatically{why}. {after} Then answer the"
            " latest user message.")


# --------------------------------------------------------------------------- Chinese

_ZH_WHERE = {"text": "你的回答", "reasoning": "你的思考", "combined": "你的输出"}
_ZH_GRADES = {"normal": "正常", "elevated": "偏高", "high": "高", "very-high": "很高", "low": "低",
              "uncalibrated": "未校准"}


def _zh_phrase(d: Detection, where: str, share: str) -> str | None:
    return None if d.phrase is None else f"{where}中出现了“{_show(d.phrase)}”"


def _zh_marker(d: Detection, where: str, share: str) -> str | None:
    return None if d.phrase is None else f"{where}中出现了标记“{_show(d.phrase)}”"


def _zh_line_repeat(d: Detection, where: str, share: str) -> str | None:
    if d.line is None:
        return None
    if d.count is not None and d.total is not None:
        out = f"{where}最近 {d.total} 行里，“{_show(d.line)}”这一行出现了 {d.count} 次"
        if d.ratio is not None:
            out += f"（{_percent(d.ratio)}）"
    else:
        out = f"{where}中“{_show(d.line)}”这一行反复出现"
    if d.run is not None and d.run > 1:
        out += f"，其中连续 {d.run} 次"
    return out


def _zh_line_cycle(d: Detection, where: str, share: str) -> str | None:
    if not d.cycle:
        return None
    listed = "、".join(f"“{_show(line)}”" for line in d.cycle)
    out = f"{where}中{listed}这几行短句轮流出现"
    return out + (f"，合计{share}" if share else "")


def _zh_filler_lines(d: Detection, where: str, share: str) -> str | None:
    return f"{where}{share}是只有一两个字的应答或语气词短句" if share else None


def _zh_prefix_monotony(d: Detection, where: str, share: str) -> str | None:
    if d.prefix is None:
        return None
    return (f"{where}{share}以“{_show(d.prefix)}”开头" if share
            else f"{where}一行接一行地以“{_show(d.prefix)}”开头")


def _zh_tail_repeat(d: Detection, where: str, share: str) -> str | None:
    if d.unit is None:
        return None
    times = f" {d.repeats} 次" if d.repeats is not None else ""
    return f"{where}末尾，“{_show(d.unit)}”首尾相接地重复了{times}"


def _zh_block_repeat(d: Detection, where: str, share: str) -> str | None:
    if d.line is None or d.period is None:
        return None
    times = f" {d.repeats} 次" if d.repeats is not None else ""
    size = f"（每次 {d.total} 个字符）" if d.total is not None else ""
    if d.period == 1:
        return f"{where}末尾，“{_show(d.line)}”这一行首尾相接地重复了{times}{size}"
    return (f"{where}末尾，以“{_show(d.line)}”开头的一段（{d.period} 行）首尾相接地重复了"
            f"{times}{size}")


def _zh_segment_repeat(d: Detection, where: str, share: str) -> str | None:
    if d.count is None or d.total is None:
        return None
    quote = f"，例如“{_show(d.line)}”" if d.line else ""
    return (f"{where}最近 {d.total} 行（句）里有 {d.count} 行只是同样几行换了数字或一个词"
            f"{quote}")


def _zh_structure_flood(d: Detection, where: str, share: str) -> str | None:
    if d.total is None:
        return None
    quote = f"（例如“{_show(d.line)}”这样的行）" if d.line else ""
    return f"{where}最后 {d.total} 个字符里没有一个字或词{quote}"


def _zh_vocab_collapse(d: Detection, where: str, share: str) -> str | None:
    if d.count is None or d.total is None:
        return None
    quote = f"（“{_show(d.line)}”）" if d.line else ""
    return f"{where}最近 {d.total} 个词里只有 {d.count} 个不同的词{quote}"


def _zh_word_repeat(d: Detection, where: str, share: str) -> str | None:
    if d.period is None:
        return None
    times = f" {d.repeats} 次" if d.repeats is not None else ""
    quote = f"以“{_show(d.line)}”开头的" if d.line else ""
    size = f"（每次 {d.total} 个字符）" if d.total is not None else ""
    return f"{where}末尾，{quote}同样 {d.period} 个词首尾相接地重复了{times}{size}"


_ZH_EVIDENCE: dict[str, _Wording] = {
    "phrase": _zh_phrase, "marker": _zh_marker, "time-anxiety": _zh_phrase,
    "context-anxiety": _zh_phrase, "line-repeat": _zh_line_repeat,
    "line-cycle": _zh_line_cycle, "filler-lines": _zh_filler_lines,
    "prefix-monotony": _zh_prefix_monotony, "tail-repeat": _zh_tail_repeat,
    "block-repeat": _zh_block_repeat, "vocab-collapse": _zh_vocab_collapse,
    "segment-repeat": _zh_segment_repeat, "structure-flood": _zh_structure_flood,
    "word-repeat": _zh_word_repeat,
}


def _zh_evidence(d: Detection) -> str:
    where = _ZH_WHERE.get(d.channel, "你的输出")
    share = ""
    if d.count is not None and d.total is not None:
        share = f"最近 {d.total} 行里有 {d.count} 行"
        if d.ratio is not None:
            share += f"（{_percent(d.ratio)}）"
    wording = _ZH_EVIDENCE.get(d.kind)
    text = wording(d, where, share) if wording is not None else None
    return text if text is not None else f"规则“{d.rule}”（{d.kind}）在{where}中触发"


_ZH_OPEN = {
    "time-anxiety": "如果你在估算还剩多少时间：",
    "context-anxiety": "如果你在估算还剩多少上下文：",
    "loop": "如果你发现自己在原地打转：",
    "other": "如果这不是你想写的内容：",
}

_ZH_ADVICE = {
    "time-anxiety": (
        "没有人给过你剩余时间的预算，所以“时间够不够”在这里没有答案，由此得出的做法（赶工、跳过验证、"
        "把剩下的批量粗略处理）也就不成立。用户明确给出的截止时间、当前时间或运行限制仍然有效，请据此规划；"
        "除此之外，只按当前这一步是否做对、是否验证过来决定下一步。"),
    "context-anxiety": (
        "上下文用量是测量出来的，不需要猜。{measurement}压缩到来时是例行操作：最近的历史和交接笔记都会保留，"
        "所以不必赶工，也不必额外准备，只需让笔记保持最新（目标、已验证的结果、未完成的工作、关键路径）。"
        "保持同样的细致，只按工作是否完成来判断在哪里停下。"),
    "loop": (
        "这样的重复通常说明工作卡住了，而不是任务需要它。请停止重复：用一句话说明你要达成什么、卡在哪里，"
        "然后换一种说法走下一步具体操作。如果这种重复是有意的（表格、同类条目的列表），请忽略这条提示。"),
    "other": "继续之前请确认回复仍在正轨上；如果是，请忽略这条提示。",
}

_ZH_AFTER_ABORT = {
    "loop": (
        "不要再写重复的部分。如果那是有意的（表格、同类条目的列表），请用紧凑的形式给出剩余内容。"
        "如果循环再次出现，先写下你的进度（目标、已完成的部分、下一步），再继续。"),
    "other": "如果那不是你想写的内容，请确认回复仍在正轨上。",
}


def _zh_grade(grade: str | None) -> str:
    return f"（{_ZH_GRADES.get(grade, grade)}）" if grade else ""


def _zh_measurement(m: Measurement | None) -> str:
    if m is not None and m.has_figures:
        assert m.fatigue is not None and m.wakefulness is not None
        when = "本次请求时" if m.age <= 1 else f"{m.age - 1} 次模型调用之前，可能已经过时"
        return (f"最近一次测量（{when}）：疲劳度 {_number(m.fatigue)}%{_zh_grade(m.fatigue_grade)}，"
                f"清醒度 {_number(m.wakefulness)}%{_zh_grade(m.wakefulness_grade)}。")
    if m is not None and "uncalibrated" in (m.fatigue_grade, m.wakefulness_grade):
        return "系统不知道这个模型的上下文窗口有多大，因此没有可报告的数值；请不要自行估算。"
    return ("这次对话还没有报告过测量值：如果你有查看上下文状态的工具（例如 context_status），请调用它；"
            "否则不要自行估算，需要压缩时系统会告诉你。")


def _zh(d: Detection, form: Form, m: Measurement | None, stops: int | None) -> str:
    topic = topic_of(d)
    evidence = _zh_evidence(d)
    advice = _ZH_ADVICE[topic].replace("{measurement}", _zh_measurement(m))
    if form == "remind":
        return f"{_ZH_OPEN[topic]}系统看到{evidence}。{advice}"
    head = (f"你的上一条回复在生成过程中被系统中止了，不是你自己停下的。原因：系统看到{evidence}。"
            "已经写出的部分保留在上文，标记为已中断。")
    after = _ZH_AFTER_ABORT.get(topic, advice)
    if form == "continue":
        return f"{head}{after}现在请从最后一个正确完成的步骤继续任务。"
    why = f"，因为回复已经连续 {stops} 次被中止" if stops is not None and stops > 1 else ""
    return f"{head}系统没有自动继续{why}。{after}然后回应用户最新的消息。"


# --------------------------------------------------------------------------- public

def describe(detection: Detection, lang: str = "en") -> str:
    """One phrase naming the evidence of ``detection`` ("the line "x" 31 times among …")."""
    return _zh_evidence(detection) if check_lang(lang) == "zh" else _en_evidence(detection)


def render(detection: Detection, *, lang: str = "en", form: str = "remind",
           measurement: Measurement | None = None, stops: int | None = None) -> str:
    """The model-visible text of a notice about ``detection``.

    ``form`` is one of :data:`FORMS`. ``measurement`` is the latest status (used by the
    context-anxiety text only). ``stops`` is the number of aborts in a row (``stopped`` form).
    """
    if not isinstance(detection, Detection):
        raise ArgumentTypeError(f"detection must be a Detection, got {type(detection).__name__}")
    checked = check_lang(lang)
    if form not in FORMS:
        raise ArgumentValueError(f"form must be one of 'remind', 'continue', 'stopped', got {form!r}")
    body = (_zh if checked == "zh" else _en)(detection, form, measurement, stops)
    return f"<context-care>\n{body}\n</context-care>"


def message(detection: Detection, *, lang: str = "en", form: str = "remind",
            measurement: Measurement | None = None, stops: int | None = None,
            name: str | None = OWN_NAME) -> dict[str, Any]:
    """The notice as an OpenAI-format user message with a ``metadata`` dict for the host.

    ``name`` is ``"contextcare"``, the mark of every message the library writes
    (:mod:`contextcare.marker`): the planner and the survey recognise the notice by it. Another
    name (or ``None``, no ``name`` field) takes the notice out of their default view; pass them
    an ``is_own_notice`` predicate then.

    ``metadata`` holds ``source`` ("contextcare"), ``form``, the detection (``rule``, ``kind``,
    ``action``, ``channel``, ``offset``), its ``evidence`` and, for context anxiety, the
    ``measurement`` the text quoted (or ``None``).
    """
    text = render(detection, lang=lang, form=form, measurement=measurement, stops=stops)
    msg: dict[str, Any] = {"role": "user", "content": text}
    if name is not None:
        msg["name"] = name
    meta: dict[str, Any] = {
        "source": "contextcare",
        "form": form,
        "rule": detection.rule,
        "kind": detection.kind,
        "action": detection.action,
        "channel": detection.channel,
        "offset": detection.offset,
        "evidence": detection.evidence(),
    }
    if topic_of(detection) == "context-anxiety":
        meta["measurement"] = measurement.to_dict() if measurement is not None else None
    msg["metadata"] = meta
    return msg
