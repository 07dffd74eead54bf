"""Stream filters: pass-through, abort-and-close, the OpenAI chunk adapter, and the real ``openai``
client (sync and async) reading a chat-completions SSE stream from a local HTTP server."""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import openai
import pytest

import contextcare as cc
from contextcare.guard import Abort, Guard, Remind
from contextcare.streams import awatch, awatch_openai, openai_parts, watch, watch_openai

STOP = cc.Phrases("stop", ("LOOPING",), channel="combined", action="abort")
NUDGE = cc.Phrases("nudge", ("hmm",), channel="combined", action="remind")


@pytest.fixture(scope="module")
def ruleset() -> cc.Ruleset:
    return cc.Ruleset([STOP, NUDGE])


class Source:
    """A sync iterator that records how far it was read and whether it was closed."""

    def __init__(self, items: list[Any]) -> None:
        self.items = items
        self.taken = 0
        self.closed = False

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        if self.closed or self.taken == len(self.items):
            raise StopIteration
        self.taken += 1
        return self.items[self.taken - 1]

    def close(self) -> None:
        self.closed = True


# --------------------------------------------------------------------------- generic filters

def test_clean_stream_passes_the_same_objects(ruleset: cc.Ruleset) -> None:
    items = ["Hello", ", ", "world", "!"]
    guard = Guard(ruleset)
    w = watch(items, guard)
    out = list(w)
    assert out == items and all(a is b for a, b in zip(out, items))
    assert not w.aborted and w.abort is None and w.verdicts == []
    assert w.partial.text == "Hello, world!" and not w.partial.interrupted
    assert guard.aborts_in_a_row == 0


def test_abort_stops_closes_and_keeps_what_was_seen(ruleset: cc.Ruleset) -> None:
    items = ["go ", "LOOP", "ING ", "and ", "more ", "text"]
    source = Source(items)
    w = watch(source, Guard(ruleset))
    out = list(w)
    assert out == items[:3]  # the item that triggered the abort is passed on, then nothing
    assert source.closed and source.taken == 3
    assert w.aborted and isinstance(w.abort, Abort)
    assert w.verdicts == [w.abort]
    assert w.partial.text == "".join(out) and w.partial.interrupted
    assert next(w, None) is None


def test_generator_source_is_closed_on_abort(ruleset: cc.Ruleset) -> None:
    state = {"closed": False, "made": 0}

    def gen() -> Iterator[str]:
        try:
            for i in range(1000):
                state["made"] += 1
                yield "LOOPING" if i == 5 else f"{i} "
        finally:
            state["closed"] = True

    w = watch(gen(), Guard(ruleset))
    assert len(list(w)) == 6
    assert state == {"closed": True, "made": 6}


def test_reminders_are_recorded_and_the_stream_goes_on(ruleset: cc.Ruleset) -> None:
    guard = Guard(ruleset)
    w = watch(["hmm", " fine", " done"], guard)
    assert list(w) == ["hmm", " fine", " done"]
    assert len(w.verdicts) == 1 and isinstance(w.verdicts[0], Remind)
    assert not w.aborted
    assert [m["metadata"]["rule"] for m in guard.pending_notices()] == ["nudge"]


def test_end_of_stream_verdict_is_recorded() -> None:
    rule = cc.LineRepeat("loop", min_lines=3, min_count=3, min_ratio=0.5, min_run=0,
                         every_bytes=1 << 20)
    w = watch(["same line\n"] * 4, Guard(cc.Ruleset([rule])))
    assert len(list(w)) == 4  # everything was already through; finish() decides at the end
    assert w.aborted and w.abort is not None and w.abort.detection.rule == "loop"


def test_text_of_and_channel_of(ruleset: cc.Ruleset) -> None:
    items: list[tuple[str, str | None]] = [("reasoning", "hm"), ("text", "ok"),
                                           ("reasoning", "m"), ("tool", None)]
    w = watch(items, Guard(ruleset), channel_of=lambda it: it[0], text_of=lambda it: it[1])
    assert list(w) == items
    assert (w.partial.text, w.partial.reasoning) == ("ok", "hmm")
    # "hm" and "m" are split by a channel switch: the combined view never holds "hmm".
    assert w.verdicts == []


def test_consumer_break_closes_the_source(ruleset: cc.Ruleset) -> None:
    source = Source(["a", "b", "c"])
    with watch(source, Guard(ruleset)) as w:
        for _ in w:
            break
    assert source.closed and not w.aborted


def test_watch_rejects_a_non_guard(ruleset: cc.Ruleset) -> None:
    with pytest.raises(cc.ArgumentTypeError, match="guard"):
        watch(["x"], ruleset)


def test_awatch_aborts_and_closes_an_async_generator(ruleset: cc.Ruleset) -> None:
    state = {"closed": False, "made": 0}

    async def gen() -> AsyncIterator[str]:
        try:
            for i in range(1000):
                state["made"] += 1
                yield "LOOPING" if i == 3 else f"{i} "
        finally:
            state["closed"] = True

    async def main() -> tuple[list[str], Any]:
        w = awatch(gen(), Guard(ruleset))
        return [item async for item in w], w

    out, w = asyncio.run(main())
    assert out == ["0 ", "1 ", "2 ", "LOOPING"]
    assert state == {"closed": True, "made": 4}
    assert w.aborted and w.partial.text == "0 1 2 LOOPING"


def test_awatch_clean(ruleset: cc.Ruleset) -> None:
    async def gen() -> AsyncIterator[str]:
        for piece in ["a", "b"]:
            yield piece

    async def main() -> Any:
        w = awatch(gen(), Guard(ruleset))
        assert [x async for x in w] == ["a", "b"]
        return w

    w = asyncio.run(main())
    assert not w.aborted and w.partial.text == "ab"


# --------------------------------------------------------------------------- OpenAI chunks

def chunk(index: int = 0, finish: str | None = None, **delta: Any) -> dict[str, Any]:
    return {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": index, "delta": delta, "finish_reason": finish}]}


def test_openai_parts_reads_content_and_both_reasoning_fields() -> None:
    assert openai_parts(chunk(reasoning_content="think")) == [(0, "reasoning", "think")]
    assert openai_parts(chunk(reasoning="think")) == [(0, "reasoning", "think")]
    assert openai_parts(chunk(2, content="hi")) == [(2, "text", "hi")]
    tool = chunk(tool_calls=[{"index": 0, "function": {"arguments": "LOOPING"}}])
    assert openai_parts(tool) == []
    assert openai_parts({"choices": [], "usage": {"total_tokens": 3}}) == []
    both = chunk(reasoning_content="a", content="b")
    assert openai_parts(both) == [(0, "reasoning", "a"), (0, "text", "b")]


def test_watch_openai_dicts_one_reply_per_choice(ruleset: cc.Ruleset) -> None:
    items = [chunk(0, role="assistant", content=""), chunk(1, content="LOOP"),
             chunk(0, content="LOOP"), chunk(0, reasoning_content="hm"),
             chunk(1, content="ING"), chunk(0, content="never seen")]
    w = watch_openai(items, Guard(ruleset))
    assert list(w) == items[:5]
    assert w.aborted and w.abort is not None
    # Choice 1 wrote LOOPING; choice 0's "LOOP" was a different stream and did not join it.
    assert w.partials == {0: w.replies[0].partial, 1: w.abort.partial}
    assert w.abort.partial.text == "LOOPING"
    assert (w.partial.text, w.partial.reasoning) == ("LOOP", "hm")


def test_watch_openai_ignores_tool_call_deltas(ruleset: cc.Ruleset) -> None:
    items = [chunk(tool_calls=[{"index": 0, "function": {"arguments": "LOOPING"}}]),
             chunk(content="fine", finish="stop")]
    w = watch_openai(items, Guard(ruleset))
    assert list(w) == items and not w.aborted
    assert w.replies[0].done and w.partial.text == "fine"


def test_finish_reason_finishes_that_choice(ruleset: cc.Ruleset) -> None:
    guard = Guard(ruleset)
    guard.reply().feed("LOOPING")  # one abort in a row so far
    items = [chunk(content="ok", finish="stop"), chunk(content="LOOPING")]
    w = watch_openai(items, guard)
    assert list(w) == items  # text after finish_reason is passed on, not watched
    assert not w.aborted and guard.aborts_in_a_row == 0  # the clean finish re-armed


# --------------------------------------------------------------------------- HTTP + openai

def _pieces(text: str, seed: int) -> list[str]:
    rng = random.Random(seed)
    out, i = [], 0
    while i < len(text):
        step = rng.randint(1, 4)
        out.append(text[i:i + step])
        i += step
    return out


def make_trace(reasoning: str, content: str, seed: int = 7) -> list[dict[str, Any]]:
    """A chat-completions chunk stream as a DeepSeek-style server sends it."""
    events = [chunk(role="assistant", content="")]
    events += [chunk(reasoning_content=p) for p in _pieces(reasoning, seed)]
    events += [chunk(content=p) for p in _pieces(content, seed + 1)]
    events.append(chunk(finish="stop"))
    return events


LOOP_TRACE = make_trace("Let me look at the failing test first.\n"
                        + "I need to check the file again.\n" * 150, "")
CLEAN_TEXT = "".join(f"Item {i}: the value is {i * 37 % 101}, noted as {chr(65 + i % 26)}.\n"
                     for i in range(60))
CLEAN_TRACE = make_trace("The user wants a list of items; I will write it out.\n", CLEAN_TEXT)
TRACES = {"loop": LOOP_TRACE, "clean": CLEAN_TRACE}


class Served:
    """What the server did for one request."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.sent = 0
        self.disconnected = False
        self.done = threading.Event()


class SSEServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), SSEHandler)
        self.log: list[Served] = []
        #: Pause after each event of the looping trace (a model's pace, slowed down enough that
        #: the abort surely lands long before the end).
        self.delay = {"loop": 0.0005, "clean": 0.0}


class SSEHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: SSEServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        events = TRACES[body["model"]]
        served = Served(len(events))
        self.server.log.append(served)
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Connection", "close")
            self.end_headers()
            for event in events:
                self._write(f"data: {json.dumps(event, ensure_ascii=False)}\n\n".encode())
                served.sent += 1
                time.sleep(self.server.delay[body["model"]])
            self._write(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            served.disconnected = True
        finally:
            self.close_connection = True
            served.done.set()

    def _write(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


@pytest.fixture()
def server() -> Iterator[SSEServer]:
    srv = SSEServer()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(5)


def _base_url(srv: SSEServer) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}/v1"


def _content(chunks: list[Any]) -> tuple[str, str]:
    text: list[str] = []
    reasoning: list[str] = []
    for c in chunks:
        for _, channel, piece in openai_parts(c):
            (reasoning if channel == "reasoning" else text).append(piece)
    return "".join(text), "".join(reasoning)


def test_openai_client_loop_is_aborted_and_the_server_sees_the_disconnect(
        server: SSEServer) -> None:
    guard = Guard()
    with openai.OpenAI(base_url=_base_url(server), api_key="test", max_retries=0) as client:
        stream = client.chat.completions.create(
            model="loop", messages=[{"role": "user", "content": "fix the test"}], stream=True)
        w = watch_openai(stream, guard)
        got = list(w)
    assert w.aborted and w.abort is not None
    assert w.abort.detection.kind in ("line-repeat", "tail-repeat", "block-repeat")
    served = server.log[0]
    assert served.done.wait(10)
    assert served.disconnected, "the server never noticed the client hung up"
    assert served.sent < served.total // 2
    assert len(got) <= served.sent
    # What the consumer saw is what the partial holds, and nothing was dropped.
    assert _content(got) == (w.partial.text, w.partial.reasoning)
    assert w.partial.interrupted
    assert w.abort.notice is not None and "stopped by the system" in w.abort.notice["content"]


def test_openai_client_clean_trace_passes_unchanged(server: SSEServer) -> None:
    guard = Guard()
    with openai.OpenAI(base_url=_base_url(server), api_key="test", max_retries=0) as client:
        stream = client.chat.completions.create(
            model="clean", messages=[{"role": "user", "content": "list"}], stream=True)
        w = watch_openai(stream, guard)
        got = list(w)
    served = server.log[0]
    assert served.done.wait(10) and not served.disconnected and served.sent == served.total
    assert not w.aborted and w.verdicts == []
    assert [c.to_dict() for c in got] == CLEAN_TRACE
    assert w.partial.text == CLEAN_TEXT and not w.partial.interrupted
    assert w.replies[0].done


def test_async_openai_client_loop_is_aborted(server: SSEServer) -> None:
    async def main() -> tuple[list[Any], Any]:
        client = openai.AsyncOpenAI(base_url=_base_url(server), api_key="test", max_retries=0)
        try:
            stream = await client.chat.completions.create(
                model="loop", messages=[{"role": "user", "content": "fix"}], stream=True)
            w = awatch_openai(stream, Guard())
            got = [c async for c in w]
            return got, w
        finally:
            await client.close()

    got, w = asyncio.run(main())
    assert w.aborted
    served = server.log[0]
    assert served.done.wait(10)
    assert served.disconnected and served.sent < served.total // 2
    assert _content(got) == (w.partial.text, w.partial.reasoning)


def test_async_openai_client_clean_trace_passes_unchanged(server: SSEServer) -> None:
    async def main() -> tuple[list[Any], Any]:
        async with openai.AsyncOpenAI(base_url=_base_url(server), api_key="test",
                                      max_retries=0) as client:
            stream = await client.chat.completions.create(
                model="clean", messages=[{"role": "user", "content": "list"}], stream=True)
            w = awatch_openai(stream, Guard())
            return [c async for c in w], w

    got, w = asyncio.run(main())
    assert not w.aborted
    assert [c.to_dict() for c in got] == CLEAN_TRACE
    served = server.log[0]
    assert served.done.wait(10) and served.sent == served.total and not served.disconnected
