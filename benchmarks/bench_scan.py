"""MB/s of ``contextcare scan``, per input format, beside the bare JSON decoders on the same file.

A standalone script, not part of the pytest-benchmark suite (each round starts the command)::

    python benchmarks/bench_scan.py                 # ~8 MB of reply text per format
    python benchmarks/bench_scan.py --mb 20 --json out.json

The same replies (seeded prose with loops in some of them, deltas of 1-4 code points) are written
in each format ``scan`` reads: contextcare events (JSON lines), OpenAI chunks (JSON lines and SSE),
events gzip-compressed, saved non-streaming completions (one per line) and plain text
(``--as-text``, one file per reply). Each is scanned by ``contextcare scan FILE --format jsonl``
with the output to ``/dev/null``; the best of ``--rounds`` runs counts. Reported: MB/s of the
input as stored (what a user's disk holds) and of the reply text in it (UTF-8), and the
detections, which must be the same in every format. The machine's load average is printed: other
processes slow every row.

Then, in this process, on the events file and the chunk file (JSON lines): the bare decoders,
each reading every line of the file and doing nothing else (``json.loads``, ``orjson.loads``
when installed, msgspec into dicts, msgspec into the typed struct the trace reader uses, and
msgspec's ``decode_lines`` on 64 KiB blocks), beside the trace reader alone (lines to runs of
deltas), the replay of ``contextcare scan`` in process (reader and rules, as the command runs
them; CPU seconds, best of ``--rounds``) and the line-by-line reader and per-event replay it
replaced. The ratio ``scan / decoder`` is the goal of issue 16 (at most 2x the fastest bare
decoder). The command's start-up (an empty file) is measured too.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

WORDS = ("the", "parser", "reads", "each", "line", "and", "keeps", "state", "for", "open",
         "streams", "so", "results", "match", "exactly", "模型", "输出", "检查", "一下")
LOOP = "Let me check the caller again.\n"


def replies(total_chars: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    out: list[str] = []
    size = 0
    while size < total_chars:
        lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 14)))
                 for _ in range(rng.randint(5, 40))]
        if rng.random() < 0.2:
            lines += [LOOP.strip()] * 40
        text = "\n".join(lines) + "\n"
        out.append(text)
        size += len(text)
    return out


def split(text: str, rng: random.Random) -> list[str]:
    out, i = [], 0
    while i < len(text):
        n = rng.randint(1, 4)
        out.append(text[i:i + n])
        i += n
    return out


def write_inputs(folder: str, texts: list[str]) -> dict[str, tuple[list[str], list[str]]]:
    """Each format: (files, extra scan arguments)."""
    rng = random.Random(1)
    pieces = [split(t, rng) for t in texts]
    formats: dict[str, tuple[list[str], list[str]]] = {}

    def write(name: str, lines: Any, opener: Any = open) -> str:
        path = os.path.join(folder, name)
        with opener(path, "wt", encoding="utf-8") as f:
            f.writelines(lines)
        return path

    def event_lines() -> Any:
        for i, deltas in enumerate(pieces):
            s = f"r{i}"
            yield json.dumps({"stream": s, "type": "start"}) + "\n"
            for d in deltas:
                yield json.dumps({"stream": s, "type": "reasoning-delta", "text": d},
                                 ensure_ascii=False) + "\n"
            yield json.dumps({"stream": s, "type": "end"}) + "\n"

    def chunk_objs() -> Any:
        for i, deltas in enumerate(pieces):
            for d in deltas:
                yield {"id": f"r{i}", "object": "chat.completion.chunk",
                       "choices": [{"index": 0, "delta": {"reasoning_content": d},
                                    "finish_reason": None}]}
            yield {"id": f"r{i}", "object": "chat.completion.chunk",
                   "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}

    formats["events (JSON lines)"] = ([write("events.jsonl", event_lines())], [])
    formats["events, gzip"] = ([write("events.jsonl.gz", event_lines(), gzip.open)], [])
    formats["OpenAI chunks (JSON lines)"] = ([write("chunks.jsonl", (
        json.dumps(c, ensure_ascii=False) + "\n" for c in chunk_objs()))], [])
    formats["OpenAI chunks (SSE)"] = ([write("chunks.sse", (
        f"data: {json.dumps(c, ensure_ascii=False)}\n\n" for c in chunk_objs()))], [])
    formats["OpenAI completions (JSON lines)"] = ([write("completions.jsonl", (
        json.dumps({"id": f"r{i}", "object": "chat.completion", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": None,
                                     "reasoning_content": t}, "finish_reason": "stop"}]},
            ensure_ascii=False) + "\n" for i, t in enumerate(texts)))], [])
    text_dir = os.path.join(folder, "text")
    os.mkdir(text_dir)
    formats["plain text (--as-text)"] = (
        [write(os.path.join("text", f"r{i:05d}.txt"), [t]) for i, t in enumerate(texts)],
        ["--as-text", "--channel", "reasoning"])
    return formats


def scan_seconds(files: list[str], extra: list[str]) -> tuple[float, int, float]:
    """Wall seconds of one ``contextcare scan`` run, the detections it reported, and the CPU
    seconds (user + system) it took: on a loaded machine the wall clock counts the other
    processes too, the CPU time is the cost per core."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "contextcare", "scan", *files, *extra,
                           "--format", "jsonl", "--no-progress"],
                          capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"bench_scan: scan failed ({proc.returncode}): {proc.stderr}")
    summary = json.loads(proc.stdout.splitlines()[-1])
    return seconds, int(summary["detections"]), cpu


def _cpu_seconds(fn: Any, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def decoder_rows(path: str, rounds: int) -> list[dict[str, Any]]:
    """MB/s of the bare decoders, the trace reader and the in-process scan on one file (CPU
    time, so that other processes on the machine count less)."""
    import msgspec

    from contextcare import default_ruleset
    from contextcare.traces import (
        _LINE_DECODER,
        Replayer,
        _iter_events_lines,
        _replay_ops,
        _source_ops,
        replay,
    )

    with open(path, "rb") as f:
        data = f.read()
    mb = len(data) / 1e6
    lines = data.splitlines()
    blocks, at = [], 0
    while at < len(data):
        cut = data.find(b"\n", at + (64 << 10))
        cut = len(data) if cut < 0 else cut + 1
        blocks.append(data[at:cut])
        at = cut
    ruleset = default_ruleset()

    def scan_in_process() -> None:
        replayer = Replayer(ruleset, context=0)
        for _ in _replay_ops(replayer, path, _source_ops(path, True, None, 64 << 20), None):
            pass
        replayer.close()

    def line_by_line() -> None:
        for _ in replay(_iter_events_lines(path), ruleset, context=0):
            pass

    plain = msgspec.json.Decoder()
    typed = _LINE_DECODER
    cases: list[tuple[str, Any]] = [
        ("json.loads per line (the standard library)", lambda: [json.loads(x) for x in lines]),
    ]
    try:
        import orjson

        cases.append((f"orjson.loads per line (orjson {orjson.__version__})",
                      lambda: [orjson.loads(x) for x in lines]))
    except ImportError:
        pass
    cases += [
        (f"msgspec into dicts per line (msgspec {msgspec.__version__})",
         lambda: [plain.decode(x) for x in lines]),
        ("msgspec into the typed struct per line", lambda: [typed.decode(x) for x in lines]),
        ("msgspec decode_lines, 64 KiB blocks (typed)",
         lambda: [typed.decode_lines(b) for b in blocks]),
        ("trace reader alone (lines to runs of deltas)",
         lambda: [None for _ in _source_ops(path, True, None, 64 << 20)]),
        ("**scan in process** (reader + default rules, as the command)", scan_in_process),
        ("before: line-by-line reader + per-event replay", line_by_line),
    ]
    rows = []
    for name, fn in cases:
        seconds = _cpu_seconds(fn, rounds if not name.startswith("before") else 1)
        rows.append({"what": name, "seconds": seconds, "mb_s": mb / seconds,
                     "ns_per_line": seconds / len(lines) * 1e9,
                     "decoder": not name.startswith(("trace reader", "**scan", "before"))})
    return rows


def startup_seconds(folder: str, rounds: int) -> tuple[float, float]:
    """Wall and CPU seconds of the command on a one-event file: start-up and shut-down."""
    empty = os.path.join(folder, "empty.jsonl")
    with open(empty, "w", encoding="utf-8") as f:
        f.write('{"stream": "s", "type": "start"}\n')
    runs = [scan_seconds([empty], []) for _ in range(rounds)]
    return min(run[0] for run in runs), min(run[2] for run in runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=8.0, help="MB of reply text per format")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", default=None, metavar="PATH", help="also write the figures")
    args = parser.parse_args(argv)
    texts = replies(int(args.mb * 1e6))
    text_mb = sum(len(t.encode()) for t in texts) / 1e6
    rows: list[dict[str, Any]] = []
    load_start = os.getloadavg()[0]
    decoders: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        formats = write_inputs(tmp, texts)
        for name, (files, extra) in formats.items():
            stored_mb = sum(os.path.getsize(f) for f in files) / 1e6
            runs = [scan_seconds(files, extra) for _ in range(args.rounds)]
            best, detections, _ = min(runs)
            cpu = min(run[2] for run in runs)
            rows.append({"format": name, "stored_mb": stored_mb, "seconds": best,
                         "stored_mb_s": stored_mb / best, "text_mb_s": text_mb / best,
                         "cpu_seconds": cpu, "stored_mb_cpu_s": stored_mb / cpu,
                         "detections": detections})
        startup, startup_cpu = startup_seconds(tmp, args.rounds)
        for name in ("events (JSON lines)", "OpenAI chunks (JSON lines)"):
            decoders[name] = decoder_rows(formats[name][0][0], args.rounds)
    load_end = os.getloadavg()[0]
    print(f"{len(texts)} replies, {text_mb:.1f} MB of text; load average {load_start:.2f} →"
          f" {load_end:.2f} on {os.cpu_count()} CPUs")
    print("| input format | stored MB | seconds | MB/s stored | MB/s of text | CPU s |"
          " MB/s stored per CPU s | detections |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['format']} | {r['stored_mb']:.1f} | {r['seconds']:.2f} |"
              f" {r['stored_mb_s']:.1f} | {r['text_mb_s']:.2f} | {r['cpu_seconds']:.2f} |"
              f" {r['stored_mb_cpu_s']:.1f} | {r['detections']} |")
    print(f"\nstart-up of the command (one event, nothing to replay): {startup:.2f} s wall,"
          f" {startup_cpu:.2f} s CPU\n")
    for name, drows in decoders.items():
        best_decoder = max(r["mb_s"] for r in drows if r["decoder"])
        scan_row = next(r for r in drows if "scan in process" in r["what"])
        print(f"{name}: CPU time, best of {args.rounds}; scan / fastest bare decoder ="
              f" {best_decoder / scan_row['mb_s']:.2f}x slower")
        print("| reading every line of the file | MB/s | ns per line |")
        print("|---|---:|---:|")
        for r in drows:
            print(f"| {r['what']} | {r['mb_s']:.1f} | {r['ns_per_line']:.0f} |")
        print()
    if len({r["detections"] for r in rows}) != 1:
        print("bench_scan: the formats disagree on the detections", file=sys.stderr)
        return 1
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"rows": rows, "decoders": decoders, "startup_seconds": startup,
                       "startup_cpu_seconds": startup_cpu,
                       "text_mb": text_mb, "replies": len(texts),
                       "load_start": load_start, "load_end": load_end,
                       "cpus": os.cpu_count()}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
