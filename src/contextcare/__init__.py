"""contextcare: a native stream filter for LLM replies.

Watches text deltas as they stream and reports degenerate loops (a line repeated, a short cycle of
lines, a flood without newlines) and anxious reasoning, so a serving stack can abort the reply or
remind the model at the next request.

Primary types: :class:`Ruleset` (compiled rules, immutable, shared), :class:`Watcher` (one per
stream), :class:`Detection` (what fired). See ``docs/semantics.md`` for the exact semantics.
"""

from __future__ import annotations

from ._engine import Ruleset, Watcher
from .detection import Detection
from .errors import (
    ArgumentTypeError,
    ArgumentValueError,
    ContextCareError,
    RuleTypeError,
    RuleValueError,
)
from .guard import Abort, Guard, Partial, Remind, Reply
from .presets import default_rules, default_ruleset
from .rules import (
    BlockRepeat,
    ContextAnxiety,
    FillerLines,
    LineCycle,
    LineRepeat,
    Marker,
    Phrases,
    PrefixMonotony,
    Rule,
    SegmentRepeat,
    StructureFlood,
    TailRepeat,
    TimeAnxiety,
    VocabCollapse,
    WordRepeat,
)

__version__ = "0.1.0"

__all__ = [
    "Ruleset", "Watcher", "Detection", "Rule", "Phrases", "Marker", "TimeAnxiety",
    "ContextAnxiety", "LineRepeat", "LineCycle", "FillerLines", "PrefixMonotony", "TailRepeat",
    "BlockRepeat", "SegmentRepeat", "StructureFlood", "VocabCollapse", "WordRepeat",
    "default_rules", "default_ruleset", "ContextCareError",
    "ArgumentTypeError", "ArgumentValueError", "RuleValueError", "RuleTypeError",
    "Guard", "Reply", "Abort", "Remind", "Partial",
    "__version__",
]
