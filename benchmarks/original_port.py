"""A plain-Python port of the original engine's per-frame loop: the baseline users have today.

Written from the behavioural description of dsh-context-care's ``stream-watch.js`` (old engine,
v0.4-v0.7; see shared/reference/context-care-spec.md sections 1-2): per stream, one *view* per
scope holding the text as a list of chunks (oldest whole chunks dropped past 16 384 characters),
the pending line, the window of the last 80 trimmed lines of at least 3 characters and their
counts; phrase and marker triggers run every frame on ``carry + frame`` with one substring test
per phrase in list order; windowed triggers (line-repeat) run when 300 characters have been
appended since their view's last check. Every trigger fires at most once per attempt.

It is a cost model, not a parity tool: lengths are code points (the original counted UTF-16
units; the traces compared on are BMP-only where it matters), ``str.strip`` stands in for JS
``trim``, and actions are reduced to recording the hit. ``fire_once=False`` keeps every trigger
armed, which is what the original pays on every frame until its phrase trigger fires; the
phrase benchmarks use it so that all engines do the same work on the whole trace.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CONTEXT_PHRASES",
    "TIME_PHRASES",
    "OriginalWatch",
    "Trigger",
    "phrase_trigger",
    "production_triggers",
]

TEXT_LIMIT = 16384
LINE_WINDOW = 80
MIN_LINE_LEN = 3
LINE_LIMIT = 4096
WINDOWED_EVERY = 300

#: Stand-ins of the original's anxiety lists, same count and lengths (13 phrases of 3-4
#: characters; 15 of 4-6), built on the examples the reference quotes. The cost of the
#: original's loop depends on the number and length of phrases, not on which ones they are.
TIME_PHRASES = (
    "时间不够", "来不及", "加快速度", "抓紧时间", "时间成本", "时间紧张", "没时间了", "赶时间",
    "时间有限", "争分夺秒", "加快进度", "节省时间", "时间紧迫",
)
CONTEXT_PHRASES = (
    "上下文不够", "上下文快满", "会话太长", "节省上下文", "趁还没压缩",
    "趁上下文还够", "上下文有限", "上下文快用完", "避免被压缩", "上下文紧张",
    "省点上下文", "压缩之前", "上下文不足", "窗口快满了", "在被压缩前",
)


@dataclass(frozen=True)
class Trigger:
    """One rule of the original: ``kind`` is ``phrase``, ``marker`` or ``line-repeat``;
    ``scope`` is ``text``, ``reasoning`` or ``combined``."""

    id: str
    kind: str
    scope: str = "combined"
    phrases: tuple[str, ...] = ()
    every: int = WINDOWED_EVERY
    min_lines: int = 30
    min_count: int = 30
    min_ratio: float = 0.35
    min_run: int = 12


def production_triggers() -> list[Trigger]:
    """The original's production triggers: streaming line-repeat (abort) and the two anxiety
    phrase triggers (reasoning only)."""
    return [
        Trigger("line-repeat", "line-repeat", "combined"),
        Trigger("time-anxiety", "phrase", "reasoning", TIME_PHRASES),
        Trigger("context-anxiety", "phrase", "reasoning", CONTEXT_PHRASES),
    ]


def phrase_trigger(phrases: tuple[str, ...], scope: str = "text") -> list[Trigger]:
    """One phrase trigger holding ``phrases`` (the phrase-work comparison)."""
    return [Trigger("phrases", "phrase", scope, phrases)]


class _View:
    """The original's per-scope view: chunk list, pending line, line window and counts."""

    __slots__ = ("chunks", "counts", "length", "line", "pending", "window")

    def __init__(self) -> None:
        self.chunks: deque[str] = deque()
        self.length = 0
        self.line = ""
        self.window: deque[str] = deque()
        self.counts: dict[str, int] = {}
        self.pending = 0  # characters appended since the last windowed check

    def append(self, text: str) -> None:
        piece = text[-TEXT_LIMIT:]
        self.chunks.append(piece)
        self.length += len(piece)
        self.pending += len(piece)
        while self.length > TEXT_LIMIT and len(self.chunks) > 1:
            self.length -= len(self.chunks.popleft())
        start = 0
        nl = piece.find("\n")
        while nl >= 0:
            self._push_line(self.line + piece[start:nl])
            self.line = ""
            start = nl + 1
            nl = piece.find("\n", start)
        self.line = (self.line + piece[start:])[-LINE_LIMIT:]

    def _push_line(self, line: str) -> None:
        t = line.strip()
        if len(t) < MIN_LINE_LEN:
            return
        self.window.append(t)
        self.counts[t] = self.counts.get(t, 0) + 1
        while len(self.window) > LINE_WINDOW:
            old = self.window.popleft()
            n = self.counts[old] - 1
            if n:
                self.counts[old] = n
            else:
                del self.counts[old]

    def tail(self, limit: int = 600) -> str:
        return "".join(self.chunks)[-limit:]


def _line_repeat(view: _View, t: Trigger) -> dict[str, Any] | None:
    total = len(view.window)
    if total < t.min_lines:
        return None
    worst, worst_count = "", 0
    for line, n in view.counts.items():
        if n > worst_count:
            worst, worst_count = line, n
    best_run = run = 1
    prev = None
    for line in view.window:
        run = run + 1 if line == prev else 1
        best_run = max(best_run, run)
        prev = line
    ratio = worst_count / total
    if (worst_count >= t.min_count and ratio >= t.min_ratio) or best_run >= t.min_run:
        return {"kind": "line-repeat", "line": worst[:40], "count": worst_count, "total": total,
                "ratio": ratio, "run": best_run}
    return None


@dataclass
class _PhraseState:
    phrases: tuple[str, ...]
    keep: int
    carry: str = ""


def _phrase_feed(state: _PhraseState, text: str) -> dict[str, Any] | None:
    window = state.carry + text
    state.carry = window[-state.keep:] if state.keep else ""
    for p in state.phrases:
        if p in window:
            return {"kind": "phrase", "phrase": p}
    return None


@dataclass
class OriginalWatch:
    """The original's per-agent state and its ``observe`` loop, for one stream.

    ``start()`` begins an attempt; ``chunk(kind, text)`` is one frame (``kind`` ``text`` or
    ``reasoning``) and returns the hits it fired (also kept in ``hits``). ``feed``, ``finish``
    and ``reset`` give it the shape of a ``Watcher`` for the shared timed loops.
    """

    triggers: list[Trigger]
    fire_once: bool = True
    hits: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._scopes = tuple(dict.fromkeys(t.scope for t in self.triggers))
        self.start()

    def start(self) -> None:
        self._views = {s: _View() for s in self._scopes}
        self._states: dict[str, _PhraseState] = {}
        self._fired: set[str] = set()

    def feed(self, text: str, channel: str = "text") -> list[dict[str, Any]]:
        """``chunk`` with the argument order of ``Watcher.feed``."""
        return self.chunk(channel, text)

    def finish(self) -> tuple[()]:
        """The original had no end-of-stream work (its pending line never counted)."""
        return ()

    def reset(self) -> None:
        """A new attempt (the original's ``start`` frame)."""
        self.start()

    def chunk(self, kind: str, text: str) -> list[dict[str, Any]]:
        if not text:
            return []
        for scope, view in self._views.items():
            if scope == "combined" or scope == kind:
                view.append(text)
        fired = []
        for t in self.triggers:
            if t.id in self._fired:
                continue
            hit = None
            if t.kind == "line-repeat":
                view = self._views[t.scope]
                if view.pending < t.every:
                    continue
                view.pending = 0
                hit = _line_repeat(view, t)
            else:
                if t.scope != "combined" and t.scope != kind:
                    continue
                state = self._states.get(t.id)
                if state is None:
                    phrases = tuple(p for p in t.phrases if p)
                    keep = max(0, max((len(p) for p in phrases), default=0) - 1)
                    state = self._states[t.id] = _PhraseState(phrases, keep)
                hit = _phrase_feed(state, text)
            if hit is not None:
                if self.fire_once:
                    self._fired.add(t.id)
                hit["trigger"] = t.id
                self.hits.append(hit)
                fired.append(hit)
        return fired
