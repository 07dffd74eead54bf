"""contextcare.testing: the synthetic corpus promises loops, anxiety and clean streams, in both
trace formats, without Ray installed."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextcare import default_ruleset
from contextcare.testing import write_corpus
from contextcare.traces import TraceFormatError, iter_events, replay


def test_corpus_holds_every_kind_of_stream(tmp_path: Path) -> None:
    paths = write_corpus(tmp_path, streams=40, files=4)
    assert [Path(p).name for p in paths] == [
        "part-0000.jsonl", "part-0001.jsonl", "part-0002.jsonl.gz", "part-0003.jsonl"]
    errors: list[TraceFormatError] = []
    results = [r for p in paths
               for r in replay(iter_events(p, on_error=errors.append), default_ruleset())]
    assert len(errors) == 1  # file 0 opens with one malformed line
    fired = {d.rule for r in results for d in r.detections}
    assert "line-repeat" in fired and fired & {"time-anxiety", "context-anxiety"}
    assert any(not r.detections for r in results)
    again = write_corpus(tmp_path / "again", streams=40, files=4)  # seeded: the same bytes
    assert [Path(p).read_bytes() for p in again] == [Path(p).read_bytes() for p in paths]


def test_corpus_refuses_empty_sizes(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        write_corpus(tmp_path, streams=0)
