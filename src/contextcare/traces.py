"""Recorded streams: read trace files and replay them through a ruleset.

Two line formats are read, detected line by line, so one file may mix them:

* **contextcare events** — one JSON object per line::

      {"stream": "s1", "type": "start"}
      {"stream": "s1", "type": "reasoning-delta", "text": "Let me"}
      {"stream": "s1", "type": "text-delta", "text": " check"}
      {"stream": "s1", "type": "end"}

  ``stream`` is a string (or an integer, read as its decimal string) naming one stream; events of
  many streams may be interleaved. ``type`` is ``start`` (a new attempt of that stream: the watcher
  is reset), ``text-delta`` (visible answer text), ``reasoning-delta`` (thinking text) or ``end``.
  ``text`` is required on deltas. Other keys (timestamps, …) are ignored. A delta for a stream
  that has not started starts it.

* **OpenAI chat-completions chunks** — ``chat.completion.chunk`` objects, one per line, either bare
  JSON or server-sent-event lines (``data: {...}``, ``data: [DONE]``; ``event:``, ``id:``,
  ``retry:`` and ``:`` comment lines are skipped). The stream is the chunk ``id`` (``id#N`` for
  choice index ``N`` > 0). ``delta.reasoning_content`` or ``delta.reasoning`` is thinking text,
  ``delta.content`` visible text; a ``finish_reason`` ends the stream, and so does ``[DONE]`` for
  the most recent chunk stream of the file that is still open.

Files may be gzip-compressed (detected by their magic bytes, not their name). Blank lines are
skipped. A line that is not valid UTF-8, not JSON, or not one of the formats above is *malformed*:
:func:`iter_events` raises :class:`TraceFormatError` for it (naming the file and line number), or,
given ``on_error``, reports it there and goes on with the next line.

:func:`replay` feeds events through a ruleset, one watcher per open stream, and yields one
:class:`StreamResult` per attempt of each stream as soon as that attempt ends.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import sys
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, Union, cast

from .chunks import read_chunk
from .detection import Detection
from .errors import ContextCareError

if TYPE_CHECKING:
    from ._engine import Ruleset, Watcher

__all__ = [
    "Event", "EVENT_TYPES", "TraceFormatError", "StreamResult", "iter_events", "replay", "scan",
    "SAMPLES", "sample_events",
]

#: The ``type`` values of the contextcare event format.
EVENT_TYPES = ("start", "text-delta", "reasoning-delta", "end")

_DELTA_CHANNEL = {"text-delta": "text", "reasoning-delta": "reasoning"}
_GZIP_MAGIC = b"\x1f\x8b"
_SSE_SKIP = (b"event:", b"id:", b"retry:", b":")
#: The bundled sample traces (``contextcare/samples/NAME.jsonl``), in demo order.
SAMPLES = ("clean-answer", "reasoning-loop", "three-line-cycle", "newline-free-flood",
           "anxious-zh", "anxious-en")
#: How many lines pass between two calls of ``progress``.
_PROGRESS_EVERY = 512

Source = Union[str, "os.PathLike[str]", IO[bytes], IO[str]]


class TraceFormatError(ContextCareError, ValueError):
    """A trace line that cannot be read. ``source`` and ``line`` (1-based) say where it is."""

    def __init__(self, source: str, line: int, reason: str) -> None:
        super().__init__(f"{source}:{line}: {reason}")
        self.source = source
        self.line = line
        self.reason = reason

    def __reduce__(self) -> tuple[type[TraceFormatError], tuple[str, int, str]]:
        # picklable, so an error raised in a Ray worker reaches the driver intact
        return (type(self), (self.source, self.line, self.reason))


@dataclass(frozen=True, slots=True)
class Event:
    """One event of one stream. ``text`` is empty for ``start`` and ``end``.

    ``source`` and ``line`` say where the event was read (for messages); they are not part of what
    the event means.
    """

    stream: str
    type: str
    text: str = ""
    source: str = field(default="", compare=False)
    line: int = field(default=0, compare=False)

    @property
    def channel(self) -> str | None:
        """The watcher channel of a delta (``"text"`` or ``"reasoning"``), else ``None``."""
        return _DELTA_CHANNEL.get(self.type)


# --------------------------------------------------------------------------- reading

def _source_name(source: object) -> str:
    if isinstance(source, (str, os.PathLike)):
        name = os.fspath(source)
        return "<stdin>" if name == "-" else str(name)
    name = getattr(source, "name", None)
    return name if isinstance(name, str) else "<stream>"


def _open_binary(source: str | os.PathLike[str]) -> IO[bytes]:
    if os.fspath(source) == "-":
        return sys.stdin.buffer
    return open(source, "rb")


def _raw_lines(raw: IO[bytes], progress: Callable[[int], None] | None) -> Iterator[bytes]:
    """Lines of a binary stream, gunzipped when it starts with the gzip magic."""
    reader: Any = raw if hasattr(raw, "peek") else io.BufferedReader(cast(Any, raw))
    head = reader.peek(2)[:2]
    lines: Iterable[bytes] = gzip.GzipFile(fileobj=reader) if head == _GZIP_MAGIC else reader
    report = progress if progress is not None and raw.seekable() else None
    for n, line in enumerate(lines, 1):
        if report is not None and n % _PROGRESS_EVERY == 0:
            report(raw.tell())
        yield line
    if report is not None:
        report(raw.tell())


class _Parser:
    """Turns the lines of one file into events; keeps the per-file state of chunk streams."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.open_chunk_streams: dict[str, None] = {}  # insertion-ordered set

    def fail(self, line: int, reason: str) -> TraceFormatError:
        return TraceFormatError(self.source, line, reason)

    def parse(self, raw: bytes | str, n: int) -> list[Event]:
        if isinstance(raw, bytes):
            if n == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            data = raw.strip()
            if not data or data.startswith(_SSE_SKIP):
                return []
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise self.fail(n, f"not valid UTF-8 (byte {exc.start})") from None
        else:
            text = raw.lstrip("\ufeff").strip() if n == 1 else raw.strip()
            if not text or text.startswith(("event:", "id:", "retry:", ":")):
                return []
        sse = text.startswith("data:")
        if sse:
            text = text[5:].strip()
            if text == "[DONE]":
                return self.done(n)
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise self.fail(n, f"not JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(obj, dict):
            raise self.fail(n, f"expected a JSON object, got {type(obj).__name__}")
        if "choices" in obj:
            return self.chunk(obj, n)
        if "type" in obj and not sse:
            return [self.event(obj, n)]
        raise self.fail(n, "neither a contextcare event (no 'type') nor an OpenAI chunk"
                           " (no 'choices')")

    def event(self, obj: dict[str, Any], n: int) -> Event:
        kind = obj["type"]
        if kind not in EVENT_TYPES:
            allowed = ", ".join(EVENT_TYPES)
            raise self.fail(n, f"'type' must be one of {allowed}, got {kind!r}")
        stream = obj.get("stream")
        if isinstance(stream, int) and not isinstance(stream, bool):
            stream = str(stream)
        if not isinstance(stream, str):
            what = "missing" if stream is None else f"a {type(stream).__name__}"
            raise self.fail(n, f"'stream' must be a string or an integer, got {what}")
        text = obj.get("text")
        if kind in _DELTA_CHANNEL:
            if not isinstance(text, str):
                what = "missing" if "text" not in obj else f"a {type(text).__name__}"
                raise self.fail(n, f"'text' of a {kind} must be a string, got {what}")
        else:
            text = ""
        return Event(stream, kind, text, self.source, n)

    def chunk(self, obj: dict[str, Any], n: int) -> list[Event]:
        try:  # the one reader of chunk fields, shared with the stream filters
            choices = read_chunk(obj, "")
        except ContextCareError as exc:
            raise self.fail(n, str(exc)) from None
        base = obj.get("id")
        base = base if isinstance(base, str) and base else "chunk"
        out: list[Event] = []
        for choice in choices:
            stream = base if choice.index == 0 else f"{base}#{choice.index}"
            if stream not in self.open_chunk_streams:
                self.open_chunk_streams[stream] = None
                out.append(Event(stream, "start", "", self.source, n))
            else:  # keep the most recently active stream last, for [DONE]
                self.open_chunk_streams.pop(stream)
                self.open_chunk_streams[stream] = None
            for channel, text in choice.parts:
                kind = "reasoning-delta" if channel == "reasoning" else "text-delta"
                out.append(Event(stream, kind, text, self.source, n))
            if choice.finished:
                self.open_chunk_streams.pop(stream, None)
                out.append(Event(stream, "end", "", self.source, n))
        return out

    def done(self, n: int) -> list[Event]:
        if not self.open_chunk_streams:
            return []
        stream = next(reversed(self.open_chunk_streams))
        del self.open_chunk_streams[stream]
        return [Event(stream, "end", "", self.source, n)]


def iter_events(source: Source, *, on_error: Callable[[TraceFormatError], None] | None = None,
                progress: Callable[[int], None] | None = None) -> Iterator[Event]:
    """Read the events of one trace file.

    ``source`` is a path (``"-"`` for standard input) or an open file, binary (gzip is detected)
    or text. A malformed line raises :class:`TraceFormatError`, unless ``on_error`` is given: then
    it receives the error and reading goes on with the next line. ``progress``, if given, is
    called now and then with the number of (compressed) bytes read so far, when the source can
    tell its position. A damaged gzip stream raises :class:`TraceFormatError` in any case, since
    nothing after it can be read.
    """
    name = _source_name(source)
    parser = _Parser(name)
    owned: IO[bytes] | None = None
    lines: Iterable[bytes | str]
    if isinstance(source, (str, os.PathLike)):
        owned = _open_binary(source)
        lines = cast("Iterable[bytes | str]", _raw_lines(owned, progress))
    elif isinstance(source, io.TextIOBase):
        lines = cast("Iterable[bytes | str]", source)
    elif hasattr(source, "read"):
        lines = cast("Iterable[bytes | str]", _raw_lines(cast("IO[bytes]", source), progress))
    else:
        raise TypeError(f"source must be a path or an open file, got {type(source).__name__}")
    n = 0
    try:
        for n, raw in enumerate(lines, 1):
            try:
                events = parser.parse(raw, n)
            except TraceFormatError as exc:
                if on_error is None:
                    raise
                on_error(exc)
                continue
            yield from events
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise TraceFormatError(name, n + 1, f"damaged gzip data ({exc})") from None
    finally:
        if owned is not None and owned is not sys.stdin.buffer:
            owned.close()


# --------------------------------------------------------------------------- replay

@dataclass(frozen=True, slots=True)
class StreamResult:
    """What one attempt of one stream produced.

    ``attempt`` counts the ``start`` events of that stream in that source, from 1. ``complete`` is
    false when the input ended (or a new ``start`` arrived) before the stream's ``end``.
    ``deltas`` and ``chars`` count the non-empty deltas fed and their code points.
    """

    source: str
    stream: str
    attempt: int
    detections: tuple[Detection, ...]
    deltas: int
    chars: int
    complete: bool

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; detections as :meth:`Detection.to_dict`."""
        return {
            "source": self.source,
            "stream": self.stream,
            "attempt": self.attempt,
            "complete": self.complete,
            "deltas": self.deltas,
            "chars": self.chars,
            "detections": [d.to_dict() for d in self.detections],
        }


@dataclass(slots=True)
class _Open:
    watcher: Watcher
    attempt: int
    detections: list[Detection] = field(default_factory=list)
    deltas: int = 0
    chars: int = 0

    def result(self, source: str, stream: str, complete: bool) -> StreamResult:
        self.detections.extend(self.watcher.finish())
        return StreamResult(source, stream, self.attempt, tuple(self.detections), self.deltas,
                            self.chars, complete)


def replay(events: Iterable[Event], ruleset: Ruleset | None = None) -> Iterator[StreamResult]:
    """Feed events through ``ruleset`` (default: :func:`contextcare.default_ruleset`).

    Streams are told apart by ``(event.source, event.stream)``, so the same id in two files names
    two streams. Each attempt gets a fresh watcher; its result is yielded when the attempt ends
    (``end``, a new ``start``, or the end of ``events``, in the order the streams first appeared).
    Memory holds one watcher per stream that is open at the same time.
    """
    if ruleset is None:
        from .presets import default_ruleset

        ruleset = default_ruleset()
    open_: dict[tuple[str, str], _Open] = {}
    attempts: dict[tuple[str, str], int] = {}
    for event in events:
        key = (event.source, event.stream)
        state = open_.get(key)
        if event.type == "start" or (state is None and event.type != "end"):
            if state is not None:
                yield state.result(event.source, event.stream, complete=False)
            attempts[key] = attempts.get(key, 0) + 1
            state = open_[key] = _Open(ruleset.watcher(), attempts[key])
            if event.type == "start":
                continue
        if event.type == "end":
            if state is not None:
                del open_[key]
                yield state.result(event.source, event.stream, complete=True)
            continue
        assert state is not None
        channel = _DELTA_CHANNEL[event.type]
        if event.text:
            state.deltas += 1
            state.chars += len(event.text)
            state.detections.extend(state.watcher.feed(event.text, channel=channel))
    for (source, stream), state in open_.items():
        yield state.result(source, stream, complete=False)


def scan(source: Source, ruleset: Ruleset | None = None, *,
         on_error: Callable[[TraceFormatError], None] | None = None) -> list[StreamResult]:
    """Replay one trace file: :func:`iter_events` then :func:`replay`, as a list."""
    return list(replay(iter_events(source, on_error=on_error), ruleset))


def sample_events() -> list[Event]:
    """The events of every bundled sample trace, one sample after another.

    Each event's ``source`` is ``samples/NAME.jsonl``.
    """
    from importlib import resources

    folder = resources.files("contextcare") / "samples"
    events: list[Event] = []
    for name in SAMPLES:
        source = f"samples/{name}.jsonl"
        with (folder / f"{name}.jsonl").open("rb") as f:
            events += (Event(e.stream, e.type, e.text, source, e.line) for e in iter_events(f))
    return events
