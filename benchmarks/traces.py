"""Deterministic benchmark traces: reply text split into 1-4-character deltas, and a phrase list.

Everything here is generated from fixed seeds in code, so a benchmark run anywhere feeds exactly
the same deltas and nothing large is committed. The text imitates what a reasoning model streams:
lines of mixed English and Chinese prose, Markdown lists, the odd fenced code block, a reasoning
segment followed by an answer segment. Two families of traces:

* :func:`phrase_trace` - one long stream on one channel, BMP characters only (pyahocorasick 2.3.1's
  resumable iterator corrupts memory on characters outside the BMP), with phrases of
  :func:`make_phrases` planted at a fixed rate. Used for the phrase work, where every peer runs.
* :func:`reply_trace` - a sequence of replies, each a reasoning segment then an answer segment,
  optionally with degenerate loops of every family the default rules look for (a repeated line, a
  short cycle of short lines, filler murmurs, monotonous prefixes, a newline-free flood). Also
  holds the odd emoji, ``\\r\\n`` and anxious reasoning, because the default rules must handle them.

Ground truth for phrases is computed with ``str.find`` over the whole text (:func:`occurrences`),
which is independent of every engine under test.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import cached_property

__all__ = [
    "LOOP_FAMILIES",
    "PhraseTrace",
    "Reply",
    "ReplyTrace",
    "Segment",
    "byte_occurrences",
    "longest_per_end",
    "make_phrases",
    "occurrences",
    "phrase_set",
    "phrase_trace",
    "reply_trace",
    "split_deltas",
    "utf8_len",
]

# --------------------------------------------------------------------------- vocabulary

def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_EN_WORDS = _words(
    "the a an we I it this that these they you need to check look at read run call build test "
    "file files function method class value values result results error errors line lines code "
    "path config option options output input list item items step steps first next then again "
    "now here there so but and or if when because while after before since until maybe perhaps "
    "should could would will can must might not only also still just already all some each every "
    "one two three more less most least new old same other case cases branch loop index offset "
    "buffer state table row column field type types name names key keys map set query request "
    "response server client user model token tokens delta stream reply message messages tool "
    "tools call calls test suite fixture assert expected actual wrong right fine good better "
    "simple small large fast slow safe careful exact whole partial empty missing extra done "
    "fix change update add remove rename move keep drop return raise handle parse format print "
    "write store load save open close start stop finish reset split join count compare match"
)

_ZH_WORDS = _words(
    "我们 需要 检查 文件 函数 测试 结果 然后 因为 所以 但是 如果 这个 那个 现在 已经 还是 "
    "可以 应该 可能 问题 代码 配置 输出 输入 列表 步骤 第一 下一步 再次 修改 更新 添加 删除 "
    "返回 处理 解析 格式 写入 读取 保存 打开 关闭 开始 停止 完成 重置 拆分 合并 比较 匹配 "
    "用户 模型 请求 响应 服务器 客户端 消息 工具 调用 参数 类型 名称 字段 数据 表格 行号 "
    "索引 偏移 缓冲 状态 分支 循环 错误 异常 日志 路径 目录 选项 接口 方法 变量 常量 逻辑 "
    "仔细 简单 复杂 正确 完整 部分 缺少 多余 快速 稳定 安全 明确 具体 一致 首先 其次 最后 "
    "看看 想想 确认 验证 运行 构建 提交 回滚 比如 例如 另外 同时 或者 以及 关于 对于 根据"
)

_ZH_PUNCT = ("，", "，", "，", "。", "；", "：", "、")
_EN_END = (".", ".", ".", ",", ";", ":", "?")
#: Characters outside the BMP (only used in :func:`reply_trace`, never in phrase traces).
_ASTRAL = ("🙂", "🚀", "✨", "🤔", "𠀀")
_BMP_SYMBOLS = ("✓", "→", "…", "—", "「", "」", "“", "”")

_CODE_LINES = (
    "def check(path: str) -> bool:",
    "    return os.path.exists(path)",
    "for i, row in enumerate(rows):",
    "    total += row.count",
    "if not result:",
    "    raise ValueError(\"empty result\")",
    "x = compute(a, b)",
    "print(json.dumps(data, indent=2))",
)


def utf8_len(text: str) -> int:
    """UTF-8 length of ``text`` in bytes (lone surrogates as with ``surrogatepass``)."""
    return len(text.encode("utf-8", "surrogatepass"))


def make_phrases(n_en: int = 200, n_zh: int = 100, seed: int = 300) -> tuple[str, ...]:
    """A deterministic list of distinct phrases: ``n_en`` English, then ``n_zh`` Chinese.

    English phrases are 3-7 words of the trace vocabulary (so they read like the text around
    them but practically never occur by chance); Chinese phrases are 3-6 words (6-18
    characters). One phrase in twenty is longer (up to ~45 characters), like real stop phrases.
    """
    rng = random.Random(seed)
    out: dict[str, None] = {}
    while len(out) < n_en:
        k = rng.randint(6, 9) if rng.random() < 0.05 else rng.randint(3, 5)
        out[" ".join(rng.choice(_EN_WORDS) for _ in range(k))] = None
    zh: dict[str, None] = {}
    while len(zh) < n_zh:
        k = rng.randint(8, 12) if rng.random() < 0.05 else rng.randint(3, 6)
        zh["".join(rng.choice(_ZH_WORDS) for _ in range(k))[:45]] = None
    return tuple(out) + tuple(zh)


#: Languages of :func:`phrase_set`.
PHRASE_SET_LANGS = ("zh", "en", "mixed")


def phrase_set(n: int, lang: str = "zh", seed: int = 16) -> tuple[str, ...]:
    """``n`` distinct phrases for the size sweep, like a user's own list (banned terms, product
    names): ``zh`` = 2-8 characters drawn uniformly from the 20 902 CJK unified ideographs of the
    BMP (U+4E00-U+9FA5); ``en`` = 2-4 words of the trace vocabulary, one of them (at a random
    place) replaced by a made-up 3-8-letter name, so the phrases share prefixes with the text
    the way real lists do but do not occur in it by chance; ``mixed`` = alternately one and the
    other. The first phrases are those of :func:`make_phrases` (when ``n`` >= 300), so a trace
    planted with them finds the same occurrences in every set."""
    if lang not in PHRASE_SET_LANGS:
        raise ValueError(f"lang must be one of {PHRASE_SET_LANGS}, got {lang!r}")
    rng = random.Random(f"{seed}-{lang}-{n}")
    out: dict[str, None] = dict.fromkeys(make_phrases()[:n])
    letters = "abcdefghijklmnopqrstuvwxyz"
    k = 0
    while len(out) < n:
        pick = lang if lang != "mixed" else ("zh", "en")[k % 2]
        k += 1
        if pick == "zh":
            p = "".join(chr(rng.randint(0x4E00, 0x9FA5)) for _ in range(rng.randint(2, 8)))
        else:
            words = [rng.choice(_EN_WORDS) for _ in range(rng.randint(2, 4))]
            words[rng.randrange(len(words))] = "".join(
                rng.choice(letters) for _ in range(rng.randint(3, 8)))
            p = " ".join(words)
        out[p] = None
    return tuple(out)


# --------------------------------------------------------------------------- text pieces

def _en_sentence(rng: random.Random) -> str:
    words = [rng.choice(_EN_WORDS) for _ in range(rng.randint(4, 14))]
    words[0] = words[0].capitalize()
    return " ".join(words) + rng.choice(_EN_END)


def _zh_sentence(rng: random.Random) -> str:
    parts = ["".join(rng.choice(_ZH_WORDS) for _ in range(rng.randint(2, 6)))
             for _ in range(rng.randint(1, 3))]
    return "，".join(parts) + rng.choice(_ZH_PUNCT[3:])


def _prose_line(rng: random.Random, astral: bool) -> str:
    """One line of mixed prose, sometimes a list item, sometimes with a symbol or emoji."""
    sentences = []
    for _ in range(rng.randint(1, 3)):
        sentences.append(_en_sentence(rng) if rng.random() < 0.5 else _zh_sentence(rng))
    line = " ".join(sentences)
    r = rng.random()
    if r < 0.15:
        line = "- " + line
    elif r < 0.25:
        line = f"{rng.randint(1, 9)}. " + line
    elif r < 0.28:
        line = "**" + line + "**"
    if rng.random() < 0.05:
        line += " " + rng.choice(_BMP_SYMBOLS)
    if astral and rng.random() < 0.03:
        line += " " + rng.choice(_ASTRAL)
    return line


def _code_block(rng: random.Random) -> list[str]:
    # no line twice in a row: three identical lines back to back are the start of a loop, which
    # the default rules stop (block-repeat), and this trace is the clean one
    body: list[str] = []
    for _ in range(rng.randint(3, 10)):
        body.append(rng.choice([c for c in _CODE_LINES if not body or c != body[-1]]))
    return ["```python", *body, "```"]


def _prose(rng: random.Random, n_chars: int, astral: bool, plant: tuple[str, ...] = (),
           plant_every: int = 0) -> str:
    """About ``n_chars`` characters of lines; every ~``plant_every`` characters a phrase of
    ``plant`` is woven into a line (at a random word gap)."""
    lines: list[str] = []
    size = 0
    next_plant = rng.randint(1, plant_every) if plant else 0
    while size < n_chars:
        if rng.random() < 0.02:
            block = _code_block(rng)
        else:
            line = _prose_line(rng, astral)
            if plant and size >= next_plant:
                cut = line.rfind(" ", 0, rng.randint(0, len(line)))
                phrase = rng.choice(plant)
                line = (line[:cut + 1] + phrase + " " + line[cut + 1:]) if cut >= 0 else (
                    phrase + " " + line)
                next_plant = size + rng.randint(plant_every // 2, plant_every * 3 // 2)
            block = [line]
            if rng.random() < 0.1:
                block.append("")
        lines.extend(block)
        size += sum(len(x) + 1 for x in block)
    return "\n".join(lines) + "\n"


def split_deltas(text: str, rng: random.Random, lo: int = 1, hi: int = 4) -> list[str]:
    """Split ``text`` into deltas of ``lo``-``hi`` code points (uniform)."""
    out = []
    i = 0
    n = len(text)
    while i < n:
        j = min(n, i + rng.randint(lo, hi))
        out.append(text[i:j])
        i = j
    return out


# --------------------------------------------------------------------------- phrase trace

@dataclass(frozen=True)
class PhraseTrace:
    """One stream on one channel, split into deltas, with the phrase list planted in it."""

    name: str
    deltas: list[str]
    phrases: tuple[str, ...]

    @cached_property
    def text(self) -> str:
        return "".join(self.deltas)

    @cached_property
    def nbytes(self) -> int:
        return utf8_len(self.text)

    @cached_property
    def encoded(self) -> list[bytes]:
        """The deltas pre-encoded to UTF-8 (for Hyperscan's best case)."""
        return [d.encode("utf-8") for d in self.deltas]

    def head(self, n_deltas: int) -> PhraseTrace:
        """The first ``n_deltas`` deltas as a trace of their own (for slow engines)."""
        return PhraseTrace(f"{self.name}[:{n_deltas}]", self.deltas[:n_deltas], self.phrases)


def phrase_trace(n_bytes: int = 1_000_000, seed: int = 1, phrases: tuple[str, ...] | None = None,
                 plant_every: int = 450) -> PhraseTrace:
    """About ``n_bytes`` of BMP-only mixed prose on one channel with phrases planted about every
    ``plant_every`` characters, split into 1-4-character deltas."""
    rng = random.Random(seed)
    plist = make_phrases() if phrases is None else phrases
    # Mixed text here averages ~1.5 UTF-8 bytes per character.
    text = _prose(rng, int(n_bytes / 1.5), astral=False, plant=plist, plant_every=plant_every)
    return PhraseTrace(f"phrases-{n_bytes // 1000}KB", split_deltas(text, rng), plist)


def occurrences(text: str, phrases: tuple[str, ...]) -> list[tuple[int, int]]:
    """Every occurrence of every phrase, overlapping ones included, as ``(end, phrase index)``
    sorted by end then index; ``end`` is the exclusive end offset in code points."""
    out = []
    for k, p in enumerate(phrases):
        i = text.find(p)
        while i >= 0:
            out.append((i + len(p), k))
            i = text.find(p, i + 1)
    out.sort()
    return out


def byte_occurrences(text: str, phrases: tuple[str, ...]) -> list[tuple[int, int]]:
    """As :func:`occurrences`, with ``end`` in UTF-8 bytes (what Hyperscan reports)."""
    data = text.encode("utf-8")
    out = []
    for k, p in enumerate(phrases):
        b = p.encode("utf-8")
        i = data.find(b)
        while i >= 0:
            out.append((i + len(b), k))
            i = data.find(b, i + 1)
    out.sort()
    return out


def longest_per_end(occ: list[tuple[int, int]], phrases: tuple[str, ...]) -> dict[int, str]:
    """For each end offset, the longest phrase ending there (what one ``Phrases`` rule with
    ``once=False`` reports at that offset)."""
    out: dict[int, str] = {}
    for end, k in occ:
        p = phrases[k]
        if end not in out or len(p) > len(out[end]):
            out[end] = p
    return out


# --------------------------------------------------------------------------- reply traces

@dataclass(frozen=True)
class Segment:
    """Consecutive deltas of one channel."""

    channel: str
    deltas: list[str]


@dataclass(frozen=True)
class Reply:
    """One model reply: usually a reasoning segment, then an answer segment."""

    segments: list[Segment]
    loops: tuple[str, ...] = ()

    def text(self, channel: str) -> str:
        return "".join("".join(s.deltas) for s in self.segments if s.channel == channel)


@dataclass(frozen=True)
class ReplyTrace:
    """A sequence of replies (each one attempt: a fresh or reset watcher)."""

    name: str
    replies: list[Reply]
    loops: bool = field(default=False)

    @cached_property
    def n_deltas(self) -> int:
        return sum(len(s.deltas) for r in self.replies for s in r.segments)

    @cached_property
    def n_chars(self) -> int:
        return sum(len(d) for r in self.replies for s in r.segments for d in s.deltas)

    @cached_property
    def nbytes(self) -> int:
        return sum(utf8_len("".join(s.deltas)) for r in self.replies for s in r.segments)

    def head(self, n_replies: int) -> ReplyTrace:
        return ReplyTrace(f"{self.name}[:{n_replies}]", self.replies[:n_replies], self.loops)


#: Anxious reasoning lines planted (rarely) in replies: they should make the anxiety rules fire.
_ANXIOUS = (
    "时间不够了，我得加快速度。",
    "上下文快满了，趁还没压缩先把结论写下来。",
    "I am running out of time, so I will skip the tests.",
    "The context window is almost full; I should hurry.",
)


def _loop(rng: random.Random, family: str) -> str:
    """One degenerate loop of ``family`` (the shapes the default rules are built for)."""
    if family == "line-repeat":
        line = _prose_line(rng, astral=False)
        return (line + "\n") * rng.randint(35, 60)
    if family == "line-cycle":
        return "（输出。）\n**做。**\ngo.\n" * rng.randint(20, 30)
    if family == "filler-lines":
        return "".join(rng.choice(("好。", "嗯。", "做。", "对。", "行。")) + "\n"
                       for _ in range(rng.randint(40, 60)))
    if family == "prefix-monotony":
        return "".join("嗯，" + _zh_sentence(rng) + "\n" for _ in range(rng.randint(45, 60)))
    if family == "tail-repeat":
        unit = rng.choice(("the ", "继续。", "I will check the file again. ", "好的好的"))
        return unit * max(3, 900 // len(unit))
    raise ValueError(f"family must be a loop family, got {family!r}")


def _midpoint(text: str) -> int:
    """The first line start at or after the middle of ``text`` that is outside a code fence
    (a loop planted inside a fence would be masked, by design)."""
    inside = False
    pos = 0
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            inside = not inside
        pos += len(line)
        if pos >= len(text) // 2 and not inside:
            return pos
    return len(text)


LOOP_FAMILIES = ("line-repeat", "line-cycle", "filler-lines", "prefix-monotony", "tail-repeat")


def reply_trace(n_bytes: int = 1_000_000, seed: int = 2, loops: bool = False,
                reply_chars: tuple[int, int] = (1500, 9000)) -> ReplyTrace:
    """About ``n_bytes`` of replies (reasoning then answer), split into 1-4-character deltas.

    With ``loops`` every second reply holds one degenerate loop (families in turn) in its
    reasoning or its answer; one reply in twenty holds an anxious reasoning line either way.
    """
    rng = random.Random(seed)
    replies: list[Reply] = []
    size = 0
    k = 0
    while size < n_bytes:
        chars = rng.randint(*reply_chars)
        reasoning = _prose(rng, chars * 2 // 3, astral=True)
        answer = _prose(rng, chars // 3, astral=True)
        if rng.random() < 0.05:
            lines = reasoning.split("\n")
            lines.insert(rng.randint(0, len(lines) - 1), rng.choice(_ANXIOUS))
            reasoning = "\n".join(lines)
        if rng.random() < 0.1:
            answer = answer.replace("\n", "\r\n", 3)
        families: tuple[str, ...] = ()
        if loops and k % 2 == 1:
            family = LOOP_FAMILIES[(k // 2) % len(LOOP_FAMILIES)]
            families = (family,)
            if rng.random() < 0.5:
                cut = _midpoint(reasoning)
                reasoning = reasoning[:cut] + _loop(rng, family) + reasoning[cut:]
            else:
                cut = _midpoint(answer)
                answer = answer[:cut] + _loop(rng, family) + answer[cut:]
        segments = [Segment("reasoning", split_deltas(reasoning, rng)),
                    Segment("text", split_deltas(answer, rng))]
        replies.append(Reply(segments, families))
        size += utf8_len(reasoning) + utf8_len(answer)
        k += 1
    name = f"replies-{'loops' if loops else 'clean'}-{n_bytes // 1000}KB"
    return ReplyTrace(name, replies, loops)
