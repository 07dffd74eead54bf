"""The anxiety vocabularies: the data files load, hold what the spec requires, and leave out what
the agency rule excludes; innocent reasoning produces no anxiety detection."""

from __future__ import annotations

from importlib import resources
from types import ModuleType

import pytest

import contextcare as cc
from contextcare.vocab import LANGS, TOPICS, load, phrases_for

from conftest import stream

LISTS = [(topic, lang) for topic in TOPICS for lang in LANGS]

REQUIRED = {
    ("time", "zh"): ["时间不够"],
    ("context", "zh"): ["上下文不够", "上下文快满"],
    ("time", "en"): ["running out of time"],
    ("context", "en"): ["running out of context"],
}

#: Generic urgency and deliberate tool use: the agency rule keeps these out of every list, and no
#: listed phrase may occur inside them either.
EXCLUDED = [
    "as soon as possible", "asap", "quickly", "hurry", "尽快", "赶紧", "马上",
    "time to compact", "let me compact the context", "call context_rest", "compact the context",
    "该压缩了", "压缩一下上下文", "主动压缩", "调用 context_rest",
]

#: Ordinary reasoning that shares words with the lists (timeouts, timestamps, runtimes, register
#: context, file compression, time limits of a task) and must not fire.
INNOCENT = [
    "The request hit a timeout, so I will add a retry with backoff.",
    "We don't have timestamps in this log, so I will order events by line number.",
    "There are not enough timestamps to compute a rate.",
    "The layout of timeline widgets is handled in view.py.",
    "The runtime is running out of memory on large inputs; stream the file instead.",
    "The measured response time is shorter than the SLA.",
    "The interrupt handler must save context registers before switching tasks.",
    "There is not enough context in the question to tell which file is meant.",
    "The LSM tree merges segments before compaction kicks in.",
    "The time cost of this algorithm is O(n log n).",
    "The progress bar shows the remaining time.",
    "Please fix this as soon as possible and ship it quickly.",
    "The context window is 128k tokens; this prompt uses 3k.",
    "It is time to compact: I will write my notes, then call context_rest.",
    "Let me compact the context now and continue with step 3.",
    "请尽快修复这个问题，赶紧提交。",
    "这一步花的时间不多，可以先做。",
    "日志里没有时间戳，按行号排序。",
    "题目对运行时间有限制，需要 O(n log n) 的算法。",
    "接口超时了，加上重试。",
    "进度条显示剩余时间。",
    "这个算法的时间复杂度是 O(n)。",
    "在文件被压缩之前先校验哈希。",
    "如果上下文太长就截断最早的消息。",
    "该压缩了，我先记下笔记，然后调用 context_rest 整理上下文。",
]

#: Anxious reasoning, one per list at least, with the phrase we expect to be reported.
ANXIOUS = [
    ("time", "Hmm, I'm Running Out Of Time, so I'll skip the tests.", "running out of time"),
    ("time", "In the interest of time I will only check the first file.", "in the interest of time"),
    ("time", "时间不够了，先把剩下的文件批量处理掉。", "时间不够"),
    ("time", "来不及逐个验证，直接提交。", "来不及"),
    ("context", "I'm running out of context, so I'll summarize briefly.", "running out of context"),
    ("context", "Before the context gets compacted I should finish quickly.",
     "before the context gets compacted"),
    ("context", "上下文快满了，得赶在压缩前写完。", "上下文快满"),
    ("context", "趁还没压缩，把所有结果一次性输出。", "趁还没压缩"),
]


def _detect(engine: ModuleType, text: str) -> list[cc.Detection]:
    """Detections of the two anxiety rules on ``text`` as reasoning, fed in one piece and in
    1-4 character deltas; both feedings must agree."""
    ruleset = engine.Ruleset([cc.TimeAnxiety(), cc.ContextAnxiety()])
    watcher = ruleset.watcher()
    whole = list(watcher.feed(text, "reasoning")) + list(watcher.finish())
    assert stream(ruleset, text, "reasoning", seed=len(text)) == whole
    return whole


@pytest.mark.parametrize(("topic", "lang"), LISTS)
def test_list_loads_without_empty_lines_duplicates_or_padding(topic: str, lang: str) -> None:
    phrases = load(topic, lang)
    assert 15 <= len(phrases) <= 40
    assert all(p and p == p.strip() and not p.startswith("#") for p in phrases)
    folded = [p.lower() for p in phrases]
    assert len(set(folded)) == len(folded), "duplicate phrase (ASCII case folded)"


@pytest.mark.parametrize(("topic", "lang"), LISTS)
def test_no_phrase_is_redundant_inside_another(topic: str, lang: str) -> None:
    # A phrase that contains another listed phrase can never be the one reported: dead data.
    folded = [p.lower() for p in load(topic, lang)]
    for a in folded:
        for b in folded:
            assert a == b or a not in b, f"{b!r} contains {a!r}"


@pytest.mark.parametrize(("topic", "lang"), LISTS)
def test_files_document_rule_and_provenance(topic: str, lang: str) -> None:
    text = resources.files("contextcare.vocab").joinpath(f"{topic}_{lang}.txt").read_text("utf-8")
    comments = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    assert "agency" in comments
    assert "Provenance" in comments
    assert "[added]" in comments


def test_chinese_lists_use_only_cjk_phrases() -> None:
    # The English lists are case-folded; a Latin letter in a Chinese phrase would be the only
    # case-sensitive-looking part and is more likely a typo.
    for topic in TOPICS:
        for phrase in load(topic, "zh"):
            assert not any("a" <= c.lower() <= "z" for c in phrase), phrase


@pytest.mark.parametrize(("topic", "lang"), LISTS)
def test_required_phrases_present(topic: str, lang: str) -> None:
    for phrase in REQUIRED[(topic, lang)]:
        assert phrase in load(topic, lang)


def test_excluded_phrases_absent_and_not_matched() -> None:
    every = [p.lower() for topic, lang in LISTS for p in load(topic, lang)]
    for excluded in EXCLUDED:
        assert excluded.lower() not in every
        assert not any(p in excluded.lower() for p in every), excluded


def test_phrases_for_joins_languages_in_order() -> None:
    both = phrases_for("time", ("zh", "en"))
    assert both == load("time", "zh") + load("time", "en")
    assert phrases_for("context", ("en",)) == load("context", "en")
    assert phrases_for("time", ("en", "zh"))[0] == load("time", "en")[0]


def test_unknown_topic_or_lang_names_the_argument() -> None:
    with pytest.raises(cc.ArgumentValueError, match="topic"):
        phrases_for("money", ("en",))
    with pytest.raises(cc.ArgumentValueError, match="lang"):
        phrases_for("time", ("fr",))
    with pytest.raises(cc.ArgumentTypeError, match="topic"):
        load(3, "en")


def test_rules_take_their_phrases_from_the_lists() -> None:
    assert cc.TimeAnxiety(lang=("en",)).phrase_list() == load("time", "en")
    assert cc.ContextAnxiety(lang=("zh",)).phrase_list() == load("context", "zh")
    extra = cc.TimeAnxiety(lang=("zh",), extra=("截止时间快到",)).phrase_list()
    assert extra == load("time", "zh") + ("截止时间快到",)


@pytest.mark.parametrize("sentence", INNOCENT)
def test_innocent_reasoning_does_not_fire(engine: ModuleType, sentence: str) -> None:
    assert _detect(engine, sentence) == []


@pytest.mark.parametrize(("topic", "sentence", "phrase"), ANXIOUS)
def test_anxious_reasoning_fires(engine: ModuleType, topic: str, sentence: str,
                                 phrase: str) -> None:
    found = _detect(engine, sentence)
    assert [(d.kind, d.phrase) for d in found] == [(f"{topic}-anxiety", phrase)]
    assert found[0].action == "remind"


@pytest.mark.parametrize(("topic", "lang"), LISTS)
def test_every_listed_phrase_fires_in_a_sentence(engine: ModuleType, topic: str,
                                                 lang: str) -> None:
    head, tail = ("我想：", "。然后继续。") if lang == "zh" else ("I think ", ", then go on.")
    for phrase in load(topic, lang):
        found = _detect(engine, head + phrase.upper() + tail)
        assert [(d.kind, d.phrase) for d in found] == [(f"{topic}-anxiety", phrase)], phrase


def test_anxiety_rules_watch_reasoning_only(engine: ModuleType) -> None:
    watcher = engine.Ruleset([cc.TimeAnxiety(), cc.ContextAnxiety()]).watcher()
    assert list(watcher.feed("I'm running out of time and context is almost full.")) == []
    assert list(watcher.finish()) == []
