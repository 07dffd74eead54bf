"""Properties of the planner and the clear-mind survey over generated conversations (issue 19).

Conversations mix every shape the planner meets in practice: a system head (or none), parallel
tool calls, results out of order or far from their calls, calls never answered, in-flight batches,
the library's own messages (guard notices, status notices, reminders, checkpoints, all made by
the real producers), CJK and very long texts, loop-like histories that repeat the *same* message
objects, and ids of every kind (index, int, str). Every property is checked against an
independent brute force, not against the planner's own helpers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from contextcare.context.grades import StatusTracker, measure
from contextcare.guard import Guard
from contextcare.marker import OWN_NAME
from contextcare.context.meters import heuristic_tokens
from contextcare.context.mindmap import ClearError, ClearPlan, ReminderPolicy, survey
from contextcare.context.planner import (
    CHECKPOINT_TAG,
    Refusal,
    RestPlan,
    checkpoint_message,
    message_ids,
    plan_rest,
)

Msg = dict[str, Any]
SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _own_templates() -> list[Msg]:
    guard = Guard()
    guard.reply().feed("I am running out of time, so let me hurry.\n", "reasoning")
    notices = guard.pending_notices(metadata=False)
    status = StatusTracker().update(measure(90_000, 60_000, 128_000))
    reminder = ReminderPolicy(steps=1).check_message(tokens=10, window=None, steps_in_turn=3)
    assert status is not None and reminder is not None and notices
    return [*notices, status.to_message(), reminder,
            checkpoint_message("Goal, facts, open work. " * 30)]


OWN = _own_templates()

TEXT = st.one_of(
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60),
    st.text(st.sampled_from("的一是不了人我在有他这中大来上个国和地到以说时要就出也得里后自之"),
            min_size=1, max_size=400),
    st.builds(lambda unit, n: unit * n, st.sampled_from(["Working on it. ", "log ", "x"]),
              st.integers(1, 3000)),
    st.just(f"quoting {CHECKPOINT_TAG} is not a checkpoint"),
)


@st.composite
def conversations(draw: st.DrawFn) -> list[Msg]:
    id_kind = draw(st.sampled_from(["index", "index", "int", "str"]))
    messages: list[Msg] = []
    for role in draw(st.lists(st.sampled_from(["system", "developer"]), max_size=2)):
        messages.append({"role": role, "content": draw(TEXT)})
    pending: list[str] = []
    plain: list[Msg] = []
    calls = 0
    conversation = ["user", "user", "say", "say", "calls", "result", "result", "own", "repeat"]
    agentic = ["say", "calls", "result", "result", "own"]  # a long turn after the last user
    script = draw(st.lists(st.sampled_from(conversation), max_size=20)) + \
        draw(st.lists(st.sampled_from(agentic), max_size=12))
    for action in script:
        if action in ("user", "say"):
            message = {"role": "user" if action == "user" else "assistant",
                       "content": draw(TEXT)}
            plain.append(message)
            messages.append(message)
        elif action == "calls":
            ids = [f"call_{calls + k}" for k in range(draw(st.integers(1, 3)))]
            calls += len(ids)
            pending += ids
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": c, "type": "function",
                 "function": {"name": draw(st.sampled_from(["bash", "read", "grep"])),
                              "arguments": '{"command": "ls"}'}} for c in ids]})
        elif action == "result" and pending:
            call_id = pending.pop(draw(st.integers(0, len(pending) - 1)))  # any order
            messages.append({"role": "tool", "tool_call_id": call_id, "content": draw(TEXT)})
        elif action == "own":
            messages.append(dict(draw(st.sampled_from(OWN))))
        elif action == "repeat" and plain:
            again = draw(st.sampled_from(plain))
            # A loop repeats the very same object; with explicit ids it must be a copy.
            messages.append(again if id_kind == "index" else dict(again))
    # Whatever is still pending stays unanswered: in flight at the end, or abandoned earlier.
    if id_kind != "index":
        numbers = draw(st.permutations(range(len(messages))))
        for message, number in zip(messages, numbers):
            message["id"] = number * 3 + 1 if id_kind == "int" else f"m{number}"
    return messages


# --------------------------------------------------------------------------- brute force

def head_of(messages: Sequence[Msg]) -> int:
    n = 0
    while n < len(messages) and messages[n]["role"] in ("system", "developer"):
        n += 1
    return n


def balanced(messages: Sequence[Msg]) -> list[bool]:
    """cuts[c]: no call is open across the cut before position c (recomputed from scratch)."""
    out, open_calls = [True], set()
    for message in messages:
        for call in message.get("tool_calls") or ():
            open_calls.add(call["id"])
        if message["role"] == "tool":
            open_calls.discard(message["tool_call_id"])
        out.append(not open_calls)
    return out


def ours(message: Msg) -> bool:
    return message.get("name") == OWN_NAME


def fresh_of(messages: Sequence[Msg], lo: int, hi: int) -> int:
    return sum(heuristic_tokens(m) for m in messages[lo:hi]
               if m["role"] not in ("system", "developer") and not ours(m))


def latest_user(messages: Sequence[Msg]) -> int | None:
    found = [i for i, m in enumerate(messages) if m["role"] == "user" and not ours(m)]
    return found[-1] if found else None


def valid_spans(messages: Sequence[Msg], capacity: int, min_fresh: int,
                keep_latest: bool) -> list[tuple[int, int]]:
    """Every span [lo, hi) that keeps every promise: after the head, balanced at both ends, the
    kept suffix holds the retain target (and the last message), enough fresh material, and
    (if asked) not the latest user message."""
    retain = math.floor(Fraction(capacity) * Fraction(0.16)) if capacity > 2**60 \
        else math.floor(capacity * 0.16)
    cuts = balanced(messages)
    head = head_of(messages)
    tokens = [heuristic_tokens(m) for m in messages]
    suffix = [sum(tokens[i:]) for i in range(len(messages) + 1)]
    latest = latest_user(messages) if keep_latest else None
    spans = []
    for lo in range(head, len(messages)):
        if not cuts[lo]:
            continue
        for hi in range(lo + 1, len(messages)):
            if not cuts[hi] or suffix[hi] < max(retain, 1):
                continue
            if latest is not None and lo <= latest < hi:
                continue
            if fresh_of(messages, lo, hi) >= min_fresh:
                spans.append((lo, hi))
    return spans


# --------------------------------------------------------------------------- planner properties

def sizes(data: st.DataObject, messages: Sequence[Msg]) -> tuple[int, int]:
    """A capacity and a fresh minimum scaled to the conversation, so that plans, refusals of
    every kind and the latest-user alternatives all occur often."""
    total = sum(heuristic_tokens(m) for m in messages)
    capacity = data.draw(st.integers(1, max(1, total * 4)) | st.just(10**400), label="capacity")
    min_fresh = data.draw(st.integers(1, 100) | st.integers(1, max(1, total // 2)),
                          label="min_fresh")
    return capacity, min_fresh


@pytest.mark.parametrize("keep_latest", [True, False])
@SETTINGS
@given(conversations(), st.data())
def test_plan_rest_keeps_every_promise_or_truly_refuses(
        keep_latest: bool, messages: list[Msg], data: st.DataObject) -> None:
    capacity, min_fresh = sizes(data, messages)
    outcome = plan_rest(messages, capacity=capacity, min_fresh_tokens=min_fresh,
                        keep_latest_user=keep_latest)
    spans = valid_spans(messages, capacity, min_fresh, keep_latest)
    event(f"keep_latest={keep_latest}: "
          + (outcome.code if isinstance(outcome, Refusal) else "plan"))
    if isinstance(outcome, Refusal):
        assert spans == [], (outcome, spans)
        return
    assert isinstance(outcome, RestPlan)
    lo, hi = outcome.start_index, outcome.end_index + 1
    assert (lo, hi) in spans  # pairs, head, tail, fresh minimum, latest user: all kept
    ids = message_ids(messages)
    assert (outcome.start, outcome.end) == (ids[lo], ids[hi - 1])
    inside = messages[lo:hi]
    opened = {c["id"] for m in inside for c in m.get("tool_calls") or ()}
    answered = {m["tool_call_id"] for m in inside if m["role"] == "tool"}
    assert opened == answered  # no call is ever split from its result
    assert outcome.fresh_tokens == fresh_of(messages, lo, hi)  # our own messages are never fresh
    assert outcome.freed_tokens == sum(heuristic_tokens(m) for m in inside)
    # No valid span frees more (so the original's range is chosen when it qualifies).
    assert outcome.freed_tokens == max(
        sum(heuristic_tokens(m) for m in messages[a:b]) for a, b in spans)
    if not keep_latest:
        assert lo == head_of(messages)  # the original: the span starts right after the head


@SETTINGS
@given(conversations(), st.data())
def test_keeping_the_latest_user_changes_only_plans_that_contained_it(
        messages: list[Msg], data: st.DataObject) -> None:
    capacity, min_fresh = sizes(data, messages)
    original = plan_rest(messages, capacity=capacity, min_fresh_tokens=min_fresh,
                         keep_latest_user=False)
    kept = plan_rest(messages, capacity=capacity, min_fresh_tokens=min_fresh)
    latest = latest_user(messages)
    contained = isinstance(original, RestPlan) and latest is not None and \
        original.start_index <= latest <= original.end_index
    event("original contains the latest user: " + (
        "no plan" if not isinstance(original, RestPlan) else
        f"{contained}, now " + ("refused" if isinstance(kept, Refusal) else
                                "before it" if kept.start_index == original.start_index
                                else "after it")))
    if isinstance(original, RestPlan) and not contained:
        assert kept == original
    if isinstance(kept, Refusal) and isinstance(original, RestPlan):
        assert kept.code == "latest-user"


# --------------------------------------------------------------------------- survey properties

#: What a checkpoint with the notes "notes" weighs: a span must weigh more to be cleared.
CHECKPOINT_TOKENS = heuristic_tokens(checkpoint_message("notes"))


def boundaries(mind: Any) -> list[tuple[int, int]]:
    """Every (start, end) position pair a clear may use and that outweighs its checkpoint."""
    starts = [n.index for n in mind.nodes if n.valid_start]
    ends = [n.index for n in mind.nodes if n.valid_end]
    return [(i, j) for i in starts for j in ends if i <= j
            and sum(n.tokens for n in mind.nodes[i:j + 1]) > CHECKPOINT_TOKENS]


def try_clear(mind: Any, i: int, j: int) -> ClearPlan:
    return mind.validate_clear(mind.nodes[i].id, mind.nodes[j].id, "notes",
                               min_clear_tokens=1, min_notes_chars=1)


@SETTINGS
@given(conversations(), st.data())
def test_two_clears_from_one_survey_land_where_surveyed_or_are_refused(
        messages: list[Msg], data: st.DataObject) -> None:
    mind = survey(messages)
    latest = latest_user(messages)
    assert mind.latest_user == (None if latest is None else mind.nodes[latest].id)
    assert [n.checkpoint for n in mind.nodes] == [
        ours(m) and m["role"] == "user" and CHECKPOINT_TAG in (m.get("content") or "")
        for m in messages]
    spans = boundaries(mind)
    assume(spans)
    first = data.draw(st.sampled_from(spans), label="first")
    disjoint = [s for s in spans if s[1] < first[0] or first[1] < s[0]]
    second = data.draw(st.sampled_from(disjoint) if disjoint and data.draw(st.booleans())
                       else st.sampled_from(spans), label="second")
    one, two = try_clear(mind, *first), try_clear(mind, *second)
    assert one is not None and two is not None

    after = one.apply(messages)
    assert_replaced(messages, after, [one])
    overlap = not (two.end_index < one.start_index or one.end_index < two.start_index)
    try:
        final = two.apply(after)
    except ClearError as error:
        event(f"second clear refused (by_id={two.by_id}, overlap={overlap})")
        assert error.code == "stale"
        # Refused exactly when it could not land where surveyed: overlapping, or (positions
        # only) after a clear that moved it.
        assert overlap or (not two.by_id and two.start_index > one.end_index)
        return
    event(f"second clear landed (by_id={two.by_id})")
    assert not overlap
    assert two.by_id or two.end_index < one.start_index
    assert_replaced(messages, final, sorted([one, two], key=lambda p: p.start_index))


def assert_replaced(before: Sequence[Msg], after: Sequence[Msg],
                    plans: Sequence[ClearPlan]) -> None:
    """``after`` is ``before`` with each plan's span (in order, disjoint) replaced by one
    checkpoint; every other message is the same object, in order; ids are unique."""
    expected: list[Any] = []
    position = 0
    for plan in plans:
        expected += before[position:plan.start_index]
        expected.append(plan)
        position = plan.end_index + 1
    expected += before[position:]
    assert len(after) == len(expected)
    for got, want in zip(after, expected):
        if isinstance(want, ClearPlan):
            assert ours(got) and got["content"] == want.checkpoint["content"]
        else:
            assert got is want
    ids = message_ids(after)  # raises on a duplicate
    assert len(set(ids)) == len(ids)
