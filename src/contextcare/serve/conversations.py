"""Notices waiting for the next request of a conversation, and how a request finds its conversation.

**Keys.** A request that carries the conversation header (``X-Conversation-Id`` by default)
belongs to the conversation of that name: exact, and the recommended way. Without it the key is a
hash of the conversation *as the client will send it back*: the request's messages plus the
assistant reply the gateway just delivered (choice 0: its text, stripped, and its tool calls).
The next request of that conversation starts with those same messages, so its prefix up to and
including its last assistant message hashes to the same key. Each message counts by role, text
(string content, or the text parts of a list) and tool calls (name and arguments); reasoning and
other fields are left out, since clients differ in what they send back.

Limits of the hash: a client that edits the history (rewrites the assistant text, drops it,
compacts the conversation) or sends only part of it does not match, and the notice waits until it
expires; two conversations with the same history up to that reply (the same prompt run twice)
share the key, and the first to send its next request takes the notice. Use the header where that
matters.

**Bounds.** At most ``max_entries`` conversations hold notices (the least recently stored is
dropped first) and a notice waits at most ``ttl`` seconds.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["PendingNotices", "history_key", "reply_key"]

Message = dict[str, Any]


def _text(content: object) -> str:
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        return "".join(p for p in parts if isinstance(p, str)).strip()
    return ""


def _calls(message: dict[str, Any]) -> list[list[str]]:
    out: list[list[str]] = []
    for call in message.get("tool_calls") or ():
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict):
            out.append([str(fn.get("name") or ""), str(fn.get("arguments") or "")])
    return out


def _digest(messages: Sequence[object]) -> str:
    h = hashlib.sha256()
    for m in messages:
        if isinstance(m, dict):
            item = [str(m.get("role")), _text(m.get("content")), _calls(m)]
        else:
            item = [repr(type(m).__name__)]
        h.update(json.dumps(item, ensure_ascii=False).encode())
        h.update(b"\x00")
    return "m:" + h.hexdigest()


def history_key(messages: Sequence[object]) -> str | None:
    """The key a request's history looks up: its messages up to and including the last assistant
    message (``None`` when there is none, i.e. the first request of a conversation)."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if isinstance(m, dict) and m.get("role") == "assistant":
            return _digest(messages[: i + 1])
    return None


def reply_key(messages: Sequence[object], text: str,
              tool_calls: Sequence[dict[str, Any]] = ()) -> str:
    """The key under which notices of a reply wait: the request's messages plus that reply."""
    reply: Message = {"role": "assistant", "content": text}
    if tool_calls:
        reply["tool_calls"] = list(tool_calls)
    return _digest([*messages, reply])


class PendingNotices:
    """Notices per conversation key: an LRU with a size and an age limit (not thread-safe: the
    gateway uses it from its event loop only)."""

    def __init__(self, max_entries: int, ttl: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._max = max_entries
        self._ttl = ttl
        self._clock = clock
        self._items: OrderedDict[str, tuple[float, list[Message]]] = OrderedDict()
        #: Notices dropped unread (expired or evicted).
        self.dropped = 0

    def __len__(self) -> int:
        return len(self._items)

    def put(self, key: str, notices: list[Message]) -> None:
        """Queue ``notices`` for the next request of conversation ``key`` (after any queued)."""
        if not notices or self._max == 0:
            self.dropped += len(notices)
            return
        self._expire()
        old = self._items.pop(key, None)
        queued = (old[1] if old is not None else []) + notices
        self._items[key] = (self._clock() + self._ttl, queued)
        while len(self._items) > self._max:
            _, (_, lost) = self._items.popitem(last=False)
            self.dropped += len(lost)

    def take(self, key: str) -> list[Message]:
        """The notices waiting for ``key`` (removed), oldest first; ``[]`` if none."""
        self._expire()
        item = self._items.pop(key, None)
        return item[1] if item is not None else []

    def _expire(self) -> None:
        now = self._clock()
        items = self._items
        while items:
            key, (deadline, notices) = next(iter(items.items()))
            if deadline > now:
                break
            del items[key]
            self.dropped += len(notices)
