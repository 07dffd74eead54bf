"""The Ray Data scan (contextcare.ray): its rows, and that a local Ray with two workers gives
exactly what the single-process scan gives on a corpus of 10 000 streams.

Needs the ``[ray]`` extra; skipped without it. The tests that start Ray are marked ``slow``
(starting Ray and its worker processes alone takes 10-20 s on a small machine).
"""

from __future__ import annotations

import gzip
import io
import json
import logging
import os
import pickle
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray", reason="the Ray engine needs the [ray] extra: pip install"
                                  " 'contextcare[ray]'")
pytest.importorskip("pyarrow", reason="the Ray engine needs pyarrow (the [ray] extra)")

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]

import contextcare.ray as ccray
from contextcare.testing import write_corpus
from contextcare import cli, default_ruleset
from contextcare.detection import EVIDENCE_FIELDS
from contextcare import traces
from contextcare.traces import (
    StreamResult,
    TraceFormatError,
    iter_events,
    replay,
    sample_events,
)

# Ray Data 2.60 warns about its own deprecated settings when its DataContext is first made (its
# constructor assigns every field, the deprecated ones too); nothing here sets them.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")

CORPUS_STREAMS = 10_000
CORPUS_FILES = 8


def _key(row: dict[str, Any]) -> str:
    """A total order on rows (with nulls and lists): their canonical JSON."""
    return json.dumps(row, sort_keys=True, ensure_ascii=False)


def _single_process_rows(paths: list[str]) -> tuple[list[StreamResult], list[dict[str, Any]]]:
    """What ``contextcare scan`` does, in one process: every file's events through one replay,
    malformed lines skipped. Returns the results and their rows (the same row mapping as the
    Ray path, which the round-trip test below checks on its own)."""
    errors: list[TraceFormatError] = []
    events = (e for path in paths for e in iter_events(path, on_error=errors.append))
    results = list(replay(events, default_ruleset()))
    rows = [row for r in results for row in ccray.result_rows(r)]
    return results, rows + [ccray.error_row(e) for e in errors]


# --------------------------------------------------------------------------- without a cluster

def test_import_ray_inside_the_module_is_the_ray_package() -> None:
    import ray

    bound = vars(ccray)["ray"]  # what `import ray` bound inside contextcare/ray.py
    assert ccray.__name__ == "contextcare.ray"
    assert bound is ray is sys.modules["ray"]
    assert callable(bound.init) and hasattr(bound, "data")


def test_rows_give_back_every_detection_and_total_of_the_samples() -> None:
    results = list(replay(sample_events(), default_ruleset()))
    kinds = {d.kind for r in results for d in r.detections}
    assert {"tail-repeat", "line-repeat", "line-cycle", "time-anxiety"} <= kinds
    rows = ccray.rows_table([row for r in results for row in ccray.result_rows(r)]).to_pylist()
    for r in results:
        mine = [row for row in rows if (row["source"], row["stream"]) == (r.source, r.stream)]
        if not r.detections:
            assert [row["row_type"] for row in mine] == ["clean"]
        assert [row["index"] for row in mine if row["row_type"] == "detection"] == \
            list(range(len(r.detections)))
        got = [ccray.detection_of(row) for row in mine if row["row_type"] == "detection"]
        assert got == list(r.detections)  # the evidence survives the typed columns exactly
        for row in mine:
            assert (row["attempt"], row["complete"], row["deltas"], row["chars"],
                    row["detections"]) == (r.attempt, r.complete, r.deltas, r.chars,
                                           len(r.detections))


def test_a_clean_file_keeps_the_full_schema() -> None:
    data = b'{"stream": "a", "type": "text-delta", "text": "All good.\\n"}\n'
    batch = pa.table({"path": ["clean.jsonl"], "bytes": [data]})
    table = ccray.ScanFiles()(batch)
    assert table.schema == ccray.SCHEMA  # all-null evidence columns keep their types
    assert table.to_pylist() == [{**dict.fromkeys(ccray.SCHEMA.names), "row_type": "clean",
                                  "source": "clean.jsonl", "stream": "a", "attempt": 1,
                                  "complete": False, "deltas": 1, "chars": 10,
                                  "detections": 0}]


def test_malformed_lines_are_error_rows_or_with_strict_one_fatal_row() -> None:
    data = (b'{"stream": "a", "type": "start"}\n'
            b'not json\n'
            b'{"stream": "a", "type": "reasoning-delta", "text": "I am running out of time"}\n'
            b'{"stream": "a", "type": "end"}\n')
    rs = default_ruleset()
    rows = ccray.file_rows("f.jsonl", data, rs)
    assert [r["row_type"] for r in rows] == ["detection", "error"]
    assert rows[0]["kind"] == "time-anxiety" and rows[0]["complete"] is True
    assert (rows[1]["source"], rows[1]["error_line"]) == ("f.jsonl", 2)
    strict = ccray.file_rows("f.jsonl", data, rs, strict=True)
    assert [(r["row_type"], r["error_line"]) for r in strict] == [("fatal", 2)]


def test_a_damaged_gzip_file_is_one_fatal_row() -> None:
    body = b"".join(json.dumps({"stream": f"s{i}", "type": "text-delta",
                                "text": f"line {i}\n"}).encode() + b"\n" for i in range(2000))
    data = gzip.compress(body)
    data = data[:len(data) // 2]  # cut off mid-stream
    rows = ccray.file_rows("cut.jsonl.gz", data, default_ruleset())
    assert [r["row_type"] for r in rows] == ["fatal"]
    assert "gzip" in rows[0]["error"]


def test_the_udf_gives_the_same_rows_after_the_ruleset_is_pickled(tmp_path: Path) -> None:
    paths = write_corpus(tmp_path, streams=200, files=4)
    batch = pa.table({"path": paths, "bytes": [Path(p).read_bytes() for p in paths]})
    here = ccray.ScanFiles(default_ruleset())(batch).to_pylist()
    shipped = ccray.ScanFiles(pickle.loads(pickle.dumps(default_ruleset())))(batch).to_pylist()
    assert here == shipped
    _, want = _single_process_rows(paths)
    assert sorted(map(_key, here)) == sorted(map(_key, want))


def test_the_udf_feeds_each_streams_deltas_in_runs_not_event_by_event(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The workers take the batched path of the single-process scan: a stream of 5 000 deltas
    costs its start and end as single events, its deltas go to the watcher in runs (a few
    calls, not one per delta), with the rows of the per-event replay."""
    lines = [{"stream": "s", "type": "start"}]
    lines += [{"stream": "s", "type": "reasoning-delta", "text": t}
              for t in ["I am ", "running ", "out ", "of ", "time. "] * 1000]
    lines.append({"stream": "s", "type": "end"})
    data = "".join(json.dumps(o) + "\n" for o in lines).encode()
    want = [row for r in replay(iter_events(io.BytesIO(data)), default_ruleset())
            for row in ccray.result_rows(r)]
    events, runs = [0], [0]
    push, feed = traces.Replayer.push, traces.Replayer._feed_pending

    def counted_push(self: traces.Replayer, event: traces.Event) -> list[StreamResult]:
        events[0] += 1
        return push(self, event)

    def counted_feed(self: traces.Replayer, key: tuple[str, str]) -> None:
        runs[0] += 1
        feed(self, key)

    monkeypatch.setattr(traces.Replayer, "push", counted_push)
    monkeypatch.setattr(traces.Replayer, "_feed_pending", counted_feed)
    rows = ccray.file_rows("<stream>", data, default_ruleset())
    assert [{**row, "source": None} for row in rows] == [{**row, "source": None} for row in want]
    assert rows[0]["deltas"] == 5000
    assert {"time-anxiety", "block-repeat"} <= {row["kind"] for row in rows}
    assert events[0] == 2  # start and end
    assert 1 <= runs[0] <= len(data) // (64 << 10) + 2  # at most one call per 64 KiB block


def test_max_line_bytes_makes_a_longer_line_an_error_row_as_in_process() -> None:
    lines = [{"stream": "r", "type": "start"},
             {"stream": "r", "type": "text-delta", "text": "y" * 3000},
             {"stream": "r", "type": "text-delta", "text": "Let me check again.\n" * 40},
             {"stream": "r", "type": "end"}]
    data = "".join(json.dumps(o) + "\n" for o in lines).encode()
    for body in (data, gzip.compress(data)):
        rows = ccray.file_rows("t.jsonl", body, default_ruleset(), max_line_bytes=2048)
        errors: list[TraceFormatError] = []
        want = [row for r in traces.scan(_named(body, "t.jsonl"), default_ruleset(),
                                         on_error=errors.append, max_line_bytes=2048)
                for row in ccray.result_rows(r)] + [ccray.error_row(e) for e in errors]
        assert rows == want
        assert [(r["row_type"], r["error_line"]) for r in rows if r["row_type"] == "error"] \
            == [("error", 2)]
        assert "longer than the 2048-byte limit" in rows[-1]["error"]
        assert rows[0]["chars"] == 800 and rows[0]["detections"] > 0  # the rest was scanned
        strict = ccray.file_rows("t.jsonl", body, default_ruleset(), strict=True,
                                 max_line_bytes=2048)
        assert [(r["row_type"], r["error_line"]) for r in strict] == [("fatal", 2)]
        # under the default limit the same file reads whole
        assert not [r for r in ccray.file_rows("t.jsonl", body, default_ruleset())
                    if r["row_type"] == "error"]


def _named(data: bytes, name: str) -> io.BytesIO:
    stream = io.BytesIO(data)
    stream.name = name
    return stream


@pytest.mark.parametrize(("value", "error"), [(0, ValueError), (-5, ValueError),
                                              ("64M", TypeError), (True, TypeError),
                                              (1.5, TypeError)])
def test_bad_max_line_bytes_is_refused_on_the_driver(value: Any, error: type) -> None:
    with pytest.raises(error, match="max_line_bytes"):
        ccray.run_scan(["x.jsonl"], max_line_bytes=value)  # before Ray starts
    with pytest.raises(error, match="max_line_bytes"):
        ccray.ScanFiles(max_line_bytes=value)


def test_run_scan_rejects_bad_arguments() -> None:
    with pytest.raises(ccray.RayScanError, match="fmt"):
        ccray.run_scan(["x.jsonl"], fmt="csv")
    with pytest.raises(ccray.RayScanError, match="standard input"):
        ccray.run_scan(["-"])
    with pytest.raises(ccray.RayScanError, match="non-empty list"):
        ccray.run_scan("x.jsonl")


# --------------------------------------------------------------------------- local Ray

@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """A local Ray with two CPUs for this module's tests (started once: it is slow)."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    return write_corpus(tmp_path_factory.mktemp("corpus"), streams=CORPUS_STREAMS,
                              files=CORPUS_FILES)


def _check_corpus_expectations(results: list[StreamResult]) -> None:
    """The corpus is what write_corpus promises, so the equality below is not vacuous: every
    stream appears, loops abort, anxious reasoning reminds, clean streams stay clean."""
    last = {r.stream: r for r in results}  # the last attempt of each stream
    assert len(last) == CORPUS_STREAMS
    assert any(r.attempt == 2 for r in results) and any(not r.complete for r in results)
    for name, r in last.items():
        actions = {d.action for d in r.detections}
        kind = int(name[1:]) % 10
        if kind in (6, 7):
            assert "abort" in actions, name
        elif kind == 8:
            assert actions == {"remind"}, name
        else:
            assert not actions, name


@pytest.mark.slow
def test_ray_local_mode_equals_the_single_process_scan(local_ray: None, corpus: list[str],
                                                       tmp_path: Path) -> None:
    results, want = _single_process_rows(corpus)
    _check_corpus_expectations(results)
    out = tmp_path / "rows"
    summary = ccray.run_scan(corpus, str(out), workers=2)
    got = pq.read_table(out).to_pylist()
    assert len(got) == len(want)
    assert sorted(map(_key, got)) == sorted(map(_key, want))
    detections = [d for r in results for d in r.detections]
    assert summary == {"streams": len(results), "detections": len(detections),
                       "abort": sum(d.action == "abort" for d in detections),
                       "remind": sum(d.action == "remind" for d in detections),
                       "record": sum(d.action == "record" for d in detections),
                       "errors": 1, "fatal": 0}

    # and the detection rows are the lines of `contextcare scan --format jsonl`
    buffer = io.StringIO()
    assert cli.cmd_scan(cli.build_parser().parse_args(
        ["scan", "--format", "jsonl", "--no-progress", *corpus]), buffer) == 0
    columns = ("source", "stream", "attempt", "rule", "kind", "action", "channel", "offset")

    def shared(row: dict[str, Any]) -> dict[str, Any]:
        # the columns both outputs carry (the CLI adds source_line; Ray rows do not have it)
        return {k: v for k, v in row.items()
                if v is not None and (k in columns or k in EVIDENCE_FIELDS)}

    records = [json.loads(line) for line in buffer.getvalue().splitlines()]
    assert records[-1]["type"] == "summary" and records[-1]["complete"] is True
    lines = [shared(r) for r in records if r["type"] == "detection"]
    mine = [shared(row) for row in got if row["row_type"] == "detection"]
    assert sorted(map(_key, mine)) == sorted(map(_key, lines))


@pytest.mark.slow
def test_ray_strict_stops_at_the_first_malformed_line(local_ray: None, corpus: list[str],
                                                      tmp_path: Path) -> None:
    out = tmp_path / "rows"
    with pytest.raises(TraceFormatError) as info:
        ccray.run_scan(corpus[:2], str(out), strict=True, workers=2)
    assert (info.value.source, info.value.line) == (corpus[0], 1)  # file 0 starts with one
    assert not out.exists()


@pytest.mark.slow
def test_cli_engine_ray_writes_jsonl_and_fails_on_abort(local_ray: None, corpus: list[str],
                                                        tmp_path: Path) -> None:
    out = tmp_path / "rows"
    buffer = io.StringIO()
    args = cli.build_parser().parse_args(
        ["scan", "--engine", "ray", "--format", "jsonl", "--output", str(out), "--fail-on",
         "abort", "--no-progress", corpus[1]])
    assert cli.cmd_scan(args, buffer) == 1  # stream 6 of every 10 loops: abort
    rows = [json.loads(line) for name in sorted(os.listdir(out))
            for line in (out / name).read_text(encoding="utf-8").splitlines()]
    _, want = _single_process_rows([corpus[1]])
    assert sorted(map(_key, rows)) == sorted(map(_key, want))
    streams = sum(r["row_type"] == "clean" or r["index"] == 0 for r in want)
    assert buffer.getvalue().startswith(f"{streams} streams, ")


@pytest.mark.slow
def test_cli_engine_ray_honours_max_line_bytes(local_ray: None, tmp_path: Path) -> None:
    lines = [{"stream": "r", "type": "start"},
             {"stream": "r", "type": "text-delta", "text": "y" * 3000},
             {"stream": "r", "type": "text-delta", "text": "Let me check again.\n" * 40},
             {"stream": "r", "type": "end"}]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in lines), encoding="utf-8")
    out = tmp_path / "rows"
    buffer = io.StringIO()
    args = cli.build_parser().parse_args(
        ["scan", "--engine", "ray", "--format", "jsonl", "--output", str(out),
         "--max-line-bytes", "2K", "--no-progress", str(path)])
    assert cli.cmd_scan(args, buffer) == 0
    rows = [json.loads(line) for name in sorted(os.listdir(out))
            for line in (out / name).read_text(encoding="utf-8").splitlines()]
    assert sorted(map(_key, rows)) == sorted(map(_key, ccray.file_rows(
        str(path), path.read_bytes(), default_ruleset(), max_line_bytes=2048)))
    assert [(r["row_type"], r["error_line"]) for r in rows if r["row_type"] == "error"] \
        == [("error", 2)]
    assert "longer than the 2048-byte limit" in next(
        r["error"] for r in rows if r["row_type"] == "error")
