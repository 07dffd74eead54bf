"""Guard and Reply: verdicts per action, partial text, auto-continue and its re-arming, notice
dedupe, the queue of pending notices, and the measurement the context-anxiety notice quotes."""

from __future__ import annotations

import re

import pytest

import contextcare as cc
from contextcare import reference
from contextcare.context.grades import measure
from contextcare.guard import Abort, Guard, Partial, Remind, Reply

STOP = cc.Phrases("stop", ("LOOPING",), channel="text", action="abort")
NUDGE = cc.Phrases("nudge", ("hmm",), channel="text", action="remind")
AUDIT = cc.Phrases("audit", ("secret",), channel="text", action="record")
RULES = [STOP, NUDGE, AUDIT, cc.TimeAnxiety(), cc.ContextAnxiety()]


@pytest.fixture(scope="module", params=["native", "reference"])
def ruleset(request: pytest.FixtureRequest) -> cc.Ruleset:
    """Every test that takes this fixture runs over both engines: a Guard over the reference
    engine records its replies with the pure-Python recorder."""
    if request.param == "reference":
        return reference.Ruleset(RULES)  # type: ignore[return-value]
    return cc.Ruleset(RULES)


def run(reply: Reply, *deltas: tuple[str, str]) -> list[object]:
    """Feed (channel, delta) pairs; return the non-None verdicts."""
    out: list[object] = []
    for channel, delta in deltas:
        verdict = reply.feed(delta, channel)
        if verdict is not None:
            out.append(verdict)
    return out


def aborted_reply(guard: Guard) -> Abort:
    reply = guard.reply()
    verdicts = run(reply, ("text", "ok "), ("text", "LOOP"), ("text", "ING!"))
    assert len(verdicts) == 1 and isinstance(verdicts[0], Abort)
    return verdicts[0]


def clean_reply(guard: Guard) -> None:
    reply = guard.reply()
    assert run(reply, ("text", "all good")) == []
    assert reply.finish() is None


def test_clean_reply_keeps_text_per_channel(ruleset: cc.Ruleset) -> None:
    guard = Guard(ruleset)
    reply = guard.reply()
    assert run(reply, ("reasoning", "think"), ("reasoning", "ing"), ("text", "ans"),
               ("text", "wer")) == []
    assert reply.finish() is None
    assert reply.partial == Partial("answer", "thinking", interrupted=False)
    assert reply.done and not reply.aborted
    assert guard.pending_notices() == []
    assert reply.finish() is None  # idempotent
    with pytest.raises(RuntimeError, match="ended"):
        reply.feed("more")


def test_abort_keeps_everything_received_and_ends_the_reply(ruleset: cc.Ruleset) -> None:
    guard = Guard(ruleset)
    reply = guard.reply()
    assert run(reply, ("reasoning", "plan"), ("text", "ok "), ("text", "LOOP")) == []
    verdict = reply.feed("ING tail", "text")
    assert isinstance(verdict, Abort)
    assert verdict.detection.rule == "stop"
    # Nothing is dropped: the delta that triggered the abort is part of the partial.
    assert verdict.partial == Partial("ok LOOPING tail", "plan", interrupted=True)
    assert reply.aborted and reply.done and reply.partial == verdict.partial
    assert reply.verdicts == [verdict]
    with pytest.raises(RuntimeError, match="ended"):
        reply.feed("x")
    assert reply.finish() is None
    msg = verdict.partial.to_message()
    assert msg["content"] == "ok LOOPING tail" and msg["metadata"]["interrupted"] is True
    assert verdict.partial.to_message(reasoning_field="reasoning_content")[
        "reasoning_content"] == "plan"
    assert verdict.partial.to_message(metadata=False) == {"role": "assistant",
                                                          "content": "ok LOOPING tail"}


def test_abort_notice_is_the_queued_auto_continue_message(ruleset: cc.Ruleset) -> None:
    guard = Guard(ruleset)
    verdict = aborted_reply(guard)
    assert verdict.notice is not None
    assert verdict.notice["role"] == "user"
    assert "stopped by the system" in verdict.notice["content"]
    assert '"LOOPING"' in verdict.notice["content"]
    meta = verdict.notice["metadata"]
    assert (meta["rule"], meta["kind"], meta["form"]) == ("stop", "phrase", "continue")
    assert meta["evidence"] == {"phrase": "LOOPING"}
    assert guard.pending_notices() == [verdict.notice]
    assert guard.pending_notices() == []  # taken


def test_auto_continue_stops_after_two_aborts_in_a_row(ruleset: cc.Ruleset) -> None:
    guard = Guard(ruleset)
    first = aborted_reply(guard)
    assert first.notice is not None and guard.aborts_in_a_row == 1
    guard.pending_notices()
    second = aborted_reply(guard)
    assert second.notice is None and guard.aborts_in_a_row == 2
    # The model still learns why, with the next request the host makes.
    (explained,) = guard.pending_notices()
    assert explained["metadata"]["form"] == "stopped"
    assert "did not resume it automatically" in explained["content"]
    assert "2 times in a row" in explained["content"]
    third = aborted_reply(guard)
    assert third.notice is None
    assert guard.pending_notices() == []  # the same explanation is not repeated


@pytest.mark.parametrize("rearm", ["clean reply", "human turn"])
def test_auto_continue_rearms(ruleset: cc.Ruleset, rearm: str) -> None:
    guard = Guard(ruleset)
    aborted_reply(guard)
    assert aborted_reply(guard).notice is None
    assert not guard.auto_continue_armed
    if rearm == "clean reply":
        clean_reply(guard)
    else:
        guard.human_turn()
    assert guard.aborts_in_a_row == 0 and guard.auto_continue_armed
    assert aborted_reply(guard).notice is not None
    assert aborted_reply(guard).notice is None


def test_reply_with_reminders_only_is_clean(ruleset: cc.Ruleset) -> None:
    guard = Guard(ruleset)
    aborted_reply(guard)
    reply = guard.reply()
    assert isinstance(reply.feed("hmm", "text"), Remind)
    assert reply.finish() is None
    assert guard.aborts_in_a_row == 0


def test_an_unfinished_reply_does_not_rearm(ruleset: cc.Ruleset) -> None:
    guard = Guard(ruleset)
    aborted_reply(guard)
    run(guard.reply(), ("text", "abandoned midway"))  # e.g. the connection failed
    assert aborted_reply(guard).notice is None


@pytest.mark.parametrize("limit", [1, 3])
def test_max_consecutive_aborts(ruleset: cc.Ruleset, limit: int) -> None:
    guard = Guard(ruleset, max_consecutive_aborts=limit)
    notices = [aborted_reply(guard).notice is not None for _ in range(limit + 1)]
    assert notices == [True] * (limit - 1) + [False, False]


def test_auto_continue_off_still_explains(ruleset: cc.Ruleset) -> None:
    guard = Guard(ruleset, auto_continue=False)
    assert aborted_reply(guard).notice is None
    (explained,) = guard.pending_notices()
    assert explained["metadata"]["form"] == "stopped"
    assert "stopped by the system" in explained["content"]
    assert "in a row" not in explained["content"]


def test_remind_queues_once_per_rule_until_a_human_speaks(ruleset: cc.Ruleset) -> None:
    guard = Guard(ruleset)
    reply = guard.reply()
    verdict = reply.feed("hmm, well", "text")
    assert isinstance(verdict, Remind) and verdict.notice is not None
    assert reply.feed(" and on", "text") is None  # generation continues
    assert reply.finish() is None
    assert guard.pending_notices() == [verdict.notice]

    again = guard.reply().feed("hmm", "text")
    assert isinstance(again, Remind) and again.notice is None
    assert guard.pending_notices() == []

    guard.human_turn()
    after = guard.reply().feed("hmm", "text")
    assert isinstance(after, Remind) and after.notice is not None
    assert guard.pending_notices() == [after.notice]


def test_record_gives_no_verdict(ruleset: cc.Ruleset) -> None:
    guard = Guard(ruleset)
    reply = guard.reply()
    assert reply.feed("the secret is out", "text") is None
    assert [d.rule for d in reply.detections] == ["audit"]
    assert reply.verdicts == [] and guard.pending_notices() == []


def test_abort_outranks_remind_in_the_same_delta(ruleset: cc.Ruleset) -> None:
    guard = Guard(ruleset)
    verdict = guard.reply().feed("hmm LOOPING", "text")
    assert isinstance(verdict, Abort)
    assert [d.rule for d in verdict.others] == ["nudge"]
    forms = [(m["metadata"]["rule"], m["metadata"]["form"]) for m in guard.pending_notices()]
    assert forms == [("nudge", "remind"), ("stop", "continue")]


def test_end_of_stream_checks_may_abort() -> None:
    # A windowed rule that is only checked at finish(): the loop is caught at the end.
    rule = cc.LineRepeat("loop", min_lines=4, min_count=4, min_ratio=0.5, min_run=0,
                         every_bytes=1 << 20)
    guard = Guard(cc.Ruleset([rule]))
    reply = guard.reply()
    assert run(reply, *[("text", "same line\n")] * 5) == []
    verdict = reply.finish()
    assert isinstance(verdict, Abort)
    assert verdict.detection.line == "same line" and verdict.detection.count == 5
    assert verdict.partial.interrupted and verdict.partial.text == "same line\n" * 5
    assert guard.aborts_in_a_row == 1


def test_line_repeat_abort_notice_names_line_and_count() -> None:
    # Reference §6 item 4: the original's abort text lost the line and the count.
    guard = Guard(cc.Ruleset([cc.LineRepeat("line-repeat")]))
    reply = guard.reply()
    verdict = None
    for _ in range(40):
        verdict = reply.feed("I will check the file.\n", "text")
        if verdict is not None:
            break
    assert isinstance(verdict, Abort) and verdict.notice is not None
    d = verdict.detection
    assert d.count is not None and d.total is not None
    assert (f'the line "I will check the file." {d.count} times among the last {d.total} lines'
            in verdict.notice["content"])


def test_tail_repeat_abort_notice_names_the_unit() -> None:
    guard = Guard(cc.Ruleset([cc.TailRepeat("tail-repeat")]), lang="zh")
    reply = guard.reply()
    verdict = None
    for _ in range(200):
        verdict = reply.feed("the ", "text")
        if verdict is not None:
            break
    assert isinstance(verdict, Abort) and verdict.notice is not None
    d = verdict.detection
    assert d.unit is not None and d.unit.strip() == "the" and d.repeats is not None
    assert f"“{d.unit}”首尾相接地重复了 {d.repeats} 次" in verdict.notice["content"]


class TestContextAnxietyNotice:
    def notice(self, guard: Guard) -> str:
        verdict = guard.reply().feed("嗯，上下文快满了，得快点。\n", "reasoning")
        assert isinstance(verdict, Remind) and verdict.notice is not None
        return str(verdict.notice["content"])

    def test_without_status_says_how_to_measure(self, ruleset: cc.Ruleset) -> None:
        content = self.notice(Guard(ruleset))
        assert "context_status" in content and not re.search(r"\d", content)

    def test_quotes_the_observed_status(self, ruleset: cc.Ruleset) -> None:
        guard = Guard(ruleset, lang="zh")
        status = measure(60_000, 20_000, 128_000)
        guard.observe_status(status)
        content = self.notice(guard)
        assert f"疲劳度 {status.fatigue:.1f}%" in content
        assert f"清醒度 {status.wakefulness:.1f}%" in content
        assert "本次请求" in content

    def test_stale_status_is_marked(self, ruleset: cc.Ruleset) -> None:
        guard = Guard(ruleset)
        guard.observe_status(measure(60_000, 20_000, 128_000))
        clean_reply(guard)
        clean_reply(guard)
        assert "2 model calls ago" in self.notice(guard)

    def test_metadata_carries_the_figures(self, ruleset: cc.Ruleset) -> None:
        guard = Guard(ruleset)
        status = measure(60_000, 20_000, 128_000)
        guard.observe_status(status)
        self.notice(guard)
        (msg,) = guard.pending_notices()
        assert msg["metadata"]["measurement"]["fatigue"] == status.fatigue

    def test_status_must_have_the_figures(self, ruleset: cc.Ruleset) -> None:
        with pytest.raises(cc.ArgumentTypeError, match="status"):
            Guard(ruleset).observe_status({"fatigue": 1.0})


def test_time_anxiety_notice_in_chinese(ruleset: cc.Ruleset) -> None:
    guard = Guard(ruleset, lang="zh")
    verdict = guard.reply().feed("时间不够了，先批量处理。\n", "reasoning")
    assert isinstance(verdict, Remind) and verdict.notice is not None
    assert "如果你在估算还剩多少时间" in verdict.notice["content"]
    assert "“时间不够”" in verdict.notice["content"]


def test_pending_notices_without_metadata_and_with_name(ruleset: cc.Ruleset) -> None:
    guard = Guard(ruleset, name="contextcare")
    guard.reply().feed("hmm", "text")
    (msg,) = guard.pending_notices(metadata=False)
    assert set(msg) == {"role", "content", "name"} and msg["name"] == "contextcare"


def test_default_ruleset_is_compiled_once_and_shared() -> None:
    assert Guard().ruleset is Guard(lang="zh").ruleset


def test_rules_may_be_a_list_of_rules() -> None:
    guard = Guard([STOP])
    assert isinstance(guard.reply().feed("LOOPING"), Abort)


def test_one_ruleset_serves_many_guards(ruleset: cc.Ruleset) -> None:
    a, b = Guard(ruleset), Guard(ruleset)
    ra, rb = a.reply(), b.reply()
    ra.feed("LOOP")
    assert rb.feed("ING") is None  # separate watchers: no match across streams
    assert isinstance(ra.feed("ING"), Abort)
    assert a.aborts_in_a_row == 1 and b.aborts_in_a_row == 0


def test_bad_arguments_name_themselves(ruleset: cc.Ruleset) -> None:
    with pytest.raises(cc.ArgumentValueError, match="lang"):
        Guard(ruleset, lang="de")
    with pytest.raises(cc.ArgumentValueError, match="max_consecutive_aborts"):
        Guard(ruleset, max_consecutive_aborts=0)
    with pytest.raises(cc.ArgumentTypeError, match="max_consecutive_aborts"):
        Guard(ruleset, max_consecutive_aborts=True)
    with pytest.raises(cc.ArgumentTypeError, match="auto_continue"):
        Guard(ruleset, auto_continue=1)  # type: ignore[arg-type]
    with pytest.raises(cc.ArgumentTypeError, match="rules"):
        Guard("LOOPING")
    with pytest.raises(TypeError):
        Guard(ruleset).reply().feed(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="channel"):
        Guard(ruleset).reply().feed("x", "thinking")


# --------------------------------------------------------------------------- engine surfaces

def _public(obj: object) -> set[str]:
    return {name for name in dir(obj) if not name.startswith("_")}


def test_native_and_reference_watchers_have_the_same_public_surface() -> None:
    import inspect

    native = cc.Ruleset(RULES).watcher()
    pure = reference.Ruleset(RULES).watcher()
    assert _public(native) == _public(pure)
    for name in _public(native):
        a, b = getattr(native, name), getattr(pure, name)
        if callable(a):  # parameter names, kinds and defaults (not annotations)
            shape = [[(p.name, p.kind, p.default) for p in inspect.signature(f).parameters.values()]
                     for f in (a, b)]
            assert shape[0] == shape[1], name
    # the recorder hooks of the actions layer are not on the engine's stream any more
    for hook in ("_track", "_feed_tracked", "_kept_text", "_noop"):
        assert not hasattr(native, hook) and not hasattr(pure, hook)


def test_native_and_reference_recorders_have_the_same_surface() -> None:
    native = cc._engine.Recorder(cc.Ruleset(RULES).watcher(), tuple)
    pure = reference.Recorder(reference.Ruleset(RULES).watcher(), tuple)
    assert _public(native) == _public(pure) == {"feed", "close", "text"}


@pytest.mark.parametrize("engine", ["native", "reference"])
def test_recorder_keeps_text_calls_back_and_closes(engine: str) -> None:
    mod = cc._engine if engine == "native" else reference
    ruleset = (cc.Ruleset if engine == "native" else reference.Ruleset)([STOP])
    seen: list[tuple[object, ...]] = []
    rec = mod.Recorder(ruleset.watcher(), lambda found: seen.append(found) or "fired")
    assert rec.feed("a LOOP", "text") is None
    assert rec.feed("é", "reasoning") is None
    assert rec.feed("ING 😀", "text") == "fired"
    assert [d.rule for d in seen[0]] == ["stop"]
    assert (rec.text("text"), rec.text("reasoning")) == ("a LOOPING 😀", "é")
    rec.close("closed now")
    with pytest.raises(RuntimeError, match="closed now"):
        rec.feed("x", "text")
    assert rec.text("text") == "a LOOPING 😀"
    with pytest.raises(ValueError, match="channel"):
        rec.text("combined")
    with pytest.raises(TypeError, match="on_fire"):
        mod.Recorder(ruleset.watcher(), 3)


def test_reply_binds_feed_once() -> None:
    for ruleset in (cc.Ruleset(RULES), reference.Ruleset(RULES)):
        reply = Guard(ruleset).reply()
        feed = reply.feed
        assert reply.feed("LOOPING", "text") is not None
        assert reply.feed is feed  # not swapped when the reply ended
        with pytest.raises(RuntimeError, match="ended"):
            feed("more", "text")
