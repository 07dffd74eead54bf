"""Notice texts: every kind in both languages and all forms, naming its evidence, opening with a
condition when it reminds, never quoting a number the detection or the measurement did not give."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from contextcare import ArgumentTypeError, ArgumentValueError, Detection
from contextcare.context.grades import measure
from contextcare.notices import FORMS, KINDS, LANGS, Measurement, describe, message, render

#: One detection per kind, with evidence values chosen by hand (numbers that cannot be confused
#: with one another, so the text must have taken each from its field).
SAMPLES = {
    "phrase": Detection("no-todo", "phrase", "remind", "text", 41, phrase="TODO later"),
    "marker": Detection("end", "marker", "abort", "combined", 17, phrase="<<END>>"),
    "time-anxiety": Detection("time-anxiety", "time-anxiety", "remind", "reasoning", 88,
                              phrase="running out of time"),
    "context-anxiety": Detection("context-anxiety", "context-anxiety", "remind", "reasoning", 53,
                                 phrase="上下文快满"),
    "line-repeat": Detection("line-repeat", "line-repeat", "abort", "combined", 900,
                             line="I will check the file again.", count=31, total=79,
                             ratio=31 / 79, run=14),
    "line-cycle": Detection("line-cycle", "line-cycle", "remind", "combined", 700,
                            cycle=("（输出。）", "**做。**", "go."), count=63, total=77,
                            ratio=63 / 77),
    "filler-lines": Detection("filler-lines", "filler-lines", "remind", "reasoning", 300,
                              count=23, total=46, ratio=0.5),
    "prefix-monotony": Detection("prefix-monotony", "prefix-monotony", "remind", "combined", 600,
                                 prefix="嗯，", count=19, total=26, ratio=19 / 26),
    "tail-repeat": Detection("tail-repeat", "tail-repeat", "abort", "text", 1200,
                             unit="the \n", period=5, repeats=57),
    "block-repeat": Detection("block-repeat", "block-repeat", "abort", "combined", 2400,
                              line="class MyClass2:", period=7, repeats=4, total=118),
    "vocab-collapse": Detection("vocab-collapse", "vocab-collapse", "abort", "text", 900,
                                line="items its itemsThe items", count=6, total=80),
    "structure-flood": Detection("structure-flood", "structure-flood", "remind", "combined",
                                 936, line="#", total=600),
    "segment-repeat": Detection("near-lines", "segment-repeat", "abort", "combined", 700,
                                line="- Item 14: Pia had the value 77", count=11, total=12),
    "word-repeat": Detection("word-repeat", "word-repeat", "abort", "combined", 510,
                             line="Omar says the callee door is locked.", period=7, repeats=3,
                             total=37),
}

#: The numbers each sample's text may show: its evidence values and the rounded percentage.
ALLOWED_NUMBERS = {
    "phrase": set(), "marker": set(), "time-anxiety": set(), "context-anxiety": set(),
    "line-repeat": {"31", "79", "39", "14"},
    "line-cycle": {"63", "77", "82"},
    "filler-lines": {"23", "46", "50"},
    "prefix-monotony": {"19", "26", "73"},
    "tail-repeat": {"57"},
    "block-repeat": {"7", "4", "118", "2"},
    "vocab-collapse": {"6", "80"},
    "segment-repeat": {"11", "12", "14", "77"},
    "structure-flood": {"600"},
    "word-repeat": {"7", "3", "37"},
}

EVIDENCE_TEXT = {
    "phrase": ["TODO later"], "marker": ["<<END>>"], "time-anxiety": ["running out of time"],
    "context-anxiety": ["上下文快满"], "line-repeat": ["I will check the file again."],
    "line-cycle": ["（输出。）", "**做。**", "go."], "filler-lines": [],
    "prefix-monotony": ["嗯，"], "tail-repeat": ["the \\n"],
    "block-repeat": ["class MyClass2:"], "vocab-collapse": ["items its itemsThe items"],
    "segment-repeat": ["- Item 14: Pia had the value 77"],
    "structure-flood": ["600"],
    "word-repeat": ["Omar says the callee door is locked."],
}

STOPPED_BY_SYSTEM = {"en": "stopped by the system", "zh": "被系统中止"}
NOT_BY_MODEL = {"en": "you did not stop it yourself", "zh": "不是你自己停下的"}


def _numbers(text: str) -> set[str]:
    return set(re.findall(r"\d+(?:\.\d+)?", text))


def test_samples_cover_every_kind() -> None:
    assert set(SAMPLES) == set(KINDS)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("form", FORMS)
def test_every_kind_names_its_evidence(kind: str, lang: str, form: str) -> None:
    d = SAMPLES[kind]
    text = render(d, lang=lang, form=form)
    assert text.startswith("<context-care>\n") and text.endswith("\n</context-care>")
    for piece in EVIDENCE_TEXT[kind]:
        assert piece in text
    assert _numbers(text) <= ALLOWED_NUMBERS[kind], "a number the evidence did not give"
    for value in (d.count, d.total, d.run, d.repeats):
        if value is not None:
            assert str(value) in text
    assert "None" not in text


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("lang", LANGS)
def test_reminders_open_with_a_condition(kind: str, lang: str) -> None:
    body = render(SAMPLES[kind], lang=lang, form="remind").split("\n", 1)[1]
    assert body.startswith("If " if lang == "en" else "如果")
    assert STOPPED_BY_SYSTEM[lang] not in body


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("form", ["continue", "stopped"])
def test_abort_notices_say_the_system_stopped_the_reply(kind: str, lang: str, form: str) -> None:
    text = render(SAMPLES[kind], lang=lang, form=form)
    assert STOPPED_BY_SYSTEM[lang] in text
    assert NOT_BY_MODEL[lang] in text


def test_forms_differ_in_what_happens_next() -> None:
    d = SAMPLES["line-repeat"]
    assert "continue the task" in render(d, form="continue")
    stopped = render(d, form="stopped", stops=2)
    assert "did not resume it automatically" in stopped and "2 times in a row" in stopped
    assert "continue the task" not in stopped
    zh = render(d, lang="zh", form="stopped", stops=2)
    assert "没有自动继续" in zh and "连续 2 次" in zh


def test_time_anxiety_wording_matches_its_condition() -> None:
    en = render(SAMPLES["time-anxiety"])
    assert "If you are weighing how much time is left" in en
    assert 'the phrase "running out of time" in your reasoning' in en
    zh = render(SAMPLES["time-anxiety"], lang="zh")
    assert zh.split("\n")[1].startswith("如果你在估算还剩多少时间")


def test_line_repeat_abort_keeps_its_evidence() -> None:
    # The original's abort text read a field streaming hits lacked and fell back to a generic
    # sentence (reference §6 item 4); ours quotes the line, the count, the window and the run.
    text = render(SAMPLES["line-repeat"], form="continue")
    assert ('the line "I will check the file again." 31 times among the last 79 lines of your'
            " reply (39%), 14 times in a row") in text


def test_missing_evidence_is_left_out_not_invented() -> None:
    bare = replace(SAMPLES["line-repeat"], count=None, total=None, ratio=None, run=None)
    for lang in LANGS:
        text = render(bare, lang=lang, form="continue")
        assert "I will check the file again." in text
        assert _numbers(text) == set()


def test_unknown_kind_gets_a_generic_sentence() -> None:
    d = Detection("custom", "shouting", "remind", "text", 3)
    assert 'the rule "custom" (shouting)' in render(d)
    assert "规则“custom”（shouting）" in render(d, lang="zh")


def test_channel_names_where_it_was_seen() -> None:
    d = SAMPLES["phrase"]
    assert "in your answer" in render(d)
    assert "in your reasoning" in render(replace(d, channel="reasoning"))
    assert "你的思考" in render(replace(d, channel="reasoning"), lang="zh")


class TestContextAnxietyMeasurement:
    d = SAMPLES["context-anxiety"]

    def test_quotes_the_latest_figures_and_grades(self) -> None:
        status = measure(40_000, 30_000, 100_000)  # a real grades.Status
        assert status.fatigue is not None and status.wakefulness is not None
        m = Measurement(status, age=1)
        en = render(self.d, measurement=m)
        assert f"fatigue {status.fatigue:.1f}% ({status.fatigue_grade})" in en
        assert f"wakefulness {status.wakefulness:.1f}% ({status.wakefulness_grade})" in en
        assert "for this request" in en
        zh = render(self.d, lang="zh", measurement=m)
        assert f"疲劳度 {status.fatigue:.1f}%" in zh and f"清醒度 {status.wakefulness:.1f}%" in zh

    def test_stale_figures_say_how_old_they_are(self) -> None:
        class Old:
            fatigue = 18.5
            wakefulness = 67.3

        en = render(self.d, measurement=Measurement(Old(), age=4))
        assert "fatigue 18.5%, wakefulness 67.3%" in en
        assert "3 model calls ago, so it may be out of date" in en
        assert "3 次模型调用之前" in render(self.d, lang="zh", measurement=Measurement(Old(), 4))

    @pytest.mark.parametrize("values", [(None, None), (None, 3.0), (float("nan"), 20.0),
                                        (12.0, float("inf"))])
    def test_without_both_figures_says_how_to_measure(
            self, values: tuple[float | None, float | None]) -> None:
        class Partial:
            fatigue, wakefulness = values

        for m in (None, Measurement(Partial(), age=1)):
            for lang in LANGS:
                text = render(self.d, lang=lang, measurement=m)
                assert "context_status" in text
                assert _numbers(text) == set()

    def test_uncalibrated_says_the_window_is_unknown(self) -> None:
        status = measure(40_000, 30_000, None)
        text = render(self.d, measurement=Measurement(status, age=1))
        assert "not known" in text and _numbers(text) == set()


def test_message_shape_and_metadata() -> None:
    d = SAMPLES["line-cycle"]
    msg = message(d, lang="en", form="remind", name="contextcare")
    assert msg["role"] == "user" and msg["name"] == "contextcare"
    assert msg["content"] == render(d, lang="en", form="remind")
    meta = msg["metadata"]
    assert (meta["rule"], meta["kind"], meta["form"]) == ("line-cycle", "line-cycle", "remind")
    assert meta["evidence"] == {"cycle": ["（输出。）", "**做。**", "go."], "count": 63,
                                "total": 77, "ratio": 63 / 77}
    assert message(d)["name"] == "contextcare"  # the library's mark, by default
    assert "name" not in message(d, name=None)
    ctx = message(SAMPLES["context-anxiety"])["metadata"]
    assert ctx["measurement"] is None


def test_describe_is_the_evidence_phrase() -> None:
    assert describe(SAMPLES["tail-repeat"]) == (
        'the text "the \\n" repeated 57 times back to back at the end of your answer')


def test_bad_arguments_name_themselves() -> None:
    with pytest.raises(ArgumentValueError, match="lang"):
        render(SAMPLES["phrase"], lang="fr")
    with pytest.raises(ArgumentValueError, match="form"):
        render(SAMPLES["phrase"], form="shout")
    with pytest.raises(ArgumentTypeError, match="detection"):
        render({"rule": "x"})  # type: ignore[arg-type]
