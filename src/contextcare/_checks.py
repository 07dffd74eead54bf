"""Argument checks shared by the modules of the package: one place for the int, ratio and
language checks and their messages. Each returns the value (normalised) or raises
:class:`~contextcare.errors.ArgumentTypeError` / :class:`~contextcare.errors.ArgumentValueError`
naming the argument. Rule fields have their own checks in :mod:`contextcare.rules` (their
messages also name the rule)."""

from __future__ import annotations

from typing import Literal

from .errors import ArgumentTypeError, ArgumentValueError

__all__ = ["Lang", "check_int", "check_open_ratio", "check_lang"]

Lang = Literal["en", "zh"]


def check_int(name: str, value: object, lo: int | None = None) -> int:
    """An int (not a bool), at least ``lo`` when given."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentTypeError(f"{name} must be an int, got {type(value).__name__}")
    if lo is not None and value < lo:
        raise ArgumentValueError(f"{name} must be >= {lo}, got {value}")
    return value


def check_open_ratio(name: str, value: object) -> float:
    """A number strictly between 0 and 1, as a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ArgumentTypeError(f"{name} must be a number, got {type(value).__name__}")
    if not 0 < value < 1:
        raise ArgumentValueError(f"{name} must be strictly between 0 and 1, got {value}")
    return float(value)


def check_lang(lang: object, name: str = "lang") -> Lang:
    """``"en"`` or ``"zh"`` (the languages of every text the package writes)."""
    if not isinstance(lang, str):
        raise ArgumentTypeError(f"{name} must be a str, got {type(lang).__name__}")
    if lang == "en":
        return "en"
    if lang == "zh":
        return "zh"
    raise ArgumentValueError(f"{name} must be 'en' or 'zh', got {lang!r}")
