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

Rules files may come from users, so their size and shape are bounded *before* the TOML parser
sees them: at most :data:`MAX_RULES_FILE_BYTES` (4 MiB, four times what the phrases of one
ruleset may hold) and nothing nested deeper than :data:`MAX_TOML_DEPTH` (32) — neither arrays and
inline tables inside each other nor parts of one dotted key (``a.b.c``). Python's TOML parser
recurses per level (a few hundred levels raise ``RecursionError``) and takes time quadratic in
the parts of a dotted key; a real rules file is three levels deep.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from typing import Any, NoReturn

from .errors import ContextCareError
from .presets import DEFAULT_OPTIONS, default_rules
from .rules import RULE_TYPES as _RULE_CLASSES
from .rules import Rule, RulesetOptions, check_rules

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = ["MAX_RULES_FILE_BYTES", "MAX_TOML_DEPTH", "RULE_TYPES", "RulesFileError", "load_rules",
           "loads_rules"]

#: The largest rules document accepted, in UTF-8 bytes.
MAX_RULES_FILE_BYTES = 4 << 20
#: How deep arrays and inline tables may nest, and how many parts a dotted key may have.
MAX_TOML_DEPTH = 32

#: The rule classes a rules file may name in ``type``.
RULE_TYPES: dict[str, type[Rule]] = {cls.__name__: cls for cls in _RULE_CLASSES}

_TOP_KEYS = ("defaults", "options", "rules")
_OPTION_FIELDS = ("line_window", "min_line_chars", "evidence_chars", "mask_code_fences")


class RulesFileError(ContextCareError, ValueError):
    """A rules file that cannot be used. The message starts with the file name."""


# One TOML token for the shape check: strings (multi-line, basic, literal) and comments whole, so
# the brackets, dots and '=' inside them do not count; then the punctuation that makes nesting.
# Single-character alternatives only, so a failing match never backtracks more than linearly.
_TOKEN = re.compile(r"""
    \"{3}(?:[^"\\]|\\.|"{1,2}(?!"))*"{3,5}
  | '{3}(?:[^']|'{1,2}(?!'))*'{3,5}
  | "(?:[^"\\\n]|\\.)*"
  | '[^'\n]*'
  | \#[^\n]*
  | [][{}.=,\n]
  | [^][{}.=,\n"'\#]+
  | .
""", re.VERBOSE | re.DOTALL)


def _check_shape(source: str, text: str) -> None:
    """Refuse, before parsing, a document too large or nested too deep (see the module doc)."""
    # (a str of n code points holds at most 4n UTF-8 bytes: encode only when that could matter)
    if len(text) > MAX_RULES_FILE_BYTES or (
            len(text) > MAX_RULES_FILE_BYTES // 4
            and len(text.encode("utf-8", "surrogatepass")) > MAX_RULES_FILE_BYTES):
        raise RulesFileError(f"{source}: larger than {MAX_RULES_FILE_BYTES} bytes"
                             f" ({MAX_RULES_FILE_BYTES >> 20} MiB), the limit of a rules file")
    stack: list[str] = []
    in_key, parts = True, 1  # at a key (before '='), and how many dotted parts it has so far
    for m in _TOKEN.finditer(text):
        t = m.group()
        if t == "\n":
            if not stack or stack[-1] == "h":
                stack.clear()
                in_key, parts = True, 1
        elif t in "[{" and len(t) == 1:
            # a '[' where a key may start, outside any array, opens a table header
            stack.append("h" if t == "[" and in_key and (not stack or stack[-1] == "h") else t)
            if t == "{":
                in_key, parts = True, 1
            elif stack[-1] != "h":
                in_key = False
            if len(stack) > MAX_TOML_DEPTH:
                _too_deep(source, text, m.start(), "arrays and tables nested")
        elif t in "]}" and len(t) == 1:
            if stack:
                stack.pop()
            in_key = False
        elif t == ".":
            if in_key:
                parts += 1
                if parts > MAX_TOML_DEPTH:
                    _too_deep(source, text, m.start(), "dotted key parts")
        elif t == "=":
            in_key = False
        elif t == "," and stack and stack[-1] == "{":
            in_key, parts = True, 1


def _too_deep(source: str, text: str, at: int, what: str) -> NoReturn:
    line = text.count("\n", 0, at) + 1
    raise RulesFileError(f"{source}: line {line}: more than {MAX_TOML_DEPTH} {what}"
                         f" (the limit of a rules file)")


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
    if not isinstance(text, str):
        raise RulesFileError(f"{source}: a rules document must be a str, got"
                             f" {type(text).__name__}")
    _check_shape(source, text)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RulesFileError(f"{source}: not valid TOML: {exc}") from None
    except RecursionError:  # a shape the check above misjudged: still a file error
        raise RulesFileError(f"{source}: nested too deeply for the TOML parser") from None
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
            data = f.read(MAX_RULES_FILE_BYTES + 1)  # never more than the limit into memory
    except OSError as exc:
        raise RulesFileError(f"{name}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_RULES_FILE_BYTES:
        raise RulesFileError(f"{name}: larger than {MAX_RULES_FILE_BYTES} bytes"
                             f" ({MAX_RULES_FILE_BYTES >> 20} MiB), the limit of a rules file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RulesFileError(f"{name}: not valid UTF-8 (byte {exc.start})") from None
    return loads_rules(text, source=name)
