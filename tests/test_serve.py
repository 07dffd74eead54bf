"""The serving gateway: the official ``openai`` client (sync and async) through the gateway to a
scripted upstream on loopback (ephemeral ports), faults included, and a count of what could leak
(upstream connections in use, open streams, tasks, guards)."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

import httpx
import openai
import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("prometheus_client")

from aiohttp import web

import contextcare as cc
from contextcare.serve import ConfigError, GatewayConfig, load_config
from contextcare.serve.conversations import PendingNotices, history_key, reply_key
from contextcare.serve.gateway import Gateway
from contextcare.serve.scripted import Script, ScriptedUpstream, pieces
from contextcare.serve.sse import SSEDecoder, SSELineTooLong

T = TypeVar("T")

RULES = [cc.Phrases("stop", ("LOOPING",), channel="combined", action="abort"),
         cc.Phrases("nudge", ("hmm",), channel="combined", action="remind")]
LOOP_TEXT = "Intro line.\n" + "LOOPING line\n" * 300
CLEAN_TEXT = "Hello, world. This is a clean answer.\n" * 3
SCRIPTS = {
    "clean": Script(CLEAN_TEXT, reasoning="Thinking it over."),
    "loop": Script(LOOP_TEXT, delay=0.001),
    "loop:continue": Script("Done properly now.\n"),
    "stubborn": Script(LOOP_TEXT, delay=0.001),
    "stubborn:continue": Script("Again LOOPING line\n" * 200, delay=0.001),
    "nudge": Script("hmm, let me think.\nAnswer: 4\n"),
    "tools": Script("", tool_call=("get_weather", '{"city": "Paris", "unit": "C"}')),
    "malformed": Script(CLEAN_TEXT, fault="malformed", fault_at=5),
    "long": Script(CLEAN_TEXT, fault="long_line", fault_at=5),
    "stall": Script(CLEAN_TEXT, fault="stall", fault_at=5),
    "cut": Script(CLEAN_TEXT, fault="cut", fault_at=5),
    "error500": Script("", status=500),
    "slow": Script("tick tock\n" * 40, delay=0.005),
    "repeat": Script("Setup.\n" + "The same sentence again and again.\n" * 120),
    "json-only": Script(CLEAN_TEXT, ignore_stream=True),
}
USER = [{"role": "user", "content": "hi"}]


class Rig:
    """An event loop in a thread running the scripted upstream and gateways."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.runners: list[web.BaseRunner] = []

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 20) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def upstream(self, scripts: dict[str, Script]) -> tuple[ScriptedUpstream, str]:
        up = ScriptedUpstream(scripts)

        async def start() -> int:
            runner = web.AppRunner(up.app(), handler_cancellation=True, shutdown_timeout=1)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", 0).start()
            self.runners.append(runner)
            return int(runner.addresses[0][1])

        return up, f"http://127.0.0.1:{self.call(start())}/v1"

    def gateway(self, upstream: str, rules: Any = "test",
                **settings: Any) -> tuple[Gateway, str, web.AppRunner]:
        ruleset = cc.Ruleset(RULES) if rules == "test" else rules
        gw = Gateway(GatewayConfig(upstream=upstream, **settings), ruleset=ruleset)

        async def start() -> web.AppRunner:
            return await gw.start(port=0)

        runner = self.call(start())
        self.runners.append(runner)
        return gw, f"http://127.0.0.1:{runner.addresses[0][1]}/v1", runner

    def tasks(self) -> int:
        async def count() -> int:
            return len(asyncio.all_tasks())

        return self.call(count())

    def close(self) -> None:
        async def stop() -> None:
            for runner in reversed(self.runners):
                await runner.cleanup()

        self.call(stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


@pytest.fixture(scope="module")
def rig() -> Iterator[Rig]:
    r = Rig()
    yield r
    r.close()


@pytest.fixture(scope="module")
def up(rig: Rig) -> tuple[ScriptedUpstream, str]:
    return rig.upstream(SCRIPTS)


@pytest.fixture(scope="module")
def gw(rig: Rig, up: tuple[ScriptedUpstream, str]) -> tuple[Gateway, str]:
    gateway, url, _ = rig.gateway(up[1], read_timeout=1.0)
    return gateway, url


@pytest.fixture(scope="module")
def gw_continue(rig: Rig, up: tuple[ScriptedUpstream, str]) -> tuple[Gateway, str]:
    gateway, url, _ = rig.gateway(up[1], auto_continue=True)
    return gateway, url


def client(url: str, **kw: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key="sk-test", max_retries=0, timeout=10, **kw)


def aclient(url: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=url, api_key="sk-test", max_retries=0, timeout=10)


def text_of(chunks: list[Any]) -> str:
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def wait_for(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "condition not reached in time"
        time.sleep(0.01)


def metric(gateway: Gateway, name: str, labels: dict[str, str] | None = None) -> float:
    value = gateway.metrics.registry.get_sample_value(name, labels or {})
    return 0.0 if value is None else value


# --------------------------------------------------------------------------- streams

def test_clean_stream_reaches_the_client_byte_for_byte(gw: tuple[Gateway, str],
                                                       up: tuple[ScriptedUpstream, str]) -> None:
    body = {"model": "clean", "messages": USER, "stream": True}
    direct = httpx.post(up[1] + "/chat/completions", json=body).content
    through = httpx.post(gw[1] + "/chat/completions", json=body)
    assert through.status_code == 200
    assert through.headers["content-type"].startswith("text/event-stream")
    assert through.content == direct
    chunks = list(client(gw[1]).chat.completions.create(model="clean", messages=USER,
                                                        stream=True))
    assert text_of(chunks) == CLEAN_TEXT
    assert "".join(c.choices[0].delta.model_extra.get("reasoning_content") or ""
                   for c in chunks if c.choices) == "Thinking it over."
    assert chunks[-1].choices[0].finish_reason == "stop"


def _check_abort(chunks: list[Any], upstream: ScriptedUpstream, model: str = "loop") -> None:
    last = chunks[-1]
    assert last.choices[0].finish_reason == "content_filter"
    info = last.model_extra["contextcare"]
    assert info["action"] == "abort" and info["detection"]["rule"] == "stop"
    assert info["detection"]["phrase"] == "LOOPING"
    text = text_of(chunks)
    # nothing lost: the client has every character up to and including the aborting delta
    assert LOOP_TEXT.startswith(text) and "LOOPING" in text
    assert len(text) < len("Intro line.\nLOOPING") + 4
    # the upstream saw its client leave long before the end of the script
    wait_for(lambda: upstream.log[-1].ended is not None)
    entry = upstream.log[-1]
    assert entry.model == model and entry.disconnected and not entry.finished
    assert entry.sent < entry.total // 2


def test_abort_closes_the_upstream_and_ends_the_stream_cleanly(
        gw: tuple[Gateway, str], up: tuple[ScriptedUpstream, str]) -> None:
    aborts = metric(gw[0], "contextcare_aborts_total")
    chunks = list(client(gw[1]).chat.completions.create(model="loop", messages=USER,
                                                        stream=True))
    _check_abort(chunks, up[0])
    assert len({c.id for c in chunks}) == 1
    assert metric(gw[0], "contextcare_aborts_total") == aborts + 1
    raw = httpx.post(gw[1] + "/chat/completions",
                     json={"model": "loop", "messages": USER, "stream": True}).text
    events = raw.strip().split("\n\n")
    assert events[-1] == "data: [DONE]"
    last = json.loads(events[-2].removeprefix("data: "))
    assert last["choices"] == [{"index": 0, "delta": {}, "logprobs": None,
                                "finish_reason": "content_filter"}]
    assert last["contextcare"]["action"] == "abort"
    assert raw.count("data: [DONE]") == 1


def test_async_client_abort(gw: tuple[Gateway, str], up: tuple[ScriptedUpstream, str]) -> None:
    async def main() -> list[Any]:
        c = aclient(gw[1])
        stream = await c.chat.completions.create(model="loop", messages=USER, stream=True)
        out = [chunk async for chunk in stream]
        await c.close()
        return out

    _check_abort(asyncio.run(main()), up[0])


def test_async_client_clean(gw: tuple[Gateway, str]) -> None:
    async def main() -> tuple[list[Any], Any]:
        c = aclient(gw[1])
        stream = await c.chat.completions.create(model="clean", messages=USER, stream=True)
        out = [chunk async for chunk in stream]
        whole = await c.chat.completions.create(model="clean", messages=USER)
        await c.close()
        return out, whole

    chunks, whole = asyncio.run(main())
    assert text_of(chunks) == CLEAN_TEXT == whole.choices[0].message.content


def test_default_rules_abort_a_repeated_line(rig: Rig, up: tuple[ScriptedUpstream, str]) -> None:
    _, url, _ = rig.gateway(up[1], rules=None)
    chunks = list(client(url).chat.completions.create(model="repeat", messages=USER,
                                                      stream=True))
    info = chunks[-1].model_extra["contextcare"]
    assert info["detection"]["rule"] in ("line-repeat", "tail-repeat", "block-repeat")
    assert chunks[-1].choices[0].finish_reason == "content_filter"
    assert len(text_of(chunks)) < len(SCRIPTS["repeat"].text) // 2


# --------------------------------------------------------------------------- non-streaming

def test_non_streaming_is_streamed_upstream_and_reassembled(
        gw: tuple[Gateway, str], up: tuple[ScriptedUpstream, str]) -> None:
    c = client(gw[1])
    whole = c.chat.completions.create(model="clean", messages=USER)
    sent = up[0].requests[-1]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert whole.object == "chat.completion" and whole.id == "chatcmpl-scripted"
    assert whole.choices[0].message.content == CLEAN_TEXT
    assert whole.choices[0].message.model_extra["reasoning_content"] == "Thinking it over."
    assert whole.choices[0].finish_reason == "stop"
    assert whole.usage is not None and whole.usage.completion_tokens > 10

    cut = c.chat.completions.create(model="loop", messages=USER)
    assert cut.choices[0].finish_reason == "content_filter"
    assert LOOP_TEXT.startswith(cut.choices[0].message.content)
    assert "LOOPING" in cut.choices[0].message.content
    assert cut.model_extra["contextcare"]["action"] == "abort"
    wait_for(lambda: up[0].log[-1].ended is not None)
    assert up[0].log[-1].disconnected


def test_tool_calls_are_reassembled(gw: tuple[Gateway, str]) -> None:
    whole = client(gw[1]).chat.completions.create(model="tools", messages=USER)
    call = whole.choices[0].message.tool_calls[0]
    assert call.id == "call_1" and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris", "unit": "C"}
    assert whole.choices[0].finish_reason == "tool_calls"
    assert whole.choices[0].message.content is None


def test_completions_endpoint_is_guarded(gw: tuple[Gateway, str],
                                         up: tuple[ScriptedUpstream, str]) -> None:
    c = client(gw[1])
    chunks = list(c.completions.create(model="loop", prompt="go", stream=True))
    assert chunks[-1].choices[0].finish_reason == "content_filter"
    text = "".join(ch.choices[0].text for ch in chunks if ch.choices)
    assert LOOP_TEXT.startswith(text) and "LOOPING" in text
    whole = c.completions.create(model="clean", prompt="go")
    assert whole.choices[0].text == CLEAN_TEXT and whole.object == "text_completion"


# --------------------------------------------------------------------------- auto-continue

def test_auto_continue_splices_the_continuation(gw_continue: tuple[Gateway, str],
                                                up: tuple[ScriptedUpstream, str]) -> None:
    n = len(up[0].requests)
    chunks = list(client(gw_continue[1]).chat.completions.create(
        model="loop", messages=USER, stream=True))
    text = text_of(chunks)
    _, sep, tail = text.partition("LOOPING")
    assert sep and tail.endswith("Done properly now.\n")
    assert len({c.id for c in chunks}) == 1
    assert [c.choices[0].delta.role for c in chunks if c.choices].count("assistant") == 1
    marks = [c.model_extra["contextcare"] for c in chunks if c.model_extra.get("contextcare")]
    assert [m["action"] for m in marks] == ["continue"]
    assert chunks[-1].choices[0].finish_reason == "stop"
    second = up[0].requests[n + 1]["messages"]
    assert second[:-2] == USER
    assert second[-2]["role"] == "assistant" and text.startswith(second[-2]["content"])
    assert "metadata" not in second[-2]
    assert second[-1]["role"] == "user" and "stopped by the system" in second[-1]["content"]
    assert metric(gw_continue[0], "contextcare_auto_continues_total") >= 1

    whole = client(gw_continue[1]).chat.completions.create(model="loop", messages=USER)
    assert whole.choices[0].message.content.endswith("LOOPING" + tail.split("LOOPING")[-1])
    assert whole.choices[0].finish_reason == "stop"
    assert whole.model_extra["contextcare"]["action"] == "continue"


def test_auto_continue_stops_at_the_consecutive_abort_limit(
        gw_continue: tuple[Gateway, str], up: tuple[ScriptedUpstream, str]) -> None:
    n = len(up[0].requests)
    chunks = list(client(gw_continue[1]).chat.completions.create(
        model="stubborn", messages=USER, stream=True))
    assert len(up[0].requests) == n + 2  # max_consecutive_aborts = 2
    assert chunks[-1].choices[0].finish_reason == "content_filter"
    assert chunks[-1].model_extra["contextcare"]["attempt"] == 2
    wait_for(lambda: all(e.ended is not None for e in up[0].log[-2:]))
    assert all(e.disconnected for e in up[0].log[-2:])


# --------------------------------------------------------------------------- remind

def test_reminder_reaches_the_next_request_by_header(gw: tuple[Gateway, str],
                                                     up: tuple[ScriptedUpstream, str]) -> None:
    c = client(gw[1], default_headers={"X-Conversation-Id": "conv-42"})
    first = list(c.chat.completions.create(model="nudge", messages=USER, stream=True))
    assert first[-1].choices[0].finish_reason == "stop"
    assert not any(ch.model_extra.get("contextcare") for ch in first)
    other = client(gw[1], default_headers={"X-Conversation-Id": "someone-else"})
    other.chat.completions.create(model="clean", messages=USER)
    assert up[0].requests[-1]["messages"] == USER
    raw = c.chat.completions.with_raw_response.create(model="clean", messages=USER)
    assert raw.headers["x-contextcare-notices"] == "1"
    sent = up[0].requests[-1]["messages"]
    assert sent[:-1] == USER and sent[-1]["role"] == "user"
    assert "<context-care>" in sent[-1]["content"] and "metadata" not in sent[-1]
    c.chat.completions.create(model="clean", messages=USER)
    assert up[0].requests[-1]["messages"] == USER  # taken once


def test_reminder_reaches_the_next_request_by_history(gw: tuple[Gateway, str],
                                                      up: tuple[ScriptedUpstream, str]) -> None:
    c = client(gw[1])
    q = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "2+2?"}]
    answer = text_of(list(c.chat.completions.create(model="nudge", messages=q, stream=True)))
    stranger = [*q, {"role": "assistant", "content": "4"}, {"role": "user", "content": "ok"}]
    c.chat.completions.create(model="clean", messages=stranger)
    assert up[0].requests[-1]["messages"] == stranger
    follow = [*q, {"role": "assistant", "content": answer}, {"role": "user", "content": "more"}]
    c.chat.completions.create(model="clean", messages=follow)
    sent = up[0].requests[-1]["messages"]
    assert sent[:-1] == follow and "<context-care>" in sent[-1]["content"]


def test_conversation_keys() -> None:
    q = [{"role": "user", "content": "hi"}]
    key = reply_key(q, "hello ")
    assert history_key(q) is None
    assert history_key([*q, {"role": "assistant", "content": "hello"},
                        {"role": "user", "content": "next"}]) == key
    assert history_key([*q, {"role": "assistant", "content": [{"type": "text",
                                                               "text": "hello"}]}]) == key
    assert history_key([*q, {"role": "assistant", "content": "bye"}]) != key


def test_pending_notices_are_bounded_by_size_and_age() -> None:
    now = [0.0]
    store = PendingNotices(2, 10.0, clock=lambda: now[0])
    note = [{"role": "user", "content": "n"}]
    store.put("a", note)
    store.put("b", note)
    store.put("a", note)          # a is now the most recent, with two notices
    store.put("c", note)          # evicts b
    assert len(store) == 2 and store.dropped == 1
    assert store.take("b") == [] and len(store.take("a")) == 2
    now[0] = 11.0
    assert store.take("c") == [] and store.dropped == 2
    assert PendingNotices(0, 1.0).take("x") == []


# --------------------------------------------------------------------------- options

def test_per_request_opt_out(gw: tuple[Gateway, str], up: tuple[ScriptedUpstream, str]) -> None:
    c = client(gw[1])
    whole = c.chat.completions.create(model="loop", messages=USER,
                                      extra_body={"contextcare": {"enabled": False}})
    assert whole.choices[0].message.content == LOOP_TEXT
    assert "contextcare" not in up[0].requests[-1]
    chunks = list(c.chat.completions.create(model="loop", messages=USER, stream=True,
                                            extra_headers={"X-ContextCare": "off"}))
    assert text_of(chunks) == LOOP_TEXT
    assert metric(gw[0], "contextcare_requests_total",
                  {"endpoint": "chat", "mode": "disabled"}) >= 2


@pytest.mark.parametrize("extra_body, headers, needle", [
    ({"contextcare": {"enabled": "no"}}, {}, "contextcare.enabled must be true or false"),
    ({"contextcare": {"colour": 1}}, {}, "contextcare.colour is not an option"),
    ({"contextcare": []}, {}, "contextcare must be an object"),
    ({"contextcare": {"lang": "fr"}}, {}, "contextcare.lang must be 'en' or 'zh'"),
    ({}, {"X-ContextCare": "enabled=maybe"}, "X-ContextCare: enabled must be true or false"),
    ({}, {"X-ContextCare": "fast"}, "X-ContextCare: expected 'on', 'off' or key=value"),
    ({"stream": "yes"}, {}, "stream must be true or false"),
])
def test_bad_options_get_a_400_naming_them(gw: tuple[Gateway, str], extra_body: dict[str, Any],
                                           headers: dict[str, str], needle: str) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        client(gw[1]).chat.completions.create(model="clean", messages=USER,
                                              extra_body=extra_body, extra_headers=headers)
    assert needle in err.value.message


def test_bad_bodies_get_clear_errors(rig: Rig, gw: tuple[Gateway, str],
                                     up: tuple[ScriptedUpstream, str]) -> None:
    r = httpx.post(gw[1] + "/chat/completions", content=b"{not json")
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]["message"]
    r = httpx.post(gw[1] + "/chat/completions", json={"model": "clean"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "messages"
    _, url, _ = rig.gateway(up[1], max_body_bytes=2048)
    with pytest.raises(openai.APIStatusError) as err:
        client(url).chat.completions.create(model="clean",
                                            messages=[{"role": "user", "content": "x" * 5000}])
    assert err.value.status_code == 413 and "max_body_bytes" in err.value.message


# --------------------------------------------------------------------------- pass-through

def test_other_paths_pass_through_unchanged(gw: tuple[Gateway, str]) -> None:
    assert [m.id for m in client(gw[1]).models.list()][:2] == ["clean", "loop"]
    r = httpx.put(gw[1] + "/echo/a%2Fb?x=1&y=two", content=b"\x00raw body\xff",
                  headers={"Authorization": "Bearer sk-client", "X-Custom": "kept"})
    assert r.status_code == 201 and r.headers["x-echo"] == "yes"
    echo = r.json()
    assert echo["method"] == "PUT" and echo["query"] == "x=1&y=two"
    assert echo["path"] == "/v1/echo/a/b" or echo["path"] == "/v1/echo/a%2Fb"
    assert echo["headers"]["Authorization"] == "Bearer sk-client"
    assert echo["headers"]["X-Custom"] == "kept"
    assert echo["body"] == "\x00raw body\ufffd"


def test_guarded_requests_keep_the_client_auth(gw: tuple[Gateway, str],
                                               up: tuple[ScriptedUpstream, str]) -> None:
    client(gw[1]).chat.completions.create(model="clean", messages=USER)
    assert up[0].headers[-1]["Authorization"] == "Bearer sk-test"


def test_configured_key_is_used_only_without_client_auth(
        rig: Rig, up: tuple[ScriptedUpstream, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CC_TEST_UPSTREAM_KEY", "sk-gateway")
    _, url, _ = rig.gateway(up[1], upstream_api_key_env="CC_TEST_UPSTREAM_KEY")
    httpx.post(url + "/chat/completions", json={"model": "clean", "messages": USER})
    assert up[0].headers[-1]["Authorization"] == "Bearer sk-gateway"
    client(url).chat.completions.create(model="clean", messages=USER)
    assert up[0].headers[-1]["Authorization"] == "Bearer sk-test"


# --------------------------------------------------------------------------- faults

def test_upstream_error_status_passes_through(gw: tuple[Gateway, str]) -> None:
    with pytest.raises(openai.InternalServerError) as err:
        client(gw[1]).chat.completions.create(model="error500", messages=USER, stream=True)
    assert err.value.status_code == 500 and "scripted failure" in err.value.message


def test_upstream_that_ignores_stream_is_relayed(gw: tuple[Gateway, str]) -> None:
    before = metric(gw[0], "contextcare_upstream_errors_total", {"kind": "not_a_stream"})
    whole = client(gw[1]).chat.completions.create(model="json-only", messages=USER)
    assert whole.choices[0].message.content == CLEAN_TEXT
    assert metric(gw[0], "contextcare_upstream_errors_total",
                  {"kind": "not_a_stream"}) == before + 1


def test_unreachable_upstream_is_a_502(rig: Rig) -> None:
    _, url, _ = rig.gateway("http://127.0.0.1:9/v1", connect_timeout=2.0)
    with pytest.raises(openai.APIStatusError) as err:
        client(url).chat.completions.create(model="clean", messages=USER, stream=True)
    assert err.value.status_code == 502 and "cannot reach the upstream" in err.value.message


def test_stalled_upstream_times_out_mid_stream(gw: tuple[Gateway, str]) -> None:
    got: list[Any] = []
    with pytest.raises(openai.APIError) as err:
        got.extend(client(gw[1]).chat.completions.create(model="stall", messages=USER,
                                                         stream=True))
    assert "read_timeout" in str(err.value.message)
    assert CLEAN_TEXT.startswith(text_of(got)) and len(got) == 5


def test_broken_upstream_stream_is_an_error_event(gw: tuple[Gateway, str]) -> None:
    with pytest.raises(openai.APIError) as err:
        list(client(gw[1]).chat.completions.create(model="cut", messages=USER, stream=True))
    assert "the upstream stream broke" in str(err.value.message)


def test_long_sse_line_is_refused(rig: Rig, up: tuple[ScriptedUpstream, str]) -> None:
    _, url, _ = rig.gateway(up[1], max_line_bytes=64 * 1024)
    with pytest.raises(openai.APIError) as err:
        list(client(url).chat.completions.create(model="long", messages=USER, stream=True))
    assert "longer than 65536 bytes (max_line_bytes)" in str(err.value.message)


def test_malformed_lines_are_dropped_and_counted(gw: tuple[Gateway, str]) -> None:
    before = metric(gw[0], "contextcare_upstream_errors_total", {"kind": "malformed"})
    raw = httpx.post(gw[1] + "/chat/completions",
                     json={"model": "malformed", "messages": USER, "stream": True}).text
    assert "not json" not in raw and raw.endswith("data: [DONE]\n\n")
    chunks = list(client(gw[1]).chat.completions.create(model="malformed", messages=USER,
                                                        stream=True))
    assert text_of(chunks) == CLEAN_TEXT
    whole = client(gw[1]).chat.completions.create(model="malformed", messages=USER)
    assert whole.choices[0].message.content == CLEAN_TEXT
    assert metric(gw[0], "contextcare_upstream_errors_total",
                  {"kind": "malformed"}) == before + 3


def test_client_disconnect_mid_stream_closes_the_upstream(
        gw: tuple[Gateway, str], up: tuple[ScriptedUpstream, str]) -> None:
    before = metric(gw[0], "contextcare_client_disconnects_total")
    broken = metric(gw[0], "contextcare_upstream_errors_total", {"kind": "broken"})
    stream = client(gw[1]).chat.completions.create(model="slow", messages=USER, stream=True)
    for i, _ in enumerate(stream):
        if i == 3:
            break
    stream.close()
    wait_for(lambda: up[0].log[-1].ended is not None)
    assert up[0].log[-1].disconnected and up[0].log[-1].sent < up[0].log[-1].total
    wait_for(lambda: metric(gw[0], "contextcare_client_disconnects_total") == before + 1)
    assert metric(gw[0], "contextcare_upstream_errors_total", {"kind": "broken"}) == broken


def test_client_disconnect_on_a_passed_through_stream(gw: tuple[Gateway, str],
                                                     up: tuple[ScriptedUpstream, str]) -> None:
    broken = metric(gw[0], "contextcare_upstream_errors_total", {"kind": "broken"})
    stream = client(gw[1]).chat.completions.create(model="slow", messages=USER, stream=True,
                                                   extra_headers={"X-ContextCare": "off"})
    for i, _ in enumerate(stream):
        if i == 3:
            break
    stream.close()
    wait_for(lambda: up[0].log[-1].ended is not None)
    assert up[0].log[-1].disconnected and up[0].log[-1].sent < up[0].log[-1].total
    assert metric(gw[0], "contextcare_upstream_errors_total", {"kind": "broken"}) == broken


def test_nothing_leaks(rig: Rig, gw: tuple[Gateway, str],
                       up: tuple[ScriptedUpstream, str]) -> None:
    """After every kind of ending, no upstream connection is in use, no stream is open at either
    end, no task is left behind and no guard (hence no watcher) is still alive."""
    base_tasks = rig.tasks()
    c = client(gw[1])
    for model in ("clean", "loop", "malformed", "cut", "stall", "tools", "error500"):
        try:
            list(c.chat.completions.create(model=model, messages=USER, stream=True))
        except openai.APIError:
            pass
        try:
            c.chat.completions.create(model=model, messages=USER)
        except openai.APIError:
            pass
    stream = c.chat.completions.create(model="slow", messages=USER, stream=True)
    next(iter(stream))
    stream.close()
    wait_for(lambda: up[0].open_streams == 0)
    wait_for(lambda: metric(gw[0], "contextcare_open_streams") == 0)
    wait_for(lambda: rig.tasks() <= base_tasks)
    connector: Any = gw[0].session.connector
    assert len(connector._acquired) == 0  # upstream connections in use (aiohttp internals)
    gc.collect()
    assert len(gw[0].live_guards) == 0


# --------------------------------------------------------------------------- observability

def test_metrics_health_and_detection_log(gw: tuple[Gateway, str],
                                          caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="contextcare.serve"):
        list(client(gw[1]).chat.completions.create(model="loop", messages=USER, stream=True))
    lines = [json.loads(r.getMessage()) for r in caplog.records
             if r.name == "contextcare.serve" and '"event": "detection"' in r.getMessage()]
    assert len(lines) == 1
    assert lines[0]["rule"] == "stop" and lines[0]["action"] == "abort"
    assert lines[0]["model"] == "loop" and lines[0]["request"]
    text = httpx.get(gw[1].removesuffix("/v1") + "/metrics").text
    assert 'contextcare_detections_total{action="abort",rule="stop"}' in text
    for name in ("contextcare_requests_total", "contextcare_aborts_total",
                 "contextcare_guard_seconds_bucket", "contextcare_upstream_errors_total",
                 "contextcare_chars_total", "contextcare_open_streams"):
        assert name in text
    assert metric(gw[0], "contextcare_guard_seconds_count") > 100
    health = httpx.get(gw[1].removesuffix("/v1") + "/healthz").json()
    assert health["status"] == "ok"


def test_tokens_saved_estimate(gw: tuple[Gateway, str]) -> None:
    before = metric(gw[0], "contextcare_tokens_saved_total")
    list(client(gw[1]).chat.completions.create(model="loop", messages=USER, stream=True,
                                               max_tokens=1000))
    saved = metric(gw[0], "contextcare_tokens_saved_total") - before
    assert 950 < saved < 1000


def test_shutdown_drains_open_streams(rig: Rig, up: tuple[ScriptedUpstream, str]) -> None:
    _, url, runner = rig.gateway(up[1], shutdown_timeout=10.0)
    stream = client(url).chat.completions.create(model="slow", messages=USER, stream=True)
    it = iter(stream)
    first = next(it)
    stopping = asyncio.run_coroutine_threadsafe(runner.cleanup(), rig.loop)
    rest = list(it)
    stopping.result(10)
    assert text_of([first, *rest]) == SCRIPTS["slow"].text
    assert rest[-1].choices[0].finish_reason == "stop"
    with pytest.raises(openai.APIConnectionError):
        client(url).chat.completions.create(model="clean", messages=USER)


# --------------------------------------------------------------------------- parts

def test_sse_decoder_any_split_gives_the_same_events() -> None:
    wire = (b": keep-alive\n\n" + b'data: {"choices": []}\r\n\r\n' + b"event: x\ndata: {\"a\":\n"
            b"data: 1}\n\n" + b"data: [DONE]\n\n" + b"\n")
    whole = SSEDecoder(1024).feed(wire)
    assert [e.raw for e in whole] == [b": keep-alive\n\n", b'data: {"choices": []}\r\n\r\n',
                                      b"event: x\ndata: {\"a\":\ndata: 1}\n\n",
                                      b"data: [DONE]\n\n"]
    assert whole[2].obj == {"a": 1} and whole[3].done and whole[0].obj is None
    for size in (1, 2, 3, 7):
        dec = SSEDecoder(1024)
        got = [e.raw for i in range(0, len(wire), size) for e in dec.feed(wire[i:i + size])]
        assert got == [e.raw for e in whole]
    one = b'data: {"choices": [{"index": 0, "delta": {"content": "a"}}]}\n\n'
    fast = SSEDecoder(1024)
    got = fast.feed(one) + fast.feed(one[:10]) + fast.feed(one[10:])
    assert [e.raw for e in got] == [one, one]
    assert got[0].obj == got[1].obj == json.loads(one[6:])
    tail = SSEDecoder(1024)
    assert tail.feed(b'data: {"x": 1}') == [] and tail.end()[0].obj == {"x": 1}
    with pytest.raises(SSELineTooLong, match="max_line_bytes"):
        SSEDecoder(16).feed(b"data: " + b"x" * 20)
    with pytest.raises(SSELineTooLong):
        SSEDecoder(16).feed(b"data: " + b"x" * 20 + b"\n")


def test_chunk_json_reads_as_the_standard_library() -> None:
    from contextcare.serve import sse

    for payload in (b'{"a": [1, 2.5, "\\u00e9"], "b": null}', b' {"x": 1}', b'{"x": NaN}',
                    b'{"n": 123456789012345678901234567890}', b'{"x": 1} ', b'"text"'):
        got, want = sse._loads(payload), json.loads(payload)
        assert repr(got) == repr(want) and type(got) is type(want)
    for bad in (b'{"x": 1} trailing', b"{", b"\xff\xfe", b""):
        with pytest.raises(ValueError):
            sse._loads(bad)


def test_pieces_cover_the_text() -> None:
    parts = pieces("abcdefghij" * 10, seed=3)
    assert "".join(parts) == "abcdefghij" * 10 and all(1 <= len(p) <= 4 for p in parts)


def test_config_file_and_flags(tmp_path: Any) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rules]]\ntype = "Phrases"\nid = "x"\nphrases = ["zz"]\n')
    conf = tmp_path / "serve.toml"
    conf.write_text('[serve]\nupstream = "http://127.0.0.1:8000/v1"\nport = 9000\n'
                    'rules = "rules.toml"\nauto-continue = true\n')
    cfg = load_config(str(conf), port=9001, lang=None)
    assert cfg.port == 9001 and cfg.auto_continue and cfg.rules == str(rules)
    assert cfg.host == "127.0.0.1"
    conf.write_text('[serve]\nupstream = "http://x/v1"\ncolour = "red"\n')
    with pytest.raises(ConfigError, match="unknown key 'colour'"):
        load_config(str(conf))
    conf.write_text('[serve]\nupstream = "http://x/v1"\nread_timeout = -1\n')
    with pytest.raises(ConfigError, match="serve.toml: read_timeout must be a positive"):
        load_config(str(conf))
    with pytest.raises(ConfigError, match="upstream is required"):
        load_config(None)
    with pytest.raises(ConfigError, match="abort_finish_reason must be one of"):
        GatewayConfig(upstream="http://x/v1", abort_finish_reason="loop")
    with pytest.raises(ConfigError, match="upstream_api_key_env: environment variable"):
        GatewayConfig(upstream="http://x/v1",
                      upstream_api_key_env="CC_SURELY_UNSET_VAR").upstream_api_key()


def test_example_config_loads() -> None:
    from pathlib import Path

    cfg = load_config(str(Path(__file__).parent.parent / "examples" / "serve.toml"))
    assert cfg.upstream == "http://127.0.0.1:8000/v1" and cfg.port == 8765


def test_missing_extra_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from contextcare import serve

    monkeypatch.setitem(sys.modules, "aiohttp", None)
    monkeypatch.delitem(sys.modules, "contextcare.serve.gateway")
    with pytest.raises(serve.MissingExtraError, match=r"pip install 'contextcare\[serve\]'"):
        serve.run(GatewayConfig(upstream="http://127.0.0.1:1/v1"))


def test_cli_serve_reports_bad_settings(capsys: pytest.CaptureFixture[str]) -> None:
    from contextcare.cli import main

    assert main(["serve"]) == 2
    assert "upstream is required" in capsys.readouterr().err
    assert main(["serve", "--upstream", "ftp://x"]) == 2
    assert "http:// or https://" in capsys.readouterr().err
