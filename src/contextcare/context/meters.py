"""Token meters: how many tokens one OpenAI-format chat message costs.

A *meter* is any callable ``message -> int`` (:data:`Meter`). The grades, the rest planner and the
clear-mind survey accept one wherever they price messages, so a serving stack can plug in the exact
tokenizer of its model. Two are built in:

* :func:`heuristic_tokens` — fast, dependency-free, deterministic. Good enough to choose a
  compaction range or a grade; not a billing figure.
* :func:`tiktoken_meter` — a meter built on OpenAI's ``tiktoken`` (optional extra
  ``contextcare[tiktoken]``); ``tiktoken`` is imported only when the meter is created.

The heuristic rule (all lengths in code points):

* every message costs :data:`MESSAGE_TOKENS` (4) for its framing (role, separators);
* text costs one token per CJK character (Han ideographs, kana, Hangul, CJK and full-width
  punctuation: tokenizers rarely merge them) plus ``ceil(n / 4)`` for the ``n`` other characters
  (about four characters per token for English and code);
* the text priced is: string ``content``; every ``{"type": "text"}`` part of list content;
  ``name``; ``reasoning_content`` / ``reasoning`` when a host keeps them on the message; for each
  tool call :data:`TOOL_CALL_TOKENS` plus the function name and its ``arguments`` text (the legacy
  ``function_call`` the same way); a ``tool`` message is priced by its content like any other;
* every non-text content part (image, audio, file) costs a flat :data:`PART_TOKENS`, because the
  size of a base64 payload says nothing about what the model is charged for it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ArgumentTypeError, ArgumentValueError

__all__ = [
    "Message", "Meter", "MESSAGE_TOKENS", "TOOL_CALL_TOKENS", "PART_TOKENS", "text_tokens",
    "heuristic_tokens", "tiktoken_meter", "resolve_meter", "message_text",
]

#: One OpenAI-format chat message (``{"role": ..., "content": ..., ...}``).
Message = Mapping[str, Any]
#: Anything that prices one message in tokens.
Meter = Callable[[Message], int]

#: Framing cost of every message.
MESSAGE_TOKENS = 4
#: Framing cost of every tool call inside an assistant message.
TOOL_CALL_TOKENS = 4
#: Flat cost of a non-text content part (image, audio, file).
PART_TOKENS = 85

# CJK scripts and punctuation that tokenizers price at about one token per character.
_CJK = re.compile(
    "["
    "\u1100-\u11ff"  # Hangul Jamo
    "\u2e80-\u2fdf"  # CJK radicals, Kangxi radicals
    "\u3000-\u303f"  # CJK symbols and punctuation
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3100-\u312f"  # Bopomofo
    "\u3130-\u318f"  # Hangul compatibility Jamo
    "\u3190-\u31ff"  # Kanbun, Bopomofo ext., CJK strokes, Katakana ext.
    "\u3200-\u33ff"  # enclosed CJK, CJK compatibility
    "\u3400-\u4dbf"  # CJK ext. A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\ua960-\ua97f"  # Hangul Jamo ext. A
    "\uac00-\ud7af"  # Hangul syllables
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\ufe30-\ufe4f"  # CJK compatibility forms
    "\uff00-\uffef"  # half-width and full-width forms
    "\U00020000-\U0003ffff"  # CJK ext. B and later
    "]"
)


def text_tokens(text: str) -> int:
    """Heuristic token count of a text: one per CJK character, ``ceil(n/4)`` for the rest."""
    if not isinstance(text, str):
        raise ArgumentTypeError(f"text must be a str, got {type(text).__name__}")
    cjk = len(_CJK.findall(text))
    return cjk + math.ceil((len(text) - cjk) / 4)


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def message_text(message: Message) -> str:
    """The text of a message's content: a string content, or its text parts joined by newlines.

    Non-text parts are left out. Used for previews and for looking inside checkpoints.
    """
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [_str(part.get("text")) for part in content
                 if isinstance(part, Mapping) and part.get("type", "text") == "text"]
        return "\n".join(texts)
    return ""


def heuristic_tokens(message: Message) -> int:
    """Price one OpenAI-format message with the documented heuristic (see the module docstring)."""
    return _price(message, text_tokens)


def _price(message: Message, count: Callable[[str], int]) -> int:
    """Price ``message`` by the module's rule, counting each text with ``count``."""
    if not isinstance(message, Mapping):
        raise ArgumentTypeError(f"message must be a mapping, got {type(message).__name__}")
    total = MESSAGE_TOKENS
    content = message.get("content")
    if isinstance(content, str):
        total += count(content)
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping) and part.get("type", "text") == "text":
                total += count(_str(part.get("text")))
            else:
                total += PART_TOKENS
    for key in ("name", "reasoning_content", "reasoning"):
        total += count(_str(message.get(key)))
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        for call in calls:
            total += TOOL_CALL_TOKENS + _function_tokens(call, count)
    legacy = message.get("function_call")
    if isinstance(legacy, Mapping):
        total += TOOL_CALL_TOKENS + _call_tokens(legacy, count)
    return total


def _call_tokens(function: Mapping[str, Any], count: Callable[[str], int]) -> int:
    return count(_str(function.get("name"))) + count(_str(function.get("arguments")))


def _function_tokens(call: object, count: Callable[[str], int]) -> int:
    if not isinstance(call, Mapping):
        return 0
    function = call.get("function")
    return _call_tokens(function, count) if isinstance(function, Mapping) else 0


def tiktoken_meter(encoding: str = "o200k_base") -> Meter:
    """A meter that counts text with ``tiktoken``'s ``encoding`` (default ``o200k_base``).

    The message is priced by the same rule as :func:`heuristic_tokens` — framing, text parts,
    names, tool calls, flat-priced non-text parts — with every text counted by the tokenizer
    instead of the heuristic. Raises :class:`ImportError` naming the extra when ``tiktoken`` is
    not installed. ``tiktoken`` may download the encoding file on first use.
    """
    try:
        import tiktoken  # type: ignore[import-not-found, unused-ignore]
    except ImportError as exc:
        raise ImportError(
            "tiktoken_meter needs the optional dependency tiktoken: "
            "pip install 'contextcare[tiktoken]'"
        ) from exc
    codec = tiktoken.get_encoding(encoding)

    def count(text: str) -> int:
        return len(codec.encode(text, disallowed_special=())) if text else 0

    def meter(message: Message) -> int:
        return _price(message, count)

    meter.__name__ = f"tiktoken_meter({encoding!r})"
    return meter


def resolve_meter(meter: Meter | None) -> Callable[[Message], int]:
    """Return ``meter`` wrapped so that a bad result fails loudly, or the heuristic for ``None``.

    A meter must return a non-negative ``int`` (``bool`` is refused); anything else raises an
    error naming the meter and the value, instead of silently corrupting a plan.
    """
    if meter is None:
        return heuristic_tokens
    if not callable(meter):
        raise ArgumentTypeError(f"meter must be a callable message -> int, got {type(meter).__name__}")
    user_meter = meter

    def checked(message: Message) -> int:
        value = user_meter(message)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ArgumentTypeError(
                f"meter {getattr(user_meter, '__name__', repr(user_meter))} must return an int, "
                f"got {type(value).__name__}"
            )
        if value < 0:
            raise ArgumentValueError(
                f"meter {getattr(user_meter, '__name__', repr(user_meter))} returned {value}; "
                "token counts must be >= 0"
            )
        return value

    return checked
