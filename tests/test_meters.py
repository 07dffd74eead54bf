"""Token meters: the documented heuristic, meter checking, and the optional tiktoken meter."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from contextcare.context.meters import (
    MESSAGE_TOKENS,
    PART_TOKENS,
    TOOL_CALL_TOKENS,
    heuristic_tokens,
    message_text,
    resolve_meter,
    text_tokens,
    tiktoken_meter,
)
from contextcare.errors import ArgumentTypeError, ArgumentValueError


@pytest.mark.parametrize(("text", "tokens"), [
    ("", 0),
    ("abcd", 1),
    ("abcde", 2),          # ceil(5/4)
    ("你好", 2),            # one per CJK character
    ("你好abcd", 3),        # 2 + ceil(4/4)
    ("こんにちは", 5),       # kana
    ("안녕", 2),            # Hangul
    ("，。", 2),            # full-width / CJK punctuation
    ("😀😀😀😀", 1),        # other characters: four per token, by code point
])
def test_text_rule(text: str, tokens: int) -> None:
    assert text_tokens(text) == tokens


def test_cjk_text_costs_more_than_the_same_length_of_ascii() -> None:
    assert text_tokens("汉" * 100) == 100
    assert text_tokens("a" * 100) == 25


def test_plain_message() -> None:
    assert heuristic_tokens({"role": "user", "content": "abcdefgh"}) == MESSAGE_TOKENS + 2


def test_content_parts_and_flat_priced_media() -> None:
    message = {"role": "user", "content": [
        {"type": "text", "text": "abcd"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 100000}},
        {"type": "text", "text": "你"},
    ]}
    assert heuristic_tokens(message) == MESSAGE_TOKENS + 1 + PART_TOKENS + 1
    assert message_text(message) == "abcd\n你"


def test_tool_calls_are_priced() -> None:
    message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "bash", "arguments": '{"command":"ls"}'}},  # 4 chars, 16 chars
        {"id": "c2", "type": "function", "function": {"name": "read", "arguments": ""}},
    ]}
    expected = MESSAGE_TOKENS + (TOOL_CALL_TOKENS + 1 + 4) + (TOOL_CALL_TOKENS + 1 + 0)
    assert heuristic_tokens(message) == expected


def test_tool_results_are_priced_by_their_content() -> None:
    # The clear-mind test meter priced every tool result at a flat 8; ours reads the output.
    short = heuristic_tokens({"role": "tool", "tool_call_id": "c1", "content": "ok"})
    long = heuristic_tokens({"role": "tool", "tool_call_id": "c1", "content": "x" * 4000})
    assert short == MESSAGE_TOKENS + 1
    assert long == MESSAGE_TOKENS + 1000


def test_name_reasoning_and_legacy_function_call() -> None:
    message = {"role": "assistant", "name": "abcd", "reasoning_content": "abcdabcd",
               "content": "", "function_call": {"name": "f", "arguments": "{}"}}
    assert heuristic_tokens(message) == MESSAGE_TOKENS + 1 + 2 + TOOL_CALL_TOKENS + 1 + 1


def test_malformed_parts_do_not_crash() -> None:
    message = {"role": "assistant", "content": [None, 3, {"type": "text", "text": None}],
               "tool_calls": [None, {"id": "x"}, {"function": "nope"}]}
    assert heuristic_tokens(message) == MESSAGE_TOKENS + 2 * PART_TOKENS + 3 * TOOL_CALL_TOKENS


def test_non_mapping_message_is_a_type_error() -> None:
    with pytest.raises(ArgumentTypeError, match="message"):
        heuristic_tokens(["role", "user"])  # type: ignore[arg-type]
    with pytest.raises(ArgumentTypeError, match="text"):
        text_tokens(b"abc")  # type: ignore[arg-type]


def test_resolve_meter() -> None:
    assert resolve_meter(None) is heuristic_tokens
    checked = resolve_meter(lambda m: 7)
    assert checked({"role": "user"}) == 7
    with pytest.raises(ArgumentTypeError, match="must return an int"):
        resolve_meter(lambda m: 1.5)({"role": "user"})  # type: ignore[arg-type, return-value]
    with pytest.raises(ArgumentTypeError, match="must return an int"):
        resolve_meter(lambda m: True)({"role": "user"})
    with pytest.raises(ArgumentValueError, match="-3"):
        resolve_meter(lambda m: -3)({"role": "user"})
    with pytest.raises(ArgumentTypeError, match="meter"):
        resolve_meter(42)  # type: ignore[arg-type]


class _FakeEncoding:
    """Stands in for a tiktoken encoding: one token per whitespace-separated word."""

    def encode(self, text: str, disallowed_special: Any = "all") -> list[int]:
        assert disallowed_special == ()  # special-token text in a message must not raise
        return list(range(len(text.split())))


def test_tiktoken_meter_wiring_with_a_stand_in_module(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("tiktoken")
    asked: list[str] = []

    def get_encoding(name: str) -> _FakeEncoding:
        asked.append(name)
        return _FakeEncoding()

    fake.get_encoding = get_encoding  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tiktoken", fake)
    meter = tiktoken_meter("cl100k_base")
    assert asked == ["cl100k_base"]
    message = {"role": "assistant", "content": "three word text", "tool_calls": [
        {"id": "c", "function": {"name": "bash", "arguments": '{"a": "b c"}'}}]}
    # 4 framing + 3 words + (4 call framing + 1 name word + 3 argument words)
    assert meter(message) == MESSAGE_TOKENS + 3 + TOOL_CALL_TOKENS + 1 + 3


def test_tiktoken_meter_without_tiktoken_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # makes `import tiktoken` fail
    with pytest.raises(ImportError, match=r"contextcare\[tiktoken\]"):
        tiktoken_meter()


def test_real_tiktoken_meter() -> None:
    tiktoken = pytest.importorskip("tiktoken")
    try:
        encoding = tiktoken.get_encoding("o200k_base")
    except Exception as exc:  # the encoding file is downloaded on first use
        pytest.skip(f"o200k_base not available here: {exc}")
    meter = tiktoken_meter()
    text = "Hello, world! 你好"
    assert meter({"role": "user", "content": text}) == MESSAGE_TOKENS + len(encoding.encode(text))
