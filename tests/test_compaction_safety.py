"""Compaction that never lands on the wrong messages (issue 19): one regression test per defect.

A host that compacts on the planner's or the survey's word replaces messages for good, so each of
these is a data-loss risk. The property suite over generated conversations is in
``test_compaction_properties.py``; the bad-input rows are in ``test_bad_input.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from contextcare.context.grades import StatusTracker, measure
from contextcare.guard import Guard
from contextcare.marker import OWN_NAME, is_own_message
from contextcare.context.meters import heuristic_tokens
from contextcare.context.mindmap import ClearError, ReminderPolicy, survey
from contextcare.context.planner import (
    CHECKPOINT_TAG,
    ConversationError,
    Refusal,
    RestPlan,
    checkpoint_message,
    message_ids,
    plan_clear,
    plan_rest,
)

Msg = dict[str, Any]
LOOP = [{"role": "user", "content": "continue"},
        {"role": "assistant", "content": "Working on it. " * 40}] * 4
NOTES = "Goal: finish the task. Done: steps one and two. Next: step three."


def by_key(message: Any) -> int:
    return int(message["tokens"])


def msg(role: str, tokens: int, ident: Any = None, **extra: Any) -> Msg:
    out: Msg = {"role": role, "content": role[0], "tokens": tokens, **extra}
    if ident is not None:
        out["id"] = ident
    return out


def clear(result: Any, start: Any, end: Any) -> Any:
    return result.validate_clear(start, end, NOTES, min_clear_tokens=1, min_notes_chars=10)


# --------------------------------------------------------------------------- 1. stale clears

def test_second_clear_on_index_ids_is_refused_not_misplaced() -> None:
    """The issue's seed: the second clear used to replace original messages 6–7."""
    conv = list(LOOP)
    mind = survey(conv)
    first, second = clear(mind, 0, 2), clear(mind, 4, 5)
    after_first = first.apply(conv)
    with pytest.raises(ClearError) as info:
        second.apply(after_first)
    assert info.value.code == "stale"
    assert "messages[0]" in str(info.value) and "'id' keys" in str(info.value)


def test_overlapping_second_clear_is_refused() -> None:
    conv = list(LOOP)
    mind = survey(conv)
    first, overlapping = clear(mind, 0, 2), clear(mind, 2, 5)
    with pytest.raises(ClearError, match="not the message surveyed") as info:
        overlapping.apply(first.apply(conv))
    assert info.value.code == "stale"
    ided = [{**m, "id": f"m{i}"} for i, m in enumerate(LOOP)]
    mind = survey(ided)
    first, overlapping = clear(mind, "m0", "m2"), clear(mind, "m1", "m5")
    with pytest.raises(ClearError, match="no longer in the conversation"):
        overlapping.apply(first.apply(ided, checkpoint_id="cp"))
    tail_overlap = clear(mind, "m2", "m5")  # starts on the first clear's last message
    with pytest.raises(ClearError) as info:
        tail_overlap.apply(first.apply(ided, checkpoint_id="cp"))
    assert info.value.code == "stale"


def test_in_place_edit_of_the_surveyed_list_is_detected_by_identity() -> None:
    """The same list object, rewritten in place with equal-looking messages, is not the list
    the survey saw: positions 4–5 hold the same *values* but not the surveyed messages."""
    conv = list(LOOP)
    mind = survey(conv)
    first, second = clear(mind, 0, 2), clear(mind, 4, 5)
    conv[:] = first.apply(conv)
    with pytest.raises(ClearError) as info:
        second.apply(conv)
    assert info.value.code == "stale"


def test_a_later_clear_applied_first_lets_the_earlier_one_land_exactly() -> None:
    conv = list(LOOP)
    mind = survey(conv)
    first, second = clear(mind, 0, 2), clear(mind, 4, 5)
    both = first.apply(second.apply(conv))
    assert [m.get("name") for m in both] == [OWN_NAME, None, OWN_NAME, None, None]
    assert both[1] is conv[3] and both[3] is conv[6] and both[4] is conv[7]


def test_clears_with_real_ids_re_base_by_id() -> None:
    ided = [{**m, "id": 100 + i} for i, m in enumerate(LOOP)]
    mind = survey(ided)
    first, second = clear(mind, 100, 102), clear(mind, 104, 105)
    for after in (second.apply(first.apply(ided)), first.apply(second.apply(ided))):
        assert [m["id"] for m in after if not is_own_message(m)] == [103, 106, 107]
        assert after[1] is ided[3] and after[3] is ided[6] and after[4] is ided[7]
        assert len(set(message_ids(after))) == len(after) == 5


# --------------------------------------------------------------------------- 2. own messages

def own_messages() -> list[Msg]:
    guard = Guard()
    guard.reply().feed("I am running out of time, so let me hurry.\n", "reasoning")
    (notice,) = guard.pending_notices(metadata=False)
    status = StatusTracker().update(measure(90_000, 60_000, 128_000))
    assert status is not None
    reminder = ReminderPolicy(steps=1).check_message(tokens=10, window=None, steps_in_turn=3)
    assert reminder is not None
    return [notice, status.to_message(), reminder, checkpoint_message(NOTES)]


def test_everything_the_library_writes_carries_the_mark() -> None:
    for message in own_messages():
        assert message["name"] == OWN_NAME and is_own_message(message)
        assert message["role"] == "user"


def test_the_second_worked_example_with_real_notices_refuses() -> None:
    """Checkpoint + our notices + a short tail: nothing fresh to compact, in both modes."""
    messages = [*own_messages(), {"role": "user", "content": "ok"}]
    for outcome in (plan_rest(messages, capacity=10, min_fresh_tokens=50),
                    plan_rest(messages, capacity=10, min_fresh_tokens=50, keep_latest_user=False)):
        assert isinstance(outcome, Refusal) and outcome.code == "not-enough-fresh"
        assert "~0 tokens" in outcome.reason


def test_own_messages_do_not_open_turns_and_are_not_the_latest_user() -> None:
    messages = [{"role": "user", "content": "the task"}, *own_messages()]
    mind = survey(messages)
    assert [n.turn for n in mind.nodes] == [1] * len(messages)
    assert mind.latest_user == 0
    assert [n.checkpoint for n in mind.nodes] == [False, False, False, False, True]


def test_a_user_quoting_the_checkpoint_tag_is_the_user() -> None:
    quoted = {"role": "user", "content": f"what does {CHECKPOINT_TAG} in your output mean? "
              + "details " * 400}
    messages = [quoted, {"role": "assistant", "content": "It marks a summary."},
                {"role": "user", "content": "thanks"}]
    plan = plan_rest(messages, capacity=10, min_fresh_tokens=50)
    assert isinstance(plan, RestPlan) and plan.fresh_tokens == sum(
        heuristic_tokens(m) for m in messages[:2])
    assert not survey(messages).nodes[0].checkpoint


# --------------------------------------------------------------------------- 3. malformed input

@pytest.mark.parametrize("role", ["System", "USER", "human", "ai", ""])
@pytest.mark.parametrize("entry", ["plan_rest", "plan_clear", "survey"])
def test_unknown_roles_are_refused_by_every_entry_point(role: str, entry: str) -> None:
    messages = [{"role": role, "content": "You are a careful agent."},
                {"role": "user", "content": "x" * 4000}, {"role": "user", "content": "go"}]
    call = {"plan_rest": lambda: plan_rest(messages, capacity=100),
            "plan_clear": lambda: plan_clear(messages), "survey": lambda: survey(messages)}[entry]
    with pytest.raises(ConversationError, match=r"messages\[0\]\.role"):
        call()


@pytest.mark.parametrize("content", [5, True, {"text": "x"}, ["plain string part"],
                                     [{"type": "text", "text": 5}], [{"type": None}]])
def test_non_string_content_is_refused_not_priced_as_empty(content: Any) -> None:
    messages = [{"role": "user", "content": "a" * 400}, {"role": "user", "content": content}]
    for call in (lambda: plan_rest(messages, capacity=100), lambda: plan_clear(messages),
                 lambda: survey(messages)):
        with pytest.raises(TypeError, match=r"messages\[1\]\.content"):
            call()


def test_valid_content_parts_are_accepted() -> None:
    parts = [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "u"}}]
    assert survey([{"role": "user", "content": parts}, {"role": "assistant"}]).nodes[0].tokens > 0


def test_absurd_capacity_is_an_answer_not_an_overflow() -> None:
    outcome = plan_rest([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
                        capacity=10**400)
    assert isinstance(outcome, Refusal) and outcome.code == "tail-covers-all"


def test_reminder_refuses_a_negative_window() -> None:
    with pytest.raises(ValueError, match="window must be >= 0"):
        ReminderPolicy(steps=1).check(tokens=10, window=-5, steps_in_turn=3)


# --------------------------------------------------------------------------- 4. stray quotes

@pytest.mark.parametrize(("start", "end"), [("'first", 'latest"'), ('"first', "latest'"),
                                            (" 'FIRST ", ' LATEST" ')])
def test_sentinels_with_one_stray_quote(start: str, end: str) -> None:
    mind = survey(list(LOOP))
    plan = clear(mind, start, end)
    assert (plan.start, plan.end) == (0, 7)


# --------------------------------------------------------------------------- 5. unanswered calls

def call_msg(ident: Any, tokens: int, call_id: str) -> Msg:
    return {"id": ident, "role": "assistant", "content": None, "tokens": tokens,
            "tool_calls": [{"id": call_id, "type": "function",
                            "function": {"name": "bash", "arguments": "{}"}}]}


@pytest.mark.parametrize("head", [False, True])
def test_an_unanswered_call_is_named_with_the_repair(head: bool) -> None:
    messages = [msg("user", 3000, "u1"), call_msg("a1", 10, "call_lost"),
                msg("user", 3000, "u2"), msg("assistant", 3000, "a2"), msg("user", 10, "u3")]
    if head:
        messages = [msg("system", 10, "s"), *messages[1:]]
    outcome = plan_rest(messages, capacity=100, min_fresh_tokens=100, meter=by_key,
                        keep_latest_user=False)
    if not head:
        assert isinstance(outcome, RestPlan) and (outcome.start, outcome.end) == ("u1", "u1")
        messages = messages[1:]
        outcome = plan_rest(messages, capacity=100, min_fresh_tokens=100, meter=by_key)
    assert isinstance(outcome, Refusal) and outcome.code == "unanswered-call"
    assert "'call_lost'" in outcome.reason and "message 'a1'" in outcome.reason
    assert "add a tool message" in outcome.reason
    assert "reach into the recent history" not in outcome.reason


def test_deep_rest_names_an_unanswered_call() -> None:
    messages = [msg("system", 10, "s"), call_msg("a1", 10, "lost"), msg("user", 10, "u")]
    outcome = plan_clear(messages, meter=by_key)
    assert isinstance(outcome, Refusal) and outcome.code == "unanswered-call"
    assert "'lost'" in outcome.reason


def test_the_survey_names_an_unanswered_call() -> None:
    messages = [{"role": "user", "content": "x" * 2000}, call_msg("a1", 10, "lost"),
                {"role": "user", "content": "y" * 2000}]
    with pytest.raises(ClearError, match="'lost' in message a1 was never answered") as info:
        survey(messages).validate_clear("first", 2, NOTES, min_clear_tokens=1)
    assert info.value.code == "split-end"


def test_an_in_flight_batch_at_the_end_is_not_unanswered() -> None:
    messages = [msg("user", 3000, "u1"), msg("user", 10, "u2"), call_msg("a1", 10, "running")]
    plan = plan_rest(messages, capacity=100, meter=by_key, keep_latest_user=False)
    assert isinstance(plan, RestPlan)


# --------------------------------------------------------------------------- 6. checkpoint ids

def test_default_checkpoint_id_never_duplicates_an_id() -> None:
    messages = [{"id": 7, "role": "user", "content": "task " * 300},
                {"id": 8, "role": "assistant", "content": "work " * 300},
                {"id": 0, "role": "user", "content": "more"},
                {"id": 1, "role": "assistant", "content": "done"}]
    plan = survey(messages).validate_clear(7, 8, NOTES, min_clear_tokens=1, min_notes_chars=10)
    after = plan.apply(messages)
    ids = message_ids(after)
    assert len(set(ids)) == len(ids) and after[0]["id"] == 9
    survey(after)  # the next survey used to raise: the checkpoint took id 0 by position
    strings = [{**m, "id": f"m{m['id']}"} for m in messages]
    plan = survey(strings).validate_clear("m7", "m8", NOTES, min_clear_tokens=1,
                                          min_notes_chars=10)
    assert plan.apply(strings)[0]["id"] == "checkpoint-1"


def test_index_ids_stay_index_ids() -> None:
    plan = clear(survey(list(LOOP)), 0, 2)
    assert "id" not in plan.apply(list(LOOP))[0]


# --------------------------------------------------------------------------- 7. latest user

def agentic_turn() -> list[Msg]:
    """An older exchange, then the latest user message and a long run of assistant work."""
    return [msg("system", 50, "s"), msg("user", 2000, "u1"), msg("assistant", 2000, "a1"),
            msg("user", 100, "task"), msg("assistant", 3000, "w1"),
            msg("assistant", 3000, "w2"), msg("assistant", 200, "w3")]


def test_latest_user_message_is_kept_and_the_larger_side_is_compacted() -> None:
    messages = agentic_turn()
    original = plan_rest(messages, capacity=1000, min_fresh_tokens=1000, meter=by_key,
                         keep_latest_user=False)
    assert isinstance(original, RestPlan) and (original.start, original.end) == ("u1", "w2")
    plan = plan_rest(messages, capacity=1000, min_fresh_tokens=1000, meter=by_key)
    assert plan == RestPlan(start="w1", end="w2", fresh_tokens=6000, retained_tokens=200,
                            freed_tokens=6000, start_index=4, end_index=5)
    messages[4]["tokens"] = messages[5]["tokens"] = 900  # now the part before it frees more
    plan = plan_rest(messages, capacity=1000, min_fresh_tokens=1000, meter=by_key)
    assert isinstance(plan, RestPlan) and (plan.start, plan.end, plan.freed_tokens) == \
        ("u1", "a1", 4000)


def test_latest_user_refusal_says_why() -> None:
    messages = [msg("user", 600, "u1"), msg("user", 100, "task"), msg("assistant", 600, "w1"),
                msg("assistant", 10, "w2")]
    assert isinstance(plan_rest(messages, capacity=10, min_fresh_tokens=1000, meter=by_key,
                                keep_latest_user=False), RestPlan)
    outcome = plan_rest(messages, capacity=10, min_fresh_tokens=1000, meter=by_key)
    assert isinstance(outcome, Refusal) and outcome.code == "latest-user"
    assert "latest user message (id 'task')" in outcome.reason
    assert "~600 tokens before it and ~600 tokens after it" in outcome.reason


def test_plan_is_the_original_when_it_leaves_the_latest_user_alone() -> None:
    messages = [*agentic_turn()[:3], msg("user", 10, "task")]
    one = plan_rest(messages, capacity=100, min_fresh_tokens=100, meter=by_key)
    two = plan_rest(messages, capacity=100, min_fresh_tokens=100, meter=by_key,
                    keep_latest_user=False)
    assert one == two and isinstance(one, RestPlan) and (one.start, one.end) == ("u1", "u1")


def test_notices_and_checkpoints_are_not_the_latest_user_message() -> None:
    messages = [msg("user", 2000, "task"), msg("assistant", 2000, "w1"),
                {**checkpoint_message(NOTES), "id": "cp", "tokens": 10},
                msg("user", 10, "n", name=OWN_NAME)]
    plan = plan_rest(messages, capacity=10, min_fresh_tokens=100, meter=by_key)
    assert isinstance(plan, RestPlan) and plan.start == "w1"


def test_the_survey_marks_the_latest_user_message() -> None:
    messages = [{"role": "user", "content": "first"}, {"role": "assistant", "content": "a"},
                {"role": "user", "content": "the task"}, {"role": "assistant", "content": "b"},
                {**checkpoint_message(NOTES)}]
    mind = survey(messages)
    assert [n.latest_user for n in mind.nodes] == [False, False, True, False, False]
    text = mind.render()
    assert "★ marks the latest user message (id 2)" in text
    assert '   2 ◂ ★user' in text
