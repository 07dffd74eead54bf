# Hand-written stub of the compiled module (src/contextcare/_engine.pyx).
from collections.abc import Callable, Iterable, Sequence
from typing import Any, SupportsIndex, final

from .detection import Detection
from .rules import Rule, RulesetOptions

# Limits of the C core (csrc/engine.h).
EVIDENCE_CHARS: int
MAX_COUNT: int
MAX_EVERY_BYTES: int
MAX_CYCLE_TOP: int
MAX_PREFIX_CHARS: int
MAX_FILLERS: int
MAX_DELIMITERS: int
MAX_WINDOW_CHARS: int
MAX_TAIL_CHARS: int
MAX_PHRASE_CHARS: int
MAX_PHRASES: int
MAX_PHRASE_BYTES: int
MAX_BLOCK_SEGMENTS: int
MAX_BLOCK_PERIOD: int
MAX_BLOCK_REPEATS: int
MAX_SEGMENT_EVERY_BYTES: int
MAX_VOCAB_WORDS: int
MAX_WORD_PERIOD: int
MAX_WORD_TAIL: int
MAX_AUTOMATON_BYTES: int

def _automaton_limits(
    dense_bytes: int | None = None, max_bytes: int | None = None
) -> tuple[int, int]: ...
def _compile_specs(
    specs: Iterable[dict[str, Any]],
    phrase_lists: Iterable[Iterable[str]] | None = None,
    **options: Any,
) -> None: ...

@final
class Ruleset:
    """Compiled rules: immutable, safe to share across threads, picklable."""

    @property
    def rules(self) -> tuple[Rule, ...]: ...
    @property
    def options(self) -> RulesetOptions: ...
    def __init__(
        self,
        rules: Iterable[Rule],
        /,
        *,
        line_window: int = 80,
        min_line_chars: int = 3,
        evidence_chars: int = 600,
        mask_code_fences: bool = False,
    ) -> None: ...
    def watcher(self) -> Watcher: ...
    def replay(
        self,
        text: str,
        /,
        splits: Sequence[SupportsIndex] | Any | None = None,
        *,
        channel: str = "text",
    ) -> list[Detection]: ...
    def __reduce__(self) -> tuple[Any, ...]: ...
    @property
    def memory(self) -> int: ...
    def __sizeof__(self) -> int: ...

@final
class Watcher:
    """The state of one stream. Create with ``Ruleset.watcher()``."""

    @property
    def ruleset(self) -> Ruleset: ...
    @property
    def fired(self) -> frozenset[str]: ...
    @property
    def finished(self) -> bool: ...
    def __init__(self, *args: object, **kwargs: object) -> None: ...
    def feed(self, text: str, /, channel: str = "text") -> tuple[Detection, ...]: ...
    def _feed_deltas(self, texts: list[str], channel: str = "text"
                     ) -> list[tuple[int, tuple[Detection, ...]]]: ...
    def finish(self) -> tuple[Detection, ...]: ...
    def reset(self) -> None: ...
    def tail(self, n: int | None = None) -> str: ...
    def copy(self) -> Watcher: ...
    def _sort_comparisons(self) -> int: ...
    def __sizeof__(self) -> int: ...
    def __reduce__(self) -> tuple[Any, ...]: ...

@final
class Recorder:
    """A watched reply's recorder: feeds a watcher, keeps the text, reports detections."""

    def __init__(self, watcher: Watcher, on_fire: Callable[[tuple[Detection, ...]], Any]) -> None: ...
    def feed(self, text: str, /, channel: str = "text") -> Any: ...
    def close(self, message: str) -> None: ...
    def text(self, channel: str) -> str: ...
    def __reduce__(self) -> tuple[Any, ...]: ...

@final
class _Floor:
    def __init__(self, watcher: Watcher) -> None: ...
    def feed(self, text: str, /, channel: str = "text") -> tuple[()] | None: ...
