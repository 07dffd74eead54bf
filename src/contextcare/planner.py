"""The rest planner: which span of a conversation to compact, without breaking tool-call pairs.

Works on OpenAI-format chat messages (``{"role": ..., "content": ..., "tool_calls": [...]}`` and
``{"role": "tool", "tool_call_id": ..., ...}``). A message's *id* is its ``id`` key when it has one
(a host that keeps stable ids across compactions should set them), else its index in the list.

How the original's host concepts map onto a plain message list:

* *system head* — the leading run of ``system`` / ``developer`` messages. It is never part of a
  range (the original protected one system node at position 0).
* *tool pairing* — an assistant message's ``tool_calls[*].id`` opens calls, a ``tool`` message's
  ``tool_call_id`` closes one. A cut is balanced when no call is open across it. Calls are matched
  by id, not counted (the original counted, so a result for the wrong call balanced the books). A
  tool result whose id has no open call is an error (:class:`ConversationError`) naming it. The
  legacy ``function`` role has no ids to match and is treated as an ordinary message.
* *checkpoints* and *our own notices* — the host's event sources do not exist here, so two
  predicates decide: ``is_checkpoint`` (default: a user message containing
  :data:`CHECKPOINT_TAG`, which :func:`checkpoint_message` writes) and ``is_own_notice``
  (default: a message whose ``name`` is :data:`NOTICE_NAME`). Neither counts as fresh content.

Outcomes that are not errors — nothing worth compacting — come back as a :class:`Refusal` value
whose ``reason`` can be shown to the model; malformed input raises.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Union

from .errors import ContextCareError, RuleTypeError, RuleValueError
from .meters import Message, Meter, message_text, resolve_meter

__all__ = [
    "MessageId", "ConversationError", "RestPlan", "Refusal", "RestRequest", "CareConfig",
    "plan_rest", "plan_clear", "validate_note", "parse_rest_request", "checkpoint_message",
    "is_checkpoint_message", "is_notice_message", "message_ids", "balanced_cuts",
    "system_head_length", "CHECKPOINT_TAG", "NOTICE_NAME",
]

#: A message's identity: its ``id`` key, or its index in the list.
MessageId = Union[int, str]
#: Predicate over one message.
Predicate = Callable[[Message], bool]

#: Marks a checkpoint: the summary text sits between this tag and its closing twin.
CHECKPOINT_TAG = "<compacted-summary>"
#: The ``name`` a host gives the notices contextcare writes, so the planner can skip them.
NOTICE_NAME = "contextcare"

_SYSTEM_ROLES = ("system", "developer")


class ConversationError(ContextCareError, ValueError):
    """The message list is malformed (duplicate id, tool result without an open call, …)."""


# --------------------------------------------------------------------------- conversation shape

def _check_messages(messages: object) -> Sequence[Message]:
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise RuleTypeError(
            f"messages must be a sequence of message mappings, got {type(messages).__name__}"
        )
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise RuleTypeError(
                f"messages[{index}] must be a mapping, got {type(message).__name__}"
            )
        if not isinstance(message.get("role"), str):
            raise ConversationError(f"messages[{index}] has no string 'role'")
    return messages


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
            raise RuleTypeError(
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
    """Default checkpoint test: a user message whose text contains :data:`CHECKPOINT_TAG`."""
    return message.get("role") == "user" and CHECKPOINT_TAG in message_text(message)


def is_notice_message(message: Message) -> bool:
    """Default own-notice test: the message's ``name`` is :data:`NOTICE_NAME`."""
    return message.get("name") == NOTICE_NAME


def _predicate(name: str, value: Predicate | None, default: Predicate) -> Predicate:
    if value is None:
        return default
    if not callable(value):
        raise RuleTypeError(
            f"{name} must be a callable message -> bool, got {type(value).__name__}"
        )
    return value


# --------------------------------------------------------------------------- configuration

def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RuleTypeError(f"{name} must be an int, got {type(value).__name__}")
    if value <= 0:
        raise RuleValueError(f"{name} must be a positive integer, got {value}")
    return value


def _open_ratio(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RuleTypeError(f"{name} must be a number, got {type(value).__name__}")
    if not 0 < value < 1:
        raise RuleValueError(f"{name} must be strictly between 0 and 1, got {value}")
    return float(value)


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
            raise RuleValueError(
                f"retain_ratio ({self.retain_ratio}) must be less than budget_ratio "
                f"({self.budget_ratio})"
            )
        exponent = self.fatigue_exponent
        if isinstance(exponent, bool) or not isinstance(exponent, (int, float)):
            raise RuleTypeError(f"fatigue_exponent must be a number, got {type(exponent).__name__}")
        if not (math.isfinite(exponent) and exponent > 0):
            raise RuleValueError(f"fatigue_exponent must be a finite number > 0, got {exponent}")
        for name in ("min_fresh_tokens", "min_note_chars", "max_note_chars"):
            _positive_int(name, getattr(self, name))
        if not self.min_note_chars < self.max_note_chars:
            raise RuleValueError(
                f"min_note_chars ({self.min_note_chars}) must be less than max_note_chars "
                f"({self.max_note_chars})"
            )

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> CareConfig:
        """Build from a mapping (a config file section); unknown keys are rejected by name."""
        if not isinstance(data, Mapping):
            raise RuleTypeError(f"config must be a mapping, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(str(key) for key in data if key not in known)
        if unknown:
            raise RuleValueError(
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
    ``not-enough-fresh``.
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


def plan_rest(
    messages: Sequence[Message],
    *,
    capacity: int,
    retain_ratio: float = 0.16,
    min_fresh_tokens: int = 1024,
    meter: Meter | None = None,
    is_checkpoint: Predicate | None = None,
    is_own_notice: Predicate | None = None,
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
    """
    messages = _check_messages(messages)
    capacity = _positive_int("capacity", capacity)
    retain_ratio = _open_ratio("retain_ratio", retain_ratio)
    min_fresh_tokens = _positive_int("min_fresh_tokens", min_fresh_tokens)
    checkpoint = _predicate("is_checkpoint", is_checkpoint, is_checkpoint_message)
    notice = _predicate("is_own_notice", is_own_notice, is_notice_message)
    ids = message_ids(messages)
    cuts = balanced_cuts(messages, ids)
    tokens = _prices(messages, meter)
    if not messages:
        return Refusal("there is no history to compact", "empty")

    retain = math.floor(capacity * retain_ratio)
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
    if keep == 0:
        return Refusal(
            "every older message belongs to a tool call whose results reach into the recent "
            "history kept verbatim; there is no place to cut", "no-balanced-cut")
    if head >= keep:
        return Refusal(
            "only the system prompt lies outside the recent history that is kept verbatim; "
            "there is nothing to compact", "system-only")
    fresh = _fresh(messages, tokens, head, keep, checkpoint, notice)
    if fresh < min_fresh_tokens:
        return Refusal(
            f"the older history holds only ~{fresh} tokens of new material (at least "
            f"{min_fresh_tokens} needed) outside the recent history kept verbatim; it is mostly "
            "earlier checkpoints and notices, so a summary would not free anything worthwhile",
            "not-enough-fresh")
    return RestPlan(
        start=ids[head], end=ids[keep - 1], fresh_tokens=fresh,
        retained_tokens=sum(tokens[keep:]), freed_tokens=sum(tokens[head:keep]),
        start_index=head, end_index=keep - 1,
    )


def plan_clear(
    messages: Sequence[Message],
    *,
    meter: Meter | None = None,
    is_checkpoint: Predicate | None = None,
    is_own_notice: Predicate | None = None,
) -> RestPlan | Refusal:
    """Deep rest: everything after the system head up to the last balanced cut.

    No tail is kept and no fresh minimum applies; only an in-flight tool batch (calls still
    waiting for results) at the end stays, because a cut through it would split a pair.
    """
    messages = _check_messages(messages)
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
        return Refusal(
            "every message after the system prompt belongs to a tool call that is still waiting "
            "for its results", "no-balanced-cut")
    return RestPlan(
        start=ids[head], end=ids[end - 1],
        fresh_tokens=_fresh(messages, tokens, head, end, checkpoint, notice),
        retained_tokens=sum(tokens[end:]), freed_tokens=sum(tokens[head:end]),
        start_index=head, end_index=end - 1,
    )


# --------------------------------------------------------------------------- notes and requests

def validate_note(note: object, *, min_chars: int = 1000, max_chars: int = 10000,
                  name: str = "note") -> str:
    """Return ``note`` stripped, if its length (code points) is within ``[min_chars, max_chars]``.

    A non-string raises :class:`~contextcare.errors.RuleTypeError`; a length out of range raises
    :class:`~contextcare.errors.RuleValueError` whose message says the length and the bounds.
    """
    min_chars = _positive_int("min_chars", min_chars)
    max_chars = _positive_int("max_chars", max_chars)
    if min_chars >= max_chars:
        raise RuleValueError(f"min_chars ({min_chars}) must be less than max_chars ({max_chars})")
    if not isinstance(note, str):
        raise RuleTypeError(f"{name} must be a string, got {type(note).__name__}")
    text = note.strip()
    if len(text) < min_chars:
        raise RuleValueError(
            f"{name} is too short: {len(text)} characters after trimming, at least {min_chars} "
            "needed. Write down the goal, what has been verified, what is still open and the key "
            "paths or identifiers."
        )
    if len(text) > max_chars:
        raise RuleValueError(
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
            raise RuleValueError(f"context_rest arguments are not valid JSON: {exc.msg}") from None
    if not isinstance(arguments, Mapping):
        raise RuleTypeError(
            f"context_rest arguments must be an object, got {type(arguments).__name__}"
        )
    extra = sorted(str(key) for key in arguments if key not in _REST_KEYS)
    if extra:
        raise RuleValueError(
            f"context_rest accepts only note, deep and recovery; unexpected: {', '.join(extra)}"
        )
    if "note" not in arguments:
        raise RuleValueError("context_rest needs a note: the handoff for your continuation")
    note = validate_note(arguments["note"], min_chars=min_chars, max_chars=max_chars)
    deep = arguments.get("deep", False)
    if not isinstance(deep, bool):
        raise RuleTypeError(f"deep must be true or false, got {type(deep).__name__}")
    recovery = arguments.get("recovery")
    if recovery is not None:
        recovery = validate_note(recovery, min_chars=min_chars, max_chars=max_chars,
                                 name="recovery")
    if deep and recovery is None:
        raise RuleValueError(
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

    The notes sit between :data:`CHECKPOINT_TAG` and its closing tag, so the planner and the
    survey recognise the message as a checkpoint (and a later compaction absorbs it).
    """
    if not isinstance(notes, str):
        raise RuleTypeError(f"notes must be a string, got {type(notes).__name__}")
    if not isinstance(preamble, str):
        raise RuleTypeError(f"preamble must be a string, got {type(preamble).__name__}")
    closing = CHECKPOINT_TAG.replace("<", "</", 1)
    return {"role": "user", "content": f"{preamble}\n\n{CHECKPOINT_TAG}\n{notes}\n{closing}"}
