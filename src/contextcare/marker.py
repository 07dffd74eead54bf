"""The one mark on every message contextcare writes into a conversation.

Notices from a :class:`~contextcare.guard.Guard`, status notices from a
:class:`~contextcare.context.grades.StatusTracker`, clear-mind reminders from a
:class:`~contextcare.context.mindmap.ReminderPolicy` and compaction checkpoints are all user-role messages
whose ``name`` field is :data:`OWN_NAME` (``"contextcare"``). The planner and the survey count such
messages as the library's own: never fresh material, never "the latest user message", never the
start of a turn.

Why ``name``: it is a field of the OpenAI chat format itself ("an optional name for the
participant"), accepted on ``system`` / ``developer`` / ``user`` / ``assistant`` messages by the
OpenAI API and the compatible servers, so a host can store the messages and send them back
unchanged and the mark survives every round trip. A ``metadata`` key would be cleaner to read
but the API rejects unknown message fields, so hosts strip it and the mark would be lost. Text
tags (``<context-care>``, ``<compacted-summary>``) are not used to recognise anything: a user may
quote them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import ArgumentTypeError

__all__ = ["OWN_NAME", "is_own_message", "own_message"]

#: The ``name`` of every message contextcare produces.
OWN_NAME = "contextcare"


def is_own_message(message: Mapping[str, Any]) -> bool:
    """Whether ``message`` carries contextcare's mark (its ``name`` is :data:`OWN_NAME`)."""
    return isinstance(message, Mapping) and message.get("name") == OWN_NAME


def own_message(content: str, *, metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A user-role message with contextcare's mark: ``{"role": "user", "content": ..., "name":
    "contextcare"}``, plus ``metadata`` (a copy) when given, for hosts that keep it."""
    if not isinstance(content, str):
        raise ArgumentTypeError(f"content must be a str, got {type(content).__name__}")
    message: dict[str, Any] = {"role": "user", "content": content, "name": OWN_NAME}
    if metadata is not None:
        if not isinstance(metadata, Mapping):
            raise ArgumentTypeError(f"metadata must be a mapping or None, got {type(metadata).__name__}")
        message["metadata"] = dict(metadata)
    return message
