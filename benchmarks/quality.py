"""Detection quality: does a detector stop the loops models really produce, early, and never cut
a legitimate answer?

Run it (a minute or two; nothing to install beyond the package)::

    python benchmarks/quality.py                 # the tables, as Markdown
    python benchmarks/quality.py --engine reference --classes block-30,collapse

Three kinds of input, each fed to every detector as the same sequence of deltas:

* **synthetic loops** (:data:`LOOP_SHAPES`): a few sentences of distinct prose, then a loop of one
  shape until about 12 000 characters (or the copies of a long block run out); several seeded
  instances per shape. The loop starts at the first character of its first copy.
* **synthetic legitimate output** (:data:`LEGIT_SHAPES`): structured text that repeats its form
  but is not a loop — counting, tables with border lines, CSV, JSON arrays of distinct objects,
  a class with 40 similar accessors, a poem with a refrain, long lists, prose, Chinese prose.
* **real streams** (``tests/data/smollm2-streams.jsonl.gz``, gzip-compressed trace events): replies of SmolLM2-135M-Instruct,
  streamed one token per delta and labelled by reading (see ``tools/label_streams.py``); classes
  ``real:loop`` / ``real:no loop``. The default rules were tuned on these.
* **held-out streams** (``tests/data/smollm2-heldout.jsonl.gz``): replies of the same model to
  other prompts (``tools/smollm2-heldout-prompts.json``: Go, Rust, SQL, Bash, TypeScript, CSS,
  a JSON object, docker-compose YAML, agent reasoning, tables, translations, math, a list of 100,
  a ballad with a refrain, Chinese, Japanese, French, German, plain questions; four system
  prompts), labelled the same way and never used to tune the rules; classes
  ``heldout:loop`` / ``heldout:no loop``. ``--real PREFIX=PATH`` (repeatable) chooses the files.

Synthetic text is split into tokens by a documented rule (:func:`tokens`: a run of letters or
digits, a run of whitespace, or a run of one repeated other character), and each token is one delta; token ids
for the token-level peer are the token strings interned in order of first appearance. On the real
streams each delta is one model token and the ids are the model's.

Detectors:

* ``contextcare``: the default rules (:func:`contextcare.presets.default_rules` with
  ``DEFAULT_OPTIONS``) on the native engine (``--engine reference`` for the Python one). A *stop*
  is its first ``abort``; a *notice* its first detection of any action.
* ``contextcare+wr`` (with ``--word-repeat``): the default rules plus the opt-in
  :class:`contextcare.WordRepeat` rule with its own defaults (a unit of 1..20 words repeated three
  times, checked every 16 bytes).
* ``vllm-16..1024x4`` and ``vllm-1..20x3``: vLLM's repetition check over token ids (the tail of
  the ids is one pattern of p ids, ``min <= p <= max``, repeated ``count`` times back to back),
  run after every token, with llama.cpp's proposed profile and vLLM's structured-output profile.
* ``gemini-like``: Gemini CLI's content "chanting" check as described in its source: 50-character
  windows sliding one character at a time over the content since the last reset; a loop is the
  same window 10 times with a mean distance of at most 250 characters between the last 10
  occurrences and at most 5 distinct texts between them; tracking resets on a line that is a code
  fence, table row, list item, heading, block quote or divider, and nothing inside a fence counts.
* ``original``: the port of the original engine (``benchmarks/original_port.py``), production
  triggers (line-repeat 30/80, 35 %, run 12).

Reported per shape class: instances, recall (share of loops stopped at or after their start),
false stops (stops on legitimate text, or before a loop's start), and latency (median and worst
characters between the loop's start and the stop).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
REAL_STREAMS = os.path.join(ROOT, "tests", "data", "smollm2-streams.jsonl.gz")
HELDOUT_STREAMS = os.path.join(ROOT, "tests", "data", "smollm2-heldout.jsonl.gz")
#: The labelled stream files read by default: class prefix -> path.
STREAM_FILES = {"real": REAL_STREAMS, "heldout": HELDOUT_STREAMS}
LOOP_CHARS = 12_000

_TOKEN = re.compile(r"[^\W_]+|\s+|([^\w\s]|_)\1*", re.S)


def tokens(text: str) -> list[str]:
    """The simple tokenisation of synthetic text: a run of letters/digits (``[^\\W_]+``), a run of
    whitespace, or a run of one repeated other character (``----`` is one token)."""
    return [m.group() for m in _TOKEN.finditer(text)]


@dataclass
class Case:
    """One stream: its deltas, token ids per delta, and its label."""

    name: str
    cls: str
    legit: bool
    deltas: list[str]
    ids: list[list[int]]
    loop_start: int | None = None      # character offset of the loop's first copy
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return "".join(self.deltas)


def synthetic_case(name: str, cls: str, text: str, loop_start: int | None) -> Case:
    toks = tokens(text)
    assert "".join(toks) == text
    vocab: dict[str, int] = {}
    ids = [[vocab.setdefault(t, len(vocab))] for t in toks]
    return Case(name, cls, loop_start is None, toks, ids, loop_start)


# --------------------------------------------------------------------------- text material

WORDS = ("time river stone light window garden paper engine signal market winter number "
         "window shadow letter circle bridge harbor forest metal silver planet motion voice "
         "season city lamp table field answer system method value record branch coast cloud "
         "mirror thread ocean valley castle picture pencil candle rocket meadow island").split()
NAMES = ("Alice Bruno Chen Dana Emil Farah Gita Hugo Ines Jonas Kemal Lena Marco Nadia Omar "
         "Pia Quentin Rosa Samir Tara Umar Vera Wen Ximena Yusuf Zoe Anton Bea Cyril Dora "
         "Elif Finn Greta Hiro Ivo Jana Karl Lotte Mila Nils Olga Pavel Rami Sven Tove Ugo "
         "Vida Wim Xia Yara Zeno").split()
FIELDS = ("name email age city country phone street zip status role title score level "
          "created updated owner group color size weight height width depth price stock "
          "rating comment author editor version label note tag kind source target start end "
          "limit offset").split()
ZH = ("春天来了，万物复苏。河边的柳树发出了新芽，田野里开满了油菜花。孩子们在草地上放风筝，老人们在树下"
      "下棋。远处的山上还有一点残雪，太阳照在上面闪闪发光。农民们开始忙着播种，希望今年有个好收成。城市"
      "里的人们也走出家门，到公园里散步、拍照。")


def sentence(rng: random.Random, n: int | None = None) -> str:
    n = n or rng.randint(6, 14)
    words = [rng.choice(WORDS) for _ in range(n)]
    return words[0].capitalize() + " " + " ".join(words[1:]) + "."


def prose(rng: random.Random, chars: int) -> str:
    out = []
    size = 0
    while size < chars:
        para = " ".join(sentence(rng) for _ in range(rng.randint(2, 5)))
        out.append(para)
        size += len(para) + 2
    return "\n\n".join(out) + "\n\n"


def code_block(rng: random.Random, lines: int) -> str:
    """A block of plausible Python of exactly ``lines`` lines."""
    out = []
    while len(out) < lines:
        f = rng.choice(FIELDS)
        g = rng.choice(WORDS)
        kind = rng.randrange(4)
        if kind == 0:
            out += [f"    def check_{f}_{g}(self, value):", "        if value is None:",
                    f"            raise ValueError('{f} is required')",
                    f"        self._{f} = value", ""]
        elif kind == 1:
            out += [f"    # update the {g} {f} before saving", f"    result = self.{g}.{f}()",
                    f"    if result > {rng.randint(1, 99)}:", "        return result"]
        elif kind == 2:
            out += [f"    for item in self.{g}s:", f"        total += item.{f}",
                    f"    log.info('{g} total %s', total)"]
        else:
            out += [f"    {f} = {g}_table.get('{f}', {rng.randint(0, 9)})"]
    return "\n".join(out[:lines]) + "\n"


def prose_block(rng: random.Random, lines: int) -> str:
    return "\n".join(sentence(rng) for _ in range(lines)) + "\n"


# --------------------------------------------------------------------------- loop shapes
# Each returns (text, loop_start).

def _loop(prefix: str, unit_fn: Callable[[int], str], limit: int = LOOP_CHARS,
          copies: int | None = None, suffix: str = "") -> tuple[str, int]:
    out = [prefix]
    size = len(prefix)
    k = 0
    while (copies is None and size < limit) or (copies is not None and k < copies):
        u = unit_fn(k)
        out.append(u)
        size += len(u)
        k += 1
    return "".join(out) + suffix, len(prefix)


def shape_block(lines: int) -> Callable[[random.Random], tuple[str, int]]:
    def make(rng: random.Random) -> tuple[str, int]:
        block = code_block(rng, lines) if rng.random() < 0.6 else prose_block(rng, lines)
        fence = rng.random() < 0.5
        prefix = prose(rng, 300) + ("```python\n" if fence else "")
        copies = rng.randint(4, 30) if lines < 90 else rng.randint(4, 8)
        return _loop(prefix, lambda k: block, limit=10**9, copies=copies)
    return make


def shape_paragraph(rng: random.Random) -> tuple[str, int]:
    para = " ".join(sentence(rng, rng.randint(10, 18)) for _ in range(3))
    sep = rng.choice([" ", "\n\n", "\n"])
    return _loop(prose(rng, 300), lambda k: para + sep, limit=10**9, copies=12)


def shape_near_lines(rng: random.Random) -> tuple[str, int]:
    name = rng.choice(NAMES)
    templates = [
        lambda k: f"Step {k + 14}: let me check the caller again.\n",
        lambda k: f"Retrying the build with the same flags (attempt {k + 2}).\n",
        lambda k: f"Wait, x = {40 + k} so the caller is wrong. Let me re-check.\n",
        lambda k: f"{k + 12}. {name}\n",
        lambda k: f"- Item {k + 3}: {name} {rng.choice(['has', 'had'])} the value {k * 7}\n",
        lambda k: f"Checking file {k + 1} of 100 ... still the same error\n",
    ]
    t = rng.choice(templates)
    return _loop(prose(rng, 300), t)


def shape_near_block(rng: random.Random) -> tuple[str, int]:
    kind = rng.randrange(3)
    if kind == 0:
        unit = lambda k: (f"class MyClass{k + 2}:\n    def __init__(self):\n        self.value = {k + 2}\n\n"
                          f"    def get_value(self):\n        return self.value\n\n")
        prefix = prose(rng, 200) + "```python\n"
    elif kind == 1:
        name = rng.choice(NAMES)
        unit = lambda k: (f'  {{\n    "id": {k + 145},\n    "name": "{name}",\n'
                          f'    "email": "{name.lower()}@example.com",\n    "age": {30 + k % 7}\n  }},\n')
        prefix = prose(rng, 200) + "```json\n[\n"
    else:
        unit = lambda k: (f"def test_case_{k + 1}():\n    calc = Calculator()\n"
                          f"    assert calc.add({k}, {k + 1}) == {2 * k + 1}\n\n")
        prefix = prose(rng, 200) + "```python\n"
    return _loop(prefix, unit)


def shape_collapse(rng: random.Random) -> tuple[str, int]:
    vocab = rng.sample(["items", "its", "itemsThe", "the", "item", "it", "The", "items,", "is",
                        "and", "of", "its,", "Items", "a"], rng.randint(4, 8))
    prefix = prose(rng, 400)
    out = []
    size = 0
    while size < LOOP_CHARS - len(prefix):
        w = rng.choice(vocab)
        out.append(w)
        size += len(w) + 1
    return prefix + " ".join(out), len(prefix)


def shape_fence_loop(rng: random.Random) -> tuple[str, int]:
    kind = rng.randrange(4)
    if kind == 0:
        prefix = prose(rng, 200) + "```css\n.btn {\n  color: red;\n}\n"
        return _loop(prefix, lambda k: "  background-color: #f2f2f2;\n")
    if kind == 1:
        prefix = prose(rng, 200) + "```yaml\njobs:\n  build:\n"
        return _loop(prefix, lambda k: "    # Run the tests on every push to the main branch\n")
    if kind == 2:
        prefix = prose(rng, 200) + "```python\nx = "
        return _loop(prefix, lambda k: "1", limit=prefix.__len__() + 970)
    prefix = prose(rng, 200) + "```html\n<table>\n"
    return _loop(prefix, lambda k: "  <tr><td>Product</td><td>Price</td></tr>\n")


def shape_chinese(rng: random.Random) -> tuple[str, int]:
    kind = rng.randrange(3)
    start = rng.randrange(0, 40)
    if kind == 0:
        line = ZH[start:start + rng.randint(12, 30)] + "\n"
        return _loop(ZH + "\n", lambda k: line)
    if kind == 1:
        para = ZH[start:]       # ~110 characters, no newline
        return _loop(ZH[:40] + "\n", lambda k: para)
    return _loop(ZH + "\n", lambda k: f"第{k + 1}步：我需要再检查一下这个函数的调用者。\n")


def shape_near_words(rng: random.Random) -> tuple[str, int]:
    """Lines where a word changes (among a few values), with or without a counter."""
    name, other = rng.sample(NAMES, 2)
    verbs = rng.choice([("has", "had"), ("is", "was"), ("caller", "callee"),
                        ("open", "closed", "pending"), ("left", "right")])
    templates = [
        lambda k: f"- Item {k + 3}: {name} {rng.choice(verbs)} the value {k * 7}\n",
        lambda k: f"Let me check the {rng.choice(verbs)} again, it looks wrong.\n",
        lambda k: f"The status of the job is {rng.choice(verbs)} so I will wait a bit more.\n",
        lambda k: f"{rng.choice([name, other])} says the {rng.choice(verbs)} door is locked.\n",
        lambda k: f"Wait, the {rng.choice(verbs)} branch returns None. Let me look again.\n",
    ]
    t = rng.choice(templates)
    return _loop(prose(rng, 300), t)


def shape_near_scattered(rng: random.Random) -> tuple[str, int]:
    """Near-variants with other (distinct) lines between them."""
    templates = [
        lambda k: f"Retrying the build with the same flags (attempt {k + 2}).\n",
        lambda k: f"Step {k + 14}: let me check the caller again.\n",
        lambda k: f"Hmm, x = {40 + k} so the result is still wrong, let me re-check.\n",
    ]
    t = rng.choice(templates)
    every = rng.randint(2, 3)
    return _loop(prose(rng, 300),
                 lambda k: t(k) + "".join(sentence(rng) + "\n" for _ in range(every - 1)))


def shape_cjk_near(rng: random.Random) -> tuple[str, int]:
    """Chinese near-variants: numbered short names cycling, a step counter, a changing word."""
    kind = rng.randrange(3)
    names = ["伊兰", "王芳", "李明", "张伟", "刘洋", "陈静", "杨帆"][:rng.randint(3, 6)]
    if kind == 0:
        return _loop(ZH + "\n", lambda k: f"{k + 12}. {names[k % len(names)]}\n")
    if kind == 1:
        return _loop(ZH + "\n", lambda k: f"第{k + 3}次尝试：结果还是不对，我再检查一下。\n")
    words = rng.choice([("上午", "下午"), ("左边", "右边"), ("打开", "关闭", "等待")])
    return _loop(ZH + "\n", lambda k: f"我再看一下{rng.choice(words)}的数据，好像有问题。\n")


LOOP_SHAPES: dict[str, Callable[[random.Random], tuple[str, int]]] = {
    "block-12": shape_block(12),
    "block-30": shape_block(30),
    "block-90": shape_block(90),
    "paragraph": shape_paragraph,
    "near-lines": shape_near_lines,
    "near-block": shape_near_block,
    "near-words": shape_near_words,
    "near-scattered": shape_near_scattered,
    "cjk-near": shape_cjk_near,
    "collapse": shape_collapse,
    "fence-loop": shape_fence_loop,
    "chinese": shape_chinese,
}


# --------------------------------------------------------------------------- legitimate output

def legit_counting(rng: random.Random) -> str:
    n = rng.choice([100, 300, 500])
    sep = rng.choice(["\n", ", ", " "])
    return "Here you go:\n\n" + sep.join(str(i) for i in range(1, n + 1)) + "\n"


def legit_md_table(rng: random.Random) -> str:
    rows = ["| # | Name | City | Score |", "|---|------|------|-------|"]
    for i in range(1, 41):
        rows.append(f"| {i} | {rng.choice(NAMES)} | {rng.choice(WORDS).capitalize()} | "
                    f"{rng.randint(10, 99)}.{rng.randint(0, 9)} |")
    return "The results:\n\n" + "\n".join(rows) + "\n"


def legit_ascii_table(rng: random.Random) -> str:
    border = "+------+------------+--------+"
    rows = [border, "| row  | value      | delta  |", border]
    for i in range(1, 61):
        rows.append(f"| {i:<4} | {rng.uniform(0, 1000):<10.2f} | {rng.randint(-99, 99):<6} |")
        rows.append(border)
    return "\n".join(rows) + "\n"


def legit_csv(rng: random.Random) -> str:
    rows = ["id,name,age,score"]
    for i in range(1, 151):
        rows.append(f"{i},{rng.choice(NAMES)},{rng.randint(18, 80)},{rng.uniform(0, 100):.1f}")
    if rng.random() < 0.5:
        rows = [",".join(str(rng.randint(0, 999)) for _ in range(6)) for _ in range(150)]
    return "```csv\n" + "\n".join(rows) + "\n```\n"


def legit_json(rng: random.Random) -> str:
    items = []
    names = rng.sample(NAMES, 40)
    for i, name in enumerate(names, 1):
        items.append(f'  {{\n    "id": {i},\n    "name": "{name}",\n    "email": '
                     f'"{name.lower()}@example.com",\n    "city": "{rng.choice(WORDS)}"\n  }}')
    return "```json\n[\n" + ",\n".join(items) + "\n]\n```\n"


def legit_accessors(rng: random.Random) -> str:
    fields = rng.sample(FIELDS, 40)
    out = ["```python", "class Record:", "    def __init__(self):"]
    out += [f"        self._{f} = None" for f in fields]
    for f in fields:
        out += ["", "    @property", f"    def {f}(self):", f"        return self._{f}", "",
                f"    @{f}.setter", f"    def {f}(self, value):", f"        self._{f} = value"]
    return "\n".join(out) + "\n```\n"


def legit_poem(rng: random.Random) -> str:
    refrain = "And the river keeps on singing, singing home."
    out = []
    for _ in range(12):
        out += [sentence(rng, rng.randint(5, 8)) for _ in range(3)]
        out += [refrain, ""]
    return "\n".join(out)


def legit_list(rng: random.Random) -> str:
    items = rng.sample([f"{a} {b}" for a in WORDS for b in FIELDS], 100)
    style = rng.randrange(3)
    if style == 0:
        return "\n".join(f"{i}. {it.capitalize()}" for i, it in enumerate(items, 1)) + "\n"
    if style == 1:
        return "\n".join(f"- {it}" for it in items) + "\n"
    return "\n".join(f"{i}. {rng.choice(NAMES)}" for i in range(1, 101)) + "\n"


def legit_prose(rng: random.Random) -> str:
    return prose(rng, 6000)


def legit_times_table(rng: random.Random) -> str:
    n = rng.randint(3, 12)
    return "\n".join(f"{n} x {i} = {n * i}" for i in range(1, 101)) + "\n"


def legit_chinese(rng: random.Random) -> str:
    out = []
    for _ in range(30):
        s = rng.randrange(0, len(ZH) - 40)
        out.append(ZH[s:s + rng.randint(20, 40)])
    return "\n".join(out) + "\n"


def legit_steps(rng: random.Random) -> str:
    return "\n".join(f"Step {i}: {sentence(rng)}" for i in range(1, 41)) + "\n"


def legit_log(rng: random.Random) -> str:
    out = []
    t = rng.randint(0, 3000)
    for i in range(120):
        t += rng.randint(1, 40)
        lvl = rng.choice(["INFO", "INFO", "INFO", "DEBUG", "WARN"])
        msg = rng.choice([f"request {rng.randint(1000, 9999)} served in {rng.randint(2, 300)} ms",
                          f"user {rng.choice(NAMES).lower()} logged in",
                          f"cache hit for key {rng.choice(FIELDS)}",
                          f"worker {rng.randint(1, 8)} heartbeat"])
        out.append(f"2024-05-{1 + t // 86400:02d} {t // 3600 % 24:02d}:{t // 60 % 60:02d}:"
                   f"{t % 60:02d} {lvl} {msg}")
    return "```\n" + "\n".join(out) + "\n```\n"


def legit_changelog(rng: random.Random) -> str:
    out = ["# Changelog", ""]
    for v in range(12, 0, -1):
        out += [f"## [1.{v}.0] - 2024-{1 + v % 12:02d}-{rng.randint(1, 28):02d}", ""]
        for _ in range(rng.randint(2, 5)):
            kind = rng.choice(["Added", "Fixed", "Changed"])
            out.append(f"- {kind} {sentence(rng, rng.randint(4, 9)).lower()}")
        out.append("")
    return "\n".join(out)


def legit_asserts(rng: random.Random) -> str:
    out = ["```python", "def test_parse():"]
    for _ in range(40):
        a, b = rng.sample(WORDS, 2)
        kind = rng.randrange(3)
        if kind == 0:
            out.append(f'    assert slugify("{a.title()} {b}") == "{a}-{b}"')
        elif kind == 1:
            out.append(f'    assert parse("{a}={rng.randint(0, 99)}") == {{"{a}": '
                       f'{rng.randint(0, 99)}}}')
        else:
            out.append(f'    assert is_valid("{a}_{b}")')
    return "\n".join(out) + "\n```\n"


def legit_links(rng: random.Random) -> str:
    out = ["Further reading:", ""]
    for w in rng.sample(WORDS, 30):
        f = rng.choice(FIELDS)
        out.append(f"- [{w.title()} and {f}](https://example.org/{w}/{f}.html)")
    return "\n".join(out) + "\n"


def legit_yaml(rng: random.Random) -> str:
    out = ["```yaml", "services:"]
    for w in rng.sample(WORDS, 12):
        out += [f"  {w}:", f"    image: {w}:{rng.randint(1, 9)}.{rng.randint(0, 20)}",
                f"    replicas: {rng.randint(1, 5)}", "    ports:",
                f"      - \"{rng.randint(3000, 9000)}:80\"", "    restart: always"]
    return "\n".join(out) + "\n```\n"


def legit_sections(rng: random.Random) -> str:
    out = []
    for i in range(1, 13):
        out += [f"## Example {i}", "", prose(rng, 200).strip(), "", "### Notes", "",
                sentence(rng), ""]
    return "\n".join(out)


def legit_dialogue(rng: random.Random) -> str:
    a, b = rng.sample(NAMES, 2)
    return "\n".join(f"{a if i % 2 == 0 else b}: {sentence(rng)}" for i in range(60)) + "\n"


def legit_sql(rng: random.Random) -> str:
    out = ["```sql"]
    for i, name in enumerate(rng.sample(NAMES, 40), 1):
        out.append(f"INSERT INTO users (id, name, email, age) VALUES ({i}, '{name}', "
                   f"'{name.lower()}@example.com', {rng.randint(18, 80)});")
    return "\n".join(out) + "\n```\n"


def legit_config_table(rng: random.Random) -> str:
    out = ["| option | default | description |", "|---|---|---|"]
    for f in rng.sample(FIELDS, 30):
        out.append(f"| `{f}` | `{rng.choice(['true', 'false', str(rng.randint(1, 999))])}` | "
                   f"{sentence(rng, rng.randint(4, 8))} |")
    return "\n".join(out) + "\n"


def legit_diff(rng: random.Random) -> str:
    out = ["```diff"]
    for _ in range(10):
        f = rng.choice(FIELDS)
        n = rng.randint(10, 400)
        out += [f"@@ -{n},6 +{n},7 @@ def {f}(self):", f"     value = self.{f}",
                f"-    return value", f"+    if value is None:", f"+        return "
                f"{rng.randint(0, 9)}", f"+    return value", ""]
    return "\n".join(out) + "```\n"


def legit_lyrics(rng: random.Random) -> str:
    chorus = ["Oh, the night is young and the road is long,",
              "we keep on driving till the break of dawn,",
              "and every mile we sing the same old song,",
              "oh, the night is young."]
    out = []
    for _ in range(6):
        out += [sentence(rng, rng.randint(5, 8)) for _ in range(4)] + [""] + chorus + [""]
    return "\n".join(out)


def legit_schedule(rng: random.Random) -> str:
    """A timetable: the weekdays cycling with their hours, four to eight weeks."""
    days = rng.choice([("Monday", "Tuesday", "Wednesday", "Thursday", "Friday"),
                       ("星期一", "星期二", "星期三", "星期四", "星期五")])
    out = ["| week | day | start | end |", "|---|---|---|---|"]
    for week in range(1, rng.randint(4, 8) + 1):
        for d in days:
            out.append(f"| {week} | {d} | {rng.randint(7, 10)}:{rng.choice(['00', '30'])} | "
                       f"{rng.randint(15, 19)}:00 |")
    return "Here is the plan:\n\n" + "\n".join(out) + "\n"


def legit_template_list(rng: random.Random) -> str:
    """A listing from one template whose numbers (and a letter) carry the content."""
    a, b = rng.randint(3, 97), rng.randint(1, 100)
    return "".join(f"Item {i}: the value is {i * a % 101 + b}, noted as {chr(65 + i % 26)}.\n"
                   for i in range(rng.randint(40, 120)))


def legit_grid(rng: random.Random) -> str:
    """Data in one-character cells outside a fence: a 0/1 maze or adjacency matrix, a board."""
    n = rng.randint(10, 20)
    cells, title, sep = rng.choice([("01", "The maze (1 = wall):", " "),
                                    ("01", "Adjacency matrix:", ", "),
                                    ("XO.", "The board:", " "),
                                    ("ACGT", "Aligned reads:", " ")])
    return title + "\n" + "\n".join(sep.join(rng.choice(cells) for _ in range(n))
                                     for _ in range(n)) + "\n"


def legit_draws(rng: random.Random) -> str:
    """One line of draws from a few words: coin flips, moves through a maze, rounds of rock
    paper scissors, answers, flags — a list, 40 to 150 items."""
    values, intro = rng.choice([
        (("Heads", "Tails"), "Here are the {n} coin flips:"),
        (("up", "down", "left", "right"), "The path through the maze ({n} moves):"),
        (("rock", "paper", "scissors"), "The computer played these {n} rounds:"),
        (("yes", "no", "maybe"), "Answers to the {n} questions, in order:"),
        (("true", "false"), "The {n} feature flags are"),
        (("正面", "反面"), "抛硬币{n}次的结果："),
    ])
    n = rng.randint(40, 150)
    sep = "、" if values[0] == "正面" else rng.choice([", ", ", ", " → ", " | ", " / "])
    return (intro.format(n=n) + " " + sep.join(rng.choice(values) for _ in range(n)) + ".\n\n"
            + prose(rng, 200))


def legit_lyrics_line(rng: random.Random) -> str:
    """Song lyrics written on one line: verses of distinct words, a short chorus sung twice."""
    chorus = rng.choice(["oh la la, oh la la, sing it again",
                         "hey hey, ho ho, we go round and round",
                         "na na na na, na na na na, hey hey, goodbye"])
    out = []
    for _ in range(rng.randint(3, 5)):
        out += [sentence(rng, rng.randint(6, 10)).rstrip(".") + "," for _ in range(2)]
        out += [chorus + ",", chorus + "!"]
    return "The lyrics: " + " ".join(out) + "\n"


def legit_data_rows(rng: random.Random) -> str:
    """Rows from one template, outside any fence, whose numbers are the content: prices of one
    ticker, metrics per epoch, an hourly forecast, CVE and release lists, orders, timed log lines
    (a prose skeleton repeats on every row; only the numbers tell the rows apart)."""
    ticker = rng.choice(["AAPL", "MSFT", "NVDA", "TSLA"])
    name = rng.choice(NAMES)
    templates: list[Callable[[int], str]] = [
        lambda i: f"2024-03-{i % 28 + 1:02d},{ticker},{rng.uniform(100, 200):.2f},"
                  f"{rng.uniform(100, 200):.2f},{rng.randint(10**5, 10**7)}",
        lambda i: f"Epoch {i + 1}/40 - loss: {rng.random():.4f} - accuracy: {rng.random():.4f}",
        lambda i: f"{i % 24:02d}:00 - temperature {rng.randint(-5, 30)}°C, humidity "
                  f"{rng.randint(30, 95)}%, wind {rng.randint(0, 40)} km/h",
        lambda i: f"- CVE-2024-{rng.randint(1000, 49999)}: fixed in {rng.randint(1, 4)}."
                  f"{rng.randint(0, 20)}.{rng.randint(0, 30)}",
        lambda i: f"Version 2.{i}.{rng.randint(0, 9)} was released on 2023-{rng.randint(1, 12):02d}-"
                  f"{rng.randint(1, 28):02d}.",
        lambda i: f"- Order #{rng.randint(10**4, 10**5)}: {rng.randint(1, 9)} items, total "
                  f"${rng.randint(5, 900)}.{rng.randint(0, 99):02d}",
        lambda i: f"[12:{i // 60 % 60:02d}:{i % 60:02d}] GET /api/users/{rng.randint(1, 9999)} "
                  f"200 in {rng.randint(2, 300)} ms",
        lambda i: f"Page {i + 1}: {rng.randint(150, 900)} words, {rng.randint(1, 9)} figures",
        lambda i: f"{name}'s score in round {i + 1}: {rng.randint(0, 100)} of 100",
        lambda i: f"第{i + 1}天：最高气温{rng.randint(10, 35)}度，最低气温{rng.randint(-5, 15)}度",
    ]
    t = rng.choice(templates)
    return "Here are the results:\n\n" + "".join(t(i) + "\n" for i in range(rng.randint(20, 60)))


def legit_identifiers(rng: random.Random) -> str:
    """A list of identifiers under one short template: links to issues, bug numbers with a
    numbered title, pull requests to review, tickets (the number is the item, not a counter)."""
    base = rng.randint(100, 400000)
    templates: list[Callable[[int], str]] = [
        lambda i: f"- https://github.com/{rng.choice(NAMES).lower()}/api/issues/"
                  f"{rng.randint(100, 9999)}",
        lambda i: f"* https://crbug.com/aomedia/{base + i * rng.randint(2, 300)}",
        lambda i: f"{base + i * 4 + rng.randint(0, 2)}  FreeBSD support, part {i + 1}",
        lambda i: f"- [{rng.choice('x ')}] Review pull request #{base + i * rng.randint(2, 40)}",
        lambda i: f"Closes JIRA-{rng.randint(1000, 99999)}",
        lambda i: f"- 工单{rng.randint(1000, 9999)}：已关闭",
    ]
    t = rng.choice(templates)
    return ("These are the related items:\n\n" + "".join(t(i) + "\n"
                                                        for i in range(rng.randint(20, 50))))


def legit_traceback(rng: random.Random) -> str:
    """A runaway recursion explained: prose, the traceback in a fence (CPython shows the
    repeated frame three times, then ``[Previous line repeated N more times]``), the fix."""
    func = rng.choice(["factorial", "fib", "walk", "flatten", "count_down", "visit_node"])
    path = rng.choice(["main.py", "app/tree.py", "/home/dev/project/src/utils/recursion.py",
                       "C:\\Users\\dev\\solver.py"])
    call = rng.choice([f"return n * {func}(n - 1)", f"return {func}(n - 1) + {func}(n - 2)",
                       f"return [{func}(child) for child in node.children]",
                       f"{func}(items[1:], depth + 1)"])
    line = rng.randint(2, 80)
    frame = f'  File "{path}", line {line}, in {func}\n    {call}\n'
    return (prose(rng, rng.randint(150, 400)) + "\n\n```\nTraceback (most recent call last):\n"
            f'  File "{path}", line {line + rng.randint(3, 30)}, in <module>\n'
            f"    print({func}(10))\n" + frame * 3
            + f"  [Previous line repeated {rng.randint(900, 996)} more times]\n"
            "RecursionError: maximum recursion depth exceeded\n```\n\n"
            + prose(rng, rng.randint(200, 500)) + "\n")


LEGIT_SHAPES: dict[str, Callable[[random.Random], str]] = {
    "counting": legit_counting,
    "md-table": legit_md_table,
    "ascii-table": legit_ascii_table,
    "csv": legit_csv,
    "json-array": legit_json,
    "accessors": legit_accessors,
    "poem-refrain": legit_poem,
    "long-list": legit_list,
    "prose": legit_prose,
    "times-table": legit_times_table,
    "chinese-prose": legit_chinese,
    "numbered-steps": legit_steps,
    "log": legit_log,
    "changelog": legit_changelog,
    "asserts": legit_asserts,
    "md-links": legit_links,
    "yaml": legit_yaml,
    "sections": legit_sections,
    "dialogue": legit_dialogue,
    "sql-inserts": legit_sql,
    "config-table": legit_config_table,
    "diff": legit_diff,
    "lyrics": legit_lyrics,
    "schedule": legit_schedule,
    "template-list": legit_template_list,
    "grid": legit_grid,
    "draws": legit_draws,
    "lyrics-line": legit_lyrics_line,
    "data-rows": legit_data_rows,
    "traceback": legit_traceback,
    "identifiers": legit_identifiers,
}


def synthetic_cases(instances: int = 20, seed: int = 14) -> list[Case]:
    out = []
    for cls, make in LOOP_SHAPES.items():
        for i in range(instances):
            text, start = make(random.Random(f"{seed}-{cls}-{i}"))
            out.append(synthetic_case(f"{cls}#{i}", cls, text, start))
    for cls, make_legit in LEGIT_SHAPES.items():
        for i in range(instances):
            text = make_legit(random.Random(f"{seed}-{cls}-{i}"))
            out.append(synthetic_case(f"{cls}#{i}", "legit:" + cls, text, None))
    return out


def code_cases(limit: int = 300, chars: int = 8000, seed: int = 14) -> list[Case]:
    """Real code written by people, class ``code:no loop``: ``limit`` modules of the Python
    standard library this interpreter runs on (test suites included: they repeat asserts),
    drawn with a fixed seed, their first ``chars`` characters fenced as a model would answer
    with them. [] when the sources are not installed."""
    import sysconfig

    root = sysconfig.get_paths()["stdlib"]
    names = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in ("site-packages", "dist-packages",
                                                      "__pycache__"))
        names += sorted(os.path.join(folder, f) for f in files if f.endswith(".py"))
    out = []
    for path in random.Random(seed).sample(names, min(limit, len(names))):
        try:
            with open(path, encoding="utf-8") as f:
                body = f.read(chars)
        except (UnicodeDecodeError, OSError):
            continue
        text = "Here is the module.\n\n```python\n" + body + "\n```\n"
        out.append(synthetic_case(os.path.relpath(path, root), "code:no loop", text, None))
    return out


def is_legit(cls: str) -> bool:
    """Whether a class holds legitimate text (no loop to stop)."""
    return cls.startswith("legit:") or cls.endswith(":no loop")


def real_cases(path: str = REAL_STREAMS, prefix: str = "real") -> list[Case]:
    """The labelled streams of a trace file as cases of class ``PREFIX:loop`` / ``PREFIX:no loop``."""
    if not os.path.exists(path):
        return []
    import gzip

    by: dict[str, Case] = {}
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            e = json.loads(line)
            if e["type"] == "start":
                loop = e.get("label") == "loop"
                by[e["stream"]] = Case(e["stream"], f"{prefix}:" + ("loop" if loop else "no loop"),
                                       not loop, [], [], e.get("loop_start"),
                                       {"shape": e.get("shape", "")})
            elif e["type"] == "text-delta":
                c = by[e["stream"]]
                c.deltas.append(e["text"])
                c.ids.append(list(e.get("tokens", [])))
    return list(by.values())


# --------------------------------------------------------------------------- detectors
# Each returns the character offset of its stop (None: no stop), and of its first notice.

@dataclass
class Outcome:
    stop: int | None
    notice: int | None
    rule: str = ""


def run_contextcare(case: Case, engine: str = "native", rules: Any = None) -> Outcome:
    from contextcare.presets import DEFAULT_OPTIONS, default_rules

    if engine == "native":
        from contextcare._engine import Ruleset
    else:
        from contextcare.reference import Ruleset  # type: ignore[assignment]
    rs = Ruleset(rules if rules is not None else default_rules(), **DEFAULT_OPTIONS)
    w = rs.watcher()
    stop = notice = None
    rule = ""
    dets = []
    for d in case.deltas:
        dets.extend(w.feed(d))
    dets.extend(w.finish())
    for det in dets:
        if notice is None:
            notice = det.offset
        if det.action == "abort" and stop is None:
            stop = det.offset
            rule = det.rule
    return Outcome(stop, notice, rule)


def vllm_check(min_p: int, max_p: int, count: int) -> Callable[[Case], Outcome]:
    """vLLM's repetition stop over token ids, checked after every token."""
    def run(case: Case) -> Outcome:
        ids: list[int] = []
        last: dict[int, list[int]] = {}
        pos = 0
        for delta, toks in zip(case.deltas, case.ids):
            hit = False
            for t in toks:
                ids.append(t)
                n = len(ids)
                occ = last.setdefault(t, [])
                # candidate periods: earlier positions of the same id within max_p
                for j in reversed(occ):
                    p = n - 1 - j
                    if p > max_p:
                        break
                    if p < min_p or p * count > n:
                        continue
                    span = p * (count - 1)
                    if all(ids[n - 1 - i] == ids[n - 1 - i - p] for i in range(span)):
                        hit = True
                        break
                occ.append(n - 1)
                if len(occ) > 64:
                    del occ[:32]
                if hit:
                    break
            pos += len(delta)
            if hit:
                return Outcome(pos, pos, f"vllm {min_p}..{max_p}x{count}")
        return Outcome(None, None)
    return run


_GEM_RESET = re.compile(r"^\s*(```|~~~|\||[-*+] |\d+[.)] |#{1,6} |>)|^\s*[-+_=*\u2500-\u257F]+\s*$")


def gemini_like(case: Case) -> Outcome:
    """Gemini CLI's content-chanting check (see the module docstring)."""
    chunk, threshold, max_gap = 50, 10, 250
    text = ""
    seen: dict[str, list[int]] = {}
    in_fence = False
    line = ""
    pos = 0
    for delta in case.deltas:
        for c in delta:
            pos += 1
            if c == "\n":
                if line.strip().startswith(("```", "~~~")):
                    in_fence = not in_fence
                if _GEM_RESET.match(line):
                    text, seen = "", {}
                line = ""
            else:
                line += c
            if in_fence:
                continue
            text += c
            if len(text) < chunk:
                continue
            key = text[-chunk:]
            occ = seen.setdefault(key, [])
            occ.append(len(text))
            if len(occ) >= threshold:
                last = occ[-threshold:]
                mean_gap = (last[-1] - last[0]) / (threshold - 1)
                periods = {text[a - chunk:b - chunk] for a, b in zip(last, last[1:])}
                if mean_gap <= max_gap and len(periods) <= threshold // 2:
                    return Outcome(pos, pos, "gemini")
    return Outcome(None, None)


def original(case: Case) -> Outcome:
    sys.path.insert(0, HERE)
    from original_port import OriginalWatch, production_triggers

    w = OriginalWatch(production_triggers())
    pos = 0
    for d in case.deltas:
        pos += len(d)
        hits = w.feed(d, "text")
        if any(h.get("kind") == "line-repeat" for h in hits):
            return Outcome(pos, pos, "original")
    return Outcome(None, None)


# --------------------------------------------------------------------------- scoring

@dataclass
class Score:
    n: int = 0
    caught: int = 0
    noticed: int = 0
    false: int = 0
    false_notice: int = 0
    latency: list[int] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)
    noticed_legit: list[str] = field(default_factory=list)   # legitimate cases with a notice
    by_case: dict[str, int] = field(default_factory=dict)   # loop name -> latency of its stop

    def add(self, case: Case, out: Outcome) -> None:
        self.n += 1
        if case.legit:
            if out.stop is not None:
                self.false += 1
                self.missed.append(case.name)
            if out.notice is not None:
                self.false_notice += 1
                self.noticed_legit.append(case.name)
            return
        start = case.loop_start or 0
        if out.stop is not None and out.stop < start:
            self.false += 1
            self.missed.append(case.name + "(early)")
        elif out.stop is not None:
            self.caught += 1
            self.latency.append(out.stop - start)
            self.by_case[case.name] = out.stop - start
        else:
            self.missed.append(case.name)
        if out.notice is not None and out.notice >= start:
            self.noticed += 1

    def cells(self, legit: bool) -> str:
        if legit:
            return f"{self.false}/{self.n} ({self.false_notice})"
        lat = (f"{int(statistics.median(self.latency))} / {max(self.latency)}"
               if self.latency else "–")
        more = self.noticed - self.caught
        return f"{self.caught}/{self.n} · {lat}" + (f" (+{more} reminded)" if more > 0 else "")


def _with_word_repeat() -> list[Any]:
    from contextcare import WordRepeat
    from contextcare.presets import default_rules

    return [*default_rules(), WordRepeat("word-repeat")]


def detectors(engine: str, word_repeat: bool = False) -> dict[str, Callable[[Case], Outcome]]:
    extra: dict[str, Callable[[Case], Outcome]] = {}
    if word_repeat:
        rules = _with_word_repeat()
        extra["contextcare+wr"] = lambda c: run_contextcare(c, engine, rules)
    return {
        "contextcare": lambda c: run_contextcare(c, engine),
        **extra,
        "vllm 16..1024×4": vllm_check(16, 1024, 4),
        "vllm 1..20×3": vllm_check(1, 20, 3),
        "gemini-like": gemini_like,
        "original": original,
    }


def evaluate(cases: Iterable[Case], engine: str = "native",
             only: set[str] | None = None,
             word_repeat: bool = False) -> dict[str, dict[str, Score]]:
    table: dict[str, dict[str, Score]] = {}
    dets = detectors(engine, word_repeat)
    for case in cases:
        if only and case.cls.split(":")[-1] not in only and case.cls not in only:
            continue
        row = table.setdefault(case.cls, {})
        for name, run in dets.items():
            row.setdefault(name, Score()).add(case, run(case))
    return table


def markdown(table: dict[str, dict[str, Score]]) -> str:
    names = list(next(iter(table.values())).keys())
    out = ["| class | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for cls, row in table.items():
        legit = is_legit(cls)
        out.append(f"| {cls} | " + " | ".join(row[n].cells(legit) for n in names) + " |")
    return "\n".join(out)


def paired(table: dict[str, dict[str, Score]], ours: str = "contextcare") -> str:
    """Latency against each peer on the loops both stop: the median of (ours - peer) in
    characters (negative: ours stops earlier) and how many of those loops ours stops no later."""
    # (contextcare+wr is compared with the defaults in its own table, not in theirs)
    names = [n for n in next(iter(table.values()))
             if n != ours and not (ours == "contextcare" and n.startswith("contextcare"))]
    out = ["| class | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for cls, row in table.items():
        if is_legit(cls):
            continue
        cells = []
        for n in names:
            both = sorted(set(row[ours].by_case) & set(row[n].by_case))
            if not both:
                cells.append("–")
                continue
            diff = [row[ours].by_case[k] - row[n].by_case[k] for k in both]
            le = sum(1 for d in diff if d <= 0)
            cells.append(f"{int(statistics.median(diff)):+d} ({le}/{len(both)})")
        out.append(f"| {cls} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="detection quality of contextcare and its peers")
    ap.add_argument("--engine", choices=("native", "reference"), default="native")
    ap.add_argument("--instances", type=int, default=20)
    ap.add_argument("--classes", default="", help="comma-separated classes (default: all)")
    ap.add_argument("--no-real", action="store_true",
                    help="skip the real-model streams and the standard library's code")
    ap.add_argument("--real", action="append", default=[], metavar="PREFIX=PATH",
                    help="a labelled stream file and its class prefix (repeatable; default: "
                         + ", ".join(f"{k}={os.path.relpath(v, ROOT)}" for k, v in STREAM_FILES.items())
                         + ")")
    ap.add_argument("--missed", action="store_true", help="list what each detector missed")
    ap.add_argument("--word-repeat", action="store_true",
                    help="add a column: the default rules plus the opt-in WordRepeat rule")
    args = ap.parse_args(argv)
    cases = synthetic_cases(args.instances)
    files = dict(STREAM_FILES)
    if args.real:
        files = {}
        for spec in args.real:
            prefix, sep, path = spec.partition("=")
            if not sep or not prefix or not path:
                ap.error(f"--real: expected PREFIX=PATH, got {spec!r}")
            if not os.path.exists(path):
                ap.error(f"--real: no such file {path!r}")
            files[prefix] = path
    if not args.no_real:
        for prefix, path in files.items():
            cases += real_cases(path, prefix)
        cases += code_cases()
    only = set(filter(None, args.classes.split(","))) or None
    table = evaluate(cases, args.engine, only, args.word_repeat)
    print("Loops: stopped/instances · latency median / worst (characters after the loop's "
          "start); \"(+k reminded)\": loops not stopped that got a reminder. Legitimate "
          "(legit:*, real:no loop, heldout:no loop, code:no loop): false stops/instances (in parentheses: instances with any "
          "notice, reminders included).\n")
    print(markdown(table))
    print("\nLatency against each peer on the loops both stop: median of contextcare's minus the "
          "peer's (characters; negative = contextcare stops earlier), and on how many of them "
          "contextcare stops no later.\n")
    print(paired(table))
    if args.word_repeat:
        print("\nThe same for contextcare+wr (the default rules plus WordRepeat).\n")
        print(paired(table, "contextcare+wr"))
    if args.missed:
        for cls, row in table.items():
            for name, sc in row.items():
                if sc.missed and name == "contextcare":
                    print(f"{cls} {name}: {' '.join(sc.missed)}")
                if sc.noticed_legit and name == "contextcare":
                    print(f"{cls} {name} notices: {' '.join(sc.noticed_legit)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
