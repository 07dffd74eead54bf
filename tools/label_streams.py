"""Help label streamed replies by reading them: suggest, show, and write the labelled subset.

Labels are a person's judgement; this helper only makes reading faster. ``suggest`` proposes a
label per stream (a loop = the end of the reply is a repeated unit of lines, exact or with only
numbers changed, or the last words collapse to a few distinct ones; the start offset is the first
character of the first copy of the unit), and ``show`` prints a stream's start, the region around
the proposed start and its end, for checking. The final labels live in a JSON file
(``stream -> {"loop": bool, "start": int | null, "shape": str, "note": str}``), written by hand
from the suggestions; ``write`` joins them with the raw events into the trace file kept in the
repository (labels go into the ``start`` event: ``label``, ``loop_start``, ``shape``).

Usage::

    python tools/label_streams.py suggest RAW.jsonl > suggestions.json
    python tools/label_streams.py show RAW.jsonl STREAM [STREAM ...]
    python tools/label_streams.py write RAW.jsonl LABELS.json OUT.jsonl.gz [--max-bytes 2000000]
    # e.g. tests/data/smollm2-streams.jsonl.gz (240 replies, 59 loops)

The labels of the kept file are in tools/smollm2-labels.json. The held-out set
(``tests/data/smollm2-heldout.jsonl.gz``, 172 replies, 46 loops; labels in
tools/smollm2-heldout-labels.json) was written the same way (145 KB). ``write`` keeps every
labelled stream: an output over ``--max-bytes`` (counted as stored, i.e. gzipped when the name
ends in ``.gz``) is an error naming the size, never a file with streams silently left out (the
first version skipped streams past an uncompressed cap).

The labels of the kept file were decided by reading every reply that the suggestion flagged or
that ran to the length limit: a reply is a loop when it keeps producing the same unit (exact, with
only numbers changed, or a handful of words) instead of progressing, until the length limit or
far past what was asked; short replies that merely repeat a line two or three times are not.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import sys
from collections import OrderedDict
from typing import Any

_DIGITS = re.compile(r"\d+")
_SPACE = re.compile(r"\s+")


def load(path: str) -> OrderedDict[str, dict[str, Any]]:
    streams: OrderedDict[str, dict[str, Any]] = OrderedDict()
    with open(path, encoding="utf-8") as f:
        for line in f:
            e = json.loads(line)
            s = streams.setdefault(e["stream"], {"events": [], "text": ""})
            s["events"].append(e)
            if e["type"] == "text-delta":
                s["text"] += e["text"]
            if e["type"] == "start":
                s["start"] = e
            if e["type"] == "end":
                s["end"] = e
    return streams


def skeleton(line: str) -> str:
    return _SPACE.sub(" ", _DIGITS.sub("#", line)).strip().lower()


def periodic_lines(text: str, truncated: bool) -> tuple[int, int, int] | None:
    """(start offset, period in lines, copies) of the longest periodic run of line skeletons
    at the end of the text (blank lines ignored), or None."""
    lines = []
    at = 0
    for raw in text.split("\n"):
        if raw.strip():
            lines.append((at, skeleton(raw)))
        at += len(raw) + 1
    if truncated and lines:
        lines.pop()          # cut mid-line by the length limit
    n = len(lines)
    best = None
    for p in range(1, min(128, n // 3) + 1):
        i = n - p - 1
        while i >= 0 and lines[i][1] == lines[i + p][1]:
            i -= 1
        length = n - 1 - i
        if length >= 2 * p and (length + p) // p >= 3:
            copies = (length + p) // p
            cover = length + p
            if best is None or cover > best[3] or (cover == best[3] and p < best[1]):
                best = (lines[i + 1][0], p, copies, cover)
    return None if best is None else best[:3]


def periodic_chars(text: str) -> tuple[int, int, int] | None:
    s = text[-6000:]
    base = len(text) - len(s)
    n = len(s)
    for p in range(1, min(1500, n // 3) + 1):
        i = n - p - 1
        while i >= 0 and s[i] == s[i + p]:
            i -= 1
        length = n - 1 - i + p
        if length >= 3 * p and length >= 60:
            return base + i + 1, p, length // p
    return None


def collapse(text: str) -> int | None:
    words = [(m.start(), m.group().lower()) for m in re.finditer(r"\S+", text)]
    if len(words) < 200:
        return None
    first = None
    for k in range(len(words) - 200, -1, -1):
        if len({w for _, w in words[k:k + 200]}) <= 10:
            first = words[k][0]
        else:
            break
    return first


def suggest(path: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, s in load(path).items():
        text = s["text"]
        truncated = s.get("end", {}).get("reason") == "length"
        label: dict[str, Any] = {"loop": False, "start": None, "shape": "", "note": ""}
        pl = periodic_lines(text, truncated)
        pc = periodic_chars(text)
        col = collapse(text)
        cands = []
        if pl:
            cands.append((pl[0], f"lines period {pl[1]} x{pl[2]}"))
        if pc:
            cands.append((pc[0], f"chars period {pc[1]} x{pc[2]}"))
        if col is not None:
            cands.append((col, "collapse"))
        if cands:
            start, shape = min(cands)
            label.update(loop=True, start=start, shape=shape)
        label["note"] = f"len={len(text)} {'length' if truncated else 'eos'}"
        out[name] = label
    return out


def show(path: str, names: list[str]) -> None:
    streams = load(path)
    sugg = suggest(path)
    for name in names:
        text = streams[name]["text"]
        lab = sugg[name]
        print(f"===== {name} {lab}")
        print(repr(text[:300]))
        if lab["start"] is not None:
            st = lab["start"]
            print("  ... around start:", repr(text[max(0, st - 150):st]), "|||", repr(text[st:st + 300]))
        print("  ... end:", repr(text[-300:]))


def _open_out(path: str) -> io.TextIOBase:
    """A text file to write; gzipped (level 9, no timestamp: reproducible) for a ``.gz`` name."""
    if path.endswith(".gz"):
        return io.TextIOWrapper(gzip.GzipFile(path, "wb", compresslevel=9, mtime=0),
                                encoding="utf-8")
    return open(path, "w", encoding="utf-8")


def write(raw: str, labels_path: str, out_path: str, max_bytes: int) -> None:
    streams = load(raw)
    with open(labels_path, encoding="utf-8") as f:
        labels = json.load(f)
    kept = 0
    with _open_out(out_path) as out:
        for name, lab in labels.items():
            events = streams[name]["events"]
            lines = []
            for e in events:
                e = dict(e)
                if e["type"] == "start":
                    e["label"] = "loop" if lab["loop"] else "no loop"
                    e["loop_start"] = lab["start"]
                    e["shape"] = lab["shape"]
                lines.append(json.dumps(e, ensure_ascii=False, separators=(",", ":")) + "\n")
            out.write("".join(lines))
            kept += 1
    size = os.path.getsize(out_path)
    if size > max_bytes:
        os.remove(out_path)
        raise SystemExit(f"write: {kept} streams take {size} bytes in {out_path}, over "
                         f"--max-bytes {max_bytes}; label fewer streams or raise the limit")
    print(f"{kept} streams, {size} bytes", file=sys.stderr)


def main(argv: list[str]) -> int:
    if argv[0] == "suggest":
        json.dump(suggest(argv[1]), sys.stdout, indent=1, ensure_ascii=False)
    elif argv[0] == "show":
        show(argv[1], argv[2:])
    elif argv[0] == "write":
        max_bytes = 2_000_000
        if "--max-bytes" in argv:
            i = argv.index("--max-bytes")
            max_bytes = int(argv[i + 1])
            del argv[i:i + 2]
        write(argv[1], argv[2], argv[3], max_bytes)
    else:
        raise SystemExit(__doc__)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
