"""Acting on detections: abort a reply, remind the model, auto-continue after an abort.

One :class:`Guard` per conversation; one :class:`Reply` per model call attempt::

    guard = Guard(lang="en")                      # default_ruleset(), compiled once, shared
    reply = guard.reply()
    for delta in deltas:
        verdict = reply.feed(delta)               # None, Remind or Abort
        if isinstance(verdict, Abort):
            break                                 # stop the stream now
    else:
        verdict = reply.finish()                  # end-of-stream checks may abort too
    messages.append(reply.partial.to_message())   # the text so far; interrupted if aborted
    messages.extend(guard.pending_notices())      # reminders and the abort explanation
    # after an Abort, call the model again if verdict.notice is not None (auto-continue)

What the guard decides, per detection ``action``:

* ``abort`` → an :class:`Abort` verdict: the reply is over (``feed`` raises afterwards); its
  :attr:`Abort.partial` keeps every character received so far, per channel, marked interrupted.
  The abort's explanation (the reply was stopped by the system, not by the model, because of the
  evidence) is queued. :attr:`Abort.notice` is that message when the guard advises to continue
  now, and ``None`` when auto-continue is off or exhausted: then the explanation waits in the
  queue for the next request the host makes (after a human message, typically), so the model
  always learns why its reply was cut.
* ``remind`` → a :class:`Remind` verdict: generation goes on; the notice is queued.
* ``record`` → no verdict; the detection is kept in :attr:`Reply.detections` only.

Auto-continue: abort number *k* in a row auto-continues while ``k < max_consecutive_aborts``; so
with the default 2, the first abort continues and the second stops. The count re-arms (goes back
to 0) when a reply finishes without an abort and on :meth:`Guard.human_turn`.

Dedupe: a reminder (and a ``stopped`` explanation) is queued at most once per rule until
:meth:`Guard.human_turn`; a ``continue`` message is always queued, since the model needs it to
resume (the consecutive-abort limit bounds it). A :class:`Remind` whose notice was suppressed this
way carries ``notice=None``.

A guard is not thread-safe: a conversation's model calls are sequential. The compiled ruleset may
be shared by any number of guards and threads.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Protocol, Union

from . import reference
from ._checks import check_int
from ._engine import Recorder, Ruleset, Watcher
from .detection import Detection
from .errors import ArgumentTypeError
from .marker import OWN_NAME
from .notices import Measurement, check_lang, message, topic_of
from .rules import Rule

__all__ = ["Guard", "Reply", "Abort", "Remind", "Verdict", "Partial"]

Message = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Partial:
    """The text a reply produced, per channel. ``interrupted`` is true when it was aborted."""

    text: str
    reasoning: str
    interrupted: bool

    def to_message(self, *, reasoning_field: str | None = None,
                   metadata: bool = True) -> Message:
        """The partial reply as an OpenAI-format assistant message.

        ``reasoning_field`` (e.g. ``"reasoning_content"``) adds the reasoning under that key, for
        servers that accept it back; by default it is left out, as the OpenAI API expects.
        ``metadata`` (dropped with ``metadata=False``) says whether the reply was
        ``interrupted``.
        """
        msg: Message = {"role": "assistant", "content": self.text}
        if reasoning_field is not None and self.reasoning:
            msg[reasoning_field] = self.reasoning
        if metadata:
            msg["metadata"] = {"source": "contextcare", "interrupted": self.interrupted}
        return msg


@dataclass(frozen=True, slots=True)
class Abort:
    """Stop the reply now. ``partial`` is everything received, marked interrupted; ``notice``
    is the auto-continue message (already queued in ``pending_notices()``) or ``None``."""

    detection: Detection
    partial: Partial
    notice: Message | None
    #: Other detections of the same call (reminders queued alongside, records).
    others: tuple[Detection, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class Remind:
    """Generation continues; ``notice`` is queued for the next request (``None`` when this rule
    already has a notice out since the last human turn)."""

    detection: Detection
    notice: Message | None
    others: tuple[Detection, ...] = field(default=())


Verdict = Union[Abort, Remind]


@lru_cache(maxsize=1)
def _default_ruleset() -> Any:
    from . import presets

    compile_defaults: Any = presets.default_ruleset
    return compile_defaults()


class Reply:
    """One model call attempt: feed it the deltas, act on the verdicts.

    Made by :meth:`Guard.reply`. ``feed(delta, channel)`` returns ``None`` when nothing asks for
    action (the fast path: one ``Watcher.feed`` call, an append, an ``if``) or the strongest
    verdict of that delta (an :class:`Abort` over a :class:`Remind`). ``finish()`` ends the reply
    (end-of-stream checks run there and may still abort). After an abort or ``finish()``,
    ``feed`` raises ``RuntimeError``.
    """

    #: ``feed(delta, channel="text")``: feed one delta of ``channel`` (``"text"`` or
    #: ``"reasoning"``); ``None`` or the delta's verdict. It is the recorder's own ``feed``
    #: (bound once, when the reply is made), so a delta costs one call into the engine.
    feed: _Feed

    def __init__(self, guard: Guard, watcher: Any) -> None:
        self._guard = guard
        self._watcher = watcher
        self._done = False
        self._aborted = False
        #: Verdicts returned so far, in order.
        self.verdicts: list[Verdict] = []
        #: Every detection so far, including ``record`` ones and those a verdict outranked.
        self.detections: list[Detection] = []
        # the recorder feeds the watcher, keeps the reply's text and calls _act only when
        # something fired: in C for the native watcher, in Python for any other
        recorder_type = Recorder if isinstance(watcher, Watcher) else reference.Recorder
        self._recorder = recorder_type(watcher, self._act)
        self.feed = self._recorder.feed

    def finish(self) -> Verdict | None:
        """End the reply: end-of-stream checks run (they may abort). A reply that ends without
        an abort re-arms auto-continue. Calling ``finish`` again returns ``None``."""
        if self._done:
            return None
        found = self._watcher.finish()
        verdict = self._act(found) if found else None
        if not self._done:
            self._end()
            self._guard._clean_reply()
        return verdict

    @property
    def done(self) -> bool:
        """True after ``finish()`` or an abort."""
        return self._done

    @property
    def aborted(self) -> bool:
        """True when the reply ended with an :class:`Abort`."""
        return self._aborted

    @property
    def partial(self) -> Partial:
        """The text received so far, per channel (``interrupted`` when aborted)."""
        return Partial(self._recorder.text("text"), self._recorder.text("reasoning"),
                       self._aborted)

    def _end(self) -> None:
        self._done = True
        self._recorder.close(_ENDED)

    def _act(self, found: Iterable[Detection]) -> Verdict | None:
        found = tuple(found)
        self.detections.extend(found)
        abort = next((d for d in found if d.action == "abort"), None)
        remind: Remind | None = None
        for d in found:
            if d.action == "remind":
                notice = self._guard._queue_once(d, "remind")
                if remind is None:
                    remind = Remind(d, notice, tuple(o for o in found if o is not d))
        verdict: Verdict | None = remind
        if abort is not None:
            self._aborted = True
            self._end()
            notice = self._guard._abort(abort)
            verdict = Abort(abort, self.partial, notice,
                            tuple(o for o in found if o is not abort))
        if verdict is not None:
            self.verdicts.append(verdict)
        return verdict

    def __repr__(self) -> str:
        state = "aborted" if self._aborted else ("finished" if self._done else "open")
        return f"<Reply {state}, {len(self.detections)} detections>"


_ENDED = "this reply has ended (aborted or finished); start a new one with guard.reply()"


class _Feed(Protocol):
    def __call__(self, delta: str, /, channel: str = "text") -> Verdict | None: ...


class Guard:
    """Maps detections to actions for one conversation (see the module docs).

    ``rules``: a compiled ruleset (anything with ``.watcher()``), a sequence of rules to compile,
    or ``None`` for :func:`contextcare.default_ruleset` (compiled once per process and shared).
    ``lang``: ``"en"`` or ``"zh"``, the language of the notices. ``auto_continue``: advise to
    continue after an abort. ``max_consecutive_aborts`` (≥ 1): the abort that makes this many in
    a row does not auto-continue. ``name``: the ``name`` field of the notice messages; the
    default ``"contextcare"`` is the mark by which the planner and the survey recognise the
    library's own messages (another name, or ``None`` for none, needs their ``is_own_notice``).
    """

    def __init__(self, rules: Any = None, *, lang: str = "en", auto_continue: bool = True,
                 max_consecutive_aborts: int = 2, name: str | None = OWN_NAME) -> None:
        self._lang = check_lang(lang)
        if not isinstance(auto_continue, bool):
            raise ArgumentTypeError(
                f"auto_continue must be a bool, got {type(auto_continue).__name__}")
        check_int("max_consecutive_aborts", max_consecutive_aborts, lo=1)
        if name is not None and not isinstance(name, str):
            raise ArgumentTypeError(f"name must be a str or None, got {type(name).__name__}")
        self._ruleset = _resolve_rules(rules)
        self._auto_continue = auto_continue
        self._max_aborts = max_consecutive_aborts
        self._name = name
        self._aborts_in_a_row = 0
        self._noticed: set[tuple[str, str]] = set()
        self._pending: list[Message] = []
        self._status: object | None = None
        self._replies_since_status = 0

    # ----------------------------------------------------------------- public

    @property
    def ruleset(self) -> Any:
        """The compiled ruleset the replies watch with."""
        return self._ruleset

    @property
    def lang(self) -> str:
        return self._lang

    @property
    def aborts_in_a_row(self) -> int:
        """Aborts since the last clean reply or human turn."""
        return self._aborts_in_a_row

    @property
    def auto_continue_armed(self) -> bool:
        """Whether the next abort would auto-continue."""
        return self._auto_continue and self._aborts_in_a_row + 1 < self._max_aborts

    def reply(self) -> Reply:
        """A new :class:`Reply` for one model call attempt (a fresh watcher)."""
        if self._status is not None:
            self._replies_since_status += 1
        return Reply(self, self._ruleset.watcher())

    def human_turn(self) -> None:
        """A human message arrived: re-arm auto-continue and allow each rule's notice again."""
        self._aborts_in_a_row = 0
        self._noticed.clear()

    def observe_status(self, status: object) -> None:
        """Remember the latest context measurement (a :class:`contextcare.context.grades.Status` or any
        object with ``fatigue`` and ``wakefulness``, numbers or ``None``, and optionally
        ``fatigue_grade`` / ``wakefulness_grade``). The context-anxiety notice quotes it."""
        if not (hasattr(status, "fatigue") and hasattr(status, "wakefulness")):
            raise ArgumentTypeError("status must have fatigue and wakefulness attributes, got"
                                f" {type(status).__name__}")
        self._status = status
        self._replies_since_status = 0

    def pending_notices(self, *, metadata: bool = True) -> list[Message]:
        """Take the queued notices, oldest first, as OpenAI-format user messages to append at the
        tail of the next request. ``metadata=False`` drops the ``metadata`` key (for APIs that
        reject unknown message fields). The queue is emptied."""
        out, self._pending = self._pending, []
        if not metadata:
            out = [{k: v for k, v in m.items() if k != "metadata"} for m in out]
        return out

    def __repr__(self) -> str:
        return (f"<Guard lang={self._lang!r} aborts_in_a_row={self._aborts_in_a_row}"
                f" pending={len(self._pending)}>")

    # ----------------------------------------------------------------- used by Reply

    def _measurement(self) -> Measurement | None:
        if self._status is None:
            return None
        return Measurement(self._status, self._replies_since_status)

    def _message(self, d: Detection, form: str) -> Message:
        m = self._measurement() if topic_of(d) == "context-anxiety" else None
        stops = self._aborts_in_a_row if form == "stopped" else None
        return message(d, lang=self._lang, form=form, measurement=m, stops=stops,
                       name=self._name)

    def _queue_once(self, d: Detection, form: str) -> Message | None:
        key = (d.rule, form)
        if key in self._noticed:
            return None
        self._noticed.add(key)
        msg = self._message(d, form)
        self._pending.append(msg)
        return msg

    def _abort(self, d: Detection) -> Message | None:
        self._aborts_in_a_row += 1
        if self._auto_continue and self._aborts_in_a_row < self._max_aborts:
            msg = self._message(d, "continue")
            self._pending.append(msg)
            return msg
        self._queue_once(d, "stopped")
        return None

    def _clean_reply(self) -> None:
        self._aborts_in_a_row = 0


def _resolve_rules(rules: Any) -> Any:
    if rules is None:
        return _default_ruleset()
    if hasattr(rules, "watcher"):
        return rules
    if isinstance(rules, Iterable) and not isinstance(rules, (str, bytes)):
        items = list(rules)
        if all(isinstance(r, Rule) for r in items):
            return Ruleset(items)
    raise ArgumentTypeError(
        f"rules must be a Ruleset, a sequence of rules or None, got {type(rules).__name__}")

