"""Write the bundled sample traces (src/contextcare/samples/*.jsonl).

The texts below are written for the demo: short replies in the shape real models produce, each
showing one behaviour (or none). They are cut into deltas the way a tokenizer streams them —
English by word pieces with their leading space, CJK one or two characters at a time — with a
fixed seed, so running this script again rewrites the same files byte for byte.

    python tools/make-samples.py
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "src" / "contextcare" / "samples"

_CJK = "\u3000-\u303f\u3400-\u9fff\uff00-\uffef"
_PIECE = re.compile(rf" ?[A-Za-z]+| ?\d+|[{_CJK}]+|\n+| +|[^\sA-Za-z\d{_CJK}]+")


def tokens(text: str, rng: random.Random) -> list[str]:
    """Cut ``text`` into streaming deltas of roughly tokenizer size (1-8 characters)."""
    out: list[str] = []
    for piece in _PIECE.findall(text):
        if re.fullmatch(f"[{_CJK}]+", piece):
            i = 0
            while i < len(piece):
                n = rng.choice((1, 1, 2))
                out.append(piece[i:i + n])
                i += n
        elif len(piece) > 8 and piece.strip().isalpha():
            i = 0
            while i < len(piece):
                n = rng.randint(3, 6)
                out.append(piece[i:i + n])
                i += n
        else:
            out.append(piece)
    # a newline usually arrives glued to the punctuation before it
    merged: list[str] = []
    for tok in out:
        if tok.startswith("\n") and merged and not merged[-1].endswith("\n") and len(merged[-1]) <= 2:
            merged[-1] += tok
        else:
            merged.append(tok)
    assert "".join(merged) == text
    return merged


def write(name: str, stream: str, parts: list[tuple[str, str]], seed: int) -> None:
    rng = random.Random(seed)
    lines = [{"stream": stream, "type": "start"}]
    for kind, text in parts:
        lines += [{"stream": stream, "type": kind, "text": t} for t in tokens(text, rng)]
    lines.append({"stream": stream, "type": "end"})
    body = "".join(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"
                   for obj in lines)
    (OUT / name).write_text(body, encoding="utf-8")


CLEAN_REASONING = (
    "The user wants to drop duplicates from a list but keep the original order.\n"
    "A set loses the order; dict.fromkeys keeps insertion order, so that is the short answer.\n"
    "Items might be unhashable: give the fallback too and say it is quadratic.\n"
)
CLEAN_TEXT = (
    "Use `dict.fromkeys`: it keeps the first occurrence of each item, in order.\n\n"
    "```python\n"
    "items = [3, 1, 3, 2, 1]\n"
    "unique = list(dict.fromkeys(items))\n"
    "print(unique)  # [3, 1, 2]\n"
    "```\n\n"
    "This runs in linear time. If the items are not hashable (lists, dicts), keep the ones"
    " seen so far in a list instead:\n\n"
    "```python\n"
    "unique = []\n"
    "for item in items:\n"
    "    if item not in unique:\n"
    "        unique.append(item)\n"
    "```\n\n"
    "That one is quadratic; prefer the first when you can.\n"
)

LOOP_REASONING = (
    "The test fails because the fixture returns None when the cache file is missing.\n"
    "`load_cache` returns early when the path does not exist.\n"
    "So the fix is to return an empty dict there.\n"
    "But the caller checks `if cache is None` to decide whether to rebuild.\n"
    + "Let me check the caller again.\n" * 26
)

CYCLE_REASONING = (
    "好的，用户要我把日志格式统一成 JSON。\n"
    "先看现有的输出格式。\n"
    "然后逐个模块修改。\n"
    + "（输出。）\n**做。**\ngo.\n" * 18
)

FLOOD_TEXT = (
    "Summary of the migration: the orders table moved to the new cluster over the weekend,"
    " and reads now go to the replica while the new cluster is"
    + " the new cluster is" * 30
)

# Two phrases in one sentence, joined by a comma: prose, not a list of phrases, so it must fire
# (suppress_quoted only silences lines that enumerate phrases).
ANXIOUS_ZH_REASONING = (
    "用户要把这三十个接口都改成异步调用。\n"
    "前八个已经改好，测试也通过了，还剩二十二个。\n"
    "时间不够了，得加快速度，后面的就不逐个跑测试了，批量改完再说。\n"
    "而且上下文快满了，趁还没压缩，先把剩下的全部改掉。\n"
)
ANXIOUS_ZH_TEXT = "前八个接口已改为异步并通过测试；其余二十二个已批量修改，尚未逐个验证。\n"

ANXIOUS_EN_REASONING = (
    "The user wants all thirty endpoints moved to the new auth middleware.\n"
    "Eight are done and their tests pass; twenty-two are left.\n"
    "I'm running out of time, so I'll skip the per-endpoint tests and batch the rest.\n"
    "The context window is almost full as well, so I should finish before the context gets"
    " compacted.\n"
)
ANXIOUS_EN_TEXT = (
    "I moved the remaining twenty-two endpoints to the new middleware in one pass."
    " Their tests have not been run yet.\n"
)


def main() -> None:
    OUT.mkdir(exist_ok=True)
    write("clean-answer.jsonl", "clean",
          [("reasoning-delta", CLEAN_REASONING), ("text-delta", CLEAN_TEXT)], seed=1)
    write("reasoning-loop.jsonl", "loop",
          [("reasoning-delta", LOOP_REASONING)], seed=2)
    write("three-line-cycle.jsonl", "cycle",
          [("reasoning-delta", CYCLE_REASONING)], seed=3)
    write("newline-free-flood.jsonl", "flood",
          [("text-delta", FLOOD_TEXT)], seed=4)
    write("anxious-zh.jsonl", "anxious-zh",
          [("reasoning-delta", ANXIOUS_ZH_REASONING), ("text-delta", ANXIOUS_ZH_TEXT)], seed=5)
    write("anxious-en.jsonl", "anxious-en",
          [("reasoning-delta", ANXIOUS_EN_REASONING), ("text-delta", ANXIOUS_EN_TEXT)], seed=6)


if __name__ == "__main__":
    main()
