"""Stream filters: watch a model's stream as it passes through, stop it on an abort.

:func:`watch` / :func:`awatch` wrap a sync / async iterable of deltas (or of anything, with
``text_of`` and ``channel_of`` saying where the text is); :func:`watch_openai` /
:func:`awatch_openai` wrap a stream of OpenAI ``chat.completion.chunk`` objects (or their dict
form). Each filter re-yields every item unchanged — the same objects, in the same order — while it
feeds their text to a :class:`~contextcare.guard.Reply` of the given guard. When a verdict says
abort, the filter closes the source right away (``close()`` / ``aclose()``, so an HTTP stream drops
its connection and the server stops generating), yields the item that triggered the abort (so what
the consumer saw is exactly :attr:`partial`) and then ends. When the source ends on its own, the
reply is finished (end-of-stream checks run; their verdict is recorded too). If the consumer stops
early, ``close()`` on the filter closes the source as well; the reply is left unfinished.

Afterwards the filter tells what happened: :attr:`~Watch.verdicts` (every verdict, in order),
:attr:`~Watch.aborted`, :attr:`~Watch.abort` (the :class:`~contextcare.guard.Abort` or ``None``)
and :attr:`~Watch.partial`.

OpenAI chunks: ``choices[i].delta.content`` is answer text; ``delta.reasoning_content`` (DeepSeek,
vLLM) or ``delta.reasoning`` (OpenRouter, some gateways) is reasoning; tool-call deltas and other
fields are not text and are ignored. Each ``choices[i].index`` gets its own reply (``n > 1``); a
choice's reply finishes at its ``finish_reason``; an abort in any choice stops the whole stream
(it is one HTTP response). A malformed chunk (``choices=5``, ``index=[1]``, ...) raises
``ArgumentTypeError``/``ArgumentValueError`` from the filter naming the chunk's position, its id and the
field (:mod:`contextcare.chunks`) before any of the chunk is fed: iterate on to skip it, or
``close()`` the filter (which closes the source).
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator
from typing import Any, Generic, Protocol, TypeVar, cast

from .chunks import chunk_parts, read_chunk
from .errors import ArgumentTypeError
from .guard import Abort, Guard, Partial, Reply, Verdict

__all__ = ["watch", "awatch", "watch_openai", "awatch_openai", "Watch", "AsyncWatch",
           "OpenAIWatch", "AsyncOpenAIWatch", "openai_parts"]

T = TypeVar("T")

_EMPTY = Partial("", "", False)


def _check_guard(guard: object) -> Guard:
    if not isinstance(guard, Guard):
        raise ArgumentTypeError(f"guard must be a contextcare Guard, got {type(guard).__name__}")
    return guard


def _close_sync(*objects: object) -> None:
    """Close each object that has a ``close()`` (iterators first, then the source)."""
    seen: set[int] = set()
    for obj in objects:
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        close = getattr(obj, "close", None)
        if callable(close):
            close()


async def _close_async(*objects: object) -> None:
    """Close each object: ``aclose()`` if it has one, else ``close()`` (awaited if it returns an
    awaitable)."""
    seen: set[int] = set()
    for obj in objects:
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        aclose = getattr(obj, "aclose", None)
        result: Any = None
        if callable(aclose):
            result = aclose()
        else:
            close = getattr(obj, "close", None)
            if callable(close):
                result = close()
        if inspect.isawaitable(result):
            await result


# --------------------------------------------------------------------------- item handlers

class _Deltas:
    """Feeds items that are (or hold) text deltas to one reply."""

    def __init__(self, guard: Guard, channel_of: Callable[[Any], str] | None,
                 text_of: Callable[[Any], str | None] | None) -> None:
        if channel_of is not None and not callable(channel_of):
            raise ArgumentTypeError(f"channel_of must be callable, got {type(channel_of).__name__}")
        if text_of is not None and not callable(text_of):
            raise ArgumentTypeError(f"text_of must be callable, got {type(text_of).__name__}")
        self.reply: Reply = guard.reply()
        self._channel_of = channel_of
        self._text_of = text_of
        self.verdicts: list[Verdict] = []

    def item(self, item: Any) -> Abort | None:
        text = item if self._text_of is None else self._text_of(item)
        if text is None:
            return None
        channel = "text" if self._channel_of is None else self._channel_of(item)
        verdict = self.reply.feed(text, channel)
        if verdict is None:
            return None
        self.verdicts.append(verdict)
        return verdict if isinstance(verdict, Abort) else None

    def end(self) -> Abort | None:
        verdict = self.reply.finish()
        if verdict is None:
            return None
        self.verdicts.append(verdict)
        return verdict if isinstance(verdict, Abort) else None

    @property
    def partial(self) -> Partial:
        return self.reply.partial


def openai_parts(chunk: Any) -> list[tuple[int, str, str]]:
    """The text parts of one chat-completion chunk: ``(choice index, channel, text)``.

    Reasoning (``delta.reasoning_content``, else ``delta.reasoning``) comes before content, the
    order in which streaming servers send them. Non-text fields (tool calls, roles, logprobs) and
    empty strings give nothing. Works on ``ChatCompletionChunk`` objects and on plain dicts; a
    malformed chunk raises ``ArgumentTypeError``/``ArgumentValueError`` naming the field
    (:func:`contextcare.chunks.read_chunk`).
    """
    return chunk_parts(read_chunk(chunk))


class _Chunks:
    """Feeds OpenAI chat-completion chunks to one reply per choice index."""

    def __init__(self, guard: Guard) -> None:
        self._guard = guard
        self.replies: dict[int, Reply] = {}
        self.verdicts: list[Verdict] = []
        self._seen = 0  # chunks read, for error messages

    def _reply(self, index: int) -> Reply:
        reply = self.replies.get(index)
        if reply is None:
            reply = self.replies[index] = self._guard.reply()
        return reply

    def _record(self, verdict: Verdict | None) -> Abort | None:
        if verdict is None:
            return None
        self.verdicts.append(verdict)
        return verdict if isinstance(verdict, Abort) else None

    def item(self, chunk: Any) -> Abort | None:
        self._seen += 1
        # checked whole before any of it is fed: a malformed chunk changes no reply
        choices = read_chunk(chunk, self._where(chunk))
        for choice in choices:
            reply = self._reply(choice.index)
            if reply.done:  # text after this choice's finish_reason: passed on, not watched
                continue
            for channel, text in choice.parts:
                abort = self._record(reply.feed(text, channel))
                if abort is not None:
                    return abort
            if choice.finished:
                abort = self._record(reply.finish())
                if abort is not None:
                    return abort
        return None

    def _where(self, chunk: Any) -> str:
        """How errors name the chunk: its position in the stream (0-based), and its id."""
        chunk_id = chunk.get("id") if isinstance(chunk, dict) else getattr(chunk, "id", None)
        if isinstance(chunk_id, str) and chunk_id:
            return f"chunk {self._seen - 1} (id {chunk_id[:60]!r})"
        return f"chunk {self._seen - 1}"

    def end(self) -> Abort | None:
        first: Abort | None = None
        for reply in self.replies.values():
            if not reply.done:
                abort = self._record(reply.finish())
                first = first or abort
        return first

    @property
    def partial(self) -> Partial:
        reply = self.replies.get(0)
        return reply.partial if reply is not None else _EMPTY


class _Handler(Protocol):
    """What a filter asks of its item handler (:class:`_Deltas` or :class:`_Chunks`)."""

    verdicts: list[Verdict]

    def item(self, item: Any) -> Abort | None: ...

    def end(self) -> Abort | None: ...

    @property
    def partial(self) -> Partial: ...


# --------------------------------------------------------------------------- filters

class _State:
    """What every filter reports after (or while) it runs."""

    _handler: _Handler
    abort: Abort | None

    @property
    def verdicts(self) -> list[Verdict]:
        """Every verdict so far, in order (reminders and at most one abort)."""
        return self._handler.verdicts

    @property
    def aborted(self) -> bool:
        """True when a verdict said abort (the source was closed)."""
        return self.abort is not None

    @property
    def partial(self) -> Partial:
        """The text seen so far, per channel, marked interrupted after an abort (for OpenAI
        streams: of choice 0; see ``partials`` for every choice)."""
        return self._handler.partial


class Watch(_State, Generic[T]):
    """A sync filter over ``source`` (see the module docs). Iterate it like the source."""

    def __init__(self, source: Iterable[T], handler: _Handler) -> None:
        self._source = source
        self._it: Iterator[T] = iter(source)
        self._handler = handler
        self._closed = False
        self.abort = None

    def __iter__(self) -> Watch[T]:
        return self

    def __next__(self) -> T:
        if self._closed:
            raise StopIteration
        try:
            item = next(self._it)
        except StopIteration:
            self._closed = True
            self.abort = self._handler.end()
            raise
        abort = self._handler.item(item)
        if abort is not None:
            self.abort = abort
            self.close()
        return item

    def close(self) -> None:
        """Stop: close the source (and its iterator). Idempotent."""
        if self._source is None:
            return
        self._closed = True
        source, it = self._source, self._it
        self._source = None  # type: ignore[assignment]
        _close_sync(it, source)

    def __enter__(self) -> Watch[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncWatch(_State, Generic[T]):
    """An async filter over ``source`` (see the module docs). ``async for`` it like the source."""

    def __init__(self, source: AsyncIterable[T], handler: _Handler) -> None:
        self._source = source
        self._it: AsyncIterator[T] = source.__aiter__()
        self._handler = handler
        self._closed = False
        self.abort = None

    def __aiter__(self) -> AsyncWatch[T]:
        return self

    async def __anext__(self) -> T:
        if self._closed:
            raise StopAsyncIteration
        try:
            item = await self._it.__anext__()
        except StopAsyncIteration:
            self._closed = True
            self.abort = self._handler.end()
            raise
        abort = self._handler.item(item)
        if abort is not None:
            self.abort = abort
            await self.aclose()
        return item

    async def aclose(self) -> None:
        """Stop: close the source (and its iterator). Idempotent."""
        if self._source is None:
            return
        self._closed = True
        source, it = self._source, self._it
        self._source = None  # type: ignore[assignment]
        await _close_async(it, source)

    async def __aenter__(self) -> AsyncWatch[T]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _ChoiceReplies:
    """The per-choice view shared by the sync and async OpenAI watches (whose handler is a
    :class:`_Chunks`)."""

    _handler: _Handler

    @property
    def replies(self) -> dict[int, Reply]:
        """The reply of each choice index seen."""
        return cast(_Chunks, self._handler).replies

    @property
    def partials(self) -> dict[int, Partial]:
        """The partial text of every choice seen."""
        return {i: r.partial for i, r in self.replies.items()}


class OpenAIWatch(_ChoiceReplies, Watch[T]):
    """:class:`Watch` over OpenAI chunks; :attr:`replies` maps each choice index to its reply."""


class AsyncOpenAIWatch(_ChoiceReplies, AsyncWatch[T]):
    """:class:`AsyncWatch` over OpenAI chunks; :attr:`replies` maps choice index to reply."""


def watch(iterable: Iterable[T], guard: Guard, *,
          channel_of: Callable[[T], str] | None = None,
          text_of: Callable[[T], str | None] | None = None) -> Watch[T]:
    """Filter a sync iterable through a new reply of ``guard``.

    By default every item is a ``str`` delta of the ``"text"`` channel. ``text_of(item)`` gives
    the text of an item (``None``: the item carries no text and is passed on unfed);
    ``channel_of(item)`` its channel, ``"text"`` or ``"reasoning"``.
    """
    return Watch(iterable, _Deltas(_check_guard(guard), channel_of, text_of))


def awatch(iterable: AsyncIterable[T], guard: Guard, *,
           channel_of: Callable[[T], str] | None = None,
           text_of: Callable[[T], str | None] | None = None) -> AsyncWatch[T]:
    """Filter an async iterable through a new reply of ``guard`` (see :func:`watch`)."""
    return AsyncWatch(iterable, _Deltas(_check_guard(guard), channel_of, text_of))


def watch_openai(stream: Iterable[T], guard: Guard) -> OpenAIWatch[T]:
    """Filter a sync stream of OpenAI chat-completion chunks (``client.chat.completions.create(
    ..., stream=True)``, or dicts of the same shape)."""
    return OpenAIWatch(stream, _Chunks(_check_guard(guard)))


def awatch_openai(stream: AsyncIterable[T], guard: Guard) -> AsyncOpenAIWatch[T]:
    """Filter an async stream of OpenAI chat-completion chunks (see :func:`watch_openai`)."""
    return AsyncOpenAIWatch(stream, _Chunks(_check_guard(guard)))
