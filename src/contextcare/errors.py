"""The exceptions contextcare raises on purpose.

Every error the package raises for a caller's mistake derives from :class:`ContextCareError`,
and also from the builtin exception a Python programmer would expect (``ValueError`` for a value
out of range, ``TypeError`` for a value of the wrong type), so ``except ValueError`` keeps working.
Each is named for what failed::

    ContextCareError
    ├── ArgumentTypeError (TypeError)      an argument has the wrong type
    │   └── RuleTypeError                  ... a field of a rule, a ruleset option, the rule list
    ├── ArgumentValueError (ValueError)    an argument has a value outside its allowed range
    │   └── RuleValueError                 ... a field of a rule, a ruleset option, the rule list
    └── UninitialisedError (RuntimeError)  a Ruleset or Watcher used without __init__

Modules with their own inputs add their own subclasses (``contextcare.traces.TraceFormatError``,
``contextcare.memory.MemoryFileError``, ...).
"""

from __future__ import annotations

__all__ = ["ContextCareError", "ArgumentTypeError", "ArgumentValueError", "RuleValueError",
           "RuleTypeError", "UninitialisedError"]


class ContextCareError(Exception):
    """Base class of the errors contextcare raises on purpose."""


class ArgumentTypeError(ContextCareError, TypeError):
    """An argument has the wrong type. The message names the argument and the type expected."""


class ArgumentValueError(ContextCareError, ValueError):
    """An argument has a value outside its allowed range. The message names the argument and
    the range."""


class RuleValueError(ArgumentValueError):
    """A rule, a ruleset option or the rule list has a value outside its allowed range.

    The message names the rule (when there is one), the field and the allowed range.
    """


class RuleTypeError(ArgumentTypeError):
    """A rule field, a ruleset option or the rule list has the wrong type."""


class UninitialisedError(ContextCareError, RuntimeError):
    """A ``Ruleset`` or ``Watcher`` was used without being initialised: made with ``__new__``,
    or by a subclass whose ``__init__`` does not call ``super().__init__``. Every entry point of
    such an object raises this (never a crash)."""


def uninitialised(obj: object) -> UninitialisedError:
    """The error for an uninitialised ``Ruleset`` or ``Watcher`` ``obj`` (either engine)."""
    name = type(obj).__name__
    if any(c.__name__ == "Watcher" for c in type(obj).__mro__):
        how = "create watchers with Ruleset.watcher()"
    else:
        how = "Ruleset.__init__ was not called (a subclass's __init__ must call super().__init__)"
    return UninitialisedError(f"this {name} object is not initialised: {how}")
