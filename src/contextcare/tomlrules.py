"""Rules from a TOML file, with the same names and fields as the Python API.

A rules file holds optional ruleset options, an optional switch that starts from the default
rules, and an array of rule tables. Each rule table names its class in ``type`` and gives that
class's fields::

    defaults = true              # start from contextcare.default_rules() (default: false)

    [options]                    # Ruleset options; the defaults' options when defaults = true,
    line_window = 80             # else the Ruleset constructor's defaults
    mask_code_fences = true

    [[rules]]
    type = "Phrases"
    id = "apology-loop"
    phrases = ["I apologize for the confusion", "Let me try again"]
    channel = "text"
    action = "remind"

    [[rules]]
    type = "LineRepeat"          # same id as a default rule: replaces it, in its place
    id = "line-repeat"
    min_count = 20

With ``defaults = true`` a rule whose id is the id of a default rule replaces that rule where it
stands; any other rule is appended. Every error is a :class:`RulesFileError` naming the file, the
rule (its position and id) and the field.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any

from .errors import ContextCareError
from .presets import DEFAULT_OPTIONS, default_rules
from .rules import (
    ContextAnxiety,
    FillerLines,
    LineCycle,
    LineRepeat,
    Marker,
    Phrases,
    PrefixMonotony,
    Rule,
    RulesetOptions,
    TailRepeat,
    TimeAnxiety,
    check_rules,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = ["RulesFileError", "RULE_TYPES", "load_rules", "loads_rules"]

#: The rule classes a rules file may name in ``type``.
RULE_TYPES: dict[str, type[Rule]] = {
    cls.__name__: cls
    for cls in (Phrases, Marker, TimeAnxiety, ContextAnxiety, LineRepeat, LineCycle, FillerLines,
                PrefixMonotony, TailRepeat)
}

_TOP_KEYS = ("defaults", "options", "rules")
_OPTION_FIELDS = ("line_window", "min_line_chars", "evidence_chars", "mask_code_fences")


class RulesFileError(ContextCareError, ValueError):
    """A rules file that cannot be used. The message starts with the file name."""


def _fields(cls: type[Rule]) -> dict[str, dataclasses.Field[Any]]:
    return {f.name: f for f in dataclasses.fields(cls) if f.init}  # type: ignore[arg-type]


def _required(field: dataclasses.Field[Any]) -> bool:
    return (field.default is dataclasses.MISSING
            and field.default_factory is dataclasses.MISSING)


def _rule(source: str, index: int, table: object) -> Rule:
    where = f"{source}: rules[{index}]"
    if not isinstance(table, dict):
        raise RulesFileError(f"{where}: must be a table, got {type(table).__name__}")
    rule_id = table.get("id")
    if isinstance(rule_id, str):
        where += f" (id {rule_id!r})"
    kind = table.get("type")
    if kind is None:
        raise RulesFileError(f"{where}: missing field 'type' (one of {', '.join(RULE_TYPES)})")
    cls = RULE_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise RulesFileError(
            f"{where}: field 'type' must be one of {', '.join(RULE_TYPES)}, got {kind!r}")
    fields = _fields(cls)
    kwargs = {k: v for k, v in table.items() if k != "type"}
    unknown = [k for k in kwargs if k not in fields]
    if unknown:
        raise RulesFileError(
            f"{where}: {kind} has no field {unknown[0]!r}; its fields are {', '.join(fields)}")
    missing = [name for name, f in fields.items() if _required(f) and name not in kwargs]
    if missing:
        raise RulesFileError(f"{where}: {kind} needs field {missing[0]!r}")
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise RulesFileError(f"{where}: {exc}") from None


def _options(source: str, table: object, base: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise RulesFileError(f"{source}: options must be a table, got {type(table).__name__}")
    unknown = [k for k in table if k not in _OPTION_FIELDS]
    if unknown:
        raise RulesFileError(f"{source}: options has no field {unknown[0]!r}; its fields are"
                             f" {', '.join(_OPTION_FIELDS)}")
    options = {**base, **table}
    try:
        RulesetOptions(**options)
    except (TypeError, ValueError) as exc:
        message = str(exc).replace("Ruleset: ", "options: ", 1)
        raise RulesFileError(f"{source}: {message}") from None
    return options


def loads_rules(text: str, *, source: str = "<string>") -> tuple[list[Rule], dict[str, Any]]:
    """Parse a rules document; return ``(rules, options)`` ready for ``Ruleset(rules, **options)``.

    ``source`` names the document in error messages.
    """
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RulesFileError(f"{source}: not valid TOML: {exc}") from None
    unknown = [k for k in doc if k not in _TOP_KEYS]
    if unknown:
        raise RulesFileError(f"{source}: unknown top-level key {unknown[0]!r}; expected"
                             f" {', '.join(_TOP_KEYS)}")
    defaults = doc.get("defaults", False)
    if not isinstance(defaults, bool):
        raise RulesFileError(f"{source}: defaults must be true or false, got {defaults!r}")
    base = dict(DEFAULT_OPTIONS) if defaults else {}
    options = _options(source, doc.get("options", {}), base)
    tables = doc.get("rules", [])
    if not isinstance(tables, list):
        raise RulesFileError(f"{source}: rules must be an array of tables ([[rules]])")
    declared = [_rule(source, i, table) for i, table in enumerate(tables)]
    rules: list[Rule] = default_rules() if defaults else []
    position = {rule.id: i for i, rule in enumerate(rules)}
    for rule in declared:
        if rule.id in position:
            rules[position.pop(rule.id)] = rule
        else:
            rules.append(rule)
    if not rules:
        raise RulesFileError(f"{source}: declares no rules (add [[rules]] tables or"
                             " defaults = true)")
    try:
        check_rules(rules, RulesetOptions(**options))
    except (TypeError, ValueError) as exc:
        raise RulesFileError(f"{source}: {exc}") from None
    return rules, options


def load_rules(path: str | os.PathLike[str]) -> tuple[list[Rule], dict[str, Any]]:
    """Read a rules file (UTF-8 TOML); return ``(rules, options)`` as :func:`loads_rules`."""
    name = os.fspath(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise RulesFileError(f"{name}: cannot read: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RulesFileError(f"{name}: not valid UTF-8 (byte {exc.start})") from None
    return loads_rules(text, source=name)
