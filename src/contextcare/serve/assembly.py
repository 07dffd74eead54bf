"""What the gateway needs to know about a streamed reply, and the completion it re-assembles.

For a streaming client only the cheap parts are kept (the chunk's id and model, which choices
finished, tool calls); for a non-streaming client the whole reply, so it can be returned as one
ordinary ``chat.completion`` / ``text_completion`` object.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Assembly"]


class Assembly:
    """Reads the parsed chunks of one request (over all its attempts)."""

    def __init__(self, text_completion: bool, full: bool) -> None:
        self.text_completion = text_completion
        self.full = full
        self.meta: dict[str, Any] | None = None
        self.seen: dict[int, None] = {}          # choice indexes, in order of appearance
        self.finished: dict[int, str] = {}
        self.content: dict[int, list[str]] = {}
        self.reasoning: dict[int, list[str]] = {}
        self.reasoning_field = "reasoning_content"
        self.calls: dict[int, dict[int, dict[str, Any]]] = {}
        self.usage: Any = None
        #: Chunks with choices received (about one per token on token-streaming servers).
        self.chunks = 0

    def add(self, obj: dict[str, Any]) -> None:
        if self.meta is None:
            self.meta = {k: obj.get(k) for k in ("id", "object", "created", "model",
                                                  "system_fingerprint")}
        usage = obj.get("usage")
        if usage:
            self.usage = usage
        choices = obj.get("choices")
        if not choices or not isinstance(choices, list):
            return
        self.chunks += 1
        for c in choices:
            if not isinstance(c, dict):
                continue
            i = c.get("index") or 0
            if i not in self.seen:
                if not isinstance(i, int):
                    continue
                self.seen[i] = None
            reason = c.get("finish_reason")
            if reason is not None:
                self.finished[i] = reason
            if self.text_completion:
                if self.full:
                    text = c.get("text")
                    if isinstance(text, str) and text:
                        self.content.setdefault(i, []).append(text)
                continue
            delta = c.get("delta")
            if not delta or not isinstance(delta, dict):
                continue
            if "tool_calls" in delta:
                self._add_calls(i, delta["tool_calls"])
            if self.full:
                self._add_text(i, delta)

    def _add_text(self, i: int, delta: dict[str, Any]) -> None:
        text = delta.get("content")
        if isinstance(text, str) and text:
            self.content.setdefault(i, []).append(text)
        for name in ("reasoning_content", "reasoning"):
            text = delta.get(name)
            if isinstance(text, str) and text:
                self.reasoning_field = name
                self.reasoning.setdefault(i, []).append(text)
                break

    def _add_calls(self, choice: int, calls: object) -> None:
        if not isinstance(calls, list):
            return
        slots = self.calls.setdefault(choice, {})
        for call in calls:
            if not isinstance(call, dict):
                continue
            k = call.get("index")
            k = k if isinstance(k, int) else len(slots)
            slot = slots.setdefault(k, {"id": None, "type": "function",
                                        "function": {"name": "", "arguments": ""}})
            if call.get("id"):
                slot["id"] = call["id"]
            if call.get("type"):
                slot["type"] = call["type"]
            fn = call.get("function")
            if isinstance(fn, dict):
                for key in ("name", "arguments"):
                    part = fn.get(key)
                    if isinstance(part, str):
                        slot["function"][key] += part

    def tool_calls(self, choice: int = 0) -> list[dict[str, Any]]:
        slots = self.calls.get(choice, {})
        return [slots[k] for k in sorted(slots)]

    @property
    def all_finished(self) -> bool:
        """Every choice seen has its ``finish_reason`` (an abort now comes after the end)."""
        return bool(self.seen) and all(i in self.finished for i in self.seen)

    def unfinished(self) -> list[int]:
        out = [i for i in self.seen if i not in self.finished]
        return out or ([] if self.seen else [0])

    def field(self, name: str, default: Any = None) -> Any:
        value = self.meta.get(name) if self.meta else None
        return default if value is None else value

    def completion(self, abort_reason: str | None) -> dict[str, Any]:
        """The re-assembled completion; unfinished choices get ``abort_reason``."""
        choices: list[dict[str, Any]] = []
        for i in sorted(self.seen) or [0]:
            reason = self.finished.get(i, abort_reason)
            text = "".join(self.content.get(i, ()))
            if self.text_completion:
                choices.append({"index": i, "text": text, "logprobs": None,
                                "finish_reason": reason})
                continue
            calls = self.tool_calls(i)
            message: dict[str, Any] = {"role": "assistant",
                                       "content": text if text or not calls else None}
            if i in self.reasoning:
                message[self.reasoning_field] = "".join(self.reasoning[i])
            if calls:
                message["tool_calls"] = calls
            choices.append({"index": i, "message": message, "logprobs": None,
                            "finish_reason": reason})
        out: dict[str, Any] = {
            "id": self.field("id", "contextcare-0"),
            "object": "text_completion" if self.text_completion else "chat.completion",
            "created": self.field("created", 0),
            "model": self.field("model", ""),
            "choices": choices,
        }
        if self.field("system_fingerprint") is not None:
            out["system_fingerprint"] = self.field("system_fingerprint")
        if self.usage is not None:
            out["usage"] = self.usage
        return out
