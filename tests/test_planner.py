"""The rest planner: range selection, tool pairing by id, system head, notes and configuration."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextcare.context.planner import (
    NOTICE_NAME,
    CareConfig,
    ConversationError,
    Refusal,
    RestPlan,
    RestRequest,
    checkpoint_message,
    is_checkpoint_message,
    parse_rest_request,
    plan_clear,
    plan_rest,
    validate_note,
)
from contextcare.errors import ArgumentTypeError, ArgumentValueError


def by_key(message: Any) -> int:
    """Test meter: each message declares its own weight."""
    return int(message["tokens"])


def user(ident: Any, tokens: int, **extra: Any) -> dict[str, Any]:
    return {"id": ident, "role": "user", "content": "u", "tokens": tokens, **extra}


def calls(ident: Any, tokens: int, *call_ids: str) -> dict[str, Any]:
    return {"id": ident, "role": "assistant", "content": None, "tokens": tokens,
            "tool_calls": [{"id": c, "type": "function",
                            "function": {"name": "bash", "arguments": "{}"}} for c in call_ids]}


def result(ident: Any, tokens: int, call_id: str) -> dict[str, Any]:
    return {"id": ident, "role": "tool", "tool_call_id": call_id, "content": "r", "tokens": tokens}


def system(ident: Any, tokens: int) -> dict[str, Any]:
    return {"id": ident, "role": "system", "content": "s", "tokens": tokens}


# --------------------------------------------------------------------------- worked examples (§5.3)

def test_tool_batch_moves_the_cut_back() -> None:
    # retain = floor(5000 · 0.16) = 800: the tail reaches 1010 at the second result (index 3),
    # which lies inside the batch opened at index 1, so the cut moves back to index 1.
    messages = [user(7, 2000), calls(2, 1000, "a", "b"), result(3, 1000, "a"),
                result(9, 1000, "b"), user(10, 10)]
    for keep_latest_user in (True, False):
        plan = plan_rest(messages, capacity=5000, min_fresh_tokens=1000, meter=by_key,
                         keep_latest_user=keep_latest_user)
        assert plan == RestPlan(start=7, end=7, fresh_tokens=2000, retained_tokens=3010,
                                freed_tokens=2000, start_index=0, end_index=0)


def test_only_checkpoints_and_notices_are_not_worth_a_rest() -> None:
    # retain = floor(9375 · 0.16) = 1500: the tail is the last user message; the rest is a
    # checkpoint and one of our notices, which hold no fresh material.
    messages = [
        {**checkpoint_message("old"), "id": 1, "tokens": 8000},
        user(3, 8000, name=NOTICE_NAME),
        user(7, 2000),
    ]
    for keep_latest_user in (True, False):
        outcome = plan_rest(messages, capacity=9375, min_fresh_tokens=1000, meter=by_key,
                            keep_latest_user=keep_latest_user)
        assert isinstance(outcome, Refusal)
        assert outcome.code == "not-enough-fresh"
        assert "~0 tokens" in outcome.reason


def test_custom_predicates_decide_what_is_fresh() -> None:
    # retain 160: the last message (200) is the tail; the memo is not fresh.
    messages = [user(1, 3000, kind="memo"), user(2, 3000), user(3, 200)]
    plan = plan_rest(messages, capacity=1000, min_fresh_tokens=1000, meter=by_key,
                     is_checkpoint=lambda m: m.get("kind") == "memo")
    assert isinstance(plan, RestPlan)
    assert (plan.start, plan.end, plan.fresh_tokens, plan.freed_tokens) == (1, 2, 3000, 6000)


def test_ids_default_to_indices() -> None:
    messages = [{"role": "user", "content": "x", "tokens": 2000},
                {"role": "user", "content": "y", "tokens": 20}]  # retain 16
    plan = plan_rest(messages, capacity=100, meter=by_key)
    assert isinstance(plan, RestPlan) and (plan.start, plan.end) == (0, 0)


# ------------------------------------------------------------------ where the original was wrong

def test_tool_result_for_an_unopened_call_is_an_error_that_names_it() -> None:
    # Counting calls would balance this batch (one call, one result); matching ids does not.
    messages = [user(1, 10), calls(2, 10, "a"), result(3, 10, "zz"), user(4, 10)]
    with pytest.raises(ConversationError, match=r"3.*'zz'.*no earlier assistant tool call"):
        plan_rest(messages, capacity=100, meter=by_key)


def test_a_call_answered_twice_is_an_error() -> None:
    # Two calls, two results: counting balances; by id, 'b' is never answered and 'a' twice.
    messages = [user(1, 10), calls(2, 10, "a", "b"), result(3, 10, "a"), result(4, 10, "a")]
    with pytest.raises(ConversationError, match="'a', which was already answered"):
        plan_rest(messages, capacity=100, meter=by_key)


def test_system_head_is_not_fresh_and_never_the_start() -> None:
    # The original (v0.2.1–v0.6) summed fresh tokens over [0, keep), so the 5000-token system
    # prompt made 5600 ≥ 1000 and a rest was planned. Only 600 tokens are fresh.
    messages = [system(0, 5000), user(1, 300), user(2, 300), user(3, 10)]
    outcome = plan_rest(messages, capacity=50, min_fresh_tokens=1000, meter=by_key)
    assert isinstance(outcome, Refusal) and outcome.code == "not-enough-fresh"
    plan = plan_rest(messages, capacity=50, min_fresh_tokens=500, meter=by_key)
    assert isinstance(plan, RestPlan)
    assert (plan.start, plan.end, plan.fresh_tokens) == (1, 2, 600)


def test_leading_system_and_developer_messages_form_the_head() -> None:
    messages = [system(0, 10), {"id": 1, "role": "developer", "content": "d", "tokens": 10},
                user(2, 2000), user(3, 10)]
    plan = plan_rest(messages, capacity=50, min_fresh_tokens=1000, meter=by_key)
    assert isinstance(plan, RestPlan) and plan.start == 2


def test_system_message_later_in_the_list_is_not_fresh() -> None:
    messages = [user(1, 600), system(2, 5000), user(3, 600), user(4, 10)]
    plan = plan_rest(messages, capacity=50, min_fresh_tokens=1000, meter=by_key)
    assert isinstance(plan, RestPlan)
    assert (plan.start, plan.end, plan.fresh_tokens, plan.freed_tokens) == (1, 3, 1200, 6200)


def test_only_the_system_prompt_outside_the_tail() -> None:
    messages = [system(0, 10), user(1, 5000)]
    outcome = plan_rest(messages, capacity=1000, meter=by_key)
    assert isinstance(outcome, Refusal) and outcome.code == "system-only"


# --------------------------------------------------------------------------- edges

def test_small_retain_still_keeps_the_last_message() -> None:
    # floor(5 · 0.16) = 0 tokens to retain: the last message is kept anyway.
    messages = [user(1, 2000), user(2, 1)]
    plan = plan_rest(messages, capacity=5, meter=by_key)
    assert isinstance(plan, RestPlan) and (plan.end, plan.retained_tokens) == (1, 1)


def test_tail_covering_everything() -> None:
    messages = [user(1, 100), user(2, 100)]
    outcome = plan_rest(messages, capacity=100000, meter=by_key)
    assert isinstance(outcome, Refusal) and outcome.code == "tail-covers-all"


def test_no_balanced_cut() -> None:
    # The tail target lands on the result; the only call is open across every earlier cut.
    messages = [calls(1, 5000, "a"), result(2, 5000, "a"), user(3, 10)]
    outcome = plan_rest(messages, capacity=625, meter=by_key)  # retain 100
    assert isinstance(outcome, Refusal) and outcome.code == "no-balanced-cut"


def test_in_flight_call_at_the_end_stays_in_the_tail() -> None:
    messages = [user(1, 3000), user(2, 10), calls(3, 10, "a")]
    plan = plan_rest(messages, capacity=100, meter=by_key)
    assert isinstance(plan, RestPlan) and (plan.start, plan.end) == (1, 1)


def test_empty_conversation() -> None:
    outcome = plan_rest([], capacity=100)
    assert isinstance(outcome, Refusal) and outcome.code == "empty"


def test_heuristic_meter_is_the_default() -> None:
    messages = [{"role": "user", "content": "a" * 8000}, {"role": "user", "content": "now"}]
    plan = plan_rest(messages, capacity=10)
    assert isinstance(plan, RestPlan) and plan.fresh_tokens == 4 + 2000


@pytest.mark.parametrize(("kwargs", "error", "word"), [
    ({"capacity": 0}, ArgumentValueError, "capacity"),
    ({"capacity": 1.5}, ArgumentTypeError, "capacity"),
    ({"capacity": 100, "retain_ratio": 1.0}, ArgumentValueError, "retain_ratio"),
    ({"capacity": 100, "min_fresh_tokens": 0}, ArgumentValueError, "min_fresh_tokens"),
    ({"capacity": 100, "is_checkpoint": "yes"}, ArgumentTypeError, "is_checkpoint"),
])
def test_plan_rest_arguments(kwargs: dict[str, Any], error: type[Exception], word: str) -> None:
    with pytest.raises(error, match=word):
        plan_rest([user(1, 1)], meter=by_key, **kwargs)


def test_malformed_messages() -> None:
    with pytest.raises(ConversationError, match="share the id 1"):
        plan_rest([user(1, 1), user(1, 1)], capacity=100, meter=by_key)
    with pytest.raises(ConversationError, match="share the id 1"):
        plan_rest([user(1, 1), {"role": "user", "tokens": 1}], capacity=100, meter=by_key)
    with pytest.raises(ArgumentTypeError, match=r"messages\[0\]"):
        plan_rest(["hello"], capacity=100)  # type: ignore[list-item]
    with pytest.raises(ArgumentTypeError, match="messages"):
        plan_rest("hello", capacity=100)  # type: ignore[arg-type]
    with pytest.raises(ConversationError, match="role"):
        plan_rest([{"content": "x"}], capacity=100)
    with pytest.raises(ConversationError, match="tool_call_id"):
        plan_rest([{"role": "assistant", "tool_calls": [{"id": "a"}]},
                   {"role": "tool", "content": "x"}], capacity=100)
    with pytest.raises(ConversationError, match="string 'id'"):
        plan_rest([{"role": "assistant", "tool_calls": [{"function": {}}]}], capacity=100)


# --------------------------------------------------------------------------- deep rest

def test_plan_clear_covers_everything_after_the_system_head() -> None:
    messages = [system(0, 10), user(1, 10), calls(2, 10, "a"), result(3, 10, "a"), user(4, 10)]
    plan = plan_clear(messages, meter=by_key)
    assert isinstance(plan, RestPlan)
    assert (plan.start, plan.end, plan.start_index, plan.end_index) == (1, 4, 1, 4)
    assert (plan.freed_tokens, plan.retained_tokens) == (40, 0)


def test_plan_clear_stops_before_an_in_flight_batch() -> None:
    messages = [user(1, 10), user(2, 10), calls(3, 10, "a", "b"), result(4, 10, "a")]
    plan = plan_clear(messages, meter=by_key)
    assert isinstance(plan, RestPlan) and (plan.start, plan.end, plan.retained_tokens) == (1, 2, 20)


@pytest.mark.parametrize(("messages", "code"), [
    ([], "empty"),
    ([system(0, 10)], "system-only"),
    ([system(0, 10), calls(1, 10, "a")], "no-balanced-cut"),
])
def test_plan_clear_refusals(messages: list[dict[str, Any]], code: str) -> None:
    outcome = plan_clear(messages, meter=by_key)
    assert isinstance(outcome, Refusal) and outcome.code == code


# --------------------------------------------------------------------------- notes and requests

def test_validate_note_strips_and_accepts_the_bounds() -> None:
    assert validate_note("  " + "n" * 1000 + "\n") == "n" * 1000
    assert validate_note("n" * 10000) == "n" * 10000
    assert validate_note("abc", min_chars=3, max_chars=4) == "abc"


@pytest.mark.parametrize(("note", "error", "match"), [
    ("", ArgumentValueError, "too short: 0 characters"),
    ("   " + "n" * 999 + "   ", ArgumentValueError, "999 characters after trimming, at least 1000"),
    ("n" * 10001, ArgumentValueError, "too long: 10001 characters"),
    (None, ArgumentTypeError, "note must be a string"),
    ({}, ArgumentTypeError, "note must be a string"),
    (42, ArgumentTypeError, "note must be a string"),
    ([], ArgumentTypeError, "note must be a string"),
])
def test_validate_note_rejects(note: object, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        validate_note(note)


def test_validate_note_bounds_are_checked() -> None:
    with pytest.raises(ArgumentValueError, match="min_chars"):
        validate_note("x", min_chars=10, max_chars=10)
    with pytest.raises(ArgumentValueError, match="min_chars"):
        validate_note("x", min_chars=0)


def test_parse_rest_request() -> None:
    note = "n" * 1000
    assert parse_rest_request({"note": note}) == RestRequest(note)
    assert parse_rest_request(json.dumps({"note": note, "deep": True, "recovery": "r" * 1000})) \
        == RestRequest(note, True, "r" * 1000)
    with pytest.raises(ArgumentValueError, match="accepts only note, deep and recovery; unexpected: x"):
        parse_rest_request({"note": note, "x": 1})
    with pytest.raises(ArgumentValueError, match="deep rest needs a recovery"):
        parse_rest_request({"note": note, "deep": True})
    with pytest.raises(ArgumentValueError, match="recovery is too short"):
        parse_rest_request({"note": note, "recovery": "short"})
    with pytest.raises(ArgumentValueError, match="needs a note"):
        parse_rest_request({})
    with pytest.raises(ArgumentTypeError, match="deep"):
        parse_rest_request({"note": note, "deep": "yes"})
    with pytest.raises(ArgumentValueError, match="not valid JSON"):
        parse_rest_request("{note")
    with pytest.raises(ArgumentTypeError, match="object"):
        parse_rest_request("[1]")


def test_checkpoint_message_is_recognised_as_a_checkpoint() -> None:
    message = checkpoint_message("the notes")
    assert message["role"] == "user"
    assert "the notes" in message["content"]
    assert is_checkpoint_message(message)
    assert not is_checkpoint_message({"role": "user", "content": "the notes"})
    assert not is_checkpoint_message({"role": "assistant", "content": message["content"]})


# --------------------------------------------------------------------------- configuration

def test_config_defaults() -> None:
    config = CareConfig()
    assert (config.budget_ratio, config.retain_ratio, config.min_fresh_tokens,
            config.min_note_chars, config.max_note_chars) == (0.8, 0.16, 1024, 1000, 10000)
    assert CareConfig.from_mapping({"retain_ratio": 0.2}).retain_ratio == 0.2


@pytest.mark.parametrize(("data", "error", "match"), [
    ({"retain_ratio": 0.9}, ArgumentValueError, "retain_ratio .* less than budget_ratio"),
    ({"min_fresh_tokens": 0}, ArgumentValueError, "min_fresh_tokens must be a positive integer"),
    ({"typo": 1}, ArgumentValueError, "unknown config key.*typo"),
    ({"budget_ratio": 1}, ArgumentValueError, "budget_ratio must be strictly between 0 and 1"),
    ({"wakefulness_ratio": 0}, ArgumentValueError, "wakefulness_ratio"),
    ({"fatigue_exponent": -1}, ArgumentValueError, "fatigue_exponent"),
    ({"min_note_chars": 500, "max_note_chars": 500}, ArgumentValueError, "min_note_chars"),
    ({"max_note_chars": True}, ArgumentTypeError, "max_note_chars must be an int"),
    ({"retain_ratio": "0.1"}, ArgumentTypeError, "retain_ratio must be a number"),
])
def test_config_errors(data: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        CareConfig.from_mapping(data)


def test_config_is_frozen() -> None:
    config = CareConfig()
    with pytest.raises(AttributeError):
        config.retain_ratio = 0.5  # type: ignore[misc]


# --------------------------------------------------------------------------- properties

@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A system prompt (or not), then user turns whose assistant steps may call tools."""
    messages: list[dict[str, Any]] = []
    if draw(st.booleans()):
        messages.append(system(len(messages), draw(st.integers(0, 3000))))
    weight = st.integers(0, 3000)
    for _ in range(draw(st.integers(0, 6))):
        messages.append(user(len(messages), draw(weight)))
        for _ in range(draw(st.integers(0, 3))):
            call_ids = [f"c{len(messages)}_{k}" for k in range(draw(st.integers(0, 3)))]
            messages.append(calls(len(messages), draw(weight), *call_ids))
            for call_id in draw(st.permutations(call_ids)):
                messages.append(result(len(messages), draw(weight), call_id))
    return messages


@given(conversations(), st.integers(1, 20000), st.integers(1, 3000))
def test_a_plan_never_splits_a_tool_pair(messages: list[dict[str, Any]], capacity: int,
                                         min_fresh: int) -> None:
    outcome = plan_rest(messages, capacity=capacity, min_fresh_tokens=min_fresh, meter=by_key)
    if isinstance(outcome, Refusal):
        return
    lo, hi = outcome.start_index, outcome.end_index
    assert messages[lo]["role"] != "system" and lo <= hi
    inside = messages[lo:hi + 1]
    opened = {c["id"] for m in inside for c in m.get("tool_calls", [])}
    answered = {m["tool_call_id"] for m in inside if m["role"] == "tool"}
    assert opened == answered  # every call in the range has its results there, and vice versa
    assert outcome.freed_tokens == sum(m["tokens"] for m in inside)
    assert outcome.retained_tokens == sum(m["tokens"] for m in messages[hi + 1:])
    assert outcome.fresh_tokens >= min_fresh
    # The kept tail is at least the target floor(capacity · 0.16): the cut only moves back.
    assert outcome.retained_tokens >= math.floor(capacity * 0.16)
