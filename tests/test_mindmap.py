"""The clear-mind survey, its rendering, clear validation and the proactive reminder.

Scenarios follow the clear-mind reference §11 wherever they apply outside its host; the heuristic
meter (:mod:`contextcare.context.meters`) prices messages.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from contextcare.context.meters import heuristic_tokens
from contextcare.context.mindmap import (
    RENDER_NODE_LIMIT,
    ClearError,
    ClearPlan,
    ReminderPolicy,
    call_hint,
    format_tokens,
    preview_line,
    survey,
)
from contextcare.context.planner import (
    CHECKPOINT_TAG,
    ConversationError,
    is_checkpoint_message,
)
from contextcare.errors import ArgumentTypeError, ArgumentValueError

LOREM = "Quiet rivers carry small stones downstream while the evening light fades slowly. "

Msg = dict[str, Any]


def user(text: str, ident: Any = None) -> Msg:
    message: Msg = {"role": "user", "content": text}
    if ident is not None:
        message["id"] = ident
    return message


def say(text: str, ident: Any = None) -> Msg:
    message: Msg = {"role": "assistant", "content": text}
    if ident is not None:
        message["id"] = ident
    return message


def call(call_id: str, name: str, args: Any = None, *, raw: str | None = None) -> Msg:
    arguments = raw if raw is not None else json.dumps(args if args is not None else {})
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def ask(*calls: Msg, ident: Any = None) -> Msg:
    message: Msg = {"role": "assistant", "content": None, "tool_calls": list(calls)}
    if ident is not None:
        message["id"] = ident
    return message


def answer(call_id: str, text: str, ident: Any = None) -> Msg:
    message: Msg = {"role": "tool", "tool_call_id": call_id, "content": text}
    if ident is not None:
        message["id"] = ident
    return message


def two_turns() -> list[Msg]:
    return [
        user("fix the build error in packages/api"),
        ask(call("c1", "bash", {"command": "npm run build"})),
        answer("c1", "npm error code ELIFECYCLE\nnpm error path /repo"),
        say("The build fails in the api package."),
        user("now run the tests"),
        ask(call("c2", "bash", {"command": "npm test"})),
        answer("c2", "npm error Test failed"),
        say("Two tests fail."),
    ]


def commit_fixture(ids: bool = False) -> list[Msg]:
    """Turn 1: explore with a bash call; turn 2: a read call. Seven messages."""
    messages = [
        user("explore approach A " + LOREM * 20),
        ask(call("b1", "bash", {"command": "make approach-a"})),
        answer("b1", LOREM * 60),
        say("approach A failed because of permissions"),
        user("try reading the config " + LOREM),
        ask(call("r1", "read", {"path": "config.toml"})),
        answer("r1", LOREM * 30),
    ]
    if ids:
        for number, message in enumerate(messages, start=10):
            message["id"] = number
    return messages


NOTES = "Goal: make the build pass. Approach A failed (permissions); do not retry. " * 4


# --------------------------------------------------------------------------- scan

def test_survey_of_two_closed_turns() -> None:
    result = survey(two_turns())
    assert len(result.nodes) == 8
    assert [n.kind for n in result.nodes] == [
        "user", "assistant", "tool", "assistant", "user", "assistant", "tool", "assistant"]
    flags = [(n.valid_start, n.valid_end) for n in result.nodes]
    T, F = True, False
    assert flags == [(T, T), (T, F), (F, T), (T, T), (T, T), (T, F), (F, T), (T, T)]
    assert result.nodes[2].tool_name == "bash"
    assert result.nodes[2].preview.startswith("bash: npm error")
    assert result.latest_end == 7
    assert [r.turn for r in result.turns] == [1, 2]
    assert result.turns[0].first_user_preview == "fix the build error in packages/api"
    assert (result.turns[0].start, result.turns[0].end, result.turns[0].nodes) == (0, 3, 4)
    assert result.pressure_tokens == result.surface_tokens > 0
    assert result.surface_tokens == sum(heuristic_tokens(m) for m in two_turns())


def test_open_call_is_not_an_end() -> None:
    messages = [user("a"), say("b"), user("c"), ask(call("x", "bash", {"command": "ls"}))]
    result = survey(messages)
    last = result.nodes[-1]
    assert (last.kind, last.valid_start, last.valid_end) == ("assistant", True, False)
    assert result.latest_end == 2


def test_checkpoint_after_a_clear() -> None:
    messages = commit_fixture()
    plan = survey(messages).validate_clear("first", "latest", NOTES, min_clear_tokens=1)
    after = plan.apply(messages)
    result = survey(after)
    assert len(result.nodes) == 1
    node = result.nodes[0]
    assert (node.checkpoint, node.kind) == (True, "user")
    assert "◆user" in result.render()
    assert result.turns == ()  # a checkpoint does not open a turn


def test_derived_turns_skip_checkpoints_and_notices() -> None:
    messages = [user("first"), say("a"), {"role": "user", "name": "contextcare", "content": "n"},
                say("b"), user("second")]
    assert [n.turn for n in survey(messages).nodes] == [1, 1, 1, 1, 2]
    assert [n.turn for n in survey([say("x"), user("y")]).nodes] == [None, 1]


def test_render_small_map() -> None:
    messages = [user("hello there"), ask(call("c", "bash", {"command": "true"})),
                answer("c", "ok"), say("done"), user("thanks")]
    text = survey(messages).render()
    assert text.startswith("Context map: 5 messages, ~")
    assert "not numbers on a scale" in text
    assert "▸" in text and "◂" in text
    assert "turn 1 · ids 0-3 · 4 messages" in text
    assert '"bash: ok"' in text
    assert "Latest clearable end: id 4." in text
    assert "— clearing guide —" in text
    zh = survey(messages).render(lang="zh")
    assert "— 清理指引 —" in zh and "放弃的路径" in zh and "多段清理" in zh
    assert "— clearing guide —" not in survey(messages).render(guide=False)


def test_node_line_layout() -> None:
    # "x" · 4784 costs 4 + 4784/4 = 1200 tokens.
    messages = [user("help me debug the plugin build error", 1), say("x" * 4784, 2)]
    lines = survey(messages).render().splitlines()
    # " " + ▸ + " " + pad4(id) + " " + ◂ + " " + ◆ + kind padded to 9 + tokens padded to 6
    # ★ (in the ◆ column) marks the latest user message.
    assert ' ▸    1 ◂ ★user         13 "help me debug the plugin build error"' in lines
    assert any(line.startswith(" ▸    2 ◂  assistant 1.20k ") for line in lines)


def test_nothing_to_clear() -> None:
    result = survey([ask(call("x", "bash", {"command": "ls"}))])
    assert result.latest_end is None
    text = result.render()
    assert "nothing to clear" in text
    assert "clearing guide" not in text


def test_aggregation_past_the_node_limit() -> None:
    messages = []
    for turn in range(60):
        messages += [user(f"question {turn}"), say(f"thinking {turn}"), say(f"answer {turn}")]
    text = survey(messages).render()
    assert "(40 older messages are summarized one line per turn below" in text
    node_lines = [line for line in text.splitlines()
                  if re.match(r"^ [▸ ] +\d+ [◂ ] [◆★ ]", line)]
    assert len(node_lines) == RENDER_NODE_LIMIT == 140
    # Nodes 0–39 are aggregated: turns 1–14 get one line each (turn 14 straddles the limit),
    # with the first valid start and the last valid end of the run.
    # Each turn: 7 ("question 0") + 7 ("thinking 0") + 6 ("answer 0") = 20 tokens.
    assert "turn 1 · ▸    0 … ◂    2      20  [3 messages] — question 0" in text
    assert "turn 14 · ▸   39 … ◂   41" in text
    assert "turn 15 · ids 42-44 · 3 messages" in text
    assert "turn 60 · ids 177-179" in text
    assert "turn 14 · ids" not in text
    first_detailed = node_lines[0]
    assert re.match(r"^ ▸   40 ◂ ", first_detailed)


def test_pre_turn_nodes_after_a_turn() -> None:
    messages = [user("a"), say("b"), say("c")]
    text = survey(messages, turns=[1, 1, None]).render()
    assert "(messages before any turn)" in text


def test_preview_has_no_newline_and_is_short() -> None:
    result = survey([user("first line of the request\n\nsecond line that goes on and on and on")])
    preview = result.nodes[0].preview
    assert "\n" not in preview and len(preview) == 48 and preview.endswith("…")
    assert preview.startswith("first line of the request second line")


def test_preview_line_rules() -> None:
    assert preview_line("  a\t\r\n b  ") == "a  b"  # break runs → one space; spaces kept
    assert preview_line("x" * 48) == "x" * 48
    assert preview_line("x" * 49) == "x" * 47 + "…"
    assert preview_line("😀" * 48) == "😀" * 48  # code points, not UTF-16 units
    assert preview_line("\n\n") == ""


def test_call_hints() -> None:
    messages = [
        user("configure"),
        ask(call("a", "bash", {"command": "pytest -k config", "description": "Run the config test suite"}),
            call("b", "edit", {"file_path": "src/config/loadSettings.ts", "old": "x"}),
            call("c", "grep", {"pattern": "loadSettings", "path": "src"})),
        answer("a", "ok"), answer("b", "ok"), answer("c", "ok"),
        ask(call("d", "web_search", {"queries": ["fix vite build", "vite config"]}),
            call("e", "bash", {"command": "npm test --filter config\nsecond line"})),
        answer("d", "ok"), answer("e", "ok"),
        ask(call("f", "mcp__degoog__search", {"limit": 3, "q": "vite plugin crash"}),
            call("g", "bash", raw="{broken"), call("h", "bash", {})),
        answer("f", "ok"), answer("g", "ok"), answer("h", "ok"),
    ]
    nodes = survey(messages).nodes
    assert nodes[1].preview == ("→ bash · Run the config test suite, edit · "
                                "src/config/loadSettings.ts, grep · loadSettings")
    assert "pytest" not in nodes[1].preview
    assert nodes[5].preview == "→ web_search · fix vite build, vite config, bash · npm test --filter config"
    assert nodes[8].preview == "→ mcp__degoog__search · vite plugin crash, bash, bash"


def test_long_call_previews_are_cut_to_98_characters() -> None:
    message = ask(call("a", "web_search", {"query": "why does the vite build fail on windows only"}),
                  call("b", "web_search", {"query": "vite build fails with esbuild error on ci"}))
    preview = survey([message, answer("a", "x"), answer("b", "y")]).nodes[0].preview
    assert len(preview) == 98 and preview.endswith("…")
    assert preview.startswith("→ web_search · why does the vite build fail")


def test_more_hints() -> None:
    assert call_hint(call("a", "pwsh", {"description": "List the build outputs", "command": "ls"})) \
        == "pwsh · List the build outputs"
    assert call_hint(call("a", "web_search", {"queries": [], "query": "single fallback query"})) \
        == "web_search · single fallback query"
    assert call_hint(call("a", "read", {"path": "/etc/hosts"})) == "read · /etc/hosts"
    assert call_hint(call("a", "bash", [1, 2])) == "bash"
    assert call_hint({"function": None}) == "tool"


def test_tool_result_without_a_known_name_and_empty_assistant() -> None:
    messages = [ask({"id": "z", "function": {"arguments": "{}"}}), answer("z", ""),
                {"role": "assistant", "content": ""}]
    nodes = survey(messages).nodes
    assert nodes[1].preview == "tool"
    assert nodes[2].preview == "(empty)"


def test_system_head_is_never_a_boundary() -> None:
    messages = [{"role": "system", "content": "You are a helpful agent."}, user("hi"), say("hello")]
    result = survey(messages)
    head = result.nodes[0]
    assert (head.kind, head.valid_start, head.valid_end, head.turn) == ("system", False, False, None)
    assert result.nodes[1].valid_start


@pytest.mark.parametrize(("tokens", "text"), [
    (0, "0"), (340, "340"), (999, "999"), (1000, "1.00k"), (1200, "1.20k"),
    (1125, "1.13k"),   # half up; Python's format() would give 1.12k
    (9995, "10.00k"), (10000, "10.0k"), (10250, "10.3k"), (15300, "15.3k"), (123456, "123.5k"),
])
def test_format_tokens(tokens: int, text: str) -> None:
    assert format_tokens(tokens) == text


def test_survey_arguments() -> None:
    with pytest.raises(ArgumentValueError, match="turns has 1 entries for 2 messages"):
        survey([user("a"), user("b")], turns=[1])
    with pytest.raises(ArgumentTypeError, match=r"turns\[0\]"):
        survey([user("a")], turns=["1"])  # type: ignore[list-item]
    with pytest.raises(ArgumentValueError, match="pressure_tokens"):
        survey([user("a")], pressure_tokens=-1)
    assert survey([user("a")], pressure_tokens=5000).pressure_tokens == 5000
    with pytest.raises(ConversationError, match="'nope'"):
        survey([user("a"), answer("nope", "x")])
    with pytest.raises(ArgumentValueError, match="lang"):
        survey([user("a")]).render(lang="fr")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- validate_clear

def test_clear_everything() -> None:
    messages = commit_fixture()
    result = survey(messages)
    plan = result.validate_clear("first", "latest", NOTES, min_clear_tokens=1)
    assert isinstance(plan, ClearPlan)
    assert (plan.start, plan.end, plan.ids) == (0, 6, tuple(range(7)))
    assert plan.cleared_tokens == result.surface_tokens
    assert plan.checkpoint_tokens < plan.cleared_tokens
    assert plan.notes == NOTES.strip()
    after = plan.apply(messages)
    assert len(after) == 1
    content = after[0]["content"]
    assert CHECKPOINT_TAG in content and NOTES.strip() in content
    assert is_checkpoint_message(after[0])
    assert messages == commit_fixture()  # the input list is not modified


def test_numerically_inverted_range_in_order_by_position() -> None:
    messages = commit_fixture(ids=True)  # ids 10..16
    first = survey(messages).validate_clear(11, 14, NOTES, min_clear_tokens=1)
    after = first.apply(messages, checkpoint_id=99)
    assert [m["id"] for m in after] == [10, 99, 15, 16]
    second = survey(after).validate_clear(99, 16, NOTES, min_clear_tokens=1)
    final = second.apply(after, checkpoint_id=100)
    assert [m["id"] for m in final] == [10, 100]


def test_two_disjoint_segments_from_one_survey() -> None:
    messages = commit_fixture(ids=True)
    result = survey(messages)
    one = result.validate_clear(10, 12, NOTES, min_clear_tokens=1)
    two = result.validate_clear(14, 16, NOTES, min_clear_tokens=1)
    after = two.apply(one.apply(messages, checkpoint_id="cp1"), checkpoint_id="cp2")
    assert [m["id"] for m in after] == ["cp1", 13, "cp2"]
    # An overlapping segment from the same survey is stale once the first was applied.
    overlap = result.validate_clear(11, 12, "n" * 200, min_clear_tokens=1)
    with pytest.raises(ClearError, match="no longer in the conversation") as info:
        overlap.apply(after)
    assert info.value.code == "stale"


def test_index_ids_go_stale_after_a_clear() -> None:
    messages = commit_fixture()
    result = survey(messages)
    one = result.validate_clear(0, 3, NOTES, min_clear_tokens=1)
    two = result.validate_clear(4, 6, NOTES, min_clear_tokens=1)
    with pytest.raises(ClearError) as info:
        two.apply(one.apply(messages))
    assert info.value.code == "stale"


def test_start_inside_a_tool_pair() -> None:
    with pytest.raises(ClearError) as info:
        survey(commit_fixture()).validate_clear(2, "latest", NOTES, min_clear_tokens=1)
    error = info.value
    assert error.code == "split-start"
    assert "may not start at id 2" in str(error)
    assert "Nearest valid starts: 1, 3, 0." in str(error)  # positions 1, 3, 0 in that order
    assert error.suggestions == (1, 3, 0)


def test_end_at_an_open_call() -> None:
    messages = commit_fixture() + [user("third turn"), ask(call("q", "bash", {"command": "ls"}))]
    with pytest.raises(ClearError) as info:
        survey(messages).validate_clear("first", 8, NOTES, min_clear_tokens=1)
    assert info.value.code == "split-end"
    assert "may not end at id 8" in str(info.value)
    assert "step is still running" in str(info.value)
    assert info.value.suggestions == (7, 6, 4)  # position 5 is a call with results


def test_floors() -> None:
    tiny = [user("hi"), say("hello")]
    with pytest.raises(ClearError, match=r"weighs only ~\d+ tokens \(< 1000\)") as info:
        survey(tiny).validate_clear("first", "latest", "n" * 250)
    assert info.value.code == "too-small"
    fixture = survey(commit_fixture())
    with pytest.raises(ClearError, match=r"too short \(5 characters < 10\)"):
        fixture.validate_clear("first", "latest", "short", min_clear_tokens=1, min_notes_chars=10)
    with pytest.raises(ClearError, match=r"too long \(20000 characters > 16000\)"):
        fixture.validate_clear("first", "latest", "x" * 20000, min_clear_tokens=1)
    with pytest.raises(ClearError, match="notes must be text") as info:
        fixture.validate_clear("first", "latest", None, min_clear_tokens=1)
    assert info.value.code == "notes-type"


def test_checkpoint_must_be_smaller_than_the_span() -> None:
    messages = [user(LOREM * 4), say(LOREM * 4), user("go on")]
    result = survey(messages)
    span = result.nodes[0].tokens + result.nodes[1].tokens
    with pytest.raises(ClearError, match=rf"would not be smaller than the range it replaces "
                                         rf"\(~{span} tokens\)") as info:
        result.validate_clear(0, 1, LOREM * 10, min_clear_tokens=1)
    assert info.value.code == "checkpoint-not-smaller"


def test_unknown_id_and_order() -> None:
    result = survey(commit_fixture())
    with pytest.raises(ClearError, match="id 99999 is not in the current conversation") as info:
        result.validate_clear(99999, "latest", NOTES, min_clear_tokens=1)
    assert info.value.code == "unknown-id"
    with pytest.raises(ClearError, match=r"start id 3 \(position 3\) comes after end id 1 "
                                         r"\(position 1\)") as info:
        result.validate_clear(3, 1, NOTES, min_clear_tokens=1)
    assert info.value.code == "order"
    with pytest.raises(ClearError, match="start must be a message id") as info:
        result.validate_clear(1.5, "latest", NOTES, min_clear_tokens=1)
    assert info.value.code == "bad-boundary"
    with pytest.raises(ClearError, match="end must be a message id"):
        result.validate_clear(0, True, NOTES, min_clear_tokens=1)


def test_tolerant_boundary_strings() -> None:
    result = survey(commit_fixture())
    plan = result.validate_clear(" '0' ", "LATEST", NOTES, min_clear_tokens=1)
    assert (plan.start, plan.end) == (0, 6)
    assert result.validate_clear("\"first\"", "6", NOTES, min_clear_tokens=1).ids == plan.ids
    string_ids = [user("a" * 400, "msg_a"), say("b" * 400, "msg_b"), user("c", "msg_c")]
    plan = survey(string_ids).validate_clear("msg_a", "'msg_b'", "n" * 200, min_clear_tokens=1)
    assert plan.ids == ("msg_a", "msg_b")


def test_sentinels_with_nothing_to_clear() -> None:
    open_only = survey([ask(call("x", "bash", {"command": "ls"}))])
    with pytest.raises(ClearError, match="no clearable boundary") as info:
        open_only.validate_clear("first", "latest", NOTES)
    assert info.value.code == "nothing-clearable"
    with pytest.raises(ClearError, match="empty"):
        survey([]).validate_clear("first", "latest", NOTES)
    with pytest.raises(ClearError, match="nothing after the system prompt"):
        survey([{"role": "system", "content": "s"}]).validate_clear("first", "first", NOTES)


def test_system_head_cannot_be_cleared() -> None:
    messages = [{"role": "system", "content": "S" * 4000}] + commit_fixture()
    result = survey(messages)
    with pytest.raises(ClearError, match="id 0 is the system prompt") as info:
        result.validate_clear(0, "latest", NOTES, min_clear_tokens=1)
    assert info.value.code == "system-head"
    plan = result.validate_clear("first", "latest", NOTES, min_clear_tokens=1)
    assert (plan.start, plan.end) == (1, 7)
    assert plan.apply(messages)[0] == messages[0]


def test_threshold_configuration_errors() -> None:
    result = survey(commit_fixture())
    with pytest.raises(ArgumentValueError, match="min_clear_tokens must be a positive integer"):
        result.validate_clear("first", "latest", NOTES, min_clear_tokens=0)
    with pytest.raises(ArgumentValueError, match="min_notes_chars .* less than max_notes_chars"):
        result.validate_clear("first", "latest", NOTES, min_notes_chars=500, max_notes_chars=100)


def test_clear_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        survey(commit_fixture()).validate_clear(99999, "latest", NOTES)


def test_apply_checks_the_checkpoint_id() -> None:
    messages = commit_fixture(ids=True)
    plan = survey(messages).validate_clear(10, 12, NOTES, min_clear_tokens=1)
    with pytest.raises(ArgumentValueError, match="already in use"):
        plan.apply(messages, checkpoint_id=13)
    with pytest.raises(ArgumentTypeError, match="checkpoint_id"):
        plan.apply(messages, checkpoint_id=1.5)  # type: ignore[arg-type]
    assert plan.apply(messages, checkpoint_id=11)[0]["id"] == 11  # an id inside the span is free


# --------------------------------------------------------------------------- reminder

def test_reminder_defaults() -> None:
    policy = ReminderPolicy()
    assert (policy.ratio, policy.tokens, policy.steps, policy.step_interval) == (0.70, 0, 100, 25)


def test_reminder_on_steps() -> None:
    text = ReminderPolicy(steps=15).check(tokens=100, window=100000, steps_in_turn=15)
    assert text is not None and "this turn has run 15 steps (threshold 15)" in text


def test_no_reason_no_reminder() -> None:
    assert ReminderPolicy(ratio=0.9).check(tokens=100, window=100000, steps_in_turn=2) is None


def test_reminder_cooldown_needs_steps_and_growth() -> None:
    policy = ReminderPolicy(steps=10, step_interval=5)
    assert policy.check(500, 100000, 10) is not None
    assert policy.check(900, 100000, 12) is None     # only 2 steps later
    assert policy.check(500, 100000, 17) is None     # enough steps, but no growth
    assert policy.check(1200, 100000, 17) is not None
    assert policy.check(5000, 100000, 20) is None    # 3 steps after the last reminder


def test_reminder_new_turn_skips_the_cooldown() -> None:
    policy = ReminderPolicy(steps=10, step_interval=5)
    assert policy.check(500, None, 10, turn=1) is not None
    assert policy.check(400, None, 10, turn=2) is not None
    # Without turn ids, a step counter that went down marks a new turn.
    implicit = ReminderPolicy(steps=10, step_interval=5)
    assert implicit.check(500, None, 12) is not None
    assert implicit.check(400, None, 10) is not None
    assert implicit.check(400, None, 11) is None


def test_reminder_on_absolute_tokens_without_a_window() -> None:
    text = ReminderPolicy(tokens=8000).check(tokens=9000, window=None, steps_in_turn=1)
    assert text is not None and "~9000 tokens (absolute threshold 8000)" in text


def test_reminder_on_window_ratio() -> None:
    text = ReminderPolicy(ratio=0.7).check(tokens=7000, window=10000, steps_in_turn=1)
    assert text is not None
    assert "fills 70% of the model window (7000/10000 tokens, threshold 70%)" in text
    assert ReminderPolicy(ratio=0.7).check(tokens=6999, window=10000, steps_in_turn=1) is None


def test_reminder_with_unknown_window_gives_the_step_reason_only() -> None:
    text = ReminderPolicy(steps=5).check(tokens=10**9, window=None, steps_in_turn=5)
    assert text is not None and "steps" in text and "window" not in text


def test_reminder_text_shape() -> None:
    text = ReminderPolicy(steps=1).check(tokens=10, window=None, steps_in_turn=3)
    assert text is not None
    lines = text.splitlines()
    assert lines[0] == "<system-reminder>" and lines[-1] == "</system-reminder>"
    assert "finish this phase first" in text
    assert "immediately" not in text and "right now" not in text
    zh = ReminderPolicy(steps=1, lang="zh").check(tokens=10, window=None, steps_in_turn=3)
    assert zh is not None and "- 原因：本轮已执行 3 步（阈值 1 步）" in zh
    assert "先把这一阶段做完再整理" in zh


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"ratio": 0}, ArgumentValueError, r"ratio must be in \(0, 1\]"),
    ({"ratio": 1.5}, ArgumentValueError, "ratio"),
    ({"tokens": -1}, ArgumentValueError, "tokens must be a non-negative integer"),
    ({"steps": 0}, ArgumentValueError, "steps must be a positive integer"),
    ({"step_interval": 2.5}, ArgumentTypeError, "step_interval"),
    ({"lang": "de"}, ArgumentValueError, "lang"),
])
def test_reminder_configuration(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        ReminderPolicy(**kwargs)


def test_reminder_ratio_of_one_is_allowed() -> None:
    assert ReminderPolicy(ratio=1).check(tokens=100, window=100, steps_in_turn=0) is not None
