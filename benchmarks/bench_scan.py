"""MB/s of ``contextcare scan`` itself, per input format: the real command, end to end.

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
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
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


def scan_seconds(files: list[str], extra: list[str]) -> tuple[float, int]:
    """Wall seconds of one ``contextcare scan`` run, and the detections it reported."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "contextcare", "scan", *files, *extra,
                           "--format", "jsonl", "--no-progress"],
                          capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"bench_scan: scan failed ({proc.returncode}): {proc.stderr}")
    summary = json.loads(proc.stdout.splitlines()[-1])
    return seconds, int(summary["detections"])


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
    with tempfile.TemporaryDirectory() as tmp:
        formats = write_inputs(tmp, texts)
        for name, (files, extra) in formats.items():
            stored_mb = sum(os.path.getsize(f) for f in files) / 1e6
            best, detections = min(scan_seconds(files, extra) for _ in range(args.rounds))
            rows.append({"format": name, "stored_mb": stored_mb, "seconds": best,
                         "stored_mb_s": stored_mb / best, "text_mb_s": text_mb / best,
                         "detections": detections})
    load_end = os.getloadavg()[0]
    print(f"{len(texts)} replies, {text_mb:.1f} MB of text; load average {load_start:.2f} →"
          f" {load_end:.2f} on {os.cpu_count()} CPUs")
    print("| input format | stored MB | seconds | MB/s stored | MB/s of text | detections |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['format']} | {r['stored_mb']:.1f} | {r['seconds']:.2f} |"
              f" {r['stored_mb_s']:.1f} | {r['text_mb_s']:.2f} | {r['detections']} |")
    if len({r["detections"] for r in rows}) != 1:
        print("bench_scan: the formats disagree on the detections", file=sys.stderr)
        return 1
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"rows": rows, "text_mb": text_mb, "replies": len(texts),
                       "load_start": load_start, "load_end": load_end,
                       "cpus": os.cpu_count()}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
