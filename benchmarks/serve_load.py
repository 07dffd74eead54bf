"""Load on the serving gateway: many concurrent streams of 1-4-character deltas, on loopback.

    python benchmarks/serve_load.py                       # 1 000 streams (about 1 minute)
    python benchmarks/serve_load.py --streams 50 --chunks 20 --repeat 1    # a smoke run
    nice python benchmarks/serve_load.py --json benchmarks/serve_load.json

Three processes: a scripted upstream (this file, ``--role upstream``), the gateway
(``python -m contextcare serve``, default rules, logging at WARNING) and the load client (this
process, aiohttp, one task per stream). Each stream sends ``--chunks`` chat-completion chunks,
one every ``--interval`` seconds, each carrying its send time (``time.monotonic_ns()``, one clock
for every process on the machine); the client notes when each arrives. Three configurations, the
same streams each time:

* ``direct``: client -> upstream;
* ``passthrough``: client -> gateway with the guard off (``X-ContextCare: off``), i.e. the plain
  byte relay of the same stack (aiohttp server + aiohttp client);
* ``guarded``: client -> gateway, every chunk parsed and fed to a guard (default rules).

Reported per configuration: per-chunk latency p50/p99 (send to receipt) and what the gateway
adds over ``direct``; chunks per second at the client; the gateway's CPU time (user + system,
from /proc) per 1 000 chunks; its resident memory while every stream is open, minus that of the
idle warmed-up process, per stream (a fresh gateway process for each run); and, from the
gateway's own histogram, the guard's time per chunk (what it adds to a chunk's latency when the
process is not kept waiting for a CPU). Each figure is the best of ``--repeat`` runs. The text is
clean prose, so the guard never aborts: this is its steady cost.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

WORDS = ("the", "model", "writes", "a", "careful", "answer", "about", "streams", "gateways",
         "and", "loops", "while", "user", "waits", "for", "every", "token", "to", "arrive", "in",
         "order", "with", "nothing", "lost", "on", "way")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _text(seed: int, chars: int) -> list[str]:
    rng = random.Random(seed)
    words: list[str] = []
    size = 0
    while size < chars:
        w = rng.choice(WORDS)
        words.append(w)
        size += len(w) + 1
        if rng.random() < 0.08:
            words[-1] += ".\n"
    text = " ".join(words)
    out, i = [], 0
    while i < len(text):
        n = rng.randint(1, 4)
        out.append(text[i:i + n])
        i += n
    return out


# --------------------------------------------------------------------------- upstream role

def run_upstream(port: int, chunks: int, interval: float) -> None:
    from aiohttp import web

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        seed = int(body.get("seed", 0))
        deltas = _text(seed, chunks * 3)[:chunks]
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        head = (b'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk",'
                b'"created":1700000000,"model":"bench","ts":')
        try:
            for d in deltas:
                tail = (b',"choices":[{"index":0,"delta":{"content":' + json.dumps(d).encode()
                        + b'},"finish_reason":null}]}\n\n')
                await resp.write(head + str(time.monotonic_ns()).encode() + tail)
                await asyncio.sleep(interval)
            await resp.write(b'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk",'
                             b'"created":1700000000,"model":"bench","choices":[{"index":0,'
                             b'"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')
            await resp.write_eof()
        except ConnectionResetError:
            pass
        return resp

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": []})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    web.run_app(app, host="127.0.0.1", port=port, print=None, backlog=4096,
                access_log=None, shutdown_timeout=1)


# --------------------------------------------------------------------------- client role

def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


async def _stream(session: Any, url: str, seed: int, headers: dict[str, str],
                  lat: list[int], counts: list[int]) -> None:
    body = {"model": "bench", "messages": [{"role": "user", "content": "go"}], "stream": True,
            "seed": seed}
    n = 0
    async with session.post(url, json=body, headers=headers) as resp:
        if resp.status != 200:
            raise RuntimeError(f"status {resp.status}: {await resp.text()}")
        async for line in resp.content:
            now = time.monotonic_ns()
            i = line.find(b'"ts":')
            if i >= 0:
                lat.append(now - int(line[i + 5:line.index(b",", i)]))
                n += 1
    counts.append(n)


async def _run(url: str, streams: int, ramp: float, headers: dict[str, str], gw_pid: int | None,
               timeout: float) -> dict[str, Any]:
    import aiohttp

    lat: list[int] = []
    counts: list[int] = []
    rss_peak = 0
    rss_before = _rss_bytes(gw_pid) if gw_pid else 0
    cpu_before = _cpu_seconds(gw_pid) if gw_pid else 0.0
    conn = aiohttp.TCPConnector(limit=0, force_close=True)
    async with aiohttp.ClientSession(connector=conn,
                                     timeout=aiohttp.ClientTimeout(total=timeout)) as session:
        async def one(i: int) -> None:
            await asyncio.sleep(ramp * i / streams)
            await _stream(session, url, i, headers, lat, counts)

        start = time.monotonic()
        tasks = [asyncio.create_task(one(i)) for i in range(streams)]
        pending: set[asyncio.Task[None]] = set(tasks)
        while pending:
            _, pending = await asyncio.wait(pending, timeout=0.25)
            if gw_pid:
                rss_peak = max(rss_peak, _rss_bytes(gw_pid))
        wall = time.monotonic() - start
        for t in tasks:
            t.result()
    chunks = sum(counts)
    out: dict[str, Any] = {
        "streams": streams, "chunks": chunks, "seconds": round(wall, 2),
        "chunks_per_s": round(chunks / wall, 1),
        "latency_ms_p50": round(statistics.median(lat) / 1e6, 3),
        "latency_ms_p99": round(statistics.quantiles(lat, n=100)[98] / 1e6, 3),
    }
    if gw_pid:
        cpu = _cpu_seconds(gw_pid) - cpu_before
        out["gateway_cpu_s"] = round(cpu, 2)
        out["gateway_cpu_ms_per_1000_chunks"] = round(cpu * 1e6 / chunks, 1)
        out["gateway_rss_mb_before"] = round(rss_before / 2**20, 1)
        out["gateway_kb_per_open_stream"] = round((rss_peak - rss_before) / 1024 / streams, 1)
    return out


def _guard_time(url: str) -> dict[str, Any]:
    """p50/p99 of the gateway's own guard time per chunk, from its histogram (upper bucket
    bounds): what the guard adds to a chunk's latency when the process is not kept waiting."""
    import urllib.request

    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    buckets = []
    for line in text.splitlines():
        if line.startswith("contextcare_guard_seconds_bucket"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            buckets.append((float(le), float(line.rsplit(" ", 1)[1])))
    total = buckets[-1][1]

    def quantile(q: float) -> float:
        return next(le for le, count in buckets if count >= q * total) * 1e6

    return {"guard_us_p50_at_most": quantile(0.5), "guard_us_p99_at_most": quantile(0.99),
            "guard_chunks": int(total)}


def _wait_ready(url: str, proc: subprocess.Popen[bytes]) -> None:
    import urllib.request

    for _ in range(300):
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--role", choices=("client", "upstream"), default="client")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--streams", type=int, default=1000)
    ap.add_argument("--chunks", type=int, default=60, help="chunks per stream")
    ap.add_argument("--interval", type=float, default=0.2, help="seconds between chunks")
    ap.add_argument("--ramp", type=float, default=2.0, help="seconds to open all streams")
    ap.add_argument("--repeat", type=int, default=2, help="runs of passthrough and guarded")
    ap.add_argument("--json", default=None, help="write the results here")
    args = ap.parse_args()
    if args.role == "upstream":
        run_upstream(args.port, args.chunks, args.interval)
        return 0

    up_port = _free_port()
    me = os.path.abspath(__file__)
    budget = args.ramp + args.chunks * args.interval * 4 + 30
    upstream = subprocess.Popen([sys.executable, me, "--role", "upstream", "--port", str(up_port),
                                 "--chunks", str(args.chunks), "--interval", str(args.interval)])

    def gateway_run(headers: dict[str, str]) -> dict[str, Any]:
        # a fresh gateway per run, so its resident memory before the run is that of an idle,
        # warmed-up process (RSS does not shrink after a run: freed memory stays in the heap)
        port = _free_port()
        gateway = subprocess.Popen([sys.executable, "-m", "contextcare", "serve", "--upstream",
                                    f"http://127.0.0.1:{up_port}/v1", "--port", str(port),
                                    "--log-level", "WARNING"])
        try:
            _wait_ready(f"http://127.0.0.1:{port}/healthz", gateway)
            url = f"http://127.0.0.1:{port}/v1/chat/completions"
            for warm in ({}, {"X-ContextCare": "off"}):  # imports, the ruleset, first sockets
                asyncio.run(_run(url, 2, 0.0, warm, None, budget))
            result = asyncio.run(_run(url, args.streams, args.ramp, headers, gateway.pid,
                                      budget))
            if not headers:
                result.update(_guard_time(f"http://127.0.0.1:{port}/metrics"))
            return result
        finally:
            gateway.terminate()
            gateway.wait(10)

    try:
        _wait_ready(f"http://127.0.0.1:{up_port}/v1/models", upstream)
        direct = f"http://127.0.0.1:{up_port}/v1/chat/completions"
        load = os.getloadavg()[0]
        asyncio.run(_run(direct, min(50, args.streams), 0.2, {}, None, budget))  # warm-up
        results: dict[str, list[dict[str, Any]]] = {"direct": [], "passthrough": [],
                                                    "guarded": []}
        results["direct"].append(asyncio.run(_run(direct, args.streams, args.ramp, {}, None,
                                                  budget)))
        for _ in range(args.repeat):
            results["passthrough"].append(gateway_run({"X-ContextCare": "off"}))
            results["guarded"].append(gateway_run({}))
    finally:
        upstream.terminate()
        upstream.wait(10)

    def best(rows: list[dict[str, Any]], key: str) -> float:
        return float(min(r[key] for r in rows))

    summary: dict[str, Any] = {
        "streams": args.streams, "chunks_per_stream": args.chunks, "interval_s": args.interval,
        "cpus": os.cpu_count(), "load_before": round(load, 2),
        "load_after": round(os.getloadavg()[0], 2), "runs": results,
    }
    d50, d99 = best(results["direct"], "latency_ms_p50"), best(results["direct"],
                                                               "latency_ms_p99")
    for name in ("passthrough", "guarded"):
        rows = results[name]
        summary[name] = {
            "latency_ms_p50": best(rows, "latency_ms_p50"),
            "latency_ms_p99": best(rows, "latency_ms_p99"),
            "added_ms_p50": round(best(rows, "latency_ms_p50") - d50, 3),
            "added_ms_p99": round(best(rows, "latency_ms_p99") - d99, 3),
            "chunks_per_s": max(r["chunks_per_s"] for r in rows),
            "cpu_ms_per_1000_chunks": best(rows, "gateway_cpu_ms_per_1000_chunks"),
            "kb_per_open_stream": best(rows, "gateway_kb_per_open_stream"),
        }
    summary["guarded"]["guard_us_p50_at_most"] = best(results["guarded"],
                                                     "guard_us_p50_at_most")
    summary["guarded"]["guard_us_p99_at_most"] = best(results["guarded"],
                                                     "guard_us_p99_at_most")
    p, g = summary["passthrough"], summary["guarded"]
    summary["guard_cpu_overhead_pct"] = round(
        100 * (g["cpu_ms_per_1000_chunks"] / p["cpu_ms_per_1000_chunks"] - 1), 1)
    summary["guard_added_ms_p99_over_passthrough"] = round(
        g["latency_ms_p99"] - p["latency_ms_p99"], 3)
    print(json.dumps({k: v for k, v in summary.items() if k != "runs"}, indent=2))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(summary, fh, indent=2)
            fh.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
