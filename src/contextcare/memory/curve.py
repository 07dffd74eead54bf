"""The forgetting curve and ranking: stability and weight of an anchor, recall days from the
diaries, the sink order, admission of a new anchor and re-injection."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime

from ..errors import ArgumentTypeError, ArgumentValueError
from .anchors import (
    _BASE_STABILITY_DAYS,
    _MAX_DOUBLINGS,
    DEFAULT_CAP,
    Anchor,
    AnchorList,
    _check_cap,
    _check_encodable,
    _check_today,
    _insert_in_view,
    _move_to_sunk,
    _norm,
    _strip_marker,
    parse_anchor,
)

__all__ = [
    "AnchorWeight",
    "Admission",
    "Reinjection",
    "stability",
    "weight",
    "days_since",
    "recall_days",
    "weigh",
    "sink_order",
    "admit",
]


# --------------------------------------------------------------------------- the curve

def stability(n: int) -> float:
    """``S = 2 ** n`` days (base stability 1 day), doubling per distinct recall day, n capped at
    30."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise ArgumentTypeError(f"n must be an int, got {type(n).__name__}")
    if n < 0:
        raise ArgumentValueError(f"n must be >= 0, got {n}")
    return _BASE_STABILITY_DAYS * 2.0 ** min(n, _MAX_DOUBLINGS)


def weight(n: int, t: float) -> float:
    """``R = exp(-t / S)``: 1 on the anchor's own date, decaying slower the more often it came
    back. ``t`` is in days, ``>= 0``."""
    if isinstance(t, bool) or not isinstance(t, (int, float)):
        raise ArgumentTypeError(f"t must be a number of days, got {type(t).__name__}")
    if not t >= 0:
        raise ArgumentValueError(f"t must be >= 0 days, got {t}")
    return math.exp(-t / stability(n))


def days_since(own_date: date, today: date) -> int:
    """Whole calendar days from ``own_date`` to ``today``, 0 when ``own_date`` is in the future."""
    return max(0, (_check_today(today) - _check_today(own_date, "own_date")).days)


def _check_diaries(diaries: object) -> Mapping[date, str]:
    if not isinstance(diaries, Mapping):
        raise ArgumentTypeError(
            f"diaries must be a mapping of date to text, got {type(diaries).__name__}")
    for key, value in diaries.items():
        if not isinstance(key, date) or isinstance(key, datetime) or not isinstance(value, str):
            raise ArgumentTypeError(
                f"diaries must map datetime.date to str, got {type(key).__name__} -> "
                f"{type(value).__name__}")
    return diaries


def _recalls(anchor: Anchor, normalised: Mapping[date, str], today: date) -> frozenset[date]:
    probe = anchor.probe
    if not probe:
        return frozenset()
    since = anchor.own_date or date.min
    return frozenset(d for d, text in normalised.items() if since <= d <= today and probe in text)


def recall_days(anchor: Anchor, diaries: Mapping[date, str], *, today: date) -> frozenset[date]:
    """The days on which the diary mentions the anchor: days from its own date up to today whose
    text contains its probe. Any number of mentions on one day is one day."""
    today = _check_today(today)
    normalised = {d: _norm(text) for d, text in _check_diaries(diaries).items()}
    return _recalls(anchor, normalised, today)


@dataclass(frozen=True)
class AnchorWeight:
    """An anchor weighed on a given day. ``t``, ``stability`` and ``weight`` are None for an
    anchor without a readable date."""

    anchor: Anchor
    n: int
    t: int | None
    stability: float
    weight: float | None
    days: tuple[date, ...]

    def sort_key(self) -> tuple[float, date, int, int]:
        """Sink order: lowest R, then older own date, then smaller n, then earlier line."""
        r = -1.0 if self.weight is None else round(self.weight, 12)
        return (r, self.anchor.own_date or date.min, self.n, self.anchor.lineno)


def weigh(anchors: Iterable[Anchor], diaries: Mapping[date, str], *,
          today: date) -> list[AnchorWeight]:
    """Weigh each anchor on ``today`` against the diary, in the order given."""
    today = _check_today(today)
    normalised = {d: _norm(text) for d, text in _check_diaries(diaries).items()}
    out = []
    for anchor in anchors:
        days = _recalls(anchor, normalised, today)
        n = len(days)
        s = stability(n)
        if anchor.own_date is None:
            out.append(AnchorWeight(anchor, n, None, s, None, tuple(sorted(days))))
        else:
            t = days_since(anchor.own_date, today)
            out.append(AnchorWeight(anchor, n, t, s, weight(n, t), tuple(sorted(days))))
    return out


def sink_order(weights: Iterable[AnchorWeight]) -> list[AnchorWeight]:
    """The weights sorted so the first is the next to sink."""
    return sorted(weights, key=AnchorWeight.sort_key)


# --------------------------------------------------------------------------- admission

@dataclass(frozen=True)
class Admission:
    """What :func:`admit` did: the list after it, the line it added, the anchors it sank (none
    while the list had room) and whether the new line was a sunk line coming back."""

    anchors: AnchorList
    added: Anchor
    sunk: tuple[AnchorWeight, ...]
    returned: bool


def admit(anchors: AnchorList, new: str | Anchor, *, today: date, cap: int = DEFAULT_CAP,
          diaries: Mapping[date, str] | None = None) -> Admission:
    """Add one anchor to the Oft-told list.

    While the list has fewer than ``cap`` anchors in view, the new line is appended and nothing is
    weighed. When it is full, the anchor in view with the lowest weight (see :func:`sink_order`)
    sinks first: its line moves unchanged to the Sunk section. The new anchor is never the one
    that sinks.

    ``new`` is one line (list marker optional). An undated line is stamped ``→ `today` 起``. A line
    whose probe (see :attr:`Anchor.probe`: the handle, or the whole title when the handle is one
    character or empty) matches a sunk anchor's returns as new: it is written with today's stamp,
    so its date and its recall count restart; the old sunk line stays where it is. A probe already
    in view is an error (edit that line by hand; this function never rewrites a user's line).
    Identity and recall counting use the same probe.

    ``new`` must be text a UTF-8 file can hold (no lone surrogates such as ``"\\ud800"``).
    """
    if not isinstance(anchors, AnchorList):
        raise ArgumentTypeError(f"anchors must be an AnchorList, got {type(anchors).__name__}")
    today = _check_today(today)
    cap = _check_cap(cap)
    if diaries is not None:
        diaries = _check_diaries(diaries)
    text = new.text if isinstance(new, Anchor) else new
    if not isinstance(text, str):
        raise ArgumentTypeError(f"new must be a str or an Anchor, got {type(new).__name__}")
    _check_encodable(text, "new")
    if "\n" in text.strip() or "\r" in text.strip():
        raise ArgumentValueError("new must be one line: one anchor per list item")
    if "<!--" in text or "-->" in text:
        raise ArgumentValueError("new must not contain an HTML comment")
    incoming = parse_anchor(text)
    if not incoming.title:
        raise ArgumentValueError(f"new must have a title, got {text!r}")
    key = incoming.probe
    for anchor in anchors.in_view:
        if anchor.probe == key:
            what = "title" if incoming.short_handle else "handle"
            name = incoming.title if incoming.short_handle else incoming.handle
            raise ArgumentValueError(
                f"new: an anchor with {what} {name!r} is already in view at line "
                f"{anchor.lineno}; edit that line by hand")
    returned = any(a.probe == key for a in anchors.sunk)
    if returned or incoming.own_date is None:
        line = f"- {incoming.title} → `{today.isoformat()}` 起"
    else:
        line = "- " + _strip_marker(incoming.text)
    sunk: list[AnchorWeight] = []
    current = anchors
    while len(current.in_view) >= cap:  # more than once only for a list over its cap
        lowest = sink_order(weigh(current.in_view, diaries or {}, today=today))[0]
        sunk.append(lowest)
        current = _move_to_sunk(current, lowest.anchor)
    current = _insert_in_view(current, line)
    added = next((a for a in current.in_view if a.text == line), None)
    moved = [a.text for a in current.sunk]
    if added is None or any(w.anchor.text not in moved for w in sunk):
        raise ArgumentValueError(
            "anchors: an unclosed HTML comment or code fence hides the end of the anchor file;"
            " close it, then add the anchor")
    return Admission(current, added, tuple(sunk), returned)


# --------------------------------------------------------------------------- re-injection

class Reinjection:
    """When to inject the list into a session: once at its start, then again after every
    ``refresh_after_messages`` counted messages (0, the default, means never again).

    Counted messages are user and assistant messages; tool results, system messages and this
    plugin's own notices are not. Use: call :meth:`due` at each step boundary; when it is True,
    inject :func:`injected_block` and call :meth:`injected`.
    """

    COUNTED_ROLES = ("user", "assistant")

    def __init__(self, refresh_after_messages: int = 0) -> None:
        value = refresh_after_messages
        if isinstance(value, bool) or not isinstance(value, int):
            raise ArgumentTypeError(
                f"refresh_after_messages must be an int, got {type(value).__name__}")
        if value < 0:
            raise ArgumentValueError(f"refresh_after_messages must be >= 0 (0 = never), got {value}")
        self.refresh_after_messages = value
        self._injections = 0
        self._since = 0

    def message(self, role: str, *, own_notice: bool = False) -> None:
        """Count one message appended to the session (``role`` as in a chat message: ``"user"``,
        ``"assistant"``, ``"tool"``, ``"system"``, …)."""
        if not isinstance(role, str):
            raise ArgumentTypeError(f"role must be a str, got {type(role).__name__}")
        if not isinstance(own_notice, bool):
            raise ArgumentTypeError(f"own_notice must be a bool, got {type(own_notice).__name__}")
        if role in self.COUNTED_ROLES and not own_notice:
            self._since += 1

    def due(self) -> bool:
        """True when the list should be injected at this step boundary."""
        if self._injections == 0:
            return True
        n = self.refresh_after_messages
        return n > 0 and self._since >= n

    def injected(self) -> None:
        """Record that the list was injected now; the message counter restarts."""
        self._injections += 1
        self._since = 0
