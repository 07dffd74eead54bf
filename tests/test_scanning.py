"""contextcare.scanning: the pieces the local and the Ray scan share."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextcare import default_ruleset
from contextcare.scanning import FAIL_ACTIONS, exit_status, load_ruleset, summary_line

SUMMARY = {"streams": 3, "detections": 2, "abort": 0, "remind": 2, "record": 0}


def test_load_ruleset_default_and_file(tmp_path: Path) -> None:
    default_ids = [r.id for r in default_ruleset().rules]
    assert [r.id for r in load_ruleset("default").rules] == default_ids
    path = tmp_path / "rules.toml"
    path.write_text('[[rules]]\ntype = "Marker"\nid = "end"\ntoken = "<<END>>"\n',
                    encoding="utf-8")
    loaded = load_ruleset(str(path))
    assert [r.id for r in loaded.rules if r.id not in default_ids] == ["end"]
    assert [r.kind for r in loaded.rules if r.id == "end"] == ["marker"]


def test_summary_line_shows_record_only_when_there_is_one() -> None:
    assert summary_line(SUMMARY) == "3 streams, 2 detections (0 abort, 2 remind)"
    assert summary_line({**SUMMARY, "record": 1}) == (
        "3 streams, 2 detections (0 abort, 2 remind, 1 record)")


@pytest.mark.parametrize(("fail_on", "status"), [(None, 0), ("abort", 0), ("remind", 1)])
def test_exit_status_follows_fail_on(fail_on: str | None, status: int) -> None:
    assert exit_status(SUMMARY, fail_on) == status
    assert exit_status({**SUMMARY, "abort": 1}, fail_on) == (0 if fail_on is None else 1)
    assert set(FAIL_ACTIONS) == {"abort", "remind"}
