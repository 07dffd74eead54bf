"""The exceptions contextcare raises on purpose.

Every error the package raises for a caller's mistake derives from :class:`ContextCareError`,
and also from the builtin exception a Python programmer would expect (``ValueError`` for a value
out of range, ``TypeError`` for a value of the wrong type), so ``except ValueError`` keeps working.
"""

from __future__ import annotations

__all__ = ["ContextCareError", "RuleValueError", "RuleTypeError"]


class ContextCareError(Exception):
    """Base class of the errors contextcare raises on purpose."""


class RuleValueError(ContextCareError, ValueError):
    """A rule, a ruleset option or an argument has a value outside its allowed range.

    The message names the rule (when there is one), the field and the allowed range.
    """


class RuleTypeError(ContextCareError, TypeError):
    """An argument has the wrong type. The message names the argument and the type expected."""
