"""The rest planner: which span of a conversation to compact, without breaking tool-call pairs.

Works on OpenAI-format chat messages (``{"role": ..., "content": ..., "tool_calls": [...]}`` and
``{"role": "tool", "tool_call_id": ..., ...}``). A message's *id* is its ``id`` key when it has one
(a host that keeps stable ids across compactions should set them), else its index in the list.

How a host's concepts map onto a plain message list:

* *system head* — the leading run of ``system`` / ``developer`` messages. It is never part of a
  range.
* *tool pairing* — an assistant message's ``tool_calls[*].id`` opens calls, a ``tool`` message's
  ``tool_call_id`` closes one. A cut is balanced when no call is open across it. Calls are matched
  by id, not counted. A
  tool result whose id has no open call is an error (:class:`ConversationError`) naming it. The
  legacy ``function`` role has no ids to match and is treated as an ordinary message.
* *checkpoints* and *our own notices* — the host's event sources do not exist here, so every
  message the library writes carries one mark, ``name: "contextcare"``
  (:mod:`contextcare.marker` says why that field). Two predicates decide: ``is_own_notice``
  (default: the message carries the mark) and ``is_checkpoint`` (default: a marked user message
  holding :data:`CHECKPOINT_TAG`, as :func:`checkpoint_message` writes it; a user message that
  merely quotes the tag is the user's). Neither counts as fresh content.
* *the latest user message* — the last ``user`` message that is neither a checkpoint nor a
  notice. :func:`plan_rest` keeps it out of the span by default (``keep_latest_user``).

Outcomes that are not errors — nothing worth compacting — come back as a :class:`Refusal` value
whose ``reason`` can be shown to the model; malformed input raises.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from fractions import Fraction
from typing import Any, Union

from .._checks import check_open_ratio as _open_ratio
from ..errors import ArgumentTypeError, ArgumentValueError, ContextCareError
from ..marker import OWN_NAME, is_own_message
from .meters import Message, Meter, message_text, resolve_meter

__all__ = [
    "MessageId", "ConversationError", "RestPlan", "Refusal", "RestRequest", "CareConfig",
    "plan_rest", "plan_clear", "validate_note", "parse_rest_request", "checkpoint_message",
    "is_checkpoint_message", "is_notice_message", "message_ids", "balanced_cuts",
    "system_head_length", "CHECKPOINT_TAG", "NOTICE_NAME", "ROLES", "check_conversation",
    "latest_user_index", "unanswered_calls",
]

#: A message's identity: its ``id`` key, or its index in the list.
MessageId = Union[int, str]
#: Predicate over one message.
Predicate = Callable[[Message], bool]

#: Marks a checkpoint: the summary text sits between this tag and its closing twin.
CHECKPOINT_TAG = "<compacted-summary>"
#: The ``name`` every message contextcare writes carries (:data:`contextcare.marker.OWN_NAME`).
NOTICE_NAME = OWN_NAME

_SYSTEM_ROLES = ("system", "developer")


class ConversationError(ContextCareError, ValueError):
    """The message list is malformed (duplicate id, tool result without an open call, …)."""


# --------------------------------------------------------------------------- conversation shape

#: The roles of the OpenAI chat format, exactly as the API spells them.
ROLES = ("system", "developer", "user", "assistant", "tool", "function")


def _check_content(content: object, where: str) -> None:
    if content is None or isinstance(content, str):
        return
    if not isinstance(content, list):
        raise ArgumentTypeError(
            f"{where} must be a string, None or a list of content parts, got "
            f"{type(content).__name__}"
        )
    for number, part in enumerate(content):
        if not isinstance(part, Mapping):
            raise ArgumentTypeError(
                f"{where}[{number}] must be a content part object (e.g. "
                f"{{\"type\": \"text\", \"text\": ...}}), got {type(part).__name__}"
            )
        kind = part.get("type", "text")
        if not isinstance(kind, str) or not kind:
            raise ArgumentTypeError(
                f"{where}[{number}].type must be a non-empty string, got {kind!r}")
        if kind == "text" and not isinstance(part.get("text"), str):
            raise ArgumentTypeError(
                f"{where}[{number}].text must be a string, got {type(part.get('text')).__name__}"
            )


def check_conversation(messages: object, name: str = "messages") -> Sequence[Message]:
    """Check that ``messages`` is an OpenAI-format conversation; return it unchanged.

    The one validator of :func:`plan_rest`, :func:`plan_clear` and
    :func:`contextcare.context.mindmap.survey`: a sequence (not a string) of mappings, each with a
    ``role`` from :data:`ROLES` (case-sensitive: ``"System"`` is not a system prompt) and a
    ``content`` that is a string, ``None`` (or absent) or a list of content parts (mappings with
    a string ``type``; a ``text`` part has a string ``text``). Other keys are the host's business.
    Errors are :class:`~contextcare.errors.ArgumentTypeError` for a wrong type and
    :class:`ConversationError` (a ``ValueError``) for a wrong value, each naming
    ``messages[i].role`` / ``messages[i].content`` or the argument.
    """
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise ArgumentTypeError(
            f"{name} must be a sequence of message mappings, got {type(messages).__name__}"
        )
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise ArgumentTypeError(
                f"{name}[{index}] must be a mapping, got {type(message).__name__}"
            )
        role = message.get("role")
        if role is None:
            raise ConversationError(f"{name}[{index}].role is missing; every message needs a role")
        if not isinstance(role, str):
            raise ArgumentTypeError(f"{name}[{index}].role must be a string, got {type(role).__name__}")
        if role not in ROLES:
            hint = " (roles are lower-case)" if role.lower() in ROLES else ""
            raise ConversationError(
                f"{name}[{index}].role must be one of {', '.join(map(repr, ROLES))}, got "
                f"{role!r}{hint}"
            )
        _check_content(message.get("content"), f"{name}[{index}].content")
    return messages


_check_messages = check_conversation


def message_ids(messages: Sequence[Message]) -> list[MessageId]:
    """Each message's id (its ``id`` key, else its index).

    Duplicates raise :class:`ConversationError`.
    """
    ids: list[MessageId] = []
    seen: dict[MessageId, int] = {}
    for index, message in enumerate(messages):
        raw = message.get("id")
        ident: MessageId
        if raw is None:
            ident = index
        elif isinstance(raw, bool) or not isinstance(raw, (int, str)):
            raise ArgumentTypeError(
                f"messages[{index}]['id'] must be a str or an int, got {type(raw).__name__}"
            )
        else:
            ident = raw
        if ident in seen:
            raise ConversationError(
                f"messages[{index}] and messages[{seen[ident]}] share the id {ident!r}; "
                "ids must be unique (a message without an 'id' key uses its index)"
            )
        seen[ident] = index
        ids.append(ident)
    return ids


def system_head_length(messages: Sequence[Message]) -> int:
    """How many leading ``system`` / ``developer`` messages the conversation has."""
    count = 0
    while count < len(messages) and messages[count].get("role") in _SYSTEM_ROLES:
        count += 1
    return count


def _call_ids(message: Message, ident: MessageId) -> list[str]:
    calls = message.get("tool_calls")
    if message.get("role") != "assistant" or calls is None:
        return []
    if not isinstance(calls, list):
        raise ConversationError(f"message {ident!r}: 'tool_calls' must be a list")
    out = []
    for call in calls:
        call_id = call.get("id") if isinstance(call, Mapping) else None
        if not isinstance(call_id, str) or not call_id:
            raise ConversationError(f"message {ident!r}: every tool call needs a string 'id'")
        out.append(call_id)
    return out


def balanced_cuts(messages: Sequence[Message], ids: Sequence[MessageId]) -> list[bool]:
    """``cuts[c]`` is true when no tool call is open across the cut before position ``c``.

    ``len(cuts) == len(messages) + 1``; ``cuts[0]`` is always true. Calls are matched to results
    by id. A result whose ``tool_call_id`` has no open call raises :class:`ConversationError`
    saying which message and which id.
    """
    pending: Counter[str] = Counter()
    answered: set[str] = set()
    cuts = [True]
    for message, ident in zip(messages, ids):
        for opened in _call_ids(message, ident):
            pending[opened] += 1
        if message.get("role") == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str):
                raise ConversationError(f"tool message {ident!r} has no string 'tool_call_id'")
            if pending[call_id] <= 0:
                why = ("was already answered" if call_id in answered
                       else "has no earlier assistant tool call")
                raise ConversationError(
                    f"tool message {ident!r} answers tool_call_id {call_id!r}, which {why}"
                )
            pending[call_id] -= 1
            answered.add(call_id)
            if pending[call_id] == 0:
                del pending[call_id]
        cuts.append(not pending)
    return cuts


def is_checkpoint_message(message: Message) -> bool:
    """Default checkpoint test: a user message with contextcare's mark (``name`` is
    :data:`NOTICE_NAME`) whose text holds :data:`CHECKPOINT_TAG`.

    The tag alone is not enough: a user may paste or quote it, and that message is theirs.
    """
    return (message.get("role") == "user" and is_own_message(message)
            and CHECKPOINT_TAG in message_text(message))


def is_notice_message(message: Message) -> bool:
    """Default own-notice test: the message carries contextcare's mark (``name`` is
    :data:`NOTICE_NAME`). Guard notices, status notices, reminders and checkpoints all do."""
    return is_own_message(message)


def latest_user_index(messages: Sequence[Message], is_checkpoint: Predicate | None = None,
                      is_own_notice: Predicate | None = None) -> int | None:
    """Position of the latest real user message: the last ``user`` message that is neither a
    checkpoint nor one of our notices (``None`` if there is none)."""
    checkpoint = _predicate("is_checkpoint", is_checkpoint, is_checkpoint_message)
    notice = _predicate("is_own_notice", is_own_notice, is_notice_message)
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") == "user" and not checkpoint(message) and not notice(message):
            return index
    return None


def unanswered_calls(messages: Sequence[Message],
                     ids: Sequence[MessageId]) -> list[tuple[str, int]]:
    """Tool calls that were never answered although the conversation went on past them.

    Each is ``(call id, position of its assistant message)``: the call has no ``tool`` result
    anywhere in the list, and some later message is not a tool result. (The OpenAI API rejects
    such a history: an assistant's tool calls must be followed by their results.) A batch still
    waiting for its results at the very end is in flight, not unanswered.
    """
    opened: dict[str, list[int]] = {}
    for index, (message, ident) in enumerate(zip(messages, ids)):
        for call_id in _call_ids(message, ident):
            opened.setdefault(call_id, []).append(index)
        if message.get("role") == "tool":
            waiting = opened.get(str(message.get("tool_call_id")))
            if waiting:
                waiting.pop(0)
    last_other = max((i for i, m in enumerate(messages) if m.get("role") != "tool"), default=-1)
    return sorted(((call_id, index) for call_id, waiting in opened.items() for index in waiting
                   if index < last_other), key=lambda found: (found[1], found[0]))


def _unanswered_reason(messages: Sequence[Message], ids: Sequence[MessageId],
                       before: int) -> str | None:
    """The repair advice when unanswered calls opened before position ``before`` block the cut."""
    blocking = [(call, at) for call, at in unanswered_calls(messages, ids) if at < before]
    if not blocking:
        return None
    call, at = blocking[0]
    more = f" (and {len(blocking) - 1} more unanswered call(s))" if len(blocking) > 1 else ""
    return (
        f"tool call {call!r} in message {ids[at]!r} was never answered{more}: no tool message "
        f"with tool_call_id {call!r} follows it, yet the conversation goes on, so no cut after "
        "it keeps the call with its result (the OpenAI API rejects such a history too). Repair "
        f"the history: add a tool message answering {call!r} (for example 'no result: the call "
        f"was interrupted') among the results that follow message {ids[at]!r}, or remove the "
        "call from that message"
    )


def _predicate(name: str, value: Predicate | None, default: Predicate) -> Predicate:
    if value is None:
        return default
    if not callable(value):
        raise ArgumentTypeError(
            f"{name} must be a callable message -> bool, got {type(value).__name__}"
        )
    return value


# --------------------------------------------------------------------------- configuration

def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentTypeError(f"{name} must be an int, got {type(value).__name__}")
    if value <= 0:
        raise ArgumentValueError(f"{name} must be a positive integer, got {value}")
    return value


@dataclass(frozen=True, slots=True)
class CareConfig:
    """The context-care settings, validated when constructed.

    Ratios are strictly between 0 and 1, ``retain_ratio < budget_ratio`` (the retained tail must
    fit under the budget, or a rest could never bring fatigue down), ``fatigue_exponent`` is a
    finite number > 0, counts are positive integers and ``min_note_chars < max_note_chars``.
    """

    budget_ratio: float = 0.8
    wakefulness_ratio: float = 1 / 3
    fatigue_exponent: float = 1.5
    retain_ratio: float = 0.16
    min_fresh_tokens: int = 1024
    min_note_chars: int = 1000
    max_note_chars: int = 10000

    def __post_init__(self) -> None:
        for name in ("budget_ratio", "wakefulness_ratio", "retain_ratio"):
            _open_ratio(name, getattr(self, name))
        if not self.retain_ratio < self.budget_ratio:
            raise ArgumentValueError(
                f"retain_ratio ({self.retain_ratio}) must be less than budget_ratio "
                f"({self.budget_ratio})"
            )
        exponent = self.fatigue_exponent
        if isinstance(exponent, bool) or not isinstance(exponent, (int, float)):
            raise ArgumentTypeError(f"fatigue_exponent must be a number, got {type(exponent).__name__}")
        if not (math.isfinite(exponent) and exponent > 0):
            raise ArgumentValueError(f"fatigue_exponent must be a finite number > 0, got {exponent}")
        for name in ("min_fresh_tokens", "min_note_chars", "max_note_chars"):
            _positive_int(name, getattr(self, name))
        if not self.min_note_chars < self.max_note_chars:
            raise ArgumentValueError(
                f"min_note_chars ({self.min_note_chars}) must be less than max_note_chars "
                f"({self.max_note_chars})"
            )

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> CareConfig:
        """Build from a mapping (a config file section); unknown keys are rejected by name."""
        if not isinstance(data, Mapping):
            raise ArgumentTypeError(f"config must be a mapping, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(str(key) for key in data if key not in known)
        if unknown:
            raise ArgumentValueError(
                f"unknown config key(s): {', '.join(unknown)}; "
                f"known keys: {', '.join(sorted(known))}"
            )
        return cls(**data)


# --------------------------------------------------------------------------- results

@dataclass(frozen=True, slots=True)
class RestPlan:
    """A span to compact: messages ``start`` … ``end`` (ids, inclusive).

    ``fresh_tokens`` is the range's content that is neither system text, a checkpoint nor one of
    our notices; ``retained_tokens`` is the tail kept verbatim after ``end``; ``freed_tokens`` is
    the whole range (what leaves the context before its summary is added). ``start_index`` and
    ``end_index`` are the positions in the list the plan was made from.
    """

    start: MessageId
    end: MessageId
    fresh_tokens: int
    retained_tokens: int
    freed_tokens: int
    start_index: int
    end_index: int


@dataclass(frozen=True, slots=True)
class Refusal:
    """No compaction: ``reason`` says why in words a model can act on; ``code`` is for programs.

    Codes: ``empty``, ``system-only``, ``tail-covers-all``, ``no-balanced-cut``,
    ``not-enough-fresh``, ``latest-user``, ``unanswered-call``.
    """

    reason: str
    code: str = ""


def _prices(messages: Sequence[Message], meter: Meter | None) -> list[int]:
    price = resolve_meter(meter)
    return [price(message) for message in messages]


def _fresh(messages: Sequence[Message], tokens: Sequence[int], lo: int, hi: int,
           is_checkpoint: Predicate, is_own_notice: Predicate) -> int:
    return sum(
        tokens[i] for i in range(lo, hi)
        if messages[i].get("role") not in _SYSTEM_ROLES
        and not is_checkpoint(messages[i]) and not is_own_notice(messages[i])
    )


def _retain_target(capacity: int, retain_ratio: float) -> int:
    """``floor(capacity · retain_ratio)``, in floating point, exactly when the
    product does not fit a float (a capacity of 10**400 is absurd, not an error)."""
    try:
        return math.floor(capacity * retain_ratio)
    except OverflowError:
        return math.floor(Fraction(capacity) * Fraction(retain_ratio))


def _plan(ids: Sequence[MessageId], tokens: Sequence[int], lo: int, hi: int, fresh: int) -> RestPlan:
    """The plan for positions ``lo`` … ``hi - 1``."""
    return RestPlan(
        start=ids[lo], end=ids[hi - 1], fresh_tokens=fresh, retained_tokens=sum(tokens[hi:]),
        freed_tokens=sum(tokens[lo:hi]), start_index=lo, end_index=hi - 1,
    )


def plan_rest(
    messages: Sequence[Message],
    *,
    capacity: int,
    retain_ratio: float = 0.16,
    min_fresh_tokens: int = 1024,
    meter: Meter | None = None,
    is_checkpoint: Predicate | None = None,
    is_own_notice: Predicate | None = None,
    keep_latest_user: bool = True,
) -> RestPlan | Refusal:
    """Choose the span to summarize, keeping a recent tail verbatim.

    1. The tail: walk back from the last message adding tokens until they reach
       ``floor(capacity · retain_ratio)``; that message and everything after it are kept (the
       last message always is).
    2. Tool pairs: move the cut back to the last position before it where no tool call is open,
       so a call and its results land on the same side. The kept tail may grow past the target.
    3. The system head is never in the range.
    4. The range must hold at least ``min_fresh_tokens`` of fresh content (not system text, not
       earlier checkpoints, not our own notices): summarizing summaries gains nothing.
    5. ``keep_latest_user`` (default): the latest real user message (not a checkpoint, not a
       notice) is never in the range — summarizing it away loses the task the agent is working
       on. When the range of steps 1–4 leaves it alone, that range is the plan, unchanged. When
       it would contain it, the plan is the part before it (up to the last balanced cut at or
       before it) or the part between it and the kept tail (from the first balanced cut after
       it), whichever frees more of those holding the fresh minimum (the earlier one on a tie);
       if neither does, a :class:`Refusal` with code ``latest-user`` says so.
       ``keep_latest_user=False`` leaves the latest user message to the span like any other.

    The conversation is checked with :func:`check_conversation`. A tool call that was never
    answered blocks every cut after it; a refusal it causes names the call and how to repair the
    history (code ``unanswered-call``).
    """
    messages = check_conversation(messages)
    capacity = _positive_int("capacity", capacity)
    retain_ratio = _open_ratio("retain_ratio", retain_ratio)
    min_fresh_tokens = _positive_int("min_fresh_tokens", min_fresh_tokens)
    checkpoint = _predicate("is_checkpoint", is_checkpoint, is_checkpoint_message)
    notice = _predicate("is_own_notice", is_own_notice, is_notice_message)
    if not isinstance(keep_latest_user, bool):
        raise ArgumentTypeError(
            f"keep_latest_user must be a bool, got {type(keep_latest_user).__name__}")
    ids = message_ids(messages)
    cuts = balanced_cuts(messages, ids)
    tokens = _prices(messages, meter)
    if not messages:
        return Refusal("there is no history to compact", "empty")

    retain = _retain_target(capacity, retain_ratio)
    keep, tail = len(messages) - 1, 0
    while keep >= 0:
        tail += tokens[keep]
        if tail >= retain:
            break
        keep -= 1
    keep = target = max(keep, 0)
    while keep > 0 and not cuts[keep]:
        keep -= 1
    head = system_head_length(messages)
    if target == 0:
        return Refusal(
            "the recent history that must be kept verbatim already covers the whole "
            "conversation; nothing older is left to compact", "tail-covers-all")
    unanswered = _unanswered_reason(messages, ids, target) if keep < target else None
    if keep == 0:
        if unanswered is not None:
            return Refusal(unanswered, "unanswered-call")
        return Refusal(
            "every older message belongs to a tool call whose results reach into the recent "
            "history kept verbatim; there is no place to cut", "no-balanced-cut")
    if head >= keep:
        if unanswered is not None:
            return Refusal(unanswered, "unanswered-call")
        return Refusal(
            "only the system prompt lies outside the recent history that is kept verbatim; "
            "there is nothing to compact", "system-only")
    fresh = _fresh(messages, tokens, head, keep, checkpoint, notice)
    if fresh < min_fresh_tokens:
        if unanswered is not None:
            return Refusal(unanswered, "unanswered-call")
        return Refusal(
            f"the older history holds only ~{fresh} tokens of new material (at least "
            f"{min_fresh_tokens} needed) outside the recent history kept verbatim; it is mostly "
            "earlier checkpoints and notices, so a summary would not free anything worthwhile",
            "not-enough-fresh")
    latest = latest_user_index(messages, checkpoint, notice) if keep_latest_user else None
    if latest is None or not head <= latest < keep:
        return _plan(ids, tokens, head, keep, fresh)

    # The latest user message lies in the range: a span on one side of it, or a refusal.
    options: list[tuple[int, int, int]] = []  # (lo, hi, fresh)
    before = max((c for c in range(head + 1, latest + 1) if cuts[c]), default=None)
    after = min((c for c in range(latest + 1, keep) if cuts[c]), default=None)
    found: list[int | None] = []
    for lo, hi in ((head, before), (after, keep)):
        if lo is None or hi is None:
            found.append(None)
            continue
        side = _fresh(messages, tokens, lo, hi, checkpoint, notice)
        found.append(side)
        if side >= min_fresh_tokens:
            options.append((lo, hi, side))
    if options:
        lo, hi, side = max(options, key=lambda o: (sum(tokens[o[0]:o[1]]), -o[0]))
        return _plan(ids, tokens, lo, hi, side)
    sides = " and ".join(
        f"~{value} tokens {where}" for value, where in zip(found, ("before it", "after it"))
        if value is not None) or "no place to cut on either side"
    return Refusal(
        f"the older history outside the recent tail holds enough new material only together "
        f"with the latest user message (id {ids[latest]!r}), which is kept verbatim so the task "
        f"in hand is not summarized away; on its own, each side falls short of "
        f"{min_fresh_tokens} tokens of new material ({sides}). Pass keep_latest_user=False to "
        "compact it too", "latest-user")


def plan_clear(
    messages: Sequence[Message],
    *,
    meter: Meter | None = None,
    is_checkpoint: Predicate | None = None,
    is_own_notice: Predicate | None = None,
) -> RestPlan | Refusal:
    """Deep rest: everything after the system head up to the last balanced cut.

    No tail is kept and no fresh minimum applies (the latest user message is cleared too: a deep
    rest hands over through its note and recovery text); only an in-flight tool batch (calls
    still waiting for results) at the end stays, because a cut through it would split a pair. A
    refusal caused by a call that was never answered names it (code ``unanswered-call``).
    """
    messages = check_conversation(messages)
    checkpoint = _predicate("is_checkpoint", is_checkpoint, is_checkpoint_message)
    notice = _predicate("is_own_notice", is_own_notice, is_notice_message)
    ids = message_ids(messages)
    cuts = balanced_cuts(messages, ids)
    tokens = _prices(messages, meter)
    if not messages:
        return Refusal("there is no history to clear", "empty")
    head = system_head_length(messages)
    if head == len(messages):
        return Refusal("there is nothing to clear besides the system prompt", "system-only")
    end = max(c for c in range(len(messages) + 1) if cuts[c])
    if end <= head:
        unanswered = _unanswered_reason(messages, ids, len(messages))
        if unanswered is not None:
            return Refusal(unanswered, "unanswered-call")
        return Refusal(
            "every message after the system prompt belongs to a tool call that is still waiting "
            "for its results", "no-balanced-cut")
    return _plan(ids, tokens, head, end, _fresh(messages, tokens, head, end, checkpoint, notice))


# --------------------------------------------------------------------------- notes and requests

def validate_note(note: object, *, min_chars: int = 1000, max_chars: int = 10000,
                  name: str = "note") -> str:
    """Return ``note`` stripped, if its length (code points) is within ``[min_chars, max_chars]``.

    A non-string raises :class:`~contextcare.errors.ArgumentTypeError`; a length out of range raises
    :class:`~contextcare.errors.ArgumentValueError` whose message says the length and the bounds.
    """
    min_chars = _positive_int("min_chars", min_chars)
    max_chars = _positive_int("max_chars", max_chars)
    if min_chars >= max_chars:
        raise ArgumentValueError(f"min_chars ({min_chars}) must be less than max_chars ({max_chars})")
    if not isinstance(note, str):
        raise ArgumentTypeError(f"{name} must be a string, got {type(note).__name__}")
    text = note.strip()
    if len(text) < min_chars:
        raise ArgumentValueError(
            f"{name} is too short: {len(text)} characters after trimming, at least {min_chars} "
            "needed. Write down the goal, what has been verified, what is still open and the key "
            "paths or identifiers."
        )
    if len(text) > max_chars:
        raise ArgumentValueError(
            f"{name} is too long: {len(text)} characters after trimming, at most {max_chars} "
            "allowed. Keep what the continuation needs and drop the rest."
        )
    return text


@dataclass(frozen=True, slots=True)
class RestRequest:
    """A validated ``context_rest`` tool call: the handoff ``note``, ``deep`` and ``recovery``."""

    note: str
    deep: bool = False
    recovery: str | None = None


_REST_KEYS = ("note", "deep", "recovery")


def parse_rest_request(arguments: Mapping[str, Any] | str, *, min_chars: int = 1000,
                       max_chars: int = 10000) -> RestRequest:
    """Validate the arguments of a ``context_rest`` tool call (a mapping or its JSON text).

    Accepts only ``note`` (required), ``deep`` (bool) and ``recovery``; ``recovery`` follows the
    note's length bounds, and ``deep: true`` requires it (after a deep rest, that text is the
    only way back to the cleared details). Errors are ``ValueError`` / ``TypeError`` subclasses
    whose messages can be returned to the model as the tool's error.
    """
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise ArgumentValueError(f"context_rest arguments are not valid JSON: {exc.msg}") from None
    if not isinstance(arguments, Mapping):
        raise ArgumentTypeError(
            f"context_rest arguments must be an object, got {type(arguments).__name__}"
        )
    extra = sorted(str(key) for key in arguments if key not in _REST_KEYS)
    if extra:
        raise ArgumentValueError(
            f"context_rest accepts only note, deep and recovery; unexpected: {', '.join(extra)}"
        )
    if "note" not in arguments:
        raise ArgumentValueError("context_rest needs a note: the handoff for your continuation")
    note = validate_note(arguments["note"], min_chars=min_chars, max_chars=max_chars)
    deep = arguments.get("deep", False)
    if not isinstance(deep, bool):
        raise ArgumentTypeError(f"deep must be true or false, got {type(deep).__name__}")
    recovery = arguments.get("recovery")
    if recovery is not None:
        recovery = validate_note(recovery, min_chars=min_chars, max_chars=max_chars,
                                 name="recovery")
    if deep and recovery is None:
        raise ArgumentValueError(
            "a deep rest needs a recovery text: after clearing, it is the only way back to the "
            "cleared details"
        )
    return RestRequest(note, deep, recovery)


_PREAMBLE = (
    "The messages before this point were condensed into the checkpoint below. Take its notes as "
    "established background, build on them without repeating them, and continue from the "
    "messages that follow."
)


def checkpoint_message(notes: str, *, preamble: str = _PREAMBLE) -> dict[str, Any]:
    """The user-role message that stands in for a compacted span.

    The notes sit between :data:`CHECKPOINT_TAG` and its closing tag, and the message carries
    contextcare's mark (``name: "contextcare"``), so the planner and the survey recognise it as a
    checkpoint (and a later compaction absorbs it).
    """
    if not isinstance(notes, str):
        raise ArgumentTypeError(f"notes must be a string, got {type(notes).__name__}")
    if not isinstance(preamble, str):
        raise ArgumentTypeError(f"preamble must be a string, got {type(preamble).__name__}")
    closing = CHECKPOINT_TAG.replace("<", "</", 1)
    return {"role": "user", "content": f"{preamble}\n\n{CHECKPOINT_TAG}\n{notes}\n{closing}",
            "name": OWN_NAME}
