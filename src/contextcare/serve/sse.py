"""Server-sent events from an upstream's byte stream, kept byte for byte for forwarding.

:class:`SSEDecoder` is fed the bytes as they arrive and returns the complete events. Each
:class:`Event` keeps its exact bytes (``raw``, forwarded unchanged) and its JSON payload
(``obj``), read once here. Lines end with ``\\n`` or ``\\r\\n`` (a lone ``\\r`` as line end,
which the SSE spec also allows, is not used by any OpenAI-compatible server and is not
supported); a blank line ends an event; several ``data:`` lines are joined with ``\\n``;
comments (``:``) and other fields pass through in ``raw``. A line longer than ``max_line`` bytes
raises :class:`SSELineTooLong`, so a broken upstream cannot make the gateway buffer without
bound.

:meth:`Event.chunk` is what the stream reader of :mod:`contextcare.streams` reads: for chat
chunks the payload itself; for ``/v1/completions`` chunks (``choices[i].text``) a chat-shaped view
(``delta.content``), so one reader serves both endpoints.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["Event", "SSEDecoder", "SSELineTooLong"]


_scan: Any = json.JSONDecoder().scan_once  # type: ignore[attr-defined]

def _loads(payload: bytes) -> Any:
    """``json.loads(payload)``, about three times faster on a chunk: the C scanner called
    directly (``json.loads`` spends most of a small document's time in its Python wrappers).
    Whatever it does not take whole (leading blanks, trailing garbage, bad UTF-8) goes through
    ``json.loads``, so results and errors are its own. (``orjson`` would be faster still, but it
    reads integers beyond 64 bits as floats, silently.)"""
    try:
        text = payload.decode("utf-8")
        obj, end = _scan(text, 0)
    except (StopIteration, ValueError):
        return json.loads(payload)
    if end != len(text) and text[end:].strip():
        return json.loads(payload)
    return obj


class SSELineTooLong(ValueError):
    """The upstream sent an SSE line longer than the configured limit."""


class Event:
    """One SSE event: its bytes, and its JSON payload when it has one.

    ``obj`` is the decoded ``data`` (a dict) or ``None``; ``done`` marks ``data: [DONE]``;
    ``malformed`` marks a ``data`` payload that is not a JSON object.
    """

    __slots__ = ("done", "malformed", "obj", "raw", "t", "text_completion")

    def __init__(self, raw: bytes, obj: dict[str, Any] | None = None, done: bool = False,
                 malformed: bool = False, text_completion: bool = False) -> None:
        self.raw = raw
        self.obj = obj
        self.done = done
        self.malformed = malformed
        self.text_completion = text_completion
        #: ``time.perf_counter()`` when the event was handed to the guard (guard-time metric).
        self.t = 0.0

    def chunk(self) -> dict[str, Any]:
        """What the chunk reader of :mod:`contextcare.streams` is given: the payload of a chat
        chunk; a chat-shaped view of a ``/v1/completions`` chunk; ``{}`` (nothing to read) for
        an event without a payload."""
        obj = self.obj
        if obj is None:
            return _NOTHING
        if not self.text_completion:
            return obj
        choices = obj.get("choices")
        if not isinstance(choices, list):
            return _NOTHING
        return {"choices": [
            {"index": c.get("index"), "finish_reason": c.get("finish_reason"),
             "delta": {"content": c.get("text")}}
            for c in choices if isinstance(c, dict)]}


_NOTHING: dict[str, Any] = {}


class SSEDecoder:
    """Incremental SSE decoder (see the module docs)."""

    def __init__(self, max_line: int, *, text_completion: bool = False) -> None:
        self._max_line = max_line
        self._text_completion = text_completion
        self._rest = b""            # an incomplete line
        self._raw: list[bytes] = []  # the lines of the event being read, with their line ends
        self._data: list[bytes] = []

    def feed(self, chunk: bytes) -> list[Event]:
        """The events completed by ``chunk``."""
        if (not self._rest and not self._raw and chunk.startswith(b"data: ")
                and chunk.endswith(b"\n\n") and chunk.count(b"\n") == 2
                and b"\r" not in chunk and len(chunk) <= self._max_line):
            # the common case: one whole event of one data line, as OpenAI-compatible servers
            # write them (same result as the general path below)
            return [self._payload(chunk, chunk[6:-2])]
        buf = self._rest + chunk if self._rest else chunk
        lines = buf.split(b"\n")
        rest = lines.pop()
        if len(rest) > self._max_line:
            raise SSELineTooLong(f"the upstream sent an SSE line longer than"
                                 f" {self._max_line} bytes (max_line_bytes)")
        self._rest = rest
        events: list[Event] = []
        raw, data = self._raw, self._data
        for line in lines:
            if len(line) > self._max_line:
                raise SSELineTooLong(f"the upstream sent an SSE line longer than"
                                     f" {self._max_line} bytes (max_line_bytes)")
            raw.append(line)
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line:
                if len(raw) > 1:
                    events.append(self._event())
                    raw, data = self._raw, self._data
                else:
                    raw.clear()  # a blank line with no event before it: nothing to pass on
                continue
            if line.startswith(b"data:"):
                value = line[5:]
                data.append(value[1:] if value.startswith(b" ") else value)
        return events

    def end(self) -> list[Event]:
        """The last event, when the stream ended without its blank line."""
        if self._rest:
            self._raw.append(self._rest)
            line = self._rest.rstrip(b"\r")
            if line.startswith(b"data:"):
                value = line[5:]
                self._data.append(value[1:] if value.startswith(b" ") else value)
            self._rest = b""
        if self._raw:
            event = self._event(terminated=False)
            return [event]
        return []

    def _event(self, terminated: bool = True) -> Event:
        raw = b"\n".join(self._raw) + (b"\n" if terminated else b"\n\n")
        data = self._data
        self._raw = []
        self._data = []
        if not data:
            return Event(raw)  # comments or fields without data: passed on as they are
        return self._payload(raw, data[0] if len(data) == 1 else b"\n".join(data))

    def _payload(self, raw: bytes, payload: bytes) -> Event:
        if payload == b"[DONE]":
            return Event(raw, done=True)
        try:
            obj = _loads(payload)
        except ValueError:
            return Event(raw, malformed=True)
        if not isinstance(obj, dict):
            return Event(raw, malformed=True)
        return Event(raw, obj, text_completion=self._text_completion)
