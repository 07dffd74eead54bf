"""A scripted OpenAI-compatible upstream, for tests and benchmarks of the gateway (loopback).

Each request's ``model`` names a :class:`Script`: the text to stream in 1-4-character deltas
(seeded, so a run is repeatable), the pace, and an optional fault. A request whose last message
is a contextcare notice (``<context-care>``) plays the script ``<model>:continue`` when there is
one. The upstream records what it saw: the request bodies, the streams open now, how many chunks
each stream sent and whether its client left before the end (:attr:`ScriptedUpstream.log`).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

__all__ = ["Script", "ScriptedUpstream", "StreamLog", "pieces"]


def pieces(text: str, seed: int = 0, sizes: tuple[int, int] = (1, 4)) -> list[str]:
    """``text`` cut into deltas of ``sizes[0]``..``sizes[1]`` characters (seeded)."""
    rng = random.Random(seed)
    out, i = [], 0
    while i < len(text):
        n = rng.randint(*sizes)
        out.append(text[i:i + n])
        i += n
    return out


@dataclass
class Script:
    """What the upstream answers for one model name.

    ``fault``: ``None``; ``"malformed"`` (a non-JSON ``data:`` line after ``fault_at`` chunks);
    ``"long_line"`` (a line of ``long_line`` bytes there); ``"stall"`` (stop sending there,
    connection kept open); ``"cut"`` (close the connection there); ``"no_done"`` (end without
    ``[DONE]``). ``status`` other than 200 answers with an OpenAI error body instead.
    """

    text: str
    reasoning: str = ""
    delay: float = 0.0
    sizes: tuple[int, int] = (1, 4)
    seed: int = 0
    fault: str | None = None
    fault_at: int = 10
    long_line: int = 4 << 20
    status: int = 200
    tool_call: tuple[str, str] | None = None
    usage: bool = True
    #: Answer with one JSON completion even when asked to stream (as some servers do).
    ignore_stream: bool = False


@dataclass
class StreamLog:
    model: str
    total: int
    sent: int = 0
    finished: bool = False
    disconnected: bool = False
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None


class ScriptedUpstream:
    """The upstream app and what it recorded."""

    def __init__(self, scripts: dict[str, Script]) -> None:
        self.scripts = scripts
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.log: list[StreamLog] = []
        self.open_streams = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/completions", self._completions)
        app.router.add_get("/v1/models", self._models)
        app.router.add_route("*", "/v1/echo/{tail:.*}", self._echo)
        return app

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [
            {"id": name, "object": "model", "created": 0, "owned_by": "scripted"}
            for name in self.scripts]})

    async def _echo(self, request: web.Request) -> web.Response:
        body = await request.read()
        return web.json_response({"method": request.method, "path": request.path,
                                  "query": request.query_string,
                                  "headers": dict(request.headers),
                                  "body": body.decode("utf-8", "replace")},
                                 status=201, headers={"X-Echo": "yes"})

    def _script(self, body: dict[str, Any]) -> tuple[str, Script] | None:
        model = str(body.get("model"))
        messages = body.get("messages") or []
        last = messages[-1] if messages else {}
        if isinstance(last, dict) and "<context-care>" in str(last.get("content")):
            cont = self.scripts.get(model + ":continue")
            if cont is not None:
                return model, cont
        script = self.scripts.get(model)
        return (model, script) if script is not None else None

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, chat=True)

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, chat=False)

    async def _serve(self, request: web.Request, chat: bool) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        found = self._script(body)
        if found is None:
            return web.json_response({"error": {"message": f"no model {body.get('model')!r}",
                                                "type": "invalid_request_error"}}, status=404)
        model, script = found
        if script.status != 200:
            return web.json_response({"error": {"message": "scripted failure",
                                                "type": "server_error"}}, status=script.status)
        if not body.get("stream") or script.ignore_stream:
            text = script.text
            msg = {"role": "assistant", "content": text}
            return web.json_response({"id": "cmpl-x", "object": "chat.completion", "created": 1,
                                      "model": model, "choices": [
                                          {"index": 0, "message": msg, "finish_reason": "stop"}]})
        options = body.get("stream_options") or {}
        chunks = self._chunks(model, script, chat, bool(options.get("include_usage")))
        entry = StreamLog(model, len(chunks))
        self.log.append(entry)
        self.open_streams += 1
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        try:
            await resp.prepare(request)
            for i, chunk in enumerate(chunks):
                if (script.fault is not None and i == script.fault_at
                        and await self._fault(script, resp, request)):
                    return resp
                await resp.write(chunk)
                entry.sent = i + 1
                if script.delay:
                    await asyncio.sleep(script.delay)
            if script.fault != "no_done":
                await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
            entry.finished = True
        except ConnectionResetError:
            entry.disconnected = True  # the client left: the engine would free its slot here
        except asyncio.CancelledError:
            entry.disconnected = True
            raise
        finally:
            entry.ended = time.monotonic()
            self.open_streams -= 1
        return resp

    async def _fault(self, script: Script, resp: web.StreamResponse,
                     request: web.Request) -> bool:
        if script.fault == "malformed":
            await resp.write(b"data: {this is not json\n\n")
        elif script.fault == "long_line":
            await resp.write(b"data: " + b"x" * script.long_line)
        elif script.fault == "stall":
            await asyncio.sleep(3600)
        elif script.fault == "cut":
            assert request.transport is not None
            request.transport.close()
            return True
        return False

    def _chunks(self, model: str, script: Script, chat: bool, usage: bool) -> list[bytes]:
        head = {"id": "chatcmpl-scripted", "created": 1700000000, "model": model}

        def chunk(choice: dict[str, Any], **extra: Any) -> bytes:
            obj = {**head, "object": "chat.completion.chunk" if chat else "text_completion",
                   "choices": [choice], **extra}
            return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"

        out: list[bytes] = []
        if chat:
            out.append(chunk({"index": 0, "delta": {"role": "assistant", "content": ""},
                              "finish_reason": None}))
            for part in pieces(script.reasoning, script.seed, script.sizes):
                out.append(chunk({"index": 0, "delta": {"reasoning_content": part},
                                  "finish_reason": None}))
        for part in pieces(script.text, script.seed + 1, script.sizes):
            if chat:
                out.append(chunk({"index": 0, "delta": {"content": part},
                                  "finish_reason": None}))
            else:
                out.append(chunk({"index": 0, "text": part, "finish_reason": None}))
        if chat and script.tool_call is not None:
            name, args = script.tool_call
            out.append(chunk({"index": 0, "delta": {"tool_calls": [
                {"index": 0, "id": "call_1", "type": "function",
                 "function": {"name": name, "arguments": ""}}]}, "finish_reason": None}))
            for part in pieces(args, script.seed, script.sizes):
                out.append(chunk({"index": 0, "delta": {"tool_calls": [
                    {"index": 0, "function": {"arguments": part}}]}, "finish_reason": None}))
        reason = "tool_calls" if chat and script.tool_call is not None else "stop"
        if chat:
            out.append(chunk({"index": 0, "delta": {}, "finish_reason": reason}))
        else:
            out.append(chunk({"index": 0, "text": "", "finish_reason": reason}))
        if usage and script.usage:
            n = len(out)
            obj = {**head, "object": "chat.completion.chunk" if chat else "text_completion",
                   "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": n,
                                            "total_tokens": n + 5}}
            out.append(b"data: " + json.dumps(obj).encode() + b"\n\n")
        return out
