"""The value a watcher returns when a rule fires."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Detection", "EVIDENCE_FIELDS"]

#: Evidence fields, in the order ``to_dict`` and ``repr`` show them. A detection fills only the
#: fields of its kind; the others are ``None``.
EVIDENCE_FIELDS = (
    "phrase", "line", "cycle", "prefix", "unit", "count", "total", "ratio", "run", "period",
    "repeats",
)


@dataclass(frozen=True, slots=True)
class Detection:
    """One rule firing on one stream.

    ``offset`` counts the code points fed to the rule's channel view when it fired (for a phrase,
    the end of the occurrence), so it does not depend on how the text was split into deltas.

    Evidence by kind:

    * ``phrase`` / ``marker`` / ``time-anxiety`` / ``context-anxiety``: ``phrase`` (as declared).
    * ``line-repeat``: ``line`` (first 40 characters), ``count``, ``total``, ``ratio``, ``run``.
    * ``line-cycle``: ``cycle`` (the lines), ``count`` (lines they cover), ``total``, ``ratio``.
    * ``filler-lines``: ``count``, ``total``, ``ratio``.
    * ``prefix-monotony``: ``prefix``, ``count``, ``total``, ``ratio``.
    * ``tail-repeat``: ``unit`` (first 40 characters), ``period``, ``repeats``.
    """

    rule: str
    kind: str
    action: str
    channel: str
    offset: int
    phrase: str | None = None
    line: str | None = None
    cycle: tuple[str, ...] | None = None
    prefix: str | None = None
    unit: str | None = None
    count: int | None = None
    total: int | None = None
    ratio: float | None = None
    run: int | None = None
    period: int | None = None
    repeats: int | None = None

    def evidence(self) -> dict[str, Any]:
        """The evidence fields of this detection's kind (the ones that are not ``None``)."""
        out: dict[str, Any] = {}
        for name in EVIDENCE_FIELDS:
            value = getattr(self, name)
            if value is not None:
                out[name] = list(value) if name == "cycle" else value
        return out

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: rule, kind, action, channel, offset and the evidence fields."""
        out: dict[str, Any] = {
            "rule": self.rule,
            "kind": self.kind,
            "action": self.action,
            "channel": self.channel,
            "offset": self.offset,
        }
        out.update(self.evidence())
        return out

    def __repr__(self) -> str:
        parts = [f"rule={self.rule!r}", f"kind={self.kind!r}", f"action={self.action!r}",
                 f"channel={self.channel!r}", f"offset={self.offset}"]
        parts += [f"{k}={getattr(self, k)!r}" for k in self.evidence()]
        return f"Detection({', '.join(parts)})"
