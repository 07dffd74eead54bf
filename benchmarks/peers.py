"""What users would use instead of contextcare, set up the way a careful user would.

* pyahocorasick: one automaton of all phrases; streaming through one resumable iterator per
  stream (``it = A.iter(""); it.set(delta)`` keeps the automaton state and the running index).
  Its 2.3.1 resumable iterator corrupts memory when a delta holds a character outside the BMP, so
  it only ever sees BMP-only traces.
* Hyperscan (python-hyperscan, which bundles Vectorscan): one literal database per mode; stream
  mode with one ``Stream`` per stream. python-hyperscan 0.9.1 keeps only a borrowed reference to a
  stream's match callback, so the callback object is held here for as long as the stream lives.

Each ``*_stream`` object consumes ``str`` deltas and collects every occurrence as
``(end, phrase index)`` with ``end`` exclusive; Hyperscan's ends are UTF-8 byte offsets.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = [
    "AhoStream",
    "HsStream",
    "aho_automaton",
    "aho_oneshot",
    "have_ahocorasick",
    "have_hyperscan",
    "hs_block",
    "hs_database",
]


def have_ahocorasick() -> bool:
    try:
        import ahocorasick  # type: ignore[import-not-found,unused-ignore]  # noqa: F401
    except ImportError:
        return False
    return True


def have_hyperscan() -> bool:
    try:
        import hyperscan  # noqa: F401
    except ImportError:
        return False
    return True


# --------------------------------------------------------------------------- pyahocorasick

def aho_automaton(phrases: tuple[str, ...]) -> Any:
    """An ``ahocorasick.Automaton`` whose value for each phrase is its index."""
    import ahocorasick  # type: ignore[import-not-found,unused-ignore]

    automaton = ahocorasick.Automaton()
    for k, p in enumerate(phrases):
        automaton.add_word(p, k)
    automaton.make_automaton()
    return automaton


class AhoStream:
    """One stream through pyahocorasick's resumable iterator."""

    def __init__(self, automaton: Any) -> None:
        self.iterator = automaton.iter("")
        self.hits: list[tuple[int, int]] = []

    def run(self, deltas: list[str]) -> None:
        """Feed every delta; the timed loop."""
        it = self.iterator
        put = it.set
        app = self.hits.append
        for d in deltas:
            put(d)
            for m in it:
                app(m)

    def occurrences(self) -> list[tuple[int, int]]:
        # pyahocorasick reports the index of the last character (inclusive).
        return sorted((end + 1, k) for end, k in self.hits)


def aho_oneshot(automaton: Any, text: str) -> list[tuple[int, int]]:
    """Every occurrence in ``text`` with one ``iter`` call over the whole text."""
    return [(end + 1, k) for end, k in automaton.iter(text)]


# --------------------------------------------------------------------------- hyperscan

def hs_database(phrases: tuple[str, ...], stream: bool) -> Any:
    """A Hyperscan literal database of ``phrases`` (ids = indexes), stream or block mode."""
    import hyperscan

    mode = hyperscan.HS_MODE_STREAM if stream else hyperscan.HS_MODE_BLOCK
    db = hyperscan.Database(mode=mode)
    db.compile(expressions=[p.encode("utf-8") for p in phrases], ids=list(range(len(phrases))),
               elements=len(phrases), flags=0, literal=True)
    return db


class HsStream:
    """One Hyperscan stream. ``encode=True`` encodes each ``str`` delta (what a user with text
    deltas must do); ``encode=False`` takes pre-encoded bytes (Hyperscan's best case)."""

    def __init__(self, db: Any) -> None:
        self.hits: list[tuple[int, int]] = []
        app = self.hits.append

        def on_match(k: int, start: int, end: int, flags: int, context: object) -> None:
            app((end, k))

        # Held on purpose: the stream itself only borrows the callback.
        self.callback: Callable[[int, int, int, int, object], None] = on_match
        self.stream = db.stream(match_event_handler=on_match)
        self.stream.__enter__()

    def run(self, deltas: list[str]) -> None:
        """Encode and scan every delta; the timed loop."""
        scan = self.stream.scan
        for d in deltas:
            scan(d.encode())

    def run_bytes(self, deltas: list[bytes]) -> None:
        """Scan every pre-encoded delta; the timed loop."""
        scan = self.stream.scan
        for d in deltas:
            scan(d)

    def close(self) -> None:
        self.stream.__exit__(None, None, None)

    def occurrences(self) -> list[tuple[int, int]]:
        return sorted(self.hits)


def hs_block(db: Any, data: bytes) -> list[tuple[int, int]]:
    """Every occurrence in ``data`` with one block-mode scan (byte end offsets)."""
    hits: list[tuple[int, int]] = []
    app = hits.append

    def on_match(k: int, start: int, end: int, flags: int, context: object) -> None:
        app((end, k))

    db.scan(data, match_event_handler=on_match)
    return hits
