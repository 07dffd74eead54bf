"""The anxiety vocabularies: phrase lists as data, in Chinese and English.

Each list is a plain-text file next to this module, ``<topic>_<lang>.txt``: one phrase per line,
``#`` comment lines (the rule of choice and the provenance of every phrase), blank lines ignored.
:class:`contextcare.TimeAnxiety` and :class:`contextcare.ContextAnxiety` read them through
:func:`phrases_for`; users who want other words pass ``extra=`` to those rules instead of editing
the files.

The lists are curated by the *agency* rule: a phrase is listed when the resource (time, the
context window, compaction) acts on the model as a threat; a phrase where the model uses a tool on
purpose ("time to compact", ``该压缩了``) is not, and neither are generic urgency words ("as soon as
possible", ``尽快``, ``赶紧``). Matching is plain substring search, English with ASCII case folding.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

from ..errors import ArgumentTypeError, ArgumentValueError

__all__ = ["TOPICS", "LANGS", "phrases_for", "load"]

#: Topics with a vocabulary: ``time`` (:class:`~contextcare.TimeAnxiety`) and ``context``
#: (:class:`~contextcare.ContextAnxiety`).
TOPICS = ("time", "context")
#: Languages with a vocabulary for every topic.
LANGS = ("zh", "en")


def _check(value: object, name: str, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str):
        raise ArgumentTypeError(f"{name} must be a str, got {type(value).__name__}")
    if value not in allowed:
        choices = ", ".join(repr(a) for a in allowed)
        raise ArgumentValueError(f"{name} must be one of {choices}, got {value!r}")
    return value


@lru_cache(maxsize=None)
def load(topic: str, lang: str) -> tuple[str, ...]:
    """The phrases of one list, in file order (comments and blank lines skipped).

    Raises :class:`~contextcare.ArgumentValueError` for an unknown ``topic`` or ``lang``.
    """
    _check(topic, "topic", TOPICS)
    _check(lang, "lang", LANGS)
    text = resources.files(__name__).joinpath(f"{topic}_{lang}.txt").read_text(encoding="utf-8")
    phrases = []
    for raw in text.splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            phrases.append(line)
    return tuple(phrases)


def phrases_for(topic: str, langs: tuple[str, ...]) -> tuple[str, ...]:
    """The phrases of ``topic`` in the languages ``langs``, in that order, without duplicates.

    ``langs`` is a tuple drawn from :data:`LANGS` (the rules validate it before calling). Lists
    are read once per process and cached.
    """
    _check(topic, "topic", TOPICS)
    if isinstance(langs, str):
        langs = (langs,)
    out: list[str] = []
    for lang in langs:
        out.extend(load(topic, lang))
    return tuple(dict.fromkeys(out))
