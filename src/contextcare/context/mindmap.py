"""The clear-mind survey: a map of the conversation the model can use to clear spans itself.

:func:`survey` turns OpenAI-format messages into a :class:`Survey`: one node per message with its
id, turn, kind, token weight, one-line preview, whether a clear may start before it (▸) or end
after it (◂), and whether it is an earlier checkpoint (◆). :meth:`Survey.render` is the text the
model reads; :meth:`Survey.validate_clear` checks the model's ``(start, end, notes)`` and returns
a :class:`ClearPlan` (apply it with :meth:`ClearPlan.apply`) or raises :class:`ClearError` with a
message that tells the model what to do instead. :class:`ReminderPolicy` decides when to suggest a
clear before the model asks.

How a host's concepts map onto a plain message list (see also :mod:`.planner`):

* seq ids → message ids (the ``id`` key, else the index). Index ids are positions in the list
  the survey was made from; give messages ``id`` keys to clear several segments from one survey
  (:meth:`ClearPlan.apply` re-bases those by id, and refuses a plan on positions that moved).
* turns → by default a new turn starts at each ``user`` message that is neither a checkpoint nor
  one of our notices; messages before the first one have turn ``None``. A host that knows its
  turns passes ``turns=`` (one int or ``None`` per message).
* the system-prompt head → the leading ``system`` / ``developer`` messages, kind ``system``,
  never a valid boundary; ``first`` means the first message after it.
* request pressure → ``pressure_tokens`` if the host knows it (prompt, tools, …), else the sum.
* tool-result previews show ``name: first line``; OpenAI results
  carry no error flag, so the ``!`` form does not occur. Path shortening against a working
  directory is host-specific and not done.
* there are no open-turn or compaction-lock checks (they need a host's session log);
  :meth:`ClearPlan.apply` instead re-checks, by identity, that the plan
  still describes the list (``docs/planner.md``).
* ★ marks the latest real user message (the task in hand); the header names it.

Lengths (previews, notes) count code points, not UTF-16 units.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

from .._checks import check_lang
from ..errors import ArgumentTypeError, ArgumentValueError, ContextCareError
from ..marker import own_message
from .meters import Message, Meter, message_text, resolve_meter
from .planner import (  # the private helpers: validation shared within the package
    ConversationError,
    MessageId,
    Predicate,
    _predicate,
    balanced_cuts,
    check_conversation,
    checkpoint_message,
    is_checkpoint_message,
    is_notice_message,
    latest_user_index,
    message_ids,
    system_head_length,
    unanswered_calls,
)

__all__ = [
    "Node", "TurnRun", "Survey", "ClearPlan", "ClearError", "ReminderPolicy", "survey",
    "format_tokens", "preview_line", "call_hint", "RENDER_NODE_LIMIT",
]

#: Past this many nodes, the oldest ones are shown one line per turn.
RENDER_NODE_LIMIT = 140
#: Longest preview, in code points (longer ones end in "…").
PREVIEW_CHARS = 48
#: Longest tool-call preview after the "→ " arrow.
CALL_PREVIEW_CHARS = 96

Lang = Literal["en", "zh"]

_BREAKS = re.compile(r"[\t\r\n]+")


# --------------------------------------------------------------------------- formatting

def format_tokens(tokens: int) -> str:
    """``340``, ``1.20k`` (two decimals from 1000), ``15.3k`` (one decimal from 10000), half up."""
    # Integer arithmetic: exact half-up rounding for any size (a Decimal context has a finite
    # precision and fails on a 400-digit pressure figure).
    if tokens >= 10000:
        tenths = (tokens + 50) // 100
        return f"{tenths // 10}.{tenths % 10}k"
    if tokens >= 1000:
        hundredths = (tokens + 5) // 10
        return f"{hundredths // 100}.{hundredths % 100:02d}k"
    return str(tokens)


def preview_line(text: str) -> str:
    """One line: trimmed, runs of tab/CR/LF made one space, at most 48 characters (47 + "…")."""
    line = _BREAKS.sub(" ", text.strip())
    if len(line) <= PREVIEW_CHARS:
        return line
    return line[: PREVIEW_CHARS - 1] + "…"


_VARIANTS = {
    "bash": "bash", "pwsh": "bash",
    "read": "read", "web_fetch": "read",
    "web_search": "search", "grep": "search", "glob": "search",
    "write": "write", "edit": "edit", "run_code": "code",
}
_SUMMARY_KEYS = {
    "bash": ("description", "command"),
    "read": ("path", "file_path", "url"),
    "search": ("query", "pattern", "url"),
    "write": ("path", "file_path"),
    "edit": ("path", "file_path"),
    "code": ("description",),
}


def _first_line(value: str) -> str:
    return value.strip().split("\n", 1)[0]


def _row_summary(variant: str, args: Mapping[str, Any]) -> str | None:
    if variant == "search":
        queries = args.get("queries")
        if isinstance(queries, list):
            texts = [_first_line(q) for q in queries if isinstance(q, str) and q.strip()]
            if texts:
                return ", ".join(texts)
    for key in _SUMMARY_KEYS.get(variant, ()):
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return _first_line(value)
    for value in args.values():
        if isinstance(value, str) and value.strip():
            return _first_line(value)
    return None


def call_hint(call: Mapping[str, Any]) -> str:
    """``name · summary`` of one OpenAI tool call, or the bare name.

    The summary is the argument a reader recognises the call by: a shell command's description
    (else the command), a read's path or URL, a search's queries or pattern, …; for an unknown
    tool the first non-empty string argument. Invalid or non-object JSON arguments give the name.
    """
    function = call.get("function")
    function = function if isinstance(function, Mapping) else {}
    name = function.get("name")
    name = name if isinstance(name, str) and name else "tool"
    raw = function.get("arguments")
    try:
        args = json.loads(raw) if isinstance(raw, str) and raw.strip() else None
    except json.JSONDecodeError:
        args = None
    if not isinstance(args, dict):
        return name
    summary = _row_summary(_VARIANTS.get(name, "others"), args)
    line = preview_line(summary) if summary is not None else ""
    return f"{name} · {line}" if line else name


# --------------------------------------------------------------------------- survey data

@dataclass(frozen=True, slots=True)
class Node:
    """One message on the map.

    ``kind`` is ``system``, ``user``, ``assistant`` or ``tool``. ``valid_start``: a clear may begin
    here (no tool call is open across the cut before it, and it is not the system head).
    ``valid_end``: a clear may end here (no call open across the cut after it). ``tool_name`` is
    set on tool results whose call is found. ``latest_user`` marks the latest real user message
    (not a checkpoint, not a notice): the task in hand, which a clear should leave verbatim.
    """

    id: MessageId
    index: int
    turn: int | None
    kind: str
    tokens: int
    preview: str
    valid_start: bool
    valid_end: bool
    checkpoint: bool
    tool_name: str | None = None
    latest_user: bool = False


@dataclass(frozen=True, slots=True)
class TurnRun:
    """Consecutive nodes of one turn: first and last id, size, and what the user asked.

    ``first_start`` / ``last_end`` are the first valid start and last valid end inside the run
    (``None`` if there is none), which is what the aggregated map lines advertise.
    """

    turn: int
    start: MessageId
    end: MessageId
    nodes: int
    tokens: int
    first_user_preview: str | None
    first_start: MessageId | None
    last_end: MessageId | None


class ClearError(ContextCareError, ValueError):
    """A ``(start, end, notes)`` request that cannot be committed, with what to do instead.

    Raised, not returned: a rejected request is the exceptional path of a call that otherwise
    produces a plan, Python validators raise, and a forgotten check then fails loudly instead of
    treating an error as a plan. ``str(error)`` is written for the model (return it as the tool's
    error result); ``code`` is a stable machine-readable reason and ``suggestions`` holds the ids
    proposed instead, if any. It is a ``ValueError``, so generic handlers catch it too.

    Codes: ``empty``, ``nothing-clearable``, ``bad-boundary``, ``unknown-id``, ``system-head``,
    ``order``, ``split-start``, ``split-end``, ``notes-type``, ``notes-short``, ``notes-long``,
    ``too-small``, ``checkpoint-not-smaller``, ``stale``.
    """

    def __init__(self, message: str, code: str, suggestions: tuple[MessageId, ...] = ()) -> None:
        super().__init__(message)
        self.code = code
        self.suggestions = suggestions


@dataclass(frozen=True, slots=True)
class ClearPlan:
    """A validated clear: replace messages ``start`` … ``end`` (inclusive) by ``checkpoint``.

    ``ids`` and ``messages`` are the span as surveyed; ``cleared_tokens`` its weight and
    ``checkpoint_tokens`` the checkpoint's, by the survey's meter. ``by_id`` is true when every
    message of the span has an ``id`` key, so :meth:`apply` may find the span by id in a list
    that changed since the survey; otherwise the plan is tied to the surveyed list's positions.
    """

    start: MessageId
    end: MessageId
    start_index: int
    end_index: int
    ids: tuple[MessageId, ...]
    messages: tuple[Message, ...]
    cleared_tokens: int
    notes: str
    checkpoint: dict[str, Any]
    checkpoint_tokens: int
    by_id: bool = False
    #: The surveyed list (references, not copies): what a positional plan is checked against.
    surveyed: tuple[Message, ...] = field(default=(), repr=False, compare=False)

    def apply(self, messages: Sequence[Message], *,
              checkpoint_id: MessageId | None = None) -> list[Message]:
        """Return a new list with the span replaced by the checkpoint message.

        The plan must still describe ``messages`` exactly, else :class:`ClearError` (code
        ``stale``) names what changed and says to survey again. Messages are compared by
        identity, never by value (a loop repeats equal messages; equal is not the same):

        * a plan whose span has ``id`` keys (``by_id``) finds the span by id: the first id must
          be present, followed by exactly the surveyed ids, each still the same message object
          (or an equal one); and the cuts before and after the span must still keep every tool
          call with its results. So several disjoint clears from one survey apply in any order,
          and one that overlaps an applied clear is refused.
        * a plan on index ids (or a span with some messages without ``id``) only knows positions:
          every message up to the end of the span must be the very object surveyed at that
          position. A clear later in the list can still be applied after an earlier-positioned
          one is refused, and nothing ever lands on messages that merely look the same.

        ``checkpoint_id`` becomes the checkpoint's ``id``. Without one, the checkpoint gets an
        id no other message has (nor had, in the cleared span) whenever the conversation uses
        ``id`` keys: the next integer above every id (integer ids) or ``"checkpoint-N"`` (string
        ids); a list on index ids
        gets none, and the checkpoint takes its index like the rest. The result never holds a
        duplicate id (else :class:`ClearError` ``id-collision``, before anything is built).
        """
        messages = check_conversation(messages)
        ids = message_ids(messages)
        count = len(self.ids)
        at = self._locate(messages, ids) if self.by_id else self._check_positions(messages)
        checkpoint = dict(self.checkpoint)
        result = [*messages[:at], checkpoint, *messages[at + count:]]
        if checkpoint_id is not None:
            if isinstance(checkpoint_id, bool) or not isinstance(checkpoint_id, (int, str)):
                raise ArgumentTypeError(
                    f"checkpoint_id must be a str or an int, got {type(checkpoint_id).__name__}"
                )
            if checkpoint_id in _taken_ids(result, at):
                raise ArgumentValueError(f"checkpoint_id {checkpoint_id!r} is already in use")
        elif any(m.get("id") is not None for m in messages):
            checkpoint_id = _fresh_id(result, at, ids[at:at + count])
        if checkpoint_id is not None:
            checkpoint["id"] = checkpoint_id
        try:
            message_ids(result)
        except ConversationError as error:
            raise ClearError(
                f"clear: the result would hold a duplicate id ({error}). Pick another "
                "checkpoint_id, or give every message an 'id' key so positions do not collide "
                "with ids.", "id-collision") from None
        return result

    def _locate(self, messages: Sequence[Message], ids: Sequence[MessageId]) -> int:
        count = len(self.ids)
        at = next((i for i, ident in enumerate(ids)
                   if ident == self.start and type(ident) is type(self.start)), None)
        if at is None:
            raise ClearError(
                f"clear: id {self.start} is no longer in the conversation (an earlier clear may "
                "have covered it). Survey again for the current ids.", "stale")
        now = tuple(ids[at:at + count])
        if now != self.ids:
            raise ClearError(
                f"clear: the messages from {self.start} to {self.end} are no longer together: "
                f"the surveyed ids {list(self.ids)} now read {list(now)} (an earlier clear may "
                "have covered part of the range). Survey again and retry.", "stale")
        for offset, (was, now_message) in enumerate(zip(self.messages, messages[at:at + count])):
            if now_message is not was and now_message != was:
                raise ClearError(
                    f"clear: message {self.ids[offset]} changed since the survey. Survey again "
                    "and retry.", "stale")
        cuts = balanced_cuts(messages, ids)
        if at < system_head_length(messages) or not (cuts[at] and cuts[at + count]):
            raise ClearError(
                f"clear: in the current conversation the range {self.start} … {self.end} would "
                "separate a tool call from its results or touch the system prompt. Survey again "
                "and retry.", "stale")
        return at

    def _check_positions(self, messages: Sequence[Message]) -> int:
        last = self.end_index
        if len(messages) <= last:
            raise ClearError(
                f"clear: the conversation has {len(messages)} messages now; the range "
                f"{self.start} … {self.end} was surveyed at positions {self.start_index}–{last}. "
                "Survey again and retry.", "stale")
        for position in range(last + 1):
            if messages[position] is not self.surveyed[position]:
                where = ("inside the range" if position >= self.start_index
                         else "before the range")
                raise ClearError(
                    f"clear: messages[{position}] ({where}) is not the message surveyed there, "
                    f"so the ids {self.start} … {self.end} (positions in the surveyed list) no "
                    "longer name the surveyed messages — an earlier clear or an edit moved them. "
                    "Survey again for the current ids; to clear several segments from one "
                    "survey, give messages 'id' keys.", "stale")
        return self.start_index


def _taken_ids(result: Sequence[Message], at: int) -> set[MessageId]:
    """The ids of ``result``'s messages other than the checkpoint at ``at``."""
    taken: set[MessageId] = set()
    for index, message in enumerate(result):
        if index != at:
            raw = message.get("id")
            taken.add(index if raw is None else raw)
    return taken


def _fresh_id(result: Sequence[Message], at: int, cleared: Sequence[MessageId]) -> MessageId:
    """An id for the checkpoint at ``result[at]`` that no other message of ``result`` has, nor
    one of the ``cleared`` messages (an id is not reused for a different message)."""
    taken = _taken_ids(result, at) | set(cleared)
    explicit = [m.get("id") for i, m in enumerate(result) if i != at and m.get("id") is not None]
    if explicit and all(isinstance(ident, str) for ident in explicit):
        number = 1
        while f"checkpoint-{number}" in taken:
            number += 1
        return f"checkpoint-{number}"
    return max((ident for ident in taken if isinstance(ident, int)), default=-1) + 1


# --------------------------------------------------------------------------- model-facing text

_HEADER = {
    "map": "Context map: {n}, ~{tokens} tokens; request pressure ~{pressure} tokens.",
    "ids": "Ids are identities in conversation order, not numbers on a scale (they need not be "
           "sorted after a clear) — name a range by its first and last id, never by arithmetic.",
    "marks": "▸ marks where a clear may start, ◂ where it may end; ◆ marks an earlier "
             "checkpoint. Latest clearable end: id {latest}.",
    "none": "No clearable boundary before the current step yet — nothing to clear.",
    "latest-user": "★ marks the latest user message (id {id}): the task in hand — keep it "
                   "verbatim, outside any range.",
    "aggregated": "({n} older messages are summarized one line per turn below; their boundary "
                  "ids remain valid and are checked again when you clear.)",
    "pre-turn": "(messages before any turn)",
}

_GUIDE: dict[str, tuple[str, ...]] = {
    "en": (
        "— clearing guide —",
        "Pick a range: a finished phase or an abandoned detour. Keep the last one or two turns "
        "verbatim (work in progress must stay as it is), and fold any ◆ checkpoint inside the "
        "range into the new notes. After the clear you see only the notes, so put in everything "
        "from the range that may still matter; when unsure, keep it.",
        "Notes outline:",
        "  ## Task and the user's intent (quote the key words)",
        "  ## Facts and decisions (paths, commands, versions, ids, numbers — exactly)",
        "  ## Paths abandoned (what failed, why, do not retry)",
        "  ## Open questions",
        "  ## Next step (quote the user's latest instruction)",
        "Check before you commit: every unfinished requirement is in; every path, id and number "
        "you will need is in verbatim; every \"don't do X\" from the user is in. Anything of "
        "lasting value belongs in a file or a todo list as well — a checkpoint serves only this "
        "conversation.",
        "Several segments: one clear per segment, in one message if you like; they must not "
        "overlap.",
    ),
    "zh": (
        "— 清理指引 —",
        "选择区间：已经完成的阶段，或已放弃的弯路。最近一两个回合保持原文（进行中的工作必须原样保留），"
        "区间内较早的 ◆ 检查点要并入新的 notes。清理之后你只能看到 notes，所以区间里以后可能用到的内容都要写进去；拿不准时就保留。",
        "notes 提纲：",
        "  ## 任务与用户意图（关键处引用原话）",
        "  ## 事实与决定（路径、命令、版本、id、数字——逐字）",
        "  ## 放弃的路径（什么失败了、为什么、不要再试）",
        "  ## 未决问题",
        "  ## 下一步（引用用户最近的指示）",
        "提交前检查：每个未完成的要求都在；之后要用的路径、id 和数字都逐字在；用户说过的“不要做 X”都在。"
        "有长期价值的内容也应写进文件或待办清单——检查点只服务于本次对话。",
        "多段清理：每段一次调用，可以放在同一条消息里；各段不能重叠。",
    ),
}


def _count(nodes: int) -> str:
    return f"{nodes} message" if nodes == 1 else f"{nodes} messages"


def _pad(value: object, width: int) -> str:
    return str(value).rjust(width)


# --------------------------------------------------------------------------- survey

class Survey:
    """The map of one message list. Build it with :func:`survey`; it does not change."""

    __slots__ = ("nodes", "turns", "latest_end", "latest_user", "surface_tokens",
                 "pressure_tokens", "_messages", "_meter", "_head", "_unanswered")

    def __init__(self, nodes: tuple[Node, ...], turns: tuple[TurnRun, ...],
                 pressure_tokens: int, messages: tuple[Message, ...],
                 meter: Meter, head: int,
                 unanswered: tuple[tuple[str, int], ...] = ()) -> None:
        self.nodes = nodes
        self.turns = turns
        ends = [node.id for node in nodes if node.valid_end]
        self.latest_end: MessageId | None = ends[-1] if ends else None
        latest = [node.id for node in nodes if node.latest_user]
        #: The id of the latest real user message (``None`` if there is none).
        self.latest_user: MessageId | None = latest[0] if latest else None
        self._unanswered = unanswered
        self.surface_tokens = sum(node.tokens for node in nodes)
        self.pressure_tokens = pressure_tokens
        self._messages = messages
        self._meter = meter
        self._head = head

    def __repr__(self) -> str:
        return (f"Survey(nodes={len(self.nodes)}, tokens={self.surface_tokens}, "
                f"latest_end={self.latest_end!r})")

    # ----------------------------------------------------------------- rendering

    def render(self, *, lang: Lang = "en", guide: bool = True) -> str:
        """The text the model reads: header, per-turn node lines, and (if a clear is possible
        and ``guide``) the clearing guide in ``lang``."""
        lang = check_lang(lang)
        lines = [
            _HEADER["map"].format(n=_count(len(self.nodes)),
                                  tokens=format_tokens(self.surface_tokens),
                                  pressure=format_tokens(self.pressure_tokens)),
            _HEADER["ids"],
            _HEADER["marks"].format(latest=self.latest_end) if self.latest_end is not None
            else _HEADER["none"],
        ]
        if self.latest_user is not None:
            lines.append(_HEADER["latest-user"].format(id=self.latest_user))
        detailed_from = max(0, len(self.nodes) - RENDER_NODE_LIMIT)
        if detailed_from:
            lines += ["", _HEADER["aggregated"].format(n=detailed_from)]
        run_at = -1
        previous: int | None = None
        for position, node in enumerate(self.nodes):
            detailed = position >= detailed_from
            if node.turn != previous:
                if node.turn is not None:
                    run_at = self._next_run(run_at, node.turn)
                    run = self.turns[run_at]
                    lines += ["", self._run_header(run, detailed)]
                elif detailed:
                    lines += ["", _HEADER["pre-turn"]]
            previous = node.turn
            if detailed:
                lines.append(self._node_line(node))
        if guide and self.latest_end is not None:
            lines += ["", *_GUIDE[lang]]
        return "\n".join(lines)

    def _next_run(self, run_at: int, turn: int) -> int:
        for candidate in range(run_at + 1, len(self.turns)):
            if self.turns[candidate].turn == turn:
                return candidate
        return run_at  # the same run resumes after messages without a turn

    @staticmethod
    def _run_header(run: TurnRun, detailed: bool) -> str:
        label = f" — {run.first_user_preview}" if run.first_user_preview else ""
        if detailed:
            return (f"turn {run.turn} · ids {run.start}-{run.end} · {_count(run.nodes)} · "
                    f"~{format_tokens(run.tokens)} tok{label}")
        start = "  " + _pad("-", 4) if run.first_start is None else f"▸ {_pad(run.first_start, 4)}"
        end = "  " + _pad("-", 4) if run.last_end is None else f"◂ {_pad(run.last_end, 4)}"
        return (f"turn {run.turn} · {start} … {end}  {_pad(format_tokens(run.tokens), 6)}"
                f"  [{_count(run.nodes)}]{label}")

    @staticmethod
    def _node_line(node: Node) -> str:
        line = (f" {'▸' if node.valid_start else ' '} {_pad(node.id, 4)} "
                f"{'◂' if node.valid_end else ' '} "
                f"{'◆' if node.checkpoint else '★' if node.latest_user else ' '}"
                f"{node.kind.ljust(9)}{_pad(format_tokens(node.tokens), 6)}")
        if node.preview:
            line += " " + json.dumps(node.preview, ensure_ascii=False)
        return line

    # ----------------------------------------------------------------- validation

    def _resolve(self, side: str, value: object) -> int:
        """Position of the node named by ``value`` (an id, ``first`` or ``latest``)."""
        if isinstance(value, str):
            # One leading and one trailing quote, each on its own (clear-mind §4.2 step 1).
            cleaned = value.strip()
            if cleaned[:1] in ("\"", "'"):
                cleaned = cleaned[1:]
            if cleaned[-1:] in ("\"", "'"):
                cleaned = cleaned[:-1]
            cleaned = cleaned.strip()
            if cleaned.lower() == "first":
                if self._head >= len(self.nodes):
                    raise ClearError("clear: there is nothing after the system prompt — nothing "
                                     "to clear.", "empty")
                return self._head
            if cleaned.lower() == "latest":
                if self.latest_end is None:
                    raise ClearError("clear: there is no clearable boundary before the current "
                                     "step — nothing to clear yet.", "nothing-clearable")
                return self._position(self.latest_end)
            found = self._lookup(value)
            if found is None:
                found = self._lookup(cleaned)
        elif isinstance(value, int) and not isinstance(value, bool):
            found = self._lookup(value)
        else:
            raise ClearError(
                f"clear: {side} must be a message id from the survey, 'first' or 'latest'.",
                "bad-boundary")
        if found is None:
            raise ClearError(
                f"clear: id {value} is not in the current conversation. Survey again for the "
                "current ids.", "unknown-id")
        return found

    def _lookup(self, ident: MessageId) -> int | None:
        """Position of the node whose id is ``ident``, else whose id reads as ``ident``."""
        for node in self.nodes:
            if node.id == ident and type(node.id) is type(ident):
                return node.index
        for node in self.nodes:
            if str(node.id) == str(ident):
                return node.index
        return None

    def _position(self, ident: MessageId) -> int:
        found = self._lookup(ident)
        assert found is not None
        return found

    def _nearest(self, position: int, flag: str) -> tuple[MessageId, ...]:
        found: list[MessageId] = []
        for distance in range(1, len(self.nodes)):
            for candidate in (position - distance, position + distance):
                if 0 <= candidate < len(self.nodes) and getattr(self.nodes[candidate], flag):
                    found.append(self.nodes[candidate].id)
            if len(found) >= 3:
                break
        return tuple(found[:3])

    def validate_clear(
        self,
        start: object,
        end: object,
        notes: object,
        *,
        min_clear_tokens: int = 1000,
        min_notes_chars: int = 200,
        max_notes_chars: int = 16000,
    ) -> ClearPlan:
        """Check a clear request against this survey; return the plan or raise :class:`ClearError`.

        ``start`` / ``end``: an id from the survey (an int, or a string such as ``"12"`` or
        ``"msg_12"``; quotes and whitespace are tolerated), or the sentinels ``first`` (the first
        message after the system head) and ``latest`` (the latest clearable end), case-insensitive,
        on either side (a sentinel wins over an id spelled the same). Checks, in order: both ids resolve; the range does not touch the system
        head; start comes before end by position (ids are identities, so a numerically inverted
        pair is fine); neither boundary splits a tool call from its results (the nearest valid
        boundaries are suggested); notes length after trimming; the range weighs at least
        ``min_clear_tokens``; the checkpoint message is smaller than the range.

        The thresholds are host configuration: a bad one raises
        :class:`~contextcare.errors.ArgumentValueError`, not :class:`ClearError`.
        """
        for name, value in (("min_clear_tokens", min_clear_tokens),
                            ("min_notes_chars", min_notes_chars),
                            ("max_notes_chars", max_notes_chars)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ArgumentTypeError(f"{name} must be an int, got {type(value).__name__}")
            if value <= 0:
                raise ArgumentValueError(f"{name} must be a positive integer, got {value}")
        if min_notes_chars >= max_notes_chars:
            raise ArgumentValueError(f"min_notes_chars ({min_notes_chars}) must be less than "
                                 f"max_notes_chars ({max_notes_chars})")
        if not self.nodes:
            raise ClearError("clear: the conversation is empty — nothing to clear.", "empty")
        i = self._resolve("start", start)
        j = self._resolve("end", end)
        first, last = self.nodes[i], self.nodes[j]
        if i < self._head or j < self._head:
            raise ClearError(
                f"clear: id {first.id if i < self._head else last.id} is the system prompt, which "
                "is never cleared. Start at 'first' or a later ▸ id.", "system-head")
        if i > j:
            raise ClearError(
                f"clear: start id {first.id} (position {i}) comes after end id {last.id} "
                f"(position {j}). Ids are identities, not numbers: pick a start that comes before "
                "the end in the survey.", "order")
        if not first.valid_start:
            near = self._nearest(i, "valid_start")
            raise ClearError(
                f"clear: a range may not start at id {first.id} — it would separate a tool call "
                "from its results." + self._suggest(near, "starts"), "split-start", near)
        if not last.valid_end:
            near = self._nearest(j, "valid_end")
            open_calls = [(call, at) for call, at in self._unanswered if at <= j]
            why = ("it would separate a tool call from its results, or the step is still "
                   "running.")
            if open_calls:
                call, at = open_calls[0]
                why = (f"tool call {call!r} in message {self.nodes[at].id} was never answered, so "
                       "no range can end after it; add its tool result (or remove the call) to "
                       "repair the history.")
            raise ClearError(
                f"clear: a range may not end at id {last.id} — {why}" + self._suggest(near, "ends"),
                "split-end", near)
        if not isinstance(notes, str):
            raise ClearError(f"clear: notes must be text, got {type(notes).__name__}.",
                             "notes-type")
        text = notes.strip()
        if len(text) < min_notes_chars:
            raise ClearError(
                f"clear: notes are too short ({len(text)} characters < {min_notes_chars}). "
                "Write what the continuation needs: the user's intent in their words, key facts, "
                "paths and ids, paths abandoned and why, open questions, the next step.",
                "notes-short")
        if len(text) > max_notes_chars:
            raise ClearError(
                f"clear: notes are too long ({len(text)} characters > {max_notes_chars}). A "
                "checkpoint is a handover, not a transcript: keep what the continuation needs and "
                "drop the rest.", "notes-long")
        span = self.nodes[i:j + 1]
        cleared = sum(node.tokens for node in span)
        if cleared < min_clear_tokens:
            raise ClearError(
                f"clear: the range weighs only ~{cleared} tokens (< {min_clear_tokens}); a "
                "checkpoint is not worth it yet. Wait until more has accumulated or widen the "
                "range.", "too-small")
        checkpoint = checkpoint_message(text)
        framed = self._meter(checkpoint)
        if framed >= cleared:
            raise ClearError(
                f"clear: the checkpoint (~{framed} tokens) would not be smaller than the range it "
                f"replaces (~{cleared} tokens). Shorten the notes or widen the range.",
                "checkpoint-not-smaller")
        surveyed = self._messages[i:j + 1]
        return ClearPlan(
            start=first.id, end=last.id, start_index=i, end_index=j,
            ids=tuple(node.id for node in span), messages=surveyed,
            cleared_tokens=cleared, notes=text, checkpoint=checkpoint, checkpoint_tokens=framed,
            by_id=all(m.get("id") is not None for m in surveyed), surveyed=self._messages,
        )

    @staticmethod
    def _suggest(near: tuple[MessageId, ...], what: str) -> str:
        if not near:
            return ""
        return f" Nearest valid {what}: {', '.join(str(ident) for ident in near)}."


def _tool_names(messages: Sequence[Message]) -> dict[str, str]:
    names: dict[str, str] = {}
    for message in messages:
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        for call in calls if isinstance(calls, list) else ():
            function = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(function, Mapping) and isinstance(function.get("name"), str):
                names[str(call.get("id"))] = function["name"]
    return names


def _kind(message: Message, index: int, head: int) -> str:
    role = message.get("role")
    if index < head:
        return "system"
    if role in ("tool", "function"):
        return "tool"
    if role == "assistant":
        return "assistant"
    return "user"


def _preview(message: Message, kind: str, tool_name: str | None) -> str:
    if kind == "tool":
        line = preview_line(message_text(message))
        name = tool_name or "tool"
        return f"{name}: {line}" if line else name
    calls = message.get("tool_calls")
    if kind == "assistant" and isinstance(calls, list) and calls:
        joined = ", ".join(call_hint(call) if isinstance(call, Mapping) else "tool"
                           for call in calls)
        if len(joined) > CALL_PREVIEW_CHARS:
            joined = joined[: CALL_PREVIEW_CHARS - 1] + "…"
        return "→ " + joined
    line = preview_line(message_text(message))
    if kind == "assistant" and not line:
        return "(empty)"
    return line


def _derive_turns(messages: Sequence[Message], checkpoint: Predicate,
                  notice: Predicate) -> list[int | None]:
    turns: list[int | None] = []
    current: int | None = None
    count = 0
    for message in messages:
        if message.get("role") == "user" and not checkpoint(message) and not notice(message):
            count += 1
            current = count
        turns.append(current)
    return turns


def survey(
    messages: Sequence[Message],
    *,
    meter: Meter | None = None,
    turns: Sequence[int | None] | None = None,
    is_checkpoint: Predicate | None = None,
    is_own_notice: Predicate | None = None,
    pressure_tokens: int | None = None,
) -> Survey:
    """Map ``messages`` for the model (see the module docstring for how a host's concepts map).

    ``meter`` prices each message (default: the heuristic meter); ``turns`` gives each message's
    turn number (or ``None``), else turns are derived from user messages; ``is_checkpoint`` /
    ``is_own_notice`` are the planner's predicates; ``pressure_tokens`` is the full request size
    if the host knows it. A malformed conversation (duplicate ids, a tool result without an open
    call) raises :class:`~contextcare.context.planner.ConversationError`.
    """
    messages = check_conversation(messages)
    checkpoint = _predicate("is_checkpoint", is_checkpoint, is_checkpoint_message)
    notice = _predicate("is_own_notice", is_own_notice, is_notice_message)
    price = resolve_meter(meter)
    ids = message_ids(messages)
    cuts = balanced_cuts(messages, ids)
    head = system_head_length(messages)
    if turns is None:
        turn_of = _derive_turns(messages, checkpoint, notice)
    else:
        if isinstance(turns, (str, bytes)) or not isinstance(turns, Sequence):
            raise ArgumentTypeError(f"turns must be a sequence, got {type(turns).__name__}")
        if len(turns) != len(messages):
            raise ArgumentValueError(
                f"turns has {len(turns)} entries for {len(messages)} messages; give one per message"
            )
        for index, turn in enumerate(turns):
            if turn is not None and (isinstance(turn, bool) or not isinstance(turn, int)):
                raise ArgumentTypeError(
                    f"turns[{index}] must be an int or None, got {type(turn).__name__}"
                )
        turn_of = list(turns)
    names = _tool_names(messages)
    latest = latest_user_index(messages, checkpoint, notice)
    nodes = []
    for index, message in enumerate(messages):
        kind = _kind(message, index, head)
        tool_name = names.get(str(message.get("tool_call_id"))) if kind == "tool" else None
        nodes.append(Node(
            id=ids[index], index=index, turn=turn_of[index], kind=kind,
            tokens=price(message), preview=_preview(message, kind, tool_name),
            valid_start=index >= head and cuts[index],
            valid_end=index >= head and cuts[index + 1],
            checkpoint=checkpoint(message), tool_name=tool_name, latest_user=index == latest,
        ))
    if pressure_tokens is None:
        pressure = sum(node.tokens for node in nodes)
    elif isinstance(pressure_tokens, bool) or not isinstance(pressure_tokens, int):
        raise ArgumentTypeError(
            f"pressure_tokens must be an int or None, got {type(pressure_tokens).__name__}"
        )
    elif pressure_tokens < 0:
        raise ArgumentValueError(f"pressure_tokens must be >= 0, got {pressure_tokens}")
    else:
        pressure = pressure_tokens
    return Survey(tuple(nodes), _runs(nodes), pressure, tuple(messages), price, head,
                  tuple(unanswered_calls(messages, ids)))


def _runs(nodes: Sequence[Node]) -> tuple[TurnRun, ...]:
    groups: list[list[Node]] = []
    for node in nodes:
        if node.turn is None:
            continue
        if groups and groups[-1][0].turn == node.turn:
            groups[-1].append(node)
        else:
            groups.append([node])
    runs = []
    for group in groups:
        users = [n.preview for n in group if n.kind == "user" and not n.checkpoint]
        starts = [n.id for n in group if n.valid_start]
        ends = [n.id for n in group if n.valid_end]
        turn = group[0].turn
        assert turn is not None
        runs.append(TurnRun(
            turn=turn, start=group[0].id, end=group[-1].id, nodes=len(group),
            tokens=sum(n.tokens for n in group),
            first_user_preview=users[0] if users else None,
            first_start=starts[0] if starts else None, last_end=ends[-1] if ends else None,
        ))
    return tuple(runs)


# --------------------------------------------------------------------------- proactive reminder

_REMINDER: dict[str, dict[str, str]] = {
    "en": {
        "head": "Context checkpoint: this conversation has reached a point where tidying it "
                "may help.",
        "why": "- Why: ",
        "sep": "; ",
        "steps": "this turn has run {step} steps (threshold {limit})",
        "tokens": "the context holds ~{tokens} tokens (absolute threshold {limit})",
        "ratio": "the context fills {percent}% of the model window ({tokens}/{window} tokens, "
                 "threshold {limit}%)",
        "body": "- Long contexts and long turns pile up stale attempts and bulky tool output, "
                "which dilute attention and cost more per step.\n"
                "- If a phase is finished or a detour was abandoned, survey the context and clear "
                "that span into a checkpoint. If you are in the middle of work, finish this "
                "phase first; there is no need to stop now.",
    },
    "zh": {
        "head": "上下文检查点：当前对话到了适合整理的时候。",
        "why": "- 原因：",
        "sep": "；",
        "steps": "本轮已执行 {step} 步（阈值 {limit} 步）",
        "tokens": "上下文约 {tokens} tokens（绝对阈值 {limit}）",
        "ratio": "上下文占模型窗口的 {percent}%（{tokens}/{window} tokens，阈值 {limit}%）",
        "body": "- 长上下文和步数过多的回合会堆积过时的尝试和冗长的工具输出，分散注意力、增加每一步的成本。\n"
                "- 如果某个阶段已经完成或某条弯路已经放弃，先查看上下文地图，再把那一段清理成检查点。"
                "如果手头的工作还没做完，先把这一阶段做完再整理，不必现在停下。",
    },
}


class ReminderPolicy:
    """When to suggest a clear before the model asks (one policy per conversation).

    :meth:`check` returns the reminder text when any reason holds — the turn has run ``steps``
    steps or more; the context holds ``tokens`` tokens or more (if ``tokens`` > 0); the context
    fills ``ratio`` of the window or more (if the window is known) — and the cooldown allows it:
    within the same turn, a new reminder needs ``step_interval`` more steps than the last one
    **and** more tokens than at the last one (a context that did not grow gains nothing from a
    repeat). A new turn skips the cooldown. Without ``turn=``, a new turn is recognised by the
    step counter going down.
    """

    def __init__(self, ratio: float = 0.70, tokens: int = 0, steps: int = 100,
                 step_interval: int = 25, *, lang: Lang = "en") -> None:
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)):
            raise ArgumentTypeError(f"ratio must be a number, got {type(ratio).__name__}")
        if not 0 < ratio <= 1:
            raise ArgumentValueError(f"ratio must be in (0, 1], got {ratio}")
        if isinstance(tokens, bool) or not isinstance(tokens, int):
            raise ArgumentTypeError(f"tokens must be an int, got {type(tokens).__name__}")
        if tokens < 0:
            raise ArgumentValueError(f"tokens must be a non-negative integer, got {tokens}")
        for name, value in (("steps", steps), ("step_interval", step_interval)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ArgumentTypeError(f"{name} must be an int, got {type(value).__name__}")
            if value < 1:
                raise ArgumentValueError(f"{name} must be a positive integer, got {value}")
        lang = check_lang(lang)
        self.ratio = float(ratio)
        self.tokens = tokens
        self.steps = steps
        self.step_interval = step_interval
        self.lang: Lang = lang
        self._last: tuple[Hashable, int, int] | None = None  # (turn, step, tokens)

    def reset(self) -> None:
        """Forget the last reminder (a new conversation)."""
        self._last = None

    def reasons(self, tokens: int, window: int | None, steps_in_turn: int) -> list[str]:
        """The reasons that hold now, ignoring the cooldown."""
        text = _REMINDER[self.lang]
        found = []
        if steps_in_turn >= self.steps:
            found.append(text["steps"].format(step=steps_in_turn, limit=self.steps))
        if self.tokens > 0 and tokens >= self.tokens:
            found.append(text["tokens"].format(tokens=tokens, limit=self.tokens))
        # Exact rational arithmetic: a token count or window too large for a float still works.
        if window is not None and window > 0 and Fraction(tokens, window) >= Fraction(self.ratio):
            found.append(text["ratio"].format(
                percent=math.floor(Fraction(tokens * 100, window) + Fraction(1, 2)),
                tokens=tokens, window=window, limit=math.floor(self.ratio * 100 + 0.5)))
        return found

    def check(self, tokens: int, window: int | None, steps_in_turn: int, *,
              turn: Hashable | None = None) -> str | None:
        """Return the reminder to append (user role) now, or ``None``.

        ``tokens`` is the request pressure, ``window`` the model's context window (``None`` or 0
        if unknown; negative is an error), ``steps_in_turn`` the steps the current turn has run,
        ``turn`` an optional identity of the current turn. To append it, use
        :meth:`check_message`, which gives the message with contextcare's mark (so the planner
        and the survey do not take it for the user's words).
        """
        for name, value in (("tokens", tokens), ("steps_in_turn", steps_in_turn)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ArgumentTypeError(f"{name} must be an int, got {type(value).__name__}")
            if value < 0:
                raise ArgumentValueError(f"{name} must be >= 0, got {value}")
        if window is not None:
            if isinstance(window, bool) or not isinstance(window, int):
                raise ArgumentTypeError(f"window must be an int or None, got {type(window).__name__}")
            if window < 0:
                raise ArgumentValueError(
                    f"window must be >= 0 (0 or None: unknown), got {window}")
        found = self.reasons(tokens, window, steps_in_turn)
        if not found:
            return None
        if self._last is not None:
            last_turn, last_step, last_tokens = self._last
            same_turn = (last_turn == turn) if turn is not None or last_turn is not None \
                else steps_in_turn >= last_step
            if same_turn:
                if steps_in_turn - last_step < self.step_interval or tokens <= last_tokens:
                    return None
        self._last = (turn, steps_in_turn, tokens)
        text = _REMINDER[self.lang]
        return "\n".join([
            "<system-reminder>", text["head"], text["why"] + text["sep"].join(found),
            text["body"], "</system-reminder>",
        ])

    def check_message(self, tokens: int, window: int | None, steps_in_turn: int, *,
                      turn: Hashable | None = None) -> dict[str, Any] | None:
        """:meth:`check`, as the user-role message to append (``name: "contextcare"``, the mark
        of every message the library writes), or ``None``."""
        text = self.check(tokens, window, steps_in_turn, turn=turn)
        return None if text is None else own_message(text)
