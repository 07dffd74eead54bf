"""Recorded streams: read trace files and replay them through a ruleset.

Three formats are read, detected line by line, so one file may mix them:

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

* **OpenAI chat completions, saved whole** — non-streaming ``chat.completion`` objects (or legacy
  ``text_completion``). Each choice is one complete stream (``id``, ``id#N``), replayed as it was
  streamed: ``message.reasoning_content`` (or ``reasoning``) as one reasoning delta, then
  ``message.content`` (a string, or content parts whose ``text`` parts are joined) as one text
  delta. Detections do not depend on how a text is split into deltas, so these give exactly what
  the streamed chunks of the same reply give.

A line may also hold a JSON list of such objects. A file whose first non-blank line opens a JSON
object or list that it does not close (a pretty-printed completion, a list of them, ``jq``
output) is read as one JSON text instead, each object then read as a line would be, its line the
line where it starts; if that text is not JSON after all, reading falls back to line by line.
:func:`iter_text_events` reads a plain-text file as the text of one reply.

Files may be gzip-compressed (detected by their magic bytes, not their name). Blank lines are
skipped. A line that is not valid UTF-8, not JSON, or not one of the formats above is *malformed*:
:func:`iter_events` raises :class:`TraceFormatError` for it (naming the file and line number), or,
given ``on_error``, reports it there and goes on with the next line.

:func:`replay` feeds events through a ruleset, one watcher per open stream, and yields one
:class:`StreamResult` per attempt of each stream as soon as that attempt ends; its ``sites`` say
on which input line each detection fired (and, asked for, the text around it).
:class:`Replayer` is the same, one event at a time. :func:`scan` (and ``contextcare scan``)
read a file in blocks decoded by msgspec and feed each stream's deltas in one call per block,
with the same results (docs/scanning.md).
"""

from __future__ import annotations

import gzip
import io
import json
import os
import sys
import zlib
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, groupby
from operator import attrgetter
from typing import IO, TYPE_CHECKING, Any, Union, cast

import msgspec

from .chunks import read_chunk
from .detection import Detection
from .errors import ContextCareError
from .rules import EVIDENCE_LINE_CHARS

if TYPE_CHECKING:
    from ._engine import Ruleset, Watcher

__all__ = [
    "Event", "EVENT_TYPES", "TraceFormatError", "StreamResult", "iter_events", "iter_text_events",
    "replay", "Replayer", "Site", "scan", "DOCUMENT_MAX_CHARS", "LINE_MAX_BYTES", "UNIT_MAX_CHARS",
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

    def __init__(self, source: str, line: int, reason: str, excerpt: str = "") -> None:
        super().__init__(f"{source}:{line}: {reason}")
        self.source = source
        self.line = line
        self.reason = reason
        #: The start of the offending line as a Python literal (``repr`` of its first 80
        #: characters, or of its first 20 bytes when it is not UTF-8); may be empty.
        self.excerpt = excerpt

    def __reduce__(self) -> tuple[type[TraceFormatError], tuple[str, int, str, str]]:
        # picklable, so an error raised in a Ray worker reaches the driver intact
        return (type(self), (self.source, self.line, self.reason, self.excerpt))


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


#: The longest line read (UTF-8 bytes; characters of a text source, newline included): a longer
#: line is a :class:`TraceFormatError` naming its file and line, read past in pieces but never
#: held whole. ``max_line_bytes`` of :func:`iter_events` and :func:`iter_text_events` changes it.
LINE_MAX_BYTES = 64 << 20


class _LongLine:
    """Stands in for a line longer than the limit: its size, not its text."""

    __slots__ = ("size",)

    def __init__(self, size: int) -> None:
        self.size = size


def _bounded_lines(reader: Any, limit: int) -> Iterator[bytes | str | _LongLine]:
    """The lines of ``reader`` (binary or text), reading at most ``limit`` + 1 at a time."""
    if limit < 1:
        raise ValueError(f"max_line_bytes must be at least 1, got {limit}")
    readline = reader.readline
    while True:
        line = readline(limit + 1)
        if not line:
            return
        newline = b"\n" if isinstance(line, bytes) else "\n"
        if len(line) <= limit or line.endswith(newline):
            yield line
            continue
        size = len(line)
        del line
        while True:  # the rest of the line, in pieces, then on with the next one
            piece = readline(1 << 20)
            size += len(piece)
            if not piece or piece.endswith(newline):
                break
        yield _LongLine(size)


def _long_line_error(source: str, n: int, line: _LongLine, limit: int) -> TraceFormatError:
    return TraceFormatError(source, n, f"a line of {line.size} bytes, longer than the"
                                       f" {limit}-byte limit (max_line_bytes); it was skipped")


def _raw_lines(raw: IO[bytes], progress: Callable[[int], None] | None,
               limit: int = LINE_MAX_BYTES) -> Iterator[bytes | _LongLine]:
    """Lines of a binary stream, gunzipped when it starts with the gzip magic."""
    reader: Any = raw if hasattr(raw, "peek") else io.BufferedReader(cast(Any, raw))
    head = reader.peek(2)[:2]
    source: Any = gzip.GzipFile(fileobj=reader) if head == _GZIP_MAGIC else reader
    lines = cast("Iterator[bytes | _LongLine]", _bounded_lines(source, limit))
    report = progress if progress is not None and raw.seekable() else None
    for n, line in enumerate(lines, 1):
        if report is not None and n % _PROGRESS_EVERY == 0:
            report(raw.tell())
        yield line
    if report is not None:
        report(raw.tell())


#: The most a file read as one JSON document (not one object per line) may hold, in characters.
DOCUMENT_MAX_CHARS = 256 << 20
_EXCERPT_CHARS = 80


def _content_text(value: object) -> object:
    """``message.content`` as text: a string as is; a list of content parts joined (the text of
    its ``text`` parts); anything else unchanged (the caller reports it)."""
    if isinstance(value, list) and all(isinstance(part, dict) for part in value):
        return "".join(part["text"] for part in value
                       if part.get("type") in ("text", "output_text")
                       and isinstance(part.get("text"), str))
    return value


class _Parser:
    """Turns the lines of one file into events; keeps the per-file state of chunk streams."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.open_chunk_streams: dict[str, None] = {}  # insertion-ordered set
        self.content_lines = 0  # non-blank lines seen
        self.excerpt = ""
        self.maybe_document = False  # the first content line opens a JSON value it does not close

    def fail(self, line: int, reason: str) -> TraceFormatError:
        return TraceFormatError(self.source, line, reason, self.excerpt)

    def parse(self, raw: bytes | str, n: int) -> list[Event]:
        if isinstance(raw, bytes):
            if n == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            data = raw.strip()
            if not data or data.startswith(_SSE_SKIP):
                return []
            self.content_lines += 1
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                self.excerpt = repr(data[:_EXCERPT_CHARS // 4])
                raise self.fail(n, f"not valid UTF-8 (byte {exc.start})") from None
        else:
            text = raw.lstrip("\ufeff").strip() if n == 1 else raw.strip()
            if not text or text.startswith(("event:", "id:", "retry:", ":")):
                return []
            self.content_lines += 1
        self.excerpt = repr(text[:_EXCERPT_CHARS])
        sse = text.startswith("data:")
        if sse:
            text = text[5:].strip()
            if text == "[DONE]":
                return self.done(n)
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            self.maybe_document = (self.content_lines == 1 and not sse
                                   and text.startswith(("{", "[")))
            raise self.fail(n, f"not JSON ({exc.msg} at column {exc.colno})") from None
        if isinstance(obj, list) and not sse:  # a list of objects on one line
            if not obj:
                raise self.fail(n, "expected a JSON object, got an empty list")
            out: list[Event] = []
            for item in obj:
                out += self.value(item, n)
            return out
        return self.value(obj, n, sse)

    def value(self, obj: object, n: int, sse: bool = False) -> list[Event]:
        """The events of one JSON value: an event, a chunk or a completion object."""
        if not isinstance(obj, dict):
            raise self.fail(n, f"expected a JSON object, got {type(obj).__name__}")
        if "choices" in obj:
            if self.is_completion(obj):
                return self.completion(obj, n)
            return self.chunk(obj, n)
        if "type" in obj and not sse:
            return [self.event(obj, n)]
        raise self.fail(n, "neither a contextcare event (no 'type') nor an OpenAI chunk or"
                           " completion (no 'choices')")

    @staticmethod
    def is_completion(obj: dict[str, Any]) -> bool:
        kind = obj.get("object")
        if kind in ("chat.completion", "text_completion"):
            return True
        if kind == "chat.completion.chunk":
            return False
        choices = obj["choices"]
        return (isinstance(choices, list) and bool(choices) and isinstance(choices[0], dict)
                and "delta" not in choices[0] and ("message" in choices[0]
                                                   or isinstance(choices[0].get("text"), str)))

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

    def completion(self, obj: dict[str, Any], n: int) -> list[Event]:
        """A non-streaming ``chat.completion`` (or legacy ``text_completion``): each choice is one
        whole stream, replayed as it was streamed: its reasoning, then its content, as one delta
        each (detections do not depend on how a text is split into deltas)."""
        choices = obj["choices"]
        if not isinstance(choices, list):
            raise self.fail(n, f"'choices' must be a list, got {type(choices).__name__}")
        base = obj.get("id")
        base = base if isinstance(base, str) and base else "completion"
        out: list[Event] = []
        for choice in choices:
            if not isinstance(choice, dict):
                raise self.fail(n, "each of 'choices' must be an object")
            index = choice.get("index")
            if index is not None and (isinstance(index, bool) or not isinstance(index, int)
                                      or index < 0):
                raise self.fail(n, f"'index' of a completion choice must be an int >= 0 or"
                                   f" null, got {index!r}")
            stream = base if not index else f"{base}#{index}"
            message = choice.get("message")
            if message is None and "text" in choice:
                message = {"content": choice["text"]}
            if not isinstance(message, dict):
                what = "missing" if message is None else f"a {type(message).__name__}"
                raise self.fail(n, f"'message' of a completion choice must be an object, got"
                                   f" {what}")
            reasoning = message.get("reasoning_content")
            if reasoning is None:
                reasoning = message.get("reasoning")
            content = _content_text(message.get("content"))
            if content is not None and not isinstance(content, str):
                raise self.fail(n, f"'message.content' must be a string, a list of content"
                                   f" parts or null, got {type(content).__name__}")
            out.append(Event(stream, "start", "", self.source, n))
            if isinstance(reasoning, str) and reasoning:
                out.append(Event(stream, "reasoning-delta", reasoning, self.source, n))
            if content:
                out.append(Event(stream, "text-delta", content, self.source, n))
            out.append(Event(stream, "end", "", self.source, n))
        return out

    def done(self, n: int) -> list[Event]:
        if not self.open_chunk_streams:
            return []
        stream = next(reversed(self.open_chunk_streams))
        del self.open_chunk_streams[stream]
        return [Event(stream, "end", "", self.source, n)]


class _DocumentError(Exception):
    """Where and why a JSON document cannot be read (made a TraceFormatError by the caller)."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(reason)
        self.line = line
        self.reason = reason


def _document_values(text: str, first_line: int) -> Iterator[tuple[object, int]]:
    """The top-level JSON values of ``text`` (one document, a list, or several documents one after
    another), the items of a top-level list one by one; each with the line it starts on."""
    decoder = json.JSONDecoder()
    pos, line, counted = 0, first_line, 0
    size = len(text)

    def skip(at: int) -> int:
        while at < size and text[at] in " \t\r\n":
            at += 1
        return at

    def line_of(at: int) -> int:
        nonlocal line, counted
        line += text.count("\n", counted, at)
        counted = at
        return line

    def decode(at: int) -> tuple[object, int]:
        try:
            return decoder.raw_decode(text, at)
        except json.JSONDecodeError as exc:
            raise _DocumentError(first_line + exc.lineno - 1,
                                 f"not JSON ({exc.msg} at column {exc.colno})") from None

    while (pos := skip(pos)) < size:
        if text[pos] != "[":
            start = line_of(pos)
            value, pos = decode(pos)
            yield value, start
            continue
        pos = skip(pos + 1)
        while pos < size and text[pos] != "]":
            start = line_of(pos)
            value, pos = decode(pos)
            yield value, start
            pos = skip(pos)
            if pos < size and text[pos] == ",":
                pos = skip(pos + 1)
            elif pos < size and text[pos] != "]":
                raise _DocumentError(line_of(pos), "expected ',' or ']' in a JSON list")
        if pos >= size:
            raise _DocumentError(line_of(pos), "a JSON list that is never closed")
        pos += 1


def _read_document(parser: _Parser, first: bytes | str, rest: Iterable[bytes | str | _LongLine],
                   n: int,
                   first_error: TraceFormatError,
                   on_error: Callable[[TraceFormatError], None] | None) -> Iterator[Event]:
    """Read a file whose first line opens a JSON value it does not close (a pretty-printed
    completion, a list of them, ``jq`` output) as a whole JSON text, from its line ``n`` on."""
    parts: list[bytes | str] = [first]
    size = len(first)
    for m, raw in enumerate(rest, n + 1):
        if isinstance(raw, _LongLine):
            raise parser.fail(m, f"a line of {raw.size} bytes in a JSON document, longer than"
                                 " the line limit (max_line_bytes)")
        size += len(raw)
        if size > DOCUMENT_MAX_CHARS:
            raise parser.fail(n, f"a JSON document larger than {DOCUMENT_MAX_CHARS >> 20} MiB;"
                                 " write one JSON object per line (JSON lines) instead")
        parts.append(raw)
    values = 0
    try:
        if isinstance(first, bytes):
            data = b"".join(cast("list[bytes]", parts))
            try:
                text = data.decode("utf-8").lstrip("\ufeff")
            except UnicodeDecodeError as exc:
                raise _DocumentError(n + data.count(b"\n", 0, exc.start),
                                     f"not valid UTF-8 (byte {exc.start})") from None
        else:
            text = "".join(cast("list[str]", parts)).lstrip("\ufeff")
        for value, line in _document_values(text, n):
            values += 1
            try:
                yield from parser.value(value, line)
            except TraceFormatError as exc:
                if on_error is None:
                    raise
                on_error(exc)
    except _DocumentError as exc:
        if values:  # a document read in part: what follows the error cannot be read
            error = parser.fail(exc.line, exc.reason)
            if on_error is None:
                raise error from None
            on_error(error)
            return
        # not a JSON document after all (a cut first line, then JSON lines): line by line
        if on_error is None:
            raise first_error from None
        on_error(first_error)
        for m, raw in enumerate(parts[1:], n + 1):
            try:
                yield from parser.parse(raw, m)
            except TraceFormatError as line_error:
                on_error(line_error)


def _open_lines(source: Source, progress: Callable[[int], None] | None,
                limit: int = LINE_MAX_BYTES
                ) -> tuple[Iterable[bytes | str | _LongLine], IO[bytes] | None]:
    owned: IO[bytes] | None = None
    lines: Iterable[bytes | str | _LongLine]
    if isinstance(source, (str, os.PathLike)):
        owned = _open_binary(source)
        lines = _raw_lines(owned, progress, limit)
    elif isinstance(source, io.TextIOBase):
        lines = _bounded_lines(source, limit)
    elif hasattr(source, "read"):
        lines = _raw_lines(cast("IO[bytes]", source), progress, limit)
    else:
        raise TypeError(f"source must be a path or an open file, got {type(source).__name__}")
    return lines, owned


def _iter_events_lines(source: Source, *,
                       on_error: Callable[[TraceFormatError], None] | None = None,
                       progress: Callable[[int], None] | None = None,
                       max_line_bytes: int = LINE_MAX_BYTES) -> Iterator[Event]:
    """The line-by-line reader (``json.loads`` per line): the reference :func:`iter_events`
    follows exactly, and the reader of text sources. Same contract as :func:`iter_events`.

    ``source`` is a path (``"-"`` for standard input) or an open file, binary (gzip is detected)
    or text. A malformed line raises :class:`TraceFormatError`, unless ``on_error`` is given: then
    it receives the error and reading goes on with the next line. ``progress``, if given, is
    called now and then with the number of (compressed) bytes read so far, when the source can
    tell its position. A damaged gzip stream raises :class:`TraceFormatError` in any case, since
    nothing after it can be read.

    A file whose first non-blank line opens a JSON object or list that it does not close is read
    as one JSON text (at most :data:`DOCUMENT_MAX_CHARS`): a pretty-printed completion, a list of
    objects, or several documents one after another; each object is then read as a line would be.
    A line longer than ``max_line_bytes`` (default :data:`LINE_MAX_BYTES`, 64 MiB) is malformed:
    it is read past in pieces, never held whole.
    """
    name = _source_name(source)
    parser = _Parser(name)
    lines, owned = _open_lines(source, progress, max_line_bytes)
    n = 0
    try:
        iterator = iter(enumerate(lines, 1))
        for n, raw in iterator:
            if isinstance(raw, _LongLine):
                error = _long_line_error(name, n, raw, max_line_bytes)
                if on_error is None:
                    raise error
                on_error(error)
                continue
            try:
                events = parser.parse(raw, n)
            except TraceFormatError as exc:
                if parser.maybe_document:
                    yield from _read_document(parser, raw, (line for _, line in iterator), n,
                                              exc, on_error)
                    return
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


# --------------------------------------------------------------------------- the fast reader
#
# ``contextcare scan`` spends its time here: one JSON line per delta. The fast path decodes each
# line with msgspec into the typed Structs below (one per shape of a line: a contextcare event or
# an OpenAI chunk, and the choice and delta of a chunk), which reject unknown fields, values of
# another type, and JSON the standard library would not give the same way (NaN, integers out of
# range, lone surrogates, invalid UTF-8: msgspec checks every string it decodes, and with unknown
# fields refused it decodes every string of the line). A line the Structs cannot take is decoded
# again into plain dicts by msgspec (fields the Structs do not know, completions) and read by
# :class:`_Parser` as a line would be; a line msgspec cannot decode at all, and every error, goes
# to :meth:`_Parser.parse` (``json.loads``), which gives the messages of the line reader. So the
# events and the errors are those of :func:`_iter_events_lines`, line by line (tests/
# test_scan_fast.py holds the two readers to it). The first content line of a file always takes
# the line reader (a byte-order mark, a file that is one JSON document).
#
# The reader yields *blocks*: lists of operations in line order, each a tuple:
#   (_START, stream, line), (_END, stream, line),
#   (_DELTAS, stream, channel, [text, ...], [line, ...])  consecutive deltas of one stream and
#       channel, their texts and lines,
#   (_ERROR, TraceFormatError, None)  a malformed line, when the caller takes errors (on_error).
# Without on_error, the first error is raised after the operations before it were handed out.


class _ChunkDelta(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    content: Union[str, None] = None
    reasoning_content: Any = None
    reasoning: Any = None
    role: Any = None
    refusal: Any = None
    tool_calls: Any = None
    function_call: Any = None


class _ChunkChoice(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    index: Union[int, None] = None
    delta: Union[_ChunkDelta, None] = None
    finish_reason: Any = None
    logprobs: Any = None


class _Line(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """One trace line: a contextcare event (``type``, ``stream``, ``text``) or an OpenAI chunk
    (``choices`` and the chunk's other fields). A field the line lacks is ``None`` (``UNSET``
    for ``choices``, which may be null); a null where a string is expected is refused."""

    type: str = None  # type: ignore[assignment]
    stream: Union[str, int] = None  # type: ignore[assignment]
    text: str = None  # type: ignore[assignment]
    choices: Union[list[_ChunkChoice], None, msgspec.UnsetType] = msgspec.UNSET
    id: Any = None
    object: Any = None
    created: Any = None
    model: Any = None
    system_fingerprint: Any = None
    service_tier: Any = None
    usage: Any = None
    obfuscation: Any = None


_START, _END, _DELTAS, _ERROR = 0, 1, 2, 3
_CONTROL = {"start": _START, "end": _END}
_KIND_OF_OP = {_START: "start", _END: "end"}
_CHANNEL_KIND = {"text": "text-delta", "reasoning": "reasoning-delta"}
#: Lines (and bytes) per block of the fast reader: memory holds one block of decoded text.
#: 64 KiB blocks keep a block's structs in the caches (1 MiB ones ran ~30 % slower here).
_BLOCK_LINES = 8192
_BLOCK_BYTES = 64 << 10
_LINE_DECODER = msgspec.json.Decoder(_Line)
_ANY_DECODER = msgspec.json.Decoder()
_MSGSPEC_ERRORS = (msgspec.DecodeError, msgspec.ValidationError)
_EVENT_KEY = attrgetter("type", "stream", "choices")


def _add_delta(ops: list[Any], stream: str, channel: str, text: str, n: int) -> None:
    last = ops[-1] if ops else None
    if last is not None and last[2] is channel and last[1] == stream:
        last[3].append(text)
        last[4].append(n)
    else:
        ops.append((_DELTAS, stream, channel, [text], [n]))


def _add_events(ops: list[Any], events: Iterable[Event]) -> None:
    for e in events:
        channel = _DELTA_CHANNEL.get(e.type)
        if channel is not None:
            _add_delta(ops, e.stream, channel, e.text, e.line)
        else:
            ops.append((_CONTROL[e.type], e.stream, e.line))


def _chunk_ops(parser: _Parser, line: _Line, n: int, ops: list[Any]) -> bool:
    """The operations of a chunk decoded into a :class:`_Line`, as :meth:`_Parser.chunk` reads
    it; ``False`` (nothing done) for what only the parser can take (a completion, an error)."""
    kind = line.object
    if kind == "chat.completion" or kind == "text_completion":
        return False
    choices = line.choices
    if not choices:  # null or [], no text: usage-only chunks
        return choices is not msgspec.UNSET
    for choice in choices:
        if choice.index is not None and choice.index < 0:
            return False
    base = line.id if isinstance(line.id, str) and line.id else "chunk"
    open_streams = parser.open_chunk_streams
    if len(choices) == 1 and ops:  # the usual chunk: one choice, its stream already open
        choice = choices[0]
        stream = base if not choice.index else f"{base}#{choice.index}"
        delta = choice.delta
        last = ops[-1]
        if (stream in open_streams and choice.finish_reason is None and delta is not None
                and last[1] == stream):
            reasoning = delta.reasoning_content
            if not isinstance(reasoning, str) or not reasoning:
                reasoning = delta.reasoning
            content = delta.content
            if isinstance(reasoning, str) and reasoning and not content:
                text, channel = reasoning, "reasoning"
            elif content and not (isinstance(reasoning, str) and reasoning):
                text, channel = content, "text"
            else:
                text, channel = "", None
            if channel is not None and last[2] is channel:  # one more delta of the last run
                del open_streams[stream]
                open_streams[stream] = None
                last[3].append(text)
                last[4].append(n)
                return True
    for choice in choices:
        stream = base if not choice.index else f"{base}#{choice.index}"
        if stream not in open_streams:
            open_streams[stream] = None
            ops.append((_START, stream, n))
        else:  # keep the most recently active stream last, for [DONE]
            del open_streams[stream]
            open_streams[stream] = None
        delta = choice.delta
        if delta is not None:
            reasoning = delta.reasoning_content
            if not isinstance(reasoning, str) or not reasoning:
                reasoning = delta.reasoning
            if isinstance(reasoning, str) and reasoning:
                _add_delta(ops, stream, "reasoning", reasoning, n)
            if delta.content:
                _add_delta(ops, stream, "text", delta.content, n)
        if choice.finish_reason is not None:
            open_streams.pop(stream, None)
            ops.append((_END, stream, n))
    return True


def _event_blocks(read: Callable[[Callable[[TraceFormatError], None] | None], Iterable[Event]],
                  keep_errors: bool) -> Iterator[list[Any]]:
    """Blocks of operations from a reader of events (``read(on_error)``), errors in line order."""
    ops: list[Any] = []

    def on_error(exc: TraceFormatError) -> None:
        ops.append((_ERROR, exc, None))

    count = size = 0
    try:
        for event in read(on_error if keep_errors else None):
            _add_events(ops, (event,))
            count += 1
            size += len(event.text)
            if count >= _BLOCK_LINES or size >= _BLOCK_BYTES:  # one run may hold them all
                yield ops
                ops = []
                count = size = 0
    except (TraceFormatError, KeyboardInterrupt):  # the events before it are replayed first
        if ops:
            yield ops
        raise
    if ops:
        yield ops


def _source_ops(source: Source, keep_errors: bool, progress: Callable[[int], None] | None,
                limit: int) -> Iterator[list[Any]]:
    """The blocks of operations of one trace file (see above). ``keep_errors``: malformed lines
    are ``_ERROR`` operations; else the first one is raised (after the operations before it)."""
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"max_line_bytes must be an int, got {type(limit).__name__}")
    if limit < 1:
        raise ValueError(f"max_line_bytes must be at least 1, got {limit}")
    name = _source_name(source)
    if isinstance(source, io.TextIOBase):  # text sources: the line reader
        yield from _event_blocks(lambda on_error: _iter_events_lines(
            source, on_error=on_error, progress=progress, max_line_bytes=limit), keep_errors)
        return
    owned: IO[bytes] | None = None
    if isinstance(source, (str, os.PathLike)):
        owned = raw = _open_binary(source)
    elif hasattr(source, "read"):
        raw = cast("IO[bytes]", source)
    else:
        raise TypeError(f"source must be a path or an open file, got {type(source).__name__}")
    parser = _Parser(name)
    ops: list[Any] = []
    n = 0
    failure: TraceFormatError | None = None
    decode = _LINE_DECODER.decode
    errors = _MSGSPEC_ERRORS
    unset = msgspec.UNSET
    channels = _DELTA_CHANNEL

    def report_error(error: TraceFormatError) -> None:
        if not keep_errors:
            raise error
        ops.append((_ERROR, error, None))

    def take(raw_line: bytes, n: int) -> bool:
        """Any line but a contextcare event the caller's typed path took: chunks, SSE, blank
        lines, then msgspec into dicts, then the line reader. False once a JSON document
        has taken the rest of the file."""
        first = raw_line[0]
        body = None
        if parser.content_lines:  # the first content line always takes the line reader
            if first == 123:  # '{'
                body = raw_line
                try:
                    line = decode(raw_line)
                except errors:
                    line = None
                if (line is not None and line.choices is not unset
                        and _chunk_ops(parser, line, n, ops)):
                    return True
            elif first == 10 or raw_line == b"\r\n":  # a blank line
                return True
            elif first == 100 and raw_line.startswith(b"data:"):  # server-sent events
                body = raw_line[5:]
                if body.strip() == b"[DONE]":
                    _add_events(ops, parser.done(n))
                    return True
                try:
                    line = decode(body)
                except errors:
                    line = None
                if (line is not None and line.choices is not unset
                        and _chunk_ops(parser, line, n, ops)):
                    return True
            if body is not None:  # JSON the Structs do not take: plain dicts, if msgspec can
                try:
                    obj = _ANY_DECODER.decode(body)
                except errors:
                    pass
                else:
                    try:
                        events = parser.value(obj, n, first == 100)
                    except TraceFormatError:
                        pass  # the line reader gives the error, with its excerpt
                    else:
                        _add_events(ops, events)
                        return True
        try:
            events = parser.parse(raw_line, n)
        except TraceFormatError as exc:
            if parser.maybe_document:
                _add_events(ops, _read_document(
                    parser, raw_line, _bounded_lines(reader, limit), n, exc,
                    report_error if keep_errors else None))
                return False
            report_error(exc)
            return True
        _add_events(ops, events)
        return True

    try:
        reader: Any = raw if hasattr(raw, "peek") else io.BufferedReader(cast(Any, raw))
        if reader.peek(2)[:2] == _GZIP_MAGIC:
            # the GzipFile's own buffer, as its readline uses it (without a Python call per line)
            gz = gzip.GzipFile(fileobj=reader)
            reader = getattr(gz, "_buffer", gz)
            read_block = reader.read1  # one read at a time: what a damaged stream gave is kept
        else:
            read_block = reader.read
        report = progress if progress is not None and raw.seekable() else None
        readline = reader.readline
        size = limit + 1
        step = _PROGRESS_EVERY if report is not None else _BLOCK_LINES
        block_end = check = step
        got = 0
        # a pipe (a live capture): hand out what ends a stream (or is an error) before waiting
        # for more input, so results come as soon as today's line-by-line reading gives them.
        # A file: whole blocks of lines are read at once once the first content line is read.
        live = not raw.seekable()
        blockwise = not live and limit >= _BLOCK_BYTES
        while True:
            if live and ops and ops[-1][0] != _DELTAS:
                yield ops
                ops = []
            if blockwise and parser.content_lines:
                if ops:
                    yield ops
                    ops = []
                if report is not None:
                    report(raw.tell())
                data = read_block(_BLOCK_BYTES)
                if not data:
                    break
                long_size = 0
                if not data.endswith(b"\n"):  # complete the last line, within the limit
                    cut = data.rfind(b"\n") + 1
                    try:
                        data += readline(size - (len(data) - cut))
                    except (EOFError, gzip.BadGzipFile, zlib.error):
                        if cut:  # the whole lines before the damage, as line by line
                            _block_events(data[:cut], n, ops, parser, take)
                            n += data.count(b"\n", 0, cut)
                        raise
                    if len(data) - cut > limit and not data.endswith(b"\n"):
                        long_size = len(data) - cut
                        data = data[:cut]
                if data and not _block_events(data, n, ops, parser, take):
                    break  # a JSON document took the rest (not after the first line: no)
                n += data.count(b"\n") + (0 if not data or data.endswith(b"\n") else 1)
                if long_size:
                    while True:  # the rest of the line, in pieces, then on with the next one
                        piece = readline(1 << 20)
                        long_size += len(piece)
                        if not piece or piece.endswith(b"\n"):
                            break
                    n += 1
                    report_error(_long_line_error(name, n, _LongLine(long_size), limit))
                continue
            raw_line = readline(size)
            if not raw_line:
                break
            n += 1
            got += len(raw_line)
            if n >= check or got >= _BLOCK_BYTES:
                if report is not None:
                    report(raw.tell())
                if n >= block_end or got >= _BLOCK_BYTES:
                    if ops:
                        yield ops
                        ops = []
                    block_end = n + _BLOCK_LINES
                    got = 0
                check = n + step
            if len(raw_line) > limit and not raw_line.endswith(b"\n"):
                length = len(raw_line)
                del raw_line
                while True:  # the rest of the line, in pieces, then on with the next one
                    piece = readline(1 << 20)
                    length += len(piece)
                    if not piece or piece.endswith(b"\n"):
                        break
                report_error(_long_line_error(name, n, _LongLine(length), limit))
                continue
            if raw_line == b"\n":  # a blank line (between server-sent events): nothing
                continue
            if raw_line[0] == 123 and parser.content_lines:  # '{': a contextcare event?
                try:
                    line = decode(raw_line)
                except errors:
                    line = None
                if line is not None and line.choices is unset:
                    stream = line.stream
                    if stream.__class__ is int:
                        stream = str(stream)
                    kind = line.type
                    channel = channels.get(kind)
                    if channel is not None:
                        text = line.text
                        if text is not None and stream is not None:
                            last = ops[-1] if ops else None
                            if last is not None and last[2] is channel and last[1] == stream:
                                last[3].append(text)
                                last[4].append(n)
                            else:
                                ops.append((_DELTAS, stream, channel, [text], [n]))
                            continue
                    elif stream is not None and (kind == "start" or kind == "end"):
                        ops.append((_START if kind == "start" else _END, stream, n))
                        continue
            if not take(raw_line, n):
                break
        if report is not None:
            report(raw.tell())
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        failure = TraceFormatError(name, n + 1, f"damaged gzip data ({exc})")
    except TraceFormatError as exc:
        failure = exc
    except KeyboardInterrupt:  # what was read before Ctrl-C is still replayed
        if ops:
            yield ops
        raise
    finally:
        if owned is not None and owned is not sys.stdin.buffer:
            owned.close()
    if ops:
        yield ops
    if failure is not None:
        raise failure


def _block_events(data: bytes, n: int, ops: list[Any], parser: _Parser,
                  take: Callable[[bytes, int], bool]) -> bool:
    """The lines of ``data`` (whole lines, the first numbered ``n + 1``) into ``ops``: decoded
    at once when every line is one JSON object (starts with ``{``, ends with ``}``: then no
    object can span two lines, and as many objects as lines means one per line), contextcare
    events taken here, a group at a time, any other line by ``take``. False when ``take`` says
    a JSON document took the rest of the file."""
    count = data.count(b"\n")
    lines = count + (0 if data[-1] == 10 else 1)
    items: list[Any] | None = None
    if (data[0] == 123 and (data.endswith(b"}\n") or data.endswith(b"}"))
            and data.count(b"}\n{") == lines - 1):
        try:
            items = _LINE_DECODER.decode_lines(data)
        except _MSGSPEC_ERRORS:
            items = None
        if items is not None and len(items) != lines:
            items = None
    if items is None:
        split_lines = data.split(b"\n")
        for j in range(lines):
            if not take(split_lines[j] + b"\n" if j < count else split_lines[j], n + j + 1):
                return False
        return True
    unset = msgspec.UNSET
    channels = _DELTA_CHANNEL
    raw_lines = None
    first = n + 1  # the line of items[j] is first + j
    j = 0
    for (kind, stream, choices), group in groupby(items, _EVENT_KEY):
        channel = channels.get(kind)
        if channel is not None and choices is unset and stream is not None:
            texts = [line.text for line in group]
            if None not in texts:  # consecutive deltas of one stream and channel: one run
                if stream.__class__ is int:
                    stream = str(stream)
                size = len(texts)
                numbers = list(range(first + j, first + j + size))
                last = ops[-1] if ops else None
                if last is not None and last[2] is channel and last[1] == stream:
                    last[3].extend(texts)
                    last[4].extend(numbers)
                else:
                    ops.append((_DELTAS, stream, channel, texts, numbers))
                j += size
                continue
            group = iter(texts)  # not one run: the lines go one by one, by the line reader
        if (kind == "start" or kind == "end") and choices is unset and stream is not None:
            if stream.__class__ is int:
                stream = str(stream)
            tag = _START if kind == "start" else _END
            for _ in group:
                ops.append((tag, stream, first + j))
                j += 1
            continue
        for line in group:  # anything else: line by line
            if choices is not unset and _chunk_ops(parser, line, first + j, ops):
                j += 1
                continue
            if raw_lines is None:
                raw_lines = data.split(b"\n")
            if not take(raw_lines[j] + b"\n" if j < count else raw_lines[j], first + j):
                return False
            j += 1
    return True


def iter_events(source: Source, *, on_error: Callable[[TraceFormatError], None] | None = None,
                progress: Callable[[int], None] | None = None,
                max_line_bytes: int = LINE_MAX_BYTES) -> Iterator[Event]:
    """Read the events of one trace file.

    ``source`` is a path (``"-"`` for standard input) or an open file, binary (gzip is detected)
    or text. A malformed line raises :class:`TraceFormatError`, unless ``on_error`` is given: then
    it receives the error and reading goes on with the next line. ``progress``, if given, is
    called now and then with the number of (compressed) bytes read so far, when the source can
    tell its position. A damaged gzip stream raises :class:`TraceFormatError` in any case, since
    nothing after it can be read.

    A file whose first non-blank line opens a JSON object or list that it does not close is read
    as one JSON text (at most :data:`DOCUMENT_MAX_CHARS`): a pretty-printed completion, a list of
    objects, or several documents one after another; each object is then read as a line would be.
    A line longer than ``max_line_bytes`` (default :data:`LINE_MAX_BYTES`, 64 MiB) is malformed:
    it is read past in pieces, never held whole.

    Lines are decoded in blocks (64 KiB at a time) by msgspec into typed structures, with the
    line-by-line reader for every line that needs it (docs/scanning.md): the events and errors
    are the same, and reading runs a block ahead of the events yielded (on a pipe, no further
    than the next ``end`` or malformed line).
    """
    name = _source_name(source)
    for ops in _source_ops(source, on_error is not None, progress, max_line_bytes):
        for op in ops:
            tag = op[0]
            if tag == _DELTAS:
                stream, kind = op[1], _CHANNEL_KIND[op[2]]
                for text, n in zip(op[3], op[4]):
                    yield Event(stream, kind, text, name, n)
            elif tag == _ERROR:
                assert on_error is not None
                on_error(op[1])
            else:
                yield Event(op[1], _KIND_OF_OP[tag], "", name, op[2])


def iter_text_events(source: Source, *, channel: str = "text", stream: str = "reply",
                     on_error: Callable[[TraceFormatError], None] | None = None,
                     progress: Callable[[int], None] | None = None,
                     max_line_bytes: int = LINE_MAX_BYTES) -> Iterator[Event]:
    """Read a plain-text file (plain or gzip) as the text of one reply on ``channel``
    (``"text"`` or ``"reasoning"``): one stream named ``stream``, one delta per line, so each
    detection points to the line it fired on. A line that is not valid UTF-8, or longer than
    ``max_line_bytes``, is malformed, as in :func:`iter_events`."""
    if channel not in ("text", "reasoning"):
        raise ValueError(f"channel must be 'text' or 'reasoning', got {channel!r}")
    kind = f"{channel}-delta"
    name = _source_name(source)
    lines, owned = _open_lines(source, progress, max_line_bytes)
    n = 0
    try:
        yield Event(stream, "start", "", name, 1)
        for n, raw in enumerate(lines, 1):
            if isinstance(raw, _LongLine):
                error = _long_line_error(name, n, raw, max_line_bytes)
                if on_error is None:
                    raise error
                on_error(error)
                continue
            if isinstance(raw, bytes):
                if n == 1 and raw.startswith(b"\xef\xbb\xbf"):
                    raw = raw[3:]
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    error = TraceFormatError(name, n, f"not valid UTF-8 (byte {exc.start})",
                                             repr(raw[:_EXCERPT_CHARS // 4]))
                    if on_error is None:
                        raise error from None
                    on_error(error)
                    continue
            else:
                text = raw.lstrip("\ufeff") if n == 1 else raw
            if text:
                yield Event(stream, kind, text, name, n)
        yield Event(stream, "end", "", name, max(n, 1))
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise TraceFormatError(name, n + 1, f"damaged gzip data ({exc})") from None
    finally:
        if owned is not None and owned is not sys.stdin.buffer:
            owned.close()


# --------------------------------------------------------------------------- replay

#: The most of a repeating unit a :class:`Site` holds (longer units are cut, and marked so).
UNIT_MAX_CHARS = 256
#: The most deltas a :class:`Replayer` collects (all streams together) before it feeds them.
_PENDING_DELTAS = 1 << 16


@dataclass(frozen=True, slots=True)
class Site:
    """Where a detection fired in its input, and the text around it (see :func:`replay`).

    ``line`` is the 1-based line of the source holding the event at which the detection fired
    (for a detection of ``finish()``, the stream's ``end`` event, or its last event when the input
    ended first); 0 when the events carry no line. ``unit`` is, for a repeating tail
    (``tail-repeat``), the whole repeating unit read back from the replayed text, cut to
    :data:`UNIT_MAX_CHARS` (``unit_cut`` true) when the period is longer; ``None`` otherwise.
    ``before`` and ``after`` are the text of the detection's channel view just before and after
    its offset (``context`` code points at most), when :func:`replay` was asked for context.
    ``repeated`` is, for a ``line-repeat`` whose evidence line the engine cut to its first
    :data:`~contextcare.rules.EVIDENCE_LINE_CHARS` characters, the whole line read back from the
    replayed text (at most :data:`UNIT_MAX_CHARS`; ``repeated_cut`` true when it is longer or
    could not be read back).
    """

    line: int
    unit: str | None = None
    unit_cut: bool = False
    before: str | None = None
    after: str | None = None
    repeated: str | None = None
    repeated_cut: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready fields this adds to a detection's dict."""
        out: dict[str, Any] = {"source_line": self.line}
        if self.unit is not None:
            out["unit"] = self.unit
            if self.unit_cut:
                out["unit_cut"] = True
        if self.repeated is not None:
            out["line"] = self.repeated
            if self.repeated_cut:
                out["line_cut"] = True
        if self.before is not None:
            out["context"] = {"before": self.before, "after": self.after or ""}
        return out


@dataclass(frozen=True, slots=True)
class StreamResult:
    """What one attempt of one stream produced.

    ``attempt`` counts the ``start`` events of that stream in that source, from 1. ``complete`` is
    false when the input ended (or a new ``start`` arrived) before the stream's ``end``.
    ``deltas`` and ``chars`` count the non-empty deltas fed and their code points. ``sites``
    (one per detection, or empty) say where each detection fired in the input.
    """

    source: str
    stream: str
    attempt: int
    detections: tuple[Detection, ...]
    deltas: int
    chars: int
    complete: bool
    sites: tuple[Site, ...] = ()

    def detection_dicts(self) -> list[dict[str, Any]]:
        """Each detection as :meth:`Detection.to_dict`, with its :class:`Site` fields when known
        (``source_line``; the whole ``unit`` of a repeating tail; ``context``)."""
        if len(self.sites) != len(self.detections):
            return [d.to_dict() for d in self.detections]
        return [{**d.to_dict(), **site.to_dict()}
                for d, site in zip(self.detections, self.sites)]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; detections as :meth:`detection_dicts`."""
        return {
            "source": self.source,
            "stream": self.stream,
            "attempt": self.attempt,
            "complete": self.complete,
            "deltas": self.deltas,
            "chars": self.chars,
            "detections": self.detection_dicts(),
        }


class _Ring:
    """The recent text of one channel view: at least ``keep`` code points before the last delta,
    and all of the last delta. Amortised O(1) per delta."""

    __slots__ = ("end", "held", "parts")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.held = 0  # code points in parts
        self.end = 0  # code points appended in all

    def add(self, text: str, keep: int) -> None:
        if self.held > 2 * keep + 256:
            kept = "".join(self.parts)[-keep:] if keep else ""
            self.parts = [kept]
            self.held = len(kept)
        self.parts.append(text)
        self.held += len(text)
        self.end += len(text)

    def extend(self, joined: str, ends: list[int], keep: int) -> str:
        """Add deltas at once, leaving exactly the state :meth:`add` leaves them one by one:
        ``joined`` is their text, ``ends`` the running totals of their lengths (all > 0).
        Returns the text held before the trim (what was held, then ``joined``)."""
        limit = 2 * keep + 256
        held, i, count, base = self.held, 0, len(ends), 0
        while i < count:  # one step per trim: the deltas added between two trims at once
            if held > limit:
                held = keep
            m = bisect_right(ends, limit - held + base, i)  # the last delta before a trim
            if m >= count:
                held += ends[-1] - base
                break
            held += ends[m] - base
            base = ends[m]
            i = m + 1
        whole = "".join(self.parts) + joined if self.parts else joined
        self.parts = [whole[len(whole) - held:] if held < len(whole) else whole]
        self.held = held
        self.end += len(joined)
        return whole

    def slice(self, start: int, stop: int) -> str:
        """View positions ``start`` … ``stop`` (clipped to what is held)."""
        if len(self.parts) > 1:
            self.parts = ["".join(self.parts)]
        held = self.parts[0] if self.parts else ""
        base = self.end - len(held)
        return held[max(start - base, 0):max(stop - base, 0)]


def _whole_line(cut: str, view: _Ring, offset: int) -> tuple[str, bool]:
    """The repeated line whose first characters the engine reported (``cut``), read back from
    the recent text of its view: the most frequent whole line there that starts with ``cut``.
    Returns the line (at most :data:`UNIT_MAX_CHARS`) and whether it is cut or unknown."""
    begin = view.end - view.held  # the first position the view still holds
    pieces = view.slice(begin, offset).split("\n")
    if begin > 0:
        pieces = pieces[1:]  # the first piece may begin mid-line
    found: dict[str, int] = {}
    for piece in pieces:
        line = piece.strip()
        if line.startswith(cut):
            found[line] = found.get(line, 0) + 1
    if not found:
        return cut, True
    line = max(found, key=lambda text: found[text])
    return line[:UNIT_MAX_CHARS], len(line) > UNIT_MAX_CHARS


@dataclass(slots=True)
class _Open:
    watcher: Watcher
    attempt: int
    detections: list[Detection] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    deltas: int = 0
    chars: int = 0
    last_line: int = 0
    views: dict[str, _Ring] | None = None
    units: dict[int, tuple[str, bool]] = field(default_factory=dict)
    before: dict[int, str] = field(default_factory=dict)
    after: dict[int, str] = field(default_factory=dict)
    waiting: list[int] = field(default_factory=list)  # detections still short of after-context
    repeated: dict[int, tuple[str, bool]] = field(default_factory=dict)

    def result(self, source: str, stream: str, complete: bool,
               context: int | None) -> StreamResult:
        found = self.watcher.finish()
        self.note(found, self.last_line, context)
        for i in self.waiting:  # the text ended before the after-context was full
            self.fill_after(i, context or 0)
        sites: tuple[Site, ...] = ()
        if context is not None or any(self.lines):
            sites = tuple(
                Site(line, unit=self.units.get(i, (None, False))[0],
                     unit_cut=self.units.get(i, (None, False))[1], before=self.before.get(i),
                     after=self.after.get(i) if context else None,
                     repeated=self.repeated.get(i, (None, False))[0],
                     repeated_cut=self.repeated.get(i, (None, False))[1])
                for i, line in enumerate(self.lines))
        return StreamResult(source, stream, self.attempt, tuple(self.detections), self.deltas,
                            self.chars, complete, sites)

    def note(self, found: Sequence[Detection], line: int, context: int | None) -> None:
        """Record the detections of one call: their line, and with ``context`` their unit and
        the text before them."""
        for d in found:
            i = len(self.detections)
            self.detections.append(d)
            self.lines.append(line)
            if self.views is None or context is None:
                continue
            view = self.views.get(d.channel)
            if view is None:
                continue
            if d.period is not None and d.unit is not None:
                cut = d.period > UNIT_MAX_CHARS
                whole = view.slice(d.offset - d.period, d.offset)
                # the engine quotes the unit from a line or word start: show the same rotation
                k = (whole + whole).find(d.unit[:d.period])
                if 0 < k < len(whole):
                    whole = whole[k:] + whole[:k]
                self.units[i] = (whole[:UNIT_MAX_CHARS], cut)
            if d.line is not None and len(d.line) >= EVIDENCE_LINE_CHARS:
                self.repeated[i] = _whole_line(d.line, view, d.offset)
            if context:
                self.before[i] = view.slice(d.offset - context, d.offset)
                if view.end >= d.offset + context:
                    self.fill_after(i, context)
                else:
                    self.waiting.append(i)

    def fill_after(self, i: int, context: int) -> None:
        d = self.detections[i]
        assert self.views is not None
        self.after[i] = self.views[d.channel].slice(d.offset, d.offset + context)

    def grow_run(self, channel: str, texts: list[str], keep: int, context: int) -> None:
        """:meth:`grow` for each of ``texts`` (non-empty deltas), in one step per view."""
        assert self.views is not None
        joined = "".join(texts)
        ends = list(accumulate(map(len, texts)))
        wholes = {}
        for name in (channel, "combined"):
            view = self.views[name]
            whole = view.extend(joined, ends, keep)
            wholes[name] = (whole, view.end - len(whole))
        if self.waiting:
            still = []
            for i in self.waiting:
                d = self.detections[i]
                got = wholes.get(d.channel)
                if got is not None and self.views[d.channel].end >= d.offset + context:
                    whole, base = got
                    self.after[i] = whole[max(d.offset - base, 0):
                                          max(d.offset + context - base, 0)]
                else:
                    still.append(i)
            self.waiting = still

    def grow(self, channel: str, text: str, keep: int, context: int) -> None:
        """Append a delta to the views it feeds; fill the after-context that is now complete."""
        assert self.views is not None
        for name in (channel, "combined"):
            self.views[name].add(text, keep)
        if self.waiting:
            still = []
            for i in self.waiting:
                d = self.detections[i]
                if self.views[d.channel].end >= d.offset + context:
                    self.fill_after(i, context)
                else:
                    still.append(i)
            self.waiting = still


class Replayer:
    """The state of :func:`replay`: one watcher per open stream. :meth:`push` an event, get the
    results it ends; :meth:`close` ends the open streams (say, when reading was interrupted)."""

    def __init__(self, ruleset: Ruleset | None = None, *, context: int | None = None) -> None:
        if ruleset is None:
            from .presets import default_ruleset

            ruleset = default_ruleset()
        if context is not None and (isinstance(context, bool) or not isinstance(context, int)
                                    or context < 0):
            raise ValueError(f"context must be None or an int >= 0, got {context!r}")
        self.ruleset = ruleset
        self.context = context
        periods = [getattr(rule, "max_period", 0) for rule in getattr(ruleset, "rules", ())]
        self.keep = max([*periods, UNIT_MAX_CHARS, context or 0])
        self.open: dict[tuple[str, str], _Open] = {}
        self.attempts: dict[tuple[str, str], int] = {}
        # deltas of open streams not fed yet: (channel, texts, lines), fed in one call
        self.pending: dict[tuple[str, str], tuple[str, list[str], list[int]]] = {}
        self.pending_deltas = 0

    def _start(self, key: tuple[str, str]) -> _Open:
        self.attempts[key] = self.attempts.get(key, 0) + 1
        state = _Open(self.ruleset.watcher(), self.attempts[key])
        if self.context is not None:
            state.views = {"text": _Ring(), "reasoning": _Ring(), "combined": _Ring()}
        self.open[key] = state
        return state

    def push(self, event: Event) -> list[StreamResult]:
        """Feed one event; return the results of the attempts it ended (none, or one)."""
        key = (event.source, event.stream)
        if key in self.pending:
            self._feed_pending(key)
        state = self.open.get(key)
        done: list[StreamResult] = []
        if event.type == "start" or (state is None and event.type != "end"):
            if state is not None:
                done.append(state.result(event.source, event.stream, False, self.context))
            state = self._start(key)
            state.last_line = event.line
            if event.type == "start":
                return done
        if event.type == "end":
            if state is not None:
                del self.open[key]
                state.last_line = event.line
                done.append(state.result(event.source, event.stream, True, self.context))
            return done
        assert state is not None
        state.last_line = event.line
        if event.text:
            channel = _DELTA_CHANNEL[event.type]
            state.deltas += 1
            state.chars += len(event.text)
            if state.views is not None:
                state.grow(channel, event.text, self.keep, self.context or 0)
            found = state.watcher.feed(event.text, channel=channel)
            if found:
                state.note(found, event.line, self.context)
        return done

    def _push_op(self, source: str, op: tuple[Any, ...]) -> list[StreamResult]:
        """Take one operation of the fast reader (:func:`_source_ops`; not ``_ERROR``): a run
        of deltas is collected (fed later, in one call per stream: :meth:`flush`), a ``start``
        or ``end`` feeds what its stream collected first. Same results as :meth:`push` of the
        operation's events."""
        key = (source, op[1])
        if op[0] == _DELTAS:
            channel, texts, lines = op[2], op[3], op[4]
            waiting = self.pending.get(key)
            if waiting is not None:
                if waiting[0] is channel:
                    waiting[1].extend(texts)
                    waiting[2].extend(lines)
                    self.pending_deltas += len(texts)
                    return []
                self._feed_pending(key)
            if key not in self.open:  # a delta starts a stream that has not started
                self._start(key).last_line = lines[0]
            self.pending[key] = (channel, texts, lines)
            self.pending_deltas += len(texts)
            if self.pending_deltas >= _PENDING_DELTAS:
                self.flush()
            return []
        if key in self.pending:
            self._feed_pending(key)
        return self.push(Event(op[1], _KIND_OF_OP[op[0]], "", source, op[2]))

    def flush(self) -> None:
        """Feed every stream the deltas it collected (results come only at ``end``/``close``)."""
        for key in list(self.pending):
            self._feed_pending(key)
        self.pending_deltas = 0

    def _feed_pending(self, key: tuple[str, str]) -> None:
        channel, texts, lines = self.pending.pop(key)
        state = self.open[key]
        state.last_line = lines[-1]
        if "" in texts:  # an empty delta feeds nothing (but its line is the stream's last)
            kept = [(text, line) for text, line in zip(texts, lines) if text]
            texts = [text for text, _ in kept]
            lines = [line for _, line in kept]
            if not texts:
                return
        state.deltas += len(texts)
        state.chars += sum(map(len, texts))
        watcher = state.watcher
        feed = getattr(watcher, "_feed_deltas", None)
        if feed is not None:
            fired = feed(texts, channel)
        else:  # another engine (contextcare.reference): one call per delta
            fired = [(i, found) for i, text in enumerate(texts)
                     if (found := watcher.feed(text, channel=channel))]
        if state.views is None:
            for i, found in fired:
                state.note(found, lines[i], self.context)
            return
        keep, context, start = self.keep, self.context or 0, 0
        for i, found in fired:  # the views as they were when each detection fired
            state.grow_run(channel, texts[start:i + 1], keep, context)
            state.note(found, lines[i], self.context)
            start = i + 1
        if start < len(texts):
            state.grow_run(channel, texts[start:] if start else texts, keep, context)

    def close(self) -> list[StreamResult]:
        """End every open stream (incomplete), in the order the streams first appeared."""
        self.flush()
        done = [state.result(source, stream, False, self.context)
                for (source, stream), state in self.open.items()]
        self.open.clear()
        return done


def replay(events: Iterable[Event], ruleset: Ruleset | None = None, *,
           context: int | None = None) -> Iterator[StreamResult]:
    """Feed events through ``ruleset`` (default: :func:`contextcare.default_ruleset`).

    Streams are told apart by ``(event.source, event.stream)``, so the same id in two files names
    two streams. Each attempt gets a fresh watcher; its result is yielded when the attempt ends
    (``end``, a new ``start``, or the end of ``events``, in the order the streams first appeared).
    Memory holds one watcher per stream that is open at the same time.

    Each result's ``sites`` say on which input line each detection fired. With ``context`` (an
    int >= 0) the replay also keeps the recent text of each view, so the sites hold the whole
    unit of a repeating tail and ``context`` code points of text before and after each detection
    (0: the units only).
    """
    replayer = Replayer(ruleset, context=context)
    for event in events:
        yield from replayer.push(event)
    yield from replayer.close()


def _replay_ops(replayer: Replayer, source: str, blocks: Iterable[list[Any]],
                on_error: Callable[[TraceFormatError], None] | None) -> Iterator[StreamResult]:
    """Feed the blocks of the fast reader through ``replayer``; errors to ``on_error``, in line
    order with the results."""
    push = replayer._push_op
    for ops in blocks:
        for op in ops:
            if op[0] == _ERROR:
                assert on_error is not None
                on_error(op[1])
            else:
                done = push(source, op)
                if done:
                    yield from done
        replayer.flush()


def scan(source: Source, ruleset: Ruleset | None = None, *,
         on_error: Callable[[TraceFormatError], None] | None = None,
         max_line_bytes: int = LINE_MAX_BYTES) -> list[StreamResult]:
    """Replay one trace file: the results of :func:`replay` of :func:`iter_events`, as a list
    (read in blocks, each stream's deltas fed in one call: docs/scanning.md)."""
    replayer = Replayer(ruleset)
    blocks = _source_ops(source, on_error is not None, None, max_line_bytes)
    results = list(_replay_ops(replayer, _source_name(source), blocks, on_error))
    return results + replayer.close()


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
