"""Helpers for testing and benchmarking code that uses contextcare (as ``trio.testing``): a
synthetic corpus of recorded streams. Nothing here is needed at run time."""

from __future__ import annotations

import gzip
import json
import os
import random
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["write_corpus"]

_LOOP_LINES = ("Let me check the caller again.", "I should re-read the config file.",
               "Wait, the test still fails.", "让我再检查一下调用方传进来的参数。")
_ANXIOUS = ("we are running out of time", "时间不够了", "the context window is almost full",
            "上下文快满了")
_WORDS = ("the", "parser", "reads", "each", "line", "and", "keeps", "state", "for", "open",
          "streams", "so", "results", "match", "exactly")


def _story(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def _stream_events(n: int, rng: random.Random) -> list[tuple[str, str]]:
    """(type, text) events of synthetic stream ``n``: clean, looping or anxious by ``n % 10``."""
    kind = n % 10
    deltas: list[tuple[str, str]] = [("reasoning-delta", f"Stream {n}: {_story(rng, 8)}.\n")]
    if kind in (6, 7):  # a loop: one line over and over (line-repeat, tail-repeat)
        line = rng.choice(_LOOP_LINES) + "\n"
        deltas += [("reasoning-delta", line)] * rng.randint(24, 34)
    elif kind == 8:  # anxious reasoning
        deltas += [("reasoning-delta", f"Hmm, {rng.choice(_ANXIOUS)}. "),
                   ("reasoning-delta", _story(rng, 6) + ".\n")]
    deltas += [("text-delta", _story(rng, rng.randint(4, 12)) + ".")]
    events = [("start", "")]
    for kind_, text in deltas:  # cut each delta in two, as a model would stream it
        cut = rng.randint(1, max(1, len(text) - 1))
        events += [(kind_, text[:cut]), (kind_, text[cut:])]
    if n % 97 == 5:  # a retry: the first attempt breaks off, a new start follows
        events = events[:4] + events
    if n % 53 != 7:  # most streams end; a few are cut off (complete is false)
        events.append(("end", ""))
    return events


def _jsonl_lines(stream: str, events: Iterable[tuple[str, str]]) -> list[str]:
    """``events`` of one stream as contextcare JSONL event lines."""
    lines = []
    for kind, text in events:
        obj = {"stream": stream, "type": kind}
        if kind.endswith("-delta"):
            obj["text"] = text
        lines.append(json.dumps(obj, ensure_ascii=False))
    return lines


def _chunk_lines(stream: str, events: Sequence[tuple[str, str]]) -> list[str]:
    """The last attempt of ``events`` as OpenAI SSE chunk lines (the first chunk of an id starts
    its stream; a chunk format has no retry of the same id before it finishes)."""
    last = max(i for i, (kind, _) in enumerate(events) if kind == "start")
    lines = []
    for kind, text in events[last + 1:]:
        if kind == "end":
            choice: dict[str, Any] = {"index": 0, "delta": {}, "finish_reason": "stop"}
        else:
            key = "reasoning_content" if kind == "reasoning-delta" else "content"
            choice = {"index": 0, "delta": {key: text}, "finish_reason": None}
        obj = {"id": stream, "object": "chat.completion.chunk", "choices": [choice]}
        lines.append("data: " + json.dumps(obj, ensure_ascii=False))
    return lines


def write_corpus(directory: str | os.PathLike[str], streams: int = 10_000, files: int = 8, *,
                 seed: int = 0) -> list[str]:
    """Write a synthetic corpus of ``streams`` short streams over ``files`` files; return the
    paths in order. For smoke tests and benchmarks of a Ray setup.

    Stream ``n`` loops (one line repeated 24-34 times) when ``n % 10`` is 6 or 7, is anxious
    (a time or context phrase, English or Chinese) when it is 8, and is clean otherwise; a few
    are retried or cut off. Streams are interleaved four at a time. File ``i`` is contextcare
    JSONL, gzip-compressed when ``i % 4 == 2``, or OpenAI SSE chunks ending in ``[DONE]`` when
    ``i % 4 == 3``. File 0 starts with one malformed line.
    """
    if streams < 1 or files < 1:
        raise ValueError(f"streams and files must be at least 1, got {streams} and {files}")
    rng = random.Random(seed)
    os.makedirs(directory, exist_ok=True)
    paths = []
    for i in range(files):
        to_lines = _chunk_lines if i % 4 == 3 else _jsonl_lines
        numbers = range(i, streams, files)
        lines = ["this line is not JSON"] if i == 0 else []
        for g in range(0, len(numbers), 4):
            group = [to_lines(f"s{n}", _stream_events(n, rng)) for n in numbers[g:g + 4]]
            for k in range(max(len(one) for one in group)):  # round-robin interleave
                lines += [one[k] for one in group if k < len(one)]
        if i % 4 == 3:
            lines.append("data: [DONE]")
        body = ("\n".join(lines) + "\n").encode("utf-8")
        gz = i % 4 == 2
        path = os.path.join(os.fspath(directory), f"part-{i:04d}.jsonl" + (".gz" if gz else ""))
        with open(path, "wb") as f:
            f.write(gzip.compress(body, mtime=0) if gz else body)
        paths.append(path)
    return paths
