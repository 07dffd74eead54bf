"""Reading one OpenAI ``chat.completion.chunk``: the single place that checks its fields.

Both readers of chunks use it: the stream filters (:func:`contextcare.streams.watch_openai`,
``openai_parts``) on SDK objects or dicts, and the trace reader (:mod:`contextcare.traces`) on
JSON lines. A malformed chunk is a :class:`~contextcare.errors.ArgumentTypeError` (a field of the
wrong type) or :class:`~contextcare.errors.ArgumentValueError` (a negative ``index``) whose message
says which chunk and which field, e.g. ``chunk 3: choices[0]: 'index' must be an int >= 0 or
null, got list``; the trace reader turns it into a ``TraceFormatError`` at the line.

What is read (fields not named here are ignored, whatever they hold):

* ``choices``: a list (or tuple) or null/missing (no text: usage-only chunks);
* each choice: an object (a dict, or any attribute object such as the SDK's ``Choice``);
* ``index``: an int >= 0, null or missing (= 0); ``bool`` is refused;
* ``delta``: an object or null/missing; in it ``reasoning_content`` (else ``reasoning``) is
  thinking text when it is a string (any other value is structured reasoning detail and carries
  no text), ``content`` is answer text: a string or null;
* ``finish_reason``: anything but null ends the choice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .errors import ArgumentTypeError, ArgumentValueError

__all__ = ["ChoiceDelta", "chunk_parts", "read_chunk"]

#: Values that are never a chunk, a choice or a delta (the rest: dicts and attribute objects).
_SCALARS = (str, bytes, bytearray, int, float, list, tuple, set, frozenset)


@dataclass(frozen=True, slots=True)
class ChoiceDelta:
    """What one choice of a chunk says: its index, its text parts in order (reasoning first)
    as ``(channel, text)``, and whether it ends (a ``finish_reason``)."""

    index: int
    parts: list[tuple[str, str]]
    finished: bool


def _field(obj: Any, name: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def _is_object(value: object) -> bool:
    return value is not None and not isinstance(value, _SCALARS)


def read_chunk(chunk: Any, where: str = "chunk") -> list[ChoiceDelta]:
    """The choices of one chunk (a dict or an SDK object), checked; ``where`` starts every
    error message (``"chunk 3"``; ``""`` for none)."""
    at = f"{where}: " if where else ""
    if not _is_object(chunk):
        raise ArgumentTypeError(f"{at}must be a chat.completion.chunk object or dict, got"
                            f" {type(chunk).__name__}")
    choices = _field(chunk, "choices")
    if choices is None:
        return []
    if not isinstance(choices, (list, tuple)):
        raise ArgumentTypeError(f"{at}'choices' must be a list or null, got {type(choices).__name__}")
    return [_choice(choice, f"{at}choices[{i}]: ") for i, choice in enumerate(choices)]


def _choice(choice: Any, at: str) -> ChoiceDelta:
    if not _is_object(choice):
        raise ArgumentTypeError(f"{at}must be an object, got {type(choice).__name__}")
    index = _field(choice, "index")
    if index is None:
        index = 0
    elif isinstance(index, bool) or not isinstance(index, int):
        raise ArgumentTypeError(f"{at}'index' must be an int >= 0 or null, got"
                            f" {type(index).__name__}")
    elif index < 0:
        raise ArgumentValueError(f"{at}'index' must be an int >= 0 or null, got {index}")
    delta = _field(choice, "delta")
    parts: list[tuple[str, str]] = []
    if delta is not None:
        if not _is_object(delta):
            raise ArgumentTypeError(f"{at}'delta' must be an object or null, got"
                                f" {type(delta).__name__}")
        parts = _delta_parts(delta, at)
    return ChoiceDelta(index, parts, _field(choice, "finish_reason") is not None)


def _delta_parts(delta: Any, at: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    reasoning = _field(delta, "reasoning_content")
    if not isinstance(reasoning, str) or not reasoning:
        reasoning = _field(delta, "reasoning")
    if isinstance(reasoning, str) and reasoning:
        out.append(("reasoning", reasoning))
    content = _field(delta, "content")
    if content is not None and not isinstance(content, str):
        raise ArgumentTypeError(f"{at}'delta.content' must be a string or null, got"
                            f" {type(content).__name__}")
    if content:
        out.append(("text", content))
    return out


def chunk_parts(chunks: Sequence[ChoiceDelta]) -> list[tuple[int, str, str]]:
    """Flatten :func:`read_chunk`'s result to ``(index, channel, text)``."""
    return [(c.index, channel, text) for c in chunks for channel, text in c.parts]
