"""The guarding OpenAI-compatible gateway (``contextcare serve``).

Stack: aiohttp for both the server and the upstream client. One mature library (no ASGI server,
no second HTTP stack), streaming in both directions with back-pressure, a connection pool to the
upstream, per-read access to the bytes as they arrive (so a chunk is guarded and forwarded as it
passes, not in batches), a handler that is cancelled when its client goes away
(``handler_cancellation``), and a graceful shutdown that waits for open streams. Starlette with
uvicorn and httpx would do too, at the cost of three packages and anyio between the loop and the
socket; the per-chunk cost is what matters here, and aiohttp's is the lower of the two.

Per guarded request (``POST /v1/chat/completions`` and ``/v1/completions``):

* The body is read (at most ``max_body_bytes``), the ``contextcare`` field and the
  ``X-ContextCare`` header give the per-request options, pending notices of the conversation are
  appended to ``messages``, and the request goes upstream **always as a stream** (a non-streaming
  client's request too, so a loop stops early there as well).
* The upstream's SSE bytes are cut into events (:mod:`.sse`); a ``data`` line that is not a JSON
  object is dropped, counted (``upstream_errors{kind="malformed"}``) and logged, since no client
  can use it and the official one fails on it; every other event is read by
  :func:`contextcare.streams.awatch_openai` over a fresh :class:`~contextcare.guard.Guard` (the
  same reader and guard a Python caller uses), and forwarded byte for byte as soon as it passed.
* On an abort the upstream response is closed (the engine sees its client go away and frees the
  slot), and the client's stream ends with one more chunk whose ``finish_reason`` is
  ``abort_finish_reason`` (``content_filter`` by default: a standard value meaning "the output
  was cut by a check on its content, not ended by the model"; ``stop`` would claim a natural end
  and ``length`` invites a retry with more tokens) and whose ``contextcare`` field names the
  detection; then ``data: [DONE]``. Everything forwarded before stays forwarded.
* With auto-continue the gateway sends the request again with the partial reply (as an assistant
  message) and the guard's notice appended, and splices the continuation into the same stream
  (same ``id``, the repeated ``role`` dropped, a ``contextcare`` field on its first chunk), within
  the guard's ``max_consecutive_aborts``. Only for chat requests with one choice.
* Reminders (and the explanation of an abort that was not continued) wait in a bounded store for
  the next request of the same conversation (:mod:`.conversations`).

Everything else (other paths and methods, and guarded requests with the guard turned off) is
passed through: method, path, query, headers (hop-by-hop ones excepted) and bodies unchanged, in
both directions, streamed.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import time
import uuid
import weakref
from bisect import bisect_left
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import prometheus_client as prom
from aiohttp import (
    ClientError,
    ClientResponse,
    ClientSession,
    ClientTimeout,
    TCPConnector,
    web,
)
from multidict import CIMultiDict
from prometheus_client import utils as prom_utils
from prometheus_client.core import HistogramMetricFamily

from ..guard import Abort, Guard
from ..streams import awatch_openai
from .assembly import Assembly
from .config import GatewayConfig
from .conversations import PendingNotices, history_key, reply_key
from .sse import Event, SSEDecoder, SSELineTooLong

__all__ = ["OPTIONS_HEADER", "Gateway", "LoopHistogram", "Metrics", "load_ruleset", "run_forever"]

log = logging.getLogger("contextcare.serve")

#: Per-request options header: ``off``, ``on``, or ``key=value`` pairs separated by commas.
OPTIONS_HEADER = "X-ContextCare"
REQUEST_ID_HEADER = "X-ContextCare-Request-Id"
NOTICES_HEADER = "X-ContextCare-Notices"

_HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-connection", "te", "trailer",
    "trailers", "transfer-encoding", "upgrade", "host",
})
_OPTION_KEYS = ("enabled", "auto_continue", "lang")
_DONE = b"data: [DONE]\n\n"
_JSON_SEPARATORS = (",", ":")


def load_ruleset(path: str | None) -> Any:
    """The compiled rules: the defaults, or a TOML rules file."""
    if path is None:
        from ..presets import default_ruleset

        return default_ruleset()
    from .._engine import Ruleset
    from ..tomlrules import load_rules

    rules, options = load_rules(path)
    return Ruleset(rules, **options)


def _dumps(obj: object) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=_JSON_SEPARATORS).encode()


class Metrics:
    """The gateway's Prometheus metrics, in a registry of their own (``/metrics``)."""

    def __init__(self, registry: prom.CollectorRegistry | None = None) -> None:
        r = self.registry = registry if registry is not None else prom.CollectorRegistry()
        self.requests = prom.Counter(
            "contextcare_requests", "Requests by endpoint (chat, completions, other) and mode"
            " (stream, collect: non-streaming re-assembled, disabled: guard off, passthrough)",
            ["endpoint", "mode"], registry=r)
        self.open_streams = prom.Gauge(
            "contextcare_open_streams", "Guarded requests in progress", registry=r)
        self.detections = prom.Counter(
            "contextcare_detections", "Detections by rule and action", ["rule", "action"],
            registry=r)
        self.aborts = prom.Counter(
            "contextcare_aborts", "Upstream streams closed because of an abort", registry=r)
        self.auto_continues = prom.Counter(
            "contextcare_auto_continues", "Continuations requested after an abort", registry=r)
        self.notices_injected = prom.Counter(
            "contextcare_notices_injected", "Notices appended to a conversation's next request",
            registry=r)
        self.notices_dropped = prom.Counter(
            "contextcare_notices_dropped", "Pending notices dropped unread (expired or evicted)",
            registry=r)
        self.pending = prom.Gauge(
            "contextcare_pending_conversations", "Conversations with notices waiting",
            registry=r)
        self.chars = prom.Counter(
            "contextcare_chars", "Characters of model text (answer and reasoning) guarded",
            registry=r)
        self.tokens_saved = prom.Counter(
            "contextcare_tokens_saved", "Estimated completion tokens not generated because of"
            " aborts: max_tokens minus the chunks received (only requests that set max_tokens)",
            registry=r)
        self.upstream_errors = prom.Counter(
            "contextcare_upstream_errors", "Upstream failures by kind (unreachable, timeout,"
            " status, not_a_stream, malformed, line_too_long, broken)", ["kind"], registry=r)
        self.client_disconnects = prom.Counter(
            "contextcare_client_disconnects", "Clients gone before their stream ended",
            registry=r)
        self.guard_seconds = LoopHistogram(
            "contextcare_guard_seconds", "Guard time per upstream chunk (reading it and feeding"
            " its deltas to the watchers)",
            (2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 5e-3, 2e-2), r)


class LoopHistogram:
    """A Prometheus histogram for one event loop: ``observe`` is a bisect and two additions (no
    lock; ``prometheus_client.Histogram`` takes two locks per observation, which is a third of
    the guard's own cost per chunk). Only the loop's thread may observe; ``/metrics`` is served
    from that same loop."""

    def __init__(self, name: str, documentation: str, buckets: tuple[float, ...],
                 registry: prom.CollectorRegistry) -> None:
        self.name = name
        self.documentation = documentation
        self._bounds = list(buckets)
        self._counts = [0] * (len(buckets) + 1)
        self._sum = 0.0
        registry.register(self)

    def observe(self, value: float) -> None:
        self._counts[bisect_left(self._bounds, value)] += 1
        self._sum += value

    def collect(self) -> Iterator[HistogramMetricFamily]:
        go_float: Any = prom_utils.floatToGoString
        total, buckets = 0, []
        for bound, count in zip(self._bounds, self._counts):
            total += count
            buckets.append((go_float(bound), total))
        buckets.append(("+Inf", total + self._counts[-1]))
        family = HistogramMetricFamily(self.name, self.documentation)
        family.add_metric([], buckets, self._sum)
        yield family


class _ClientGone(ConnectionResetError):
    """Writing to the client failed: it left. (Not an aiohttp ``ClientError``, so it is never
    taken for a failure of the upstream.)"""


class _BadRequest(Exception):
    def __init__(self, message: str, param: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.param = param
        self.status = status


def _error(status: int, message: str, *, kind: str = "invalid_request_error",
           param: str | None = None, code: str | None = None,
           headers: Mapping[str, str] | None = None) -> web.Response:
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return web.Response(status=status, body=_dumps(body), content_type="application/json",
                        headers=headers)


@dataclass(frozen=True)
class RequestOptions:
    enabled: bool
    auto_continue: bool
    lang: str


def _parse_bool(text: str, where: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "on", "1", "yes"):
        return True
    if value in ("false", "off", "0", "no"):
        return False
    raise _BadRequest(f"{where} must be true or false, got {text.strip()!r}", OPTIONS_HEADER)


class _Exchange:
    """One guarded request (see the module docs)."""

    def __init__(self, gw: Gateway, request: web.Request, rid: str, endpoint: str,
                 body: dict[str, Any], up_body: dict[str, Any], opts: RequestOptions,
                 conversation: str | None, injected: int) -> None:
        self.gw = gw
        self.request = request
        self.rid = rid
        self.endpoint = endpoint
        self.body = body
        self.up_body = up_body
        self.opts = opts
        self.stream = bool(body.get("stream", False))
        self.conversation = conversation
        self.injected = injected
        self.text_completion = endpoint == "completions"
        self.asm = Assembly(self.text_completion, full=not self.stream)
        self.resp: web.StreamResponse | None = None
        self.out: list[bytes] = []
        self.texts: list[str] = []
        self.aborts: list[Abort] = []
        self.continued_from: Abort | None = None
        self.event = Event(b"")  # the event being read (set by _chunks)
        self.left = 0             # events still to come from the same read of the upstream

    # ------------------------------------------------------------- output

    def _headers(self) -> dict[str, str]:
        headers = {REQUEST_ID_HEADER: self.rid}
        if self.injected:
            headers[NOTICES_HEADER] = str(self.injected)
        return headers

    async def _start_stream(self) -> None:
        resp = web.StreamResponse(status=200, headers={
            "Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache",
            **self._headers()})
        await resp.prepare(self.request)
        self.resp = resp

    async def _flush(self) -> None:
        if self.out and self.resp is not None:
            data = b"".join(self.out) if len(self.out) > 1 else self.out[0]
            self.out.clear()
            try:
                await self.resp.write(data)
            except ConnectionResetError:
                raise _ClientGone("the client left") from None

    async def _eof(self) -> web.StreamResponse:
        assert self.resp is not None
        try:
            await self.resp.write_eof()
        except ConnectionResetError:
            raise _ClientGone("the client left") from None
        return self.resp

    def _continuation_chunk(self, obj: dict[str, Any]) -> bytes:
        obj["id"] = self.asm.field("id", obj.get("id"))
        for choice in obj.get("choices") or ():
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if isinstance(delta, dict):
                delta.pop("role", None)
        if self.continued_from is not None:
            obj["contextcare"] = self._info(self.continued_from, "continue")
            self.continued_from = None
        return b"data: " + _dumps(obj) + b"\n\n"

    def _info(self, abort: Abort, action: str) -> dict[str, Any]:
        info = {"action": action, "detection": abort.detection.to_dict(),
                "attempt": len(self.aborts), "request_id": self.rid}
        if action == "abort":
            info["finish_reason"] = self.gw.config.abort_finish_reason
        return info

    def _abort_chunk(self, abort: Abort) -> bytes:
        reason = self.gw.config.abort_finish_reason
        asm = self.asm
        if self.text_completion:
            choices: list[dict[str, Any]] = [
                {"index": i, "text": "", "logprobs": None, "finish_reason": reason}
                for i in asm.unfinished()]
            obj = "text_completion"
        else:
            choices = [{"index": i, "delta": {}, "logprobs": None, "finish_reason": reason}
                       for i in asm.unfinished()]
            obj = "chat.completion.chunk"
        chunk = {"id": asm.field("id", "contextcare-" + self.rid),
                 "object": asm.field("object", obj), "created": asm.field("created", 0),
                 "model": asm.field("model", ""), "choices": choices,
                 "contextcare": self._info(abort, "abort")}
        return b"data: " + _dumps(chunk) + b"\n\n"

    # ------------------------------------------------------------- upstream

    async def _chunks(self, up: ClientResponse) -> AsyncIterator[dict[str, Any]]:
        """The upstream's events as the chunk reader takes them (:meth:`Event.chunk`). The event
        itself is left in ``self.event`` and ``self.left`` counts the events still to come from
        the same read, so the consumer writes to the client when a read is used up."""
        decoder = SSEDecoder(self.gw.config.max_line_bytes, text_completion=self.text_completion)
        clock = time.perf_counter
        complete = False
        try:
            async for data in up.content.iter_any():
                events = decoder.feed(data)
                left = len(events)
                for event in events:
                    left -= 1
                    self.left = left
                    self.event = event
                    event.t = clock()
                    yield event.chunk()
            self.left = 0
            for event in decoder.end():
                self.event = event
                event.t = clock()
                yield event.chunk()
            complete = True
        finally:
            if complete:
                up.release()
            else:
                up.close()  # drop the connection: the engine sees its client leave

    async def run(self) -> web.StreamResponse:
        gw, metrics = self.gw, self.gw.metrics
        guard = Guard(gw.ruleset, lang=self.opts.lang,
                      auto_continue=self.opts.auto_continue and not self.text_completion
                      and self.body.get("n") in (None, 1),
                      max_consecutive_aborts=gw.config.max_consecutive_aborts)
        gw.live_guards.add(guard)
        metrics.open_streams.inc()
        final: Abort | None = None
        try:
            attempt = 0
            while True:
                attempt += 1
                up_or_error = await gw._post(self.request, self.up_body, self.rid)
                if isinstance(up_or_error, web.StreamResponse):
                    if attempt == 1:
                        return up_or_error
                    final = self.aborts[-1]  # the continuation failed: end as that abort
                    break
                up = up_or_error
                if up.status != 200 or up.content_type != "text/event-stream":
                    # an error, or a server that ignored "stream": true (nothing to guard)
                    kind = "status" if up.status != 200 else "not_a_stream"
                    metrics.upstream_errors.labels(kind).inc()
                    if attempt == 1:
                        log.warning("%s", json.dumps({"event": "relayed_unguarded",
                                                      "request": self.rid, "status": up.status,
                                                      "content_type": up.content_type}))
                        return await gw._relay(self.request, up)
                    log.warning("%s", json.dumps({"event": "continue_failed", "request": self.rid,
                                                  "status": up.status}))
                    up.close()
                    final = self.aborts[-1]
                    break
                if self.stream and self.resp is None:
                    await self._start_stream()
                watch = awatch_openai(self._chunks(up), guard)
                failure: str | None = None
                try:
                    failure = await self._pump(watch, attempt)
                finally:
                    await watch.aclose()
                    self._account(watch, attempt)
                if failure is not None:
                    return await self._fail(failure)
                abort = watch.abort
                if abort is None:
                    break
                self.aborts.append(abort)
                metrics.aborts.inc()
                if self.asm.all_finished:
                    break  # the stream had ended: nothing to cut, the notice waits
                if abort.notice is not None:
                    metrics.auto_continues.inc()
                    notices = guard.pending_notices(metadata=False)
                    messages = list(self.up_body.get("messages") or [])
                    messages.append(abort.partial.to_message(metadata=False))
                    messages.extend(notices)
                    self.up_body = {**self.up_body, "messages": messages}
                    self.continued_from = abort
                    continue
                final = abort
                break
            return await self._finish(final)
        except _ClientGone:
            # the client left while we wrote to it: the upstream is closed (finally of _pump's
            # watch); returning the response lets aiohttp drop the connection quietly
            metrics.client_disconnects.inc()
            assert self.resp is not None
            return self.resp
        except (ConnectionResetError, asyncio.CancelledError):
            metrics.client_disconnects.inc()
            raise
        finally:
            metrics.open_streams.dec()
            self._keep_notices(guard)

    async def _pump(self, watch: Any, attempt: int) -> str | None:
        """Forward the events of one upstream response; a failure message or ``None``."""
        metrics = self.gw.metrics
        observe = metrics.guard_seconds.observe
        clock = time.perf_counter
        out = self.out
        stream = self.stream
        asm_add = self.asm.add
        try:
            async for _ in watch:
                event = self.event
                obj = event.obj
                if obj is not None:
                    observe(clock() - event.t)
                    asm_add(obj)
                    if stream:
                        out.append(event.raw if attempt == 1 else self._continuation_chunk(obj))
                elif event.malformed:
                    metrics.upstream_errors.labels("malformed").inc()
                    log.warning("%s", json.dumps({"event": "malformed_sse", "request": self.rid,
                                                  "line": event.raw[:200].decode("utf-8",
                                                                                 "replace")}))
                    # dropped: clients cannot use it (the official client fails on it)
                elif stream and not event.done:  # the gateway sends [DONE] itself, at the end
                    out.append(event.raw)  # comments and other fields
                if stream and self.left == 0:
                    await self._flush()
        except SSELineTooLong as exc:
            metrics.upstream_errors.labels("line_too_long").inc()
            return str(exc)
        except asyncio.TimeoutError:
            metrics.upstream_errors.labels("timeout").inc()
            return (f"the upstream sent nothing for {self.gw.config.read_timeout:g} s"
                    " (read_timeout)")
        except ClientError as exc:
            metrics.upstream_errors.labels("broken").inc()
            return f"the upstream stream broke: {type(exc).__name__}: {exc}"
        return None

    def _account(self, watch: Any, attempt: int) -> None:
        metrics = self.gw.metrics
        chars = 0
        for reply in watch.replies.values():
            partial = reply.partial
            chars += len(partial.text) + len(partial.reasoning)
            for d in reply.detections:
                metrics.detections.labels(d.rule, d.action).inc()
                record = {"event": "detection", "request": self.rid, "attempt": attempt,
                          "endpoint": self.endpoint, "model": self.body.get("model")}
                if self.conversation is not None:
                    record["conversation"] = self.conversation[:18]
                record.update(d.to_dict())
                log.info("%s", json.dumps(record, ensure_ascii=False))
        metrics.chars.inc(chars)
        first = watch.replies.get(0)
        self.texts.append(first.partial.text if first is not None else "")

    async def _fail(self, message: str) -> web.StreamResponse:
        log.warning("%s", json.dumps({"event": "upstream_error", "request": self.rid,
                                      "message": message}))
        if self.resp is None:
            return _error(502, f"contextcare gateway: {message}", kind="upstream_error",
                          code="upstream_error", headers=self._headers())
        error = {"error": {"message": f"contextcare gateway: {message}", "type": "upstream_error",
                           "param": None, "code": "upstream_error"}}
        self.out.append(b"data: " + _dumps(error) + b"\n\n")
        await self._flush()
        return await self._eof()

    async def _finish(self, final: Abort | None) -> web.StreamResponse:
        if final is not None:
            self._count_saved()
        if self.stream:
            if final is not None:
                self.out.append(self._abort_chunk(final))
            self.out.append(_DONE)
            await self._flush()
            return await self._eof()
        completion = self.asm.completion(
            self.gw.config.abort_finish_reason if final is not None else None)
        if self.aborts:
            completion["contextcare"] = {
                "action": "abort" if final is not None else "continue",
                "detections": [a.detection.to_dict() for a in self.aborts],
                "attempts": len(self.aborts) + (0 if final is not None else 1),
                "request_id": self.rid}
        return web.Response(body=_dumps(completion), content_type="application/json",
                            headers=self._headers())

    def _count_saved(self) -> None:
        budget = self.body.get("max_completion_tokens", self.body.get("max_tokens"))
        if isinstance(budget, int) and not isinstance(budget, bool):
            self.gw.metrics.tokens_saved.inc(max(0, budget - self.asm.chunks))

    def _keep_notices(self, guard: Guard) -> None:
        notices = guard.pending_notices(metadata=False)
        if not notices or self.text_completion:
            return
        key = self.conversation
        if key is None:
            messages = self.body.get("messages")
            if not isinstance(messages, list):
                return
            key = reply_key(messages, "".join(self.texts), self.asm.tool_calls(0))
        self.gw._store(key, notices)


class Gateway:
    """An OpenAI-compatible gateway that guards every stream passing through it.

    ``ruleset``: compiled rules (default: from ``config.rules``, else the default rules).
    ``registry``: the Prometheus registry of the metrics (default: one of its own).
    :meth:`app` gives the aiohttp application; :meth:`start` runs it on the current event loop
    (tests, embedding); :func:`contextcare.serve.run` runs it as a program.
    """

    def __init__(self, config: GatewayConfig, *, ruleset: Any = None,
                 registry: prom.CollectorRegistry | None = None) -> None:
        if not isinstance(config, GatewayConfig):
            raise TypeError(f"config must be a GatewayConfig, got {type(config).__name__}")
        self.config = config
        self.ruleset = ruleset if ruleset is not None else load_ruleset(config.rules)
        self.metrics = Metrics(registry)
        self.pending = PendingNotices(config.pending_max, config.pending_ttl)
        #: Guards of requests in progress (weak: a guard still here after its request ended
        #: would be a leak; the tests check it).
        self.live_guards: weakref.WeakSet[Guard] = weakref.WeakSet()
        self._api_key = config.upstream_api_key()
        parts = urlsplit(config.upstream)
        self._origin = f"{parts.scheme}://{parts.netloc}"
        self._prefix = parts.path.rstrip("/")
        self._session: ClientSession | None = None

    # ------------------------------------------------------------- lifecycle

    def app(self) -> web.Application:
        """The aiohttp application (routes, client session opened on startup)."""
        app = web.Application(client_max_size=self.config.max_body_bytes)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_route("*", "/{tail:.*}", self._route)
        app.on_startup.append(self._startup)
        app.on_cleanup.append(self._cleanup)
        return app

    async def start(self, host: str | None = None, port: int | None = None) -> web.AppRunner:
        """Listen on ``host:port`` (default: the config's; port 0 picks a free one) on the
        running loop; returns the runner (``await runner.cleanup()`` drains and stops).
        ``runner.addresses[0]`` is the bound address."""
        runner = web.AppRunner(self.app(), handler_cancellation=True, access_log=None,
                               shutdown_timeout=self.config.shutdown_timeout)
        await runner.setup()
        site = web.TCPSite(runner, host or self.config.host,
                           self.config.port if port is None else port)
        await site.start()
        return runner

    async def _startup(self, app: web.Application) -> None:
        timeout = ClientTimeout(total=None, connect=self.config.connect_timeout,
                                sock_read=self.config.read_timeout)
        self._session = ClientSession(connector=TCPConnector(limit=0), timeout=timeout,
                                      auto_decompress=False)

    async def _cleanup(self, app: web.Application) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def session(self) -> ClientSession:
        if self._session is None:
            raise RuntimeError("the gateway is not running (its app has not started)")
        return self._session

    # ------------------------------------------------------------- small endpoints

    async def _metrics(self, request: web.Request) -> web.Response:
        self.metrics.pending.set(len(self.pending))
        return web.Response(body=prom.generate_latest(self.metrics.registry),
                            headers={"Content-Type": prom.CONTENT_TYPE_LATEST})

    async def _healthz(self, request: web.Request) -> web.Response:
        body = {"status": "ok", "upstream": self.config.upstream,
                "open_streams": len(self.live_guards), "pending_conversations": len(self.pending)}
        return web.Response(body=_dumps(body), content_type="application/json")

    # ------------------------------------------------------------- routing

    def _url(self, request: web.Request) -> str:
        path = request.rel_url.raw_path
        if self._prefix and (path == "/v1" or path.startswith("/v1/")):
            path = self._prefix + path[3:]
        query = request.rel_url.raw_query_string
        return self._origin + path + ("?" + query if query else "")

    @staticmethod
    def _endpoint(path: str) -> str | None:
        path = path.rstrip("/")
        if path == "/v1/chat/completions":
            return "chat"
        if path == "/v1/completions":
            return "completions"
        return None

    def _upstream_headers(self, headers: Mapping[str, str], *, guarded: bool) -> CIMultiDict[str]:
        out: CIMultiDict[str] = CIMultiDict()
        for name, value in headers.items():
            low = name.lower()
            if low in _HOP_BY_HOP or low == OPTIONS_HEADER.lower():
                continue
            if guarded and low in ("content-length", "accept-encoding", "content-encoding"):
                continue
            out.add(name, value)
        if guarded:
            out["Accept-Encoding"] = "identity"  # the guard reads the stream: no compression
            out["Content-Type"] = "application/json"
        elif "accept-encoding" not in out:
            out["Accept-Encoding"] = "identity"  # do not ask for what the client did not
        if self._api_key is not None and "authorization" not in out:
            out["Authorization"] = f"Bearer {self._api_key}"
        return out

    async def _route(self, request: web.Request) -> web.StreamResponse:
        if request.method == "POST":
            endpoint = self._endpoint(request.path)
            if endpoint is not None:
                return await self._guarded(request, endpoint)
        self.metrics.requests.labels("other", "passthrough").inc()
        return await self._forward(request, None)

    async def _open(self, request: web.Request, method: str, body: Any,
                    headers: CIMultiDict[str]) -> ClientResponse | web.Response:
        url = self._url(request)
        try:
            return await self.session.request(method, url, data=body, headers=headers,
                                              allow_redirects=False)
        except asyncio.TimeoutError:
            self.metrics.upstream_errors.labels("timeout").inc()
            return _error(504, f"contextcare gateway: the upstream {self._origin} did not answer"
                          f" within {self.config.connect_timeout:g} s (connect_timeout)",
                          kind="upstream_error", code="upstream_timeout")
        except ClientError as exc:
            self.metrics.upstream_errors.labels("unreachable").inc()
            return _error(502, f"contextcare gateway: cannot reach the upstream {self._origin}:"
                          f" {exc}", kind="upstream_error", code="upstream_unreachable")

    async def _post(self, request: web.Request, body: dict[str, Any],
                    rid: str) -> ClientResponse | web.Response:
        headers = self._upstream_headers(request.headers, guarded=True)
        return await self._open(request, "POST", _dumps(body), headers)

    async def _forward(self, request: web.Request, body: bytes | None) -> web.StreamResponse:
        """Pass a request through unchanged (``body``: a replacement body, else streamed)."""
        headers = self._upstream_headers(request.headers, guarded=False)
        if body is not None:
            headers.popall("Content-Length", None)
            data: Any = body
        else:
            data = request.content if request.body_exists else None
        up = await self._open(request, request.method, data, headers)
        if isinstance(up, web.Response):
            return up
        return await self._relay(request, up)

    async def _relay(self, request: web.Request, up: ClientResponse) -> web.StreamResponse:
        """Send an upstream response to the client as it is: status, headers, body bytes."""
        done = False
        try:
            resp = web.StreamResponse(status=up.status, reason=up.reason)
            for name, value in up.headers.items():
                if name.lower() not in _HOP_BY_HOP:
                    resp.headers.add(name, value)
            await resp.prepare(request)
            async for data in up.content.iter_any():
                try:
                    await resp.write(data)
                except ConnectionResetError:
                    self.metrics.client_disconnects.inc()
                    return resp  # the client left; finally closes the upstream response
            done = True
        except (ClientError, asyncio.TimeoutError) as exc:
            self.metrics.upstream_errors.labels("broken").inc()
            log.warning("%s", json.dumps({"event": "upstream_error", "path": request.path,
                                          "message": f"{type(exc).__name__}: {exc}"}))
            if request.transport is not None:
                request.transport.close()  # the client must not take a cut body as complete
            return resp
        finally:
            if done:
                up.release()  # read to the end: the connection goes back to the pool
            else:
                up.close()
        try:
            await resp.write_eof()
        except ConnectionResetError:
            self.metrics.client_disconnects.inc()
        return resp

    # ------------------------------------------------------------- guarded endpoints

    def _options(self, headers: Mapping[str, str], body: dict[str, Any]) -> RequestOptions:
        values: dict[str, Any] = {"enabled": True, "auto_continue": self.config.auto_continue,
                                  "lang": self.config.lang}
        header = headers.get(OPTIONS_HEADER)
        if header is not None:
            text = header.strip()
            if text.lower() in ("on", "off"):
                values["enabled"] = text.lower() == "on"
            else:
                for part in text.split(","):
                    key, sep, value = part.partition("=")
                    key = key.strip()
                    if not sep or key not in _OPTION_KEYS:
                        raise _BadRequest(
                            f"{OPTIONS_HEADER}: expected 'on', 'off' or key=value pairs with keys"
                            f" {', '.join(_OPTION_KEYS)}, got {part.strip()!r}", OPTIONS_HEADER)
                    if key == "lang":
                        if value.strip() not in ("en", "zh"):
                            raise _BadRequest(f"{OPTIONS_HEADER}: lang must be 'en' or 'zh', got"
                                              f" {value.strip()!r}", OPTIONS_HEADER)
                        values[key] = value.strip()
                    else:
                        values[key] = _parse_bool(value, f"{OPTIONS_HEADER}: {key}")
        if "contextcare" in body:
            field = body.pop("contextcare")
            if not isinstance(field, dict):
                raise _BadRequest("contextcare must be an object such as {\"enabled\": false},"
                                  f" got {type(field).__name__}", "contextcare")
            for key, value in field.items():
                if key not in _OPTION_KEYS:
                    raise _BadRequest(f"contextcare.{key} is not an option (known:"
                                      f" {', '.join(_OPTION_KEYS)})", f"contextcare.{key}")
                if key == "lang":
                    if value not in ("en", "zh"):
                        raise _BadRequest(f"contextcare.lang must be 'en' or 'zh', got {value!r}",
                                          "contextcare.lang")
                elif not isinstance(value, bool):
                    raise _BadRequest(f"contextcare.{key} must be true or false, got {value!r}",
                                      f"contextcare.{key}")
                values[key] = value
        return RequestOptions(**values)

    async def _guarded(self, request: web.Request, endpoint: str) -> web.StreamResponse:
        rid = uuid.uuid4().hex[:16]
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return _error(413, f"contextcare gateway: the request body is larger than"
                          f" {self.config.max_body_bytes} bytes (max_body_bytes)",
                          code="body_too_large")
        try:
            body = self._check(raw, endpoint)
            had_field = "contextcare" in body
            opts = self._options(request.headers, body)
        except _BadRequest as exc:
            return _error(exc.status, f"contextcare gateway: {exc}", param=exc.param,
                          headers={REQUEST_ID_HEADER: rid})
        stream = bool(body.get("stream", False))
        if not opts.enabled:
            self.metrics.requests.labels(endpoint, "disabled").inc()
            return await self._forward(request, _dumps(body) if had_field else raw)
        self.metrics.requests.labels(endpoint, "stream" if stream else "collect").inc()
        up_body = dict(body)
        up_body["stream"] = True
        if not stream and self.config.collect_usage:
            options = body.get("stream_options")
            up_body["stream_options"] = {**(options if isinstance(options, dict) else {}),
                                         "include_usage": True}
        conversation, injected = None, 0
        if endpoint == "chat":
            messages = body["messages"]
            name = request.headers.get(self.config.conversation_header)
            if name:
                conversation = "h:" + name
                lookup: str | None = conversation
            else:
                lookup = history_key(messages)
            notices = self._take(lookup) if lookup is not None else []
            if notices:
                injected = len(notices)
                self.metrics.notices_injected.inc(injected)
                up_body["messages"] = [*messages, *notices]
        exchange = _Exchange(self, request, rid, endpoint, body, up_body, opts, conversation,
                             injected)
        return await exchange.run()

    @staticmethod
    def _check(raw: bytes, endpoint: str) -> dict[str, Any]:
        try:
            body = json.loads(raw)
        except ValueError:
            raise _BadRequest("the request body is not valid JSON") from None
        if not isinstance(body, dict):
            raise _BadRequest(f"the request body must be a JSON object, got"
                              f" {type(body).__name__}")
        if not isinstance(body.get("stream", False), bool):
            raise _BadRequest(f"stream must be true or false, got {body['stream']!r}", "stream")
        if endpoint == "chat" and not isinstance(body.get("messages"), list):
            raise _BadRequest("messages must be a list of messages", "messages")
        return body

    def _take(self, key: str) -> list[dict[str, Any]]:
        before = self.pending.dropped
        notices = self.pending.take(key)
        self.metrics.notices_dropped.inc(self.pending.dropped - before)
        return notices

    def _store(self, key: str, notices: list[dict[str, Any]]) -> None:
        before = self.pending.dropped
        self.pending.put(key, notices)
        self.metrics.notices_dropped.inc(self.pending.dropped - before)


def run_forever(config: GatewayConfig) -> None:
    """Serve until SIGINT/SIGTERM (``contextcare serve``), then drain: no new connections, open
    streams get ``shutdown_timeout`` seconds to finish."""
    gw = Gateway(config)
    app = gw.app()
    # The process is ours: tune the cyclic garbage collector for a server that holds thousands of
    # streams. Objects of the start-up (modules, the ruleset, the app) are frozen out of the
    # collections, and young collections run after 10 000 allocations instead of 700. With the
    # default settings, 1 000 open streams made full collections of 0.2-0.6 s (a stall of every
    # stream) and the collector took about a third of the gateway's CPU time (benchmarks/).
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 20, 50)
    log.info("contextcare gateway on http://%s:%d/v1 -> %s (rules: %s, auto-continue: %s)",
             config.host, config.port, config.upstream, config.rules or "default",
             "on" if config.auto_continue else "off")
    web.run_app(app, host=config.host, port=config.port,
                shutdown_timeout=config.shutdown_timeout, handler_cancellation=True,
                print=None, access_log=logging.getLogger("aiohttp.access"))
