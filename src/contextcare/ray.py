"""Scan recorded reply streams on Ray Data: the same parsers and rules as ``contextcare scan``,
spread over the cores of one machine or the nodes of a cluster.

Install with ``pip install 'contextcare[ray]'`` (Ray Data and pyarrow). The pieces:

* :class:`ScanFiles` — the batch UDF for :meth:`ray.data.Dataset.map_batches`: a callable class, so
  Ray builds it once per worker actor, and the ruleset it receives (pickled, a few hundred bytes
  for the defaults) is compiled once there. Each input row is one whole trace file (``path`` and
  ``bytes``, as :func:`ray.data.read_binary_files` with ``include_paths=True`` makes them); the
  file is scanned by :func:`contextcare.traces.scan`, the code of the single-process scan: lines
  decoded in blocks by msgspec, each stream's deltas fed in one call (docs/scanning.md).
* :data:`SCHEMA` — the flat output rows (see :func:`result_rows`).
* :func:`scan_dataset` / :func:`run_scan` — read, scan, write Parquet or JSON lines; what
  ``contextcare scan --engine ray`` runs.

The unit of parallelism is the **file**: the streams of one file may be interleaved, and OpenAI
``[DONE]`` lines refer to the file's most recent open stream, so a file is never split. Shard
large recordings into many files (tens to hundreds of MB each) to use many workers.

Inside this module ``import ray`` is an absolute import and binds the Ray package, not this
module (``contextcare.ray``): the two never shadow each other.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

try:
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
    import pyarrow.compute as pc  # type: ignore[import-untyped,unused-ignore]
    import ray
    import ray.data
    from ray.data.block import BlockAccessor
    from ray.data.datasource import BlockBasedFileDatasink
except ModuleNotFoundError as exc:  # pragma: no cover - exercised only without the extra
    raise ModuleNotFoundError(
        f"contextcare.ray needs the '{exc.name}' package: pip install 'contextcare[ray]'",
        name=exc.name) from None

from .detection import EVIDENCE_FIELDS, Detection
from .errors import ContextCareError
from .traces import LINE_MAX_BYTES, StreamResult, TraceFormatError, scan

if TYPE_CHECKING:
    from ._engine import Ruleset

__all__ = [
    "ROW_TYPES",
    "SCHEMA",
    "JsonLinesSink",
    "RayScanError",
    "ScanFiles",
    "detection_of",
    "error_row",
    "file_rows",
    "read_files",
    "result_rows",
    "rows_table",
    "run_scan",
    "scan_dataset",
    "summarize",
]

#: ``row_type`` values: one ``clean`` row per attempt without detections; one ``detection`` row
#: per detection; one ``error`` row per malformed line skipped; one ``fatal`` row for a file that
#: could not be read to its end (a damaged gzip stream, or a malformed line with ``strict``), which
#: then has no other rows.
ROW_TYPES = ("clean", "detection", "error", "fatal")

_EVIDENCE_TYPES: dict[str, Any] = {
    "phrase": pa.string(), "line": pa.string(), "cycle": pa.list_(pa.string()),
    "prefix": pa.string(), "unit": pa.string(), "count": pa.int64(), "total": pa.int64(),
    "ratio": pa.float64(), "run": pa.int64(), "period": pa.int64(), "repeats": pa.int64(),
}
assert tuple(_EVIDENCE_TYPES) == EVIDENCE_FIELDS, "SCHEMA is out of step with Detection"

#: The output rows, flat: the attempt (``source`` … ``detections``, the per-stream totals, repeated
#: on each of its detection rows), the detection (``index`` … ``offset``), its evidence as typed
#: columns (only the fields of its kind are set, see :class:`~contextcare.detection.Detection`),
#: and, on ``error`` and ``fatal`` rows only, the malformed line (``error_line``, ``error``). The
#: schema is fixed so that every block and every output file has the same columns and types, even
#: a file with no detection at all.
SCHEMA = pa.schema([
    ("row_type", pa.string()),
    ("source", pa.string()),
    ("stream", pa.string()),
    ("attempt", pa.int64()),
    ("complete", pa.bool_()),
    ("deltas", pa.int64()),
    ("chars", pa.int64()),
    ("detections", pa.int64()),
    ("index", pa.int64()),
    ("rule", pa.string()),
    ("kind", pa.string()),
    ("action", pa.string()),
    ("channel", pa.string()),
    ("offset", pa.int64()),
    *_EVIDENCE_TYPES.items(),
    ("error_line", pa.int64()),
    ("error", pa.string()),
])

_NULL_ROW: dict[str, Any] = dict.fromkeys(SCHEMA.names)


class RayScanError(ContextCareError, ValueError):
    """A Ray scan that cannot run as asked (bad arguments, unreadable input, a failed job)."""


# --------------------------------------------------------------------------- rows

def result_rows(result: StreamResult) -> list[dict[str, Any]]:
    """The rows of one stream attempt: one ``detection`` row per detection, in order (``index``
    0, 1, …), or a single ``clean`` row when nothing fired, so every attempt is counted."""
    base = {**_NULL_ROW, "source": result.source, "stream": result.stream,
            "attempt": result.attempt, "complete": result.complete, "deltas": result.deltas,
            "chars": result.chars, "detections": len(result.detections)}
    if not result.detections:
        return [{**base, "row_type": "clean"}]
    rows = []
    for i, d in enumerate(result.detections):
        row = {**base, "row_type": "detection", "index": i, **d.to_dict()}
        rows.append(row)
    return rows


def error_row(exc: TraceFormatError, *, fatal: bool = False) -> dict[str, Any]:
    """The row of a malformed line: skipped (``error``), or where the file stopped (``fatal``)."""
    return {**_NULL_ROW, "row_type": "fatal" if fatal else "error", "source": exc.source,
            "error_line": exc.line, "error": exc.reason}


def detection_of(row: dict[str, Any]) -> Detection:
    """The :class:`Detection` a ``detection`` row was made from (the inverse of
    :func:`result_rows` for one detection)."""
    if row.get("row_type") != "detection":
        raise RayScanError(f"row must be a detection row, got row_type={row.get('row_type')!r}")
    evidence = {k: row[k] for k in EVIDENCE_FIELDS if row.get(k) is not None}
    if "cycle" in evidence:
        evidence["cycle"] = tuple(evidence["cycle"])
    return Detection(row["rule"], row["kind"], row["action"], row["channel"], row["offset"],
                     **evidence)


def rows_table(rows: Sequence[dict[str, Any]]) -> pa.Table:
    """``rows`` as an Arrow table of :data:`SCHEMA` (missing keys are null)."""
    return pa.Table.from_pylist(list(rows), schema=SCHEMA)


def file_rows(source: str, data: bytes, ruleset: Ruleset, *, strict: bool = False,
              max_line_bytes: int = LINE_MAX_BYTES) -> list[dict[str, Any]]:
    """Scan one whole trace file (``data``, plain or gzip) named ``source``: its rows.

    The file goes through :func:`contextcare.traces.scan`, the reader and replay of the
    single-process scan (lines decoded in blocks, each stream's deltas fed in one call), so the
    results are those of ``contextcare scan``. Malformed lines, and lines longer than
    ``max_line_bytes``, become ``error`` rows and the scan goes on. With ``strict`` the first one
    stops the file instead, and so does a damaged gzip stream in any case: then the file gives a
    single ``fatal`` row, as the single-process scan gives no results but the error. Bad input
    never raises here, so no exception has to travel from a worker to the driver.
    """
    errors: list[dict[str, Any]] = []

    def on_error(exc: TraceFormatError) -> None:
        errors.append(error_row(exc))

    stream = io.BytesIO(data)
    stream.name = source  # the reader names the results' source by it
    try:
        results = scan(stream, ruleset, on_error=None if strict else on_error,
                       max_line_bytes=max_line_bytes)
    except TraceFormatError as exc:
        return [error_row(exc, fatal=True)]
    rows: list[dict[str, Any]] = []
    for result in results:
        rows += result_rows(result)
    return rows + errors


class ScanFiles:
    """The ``map_batches`` UDF: whole trace files in, :data:`SCHEMA` rows out.

    Ray creates one instance per worker actor; the ruleset is unpickled (and so compiled) once
    there, then every batch reuses it. ``ruleset`` ``None`` means
    :func:`contextcare.default_ruleset`. Input batches are Arrow tables with ``path`` (string)
    and ``bytes`` (binary) columns, the rows of :func:`ray.data.read_binary_files` with
    ``include_paths=True``. ``strict`` and ``max_line_bytes`` are those of :func:`file_rows`.
    """

    def __init__(self, ruleset: Ruleset | None = None, *, strict: bool = False,
                 max_line_bytes: int = LINE_MAX_BYTES) -> None:
        _check_max_line_bytes(max_line_bytes)
        if ruleset is None:
            from .presets import default_ruleset

            ruleset = default_ruleset()
        self.ruleset = ruleset
        self.strict = strict
        self.max_line_bytes = max_line_bytes

    def __call__(self, batch: pa.Table) -> pa.Table:
        missing = {"path", "bytes"} - set(batch.column_names)
        if missing:
            raise RayScanError(f"batch must have 'path' and 'bytes' columns; missing"
                               f" {', '.join(sorted(missing))}")
        rows: list[dict[str, Any]] = []
        for path, data in zip(batch.column("path").to_pylist(),
                              batch.column("bytes").to_pylist()):
            rows += file_rows(path, data, self.ruleset, strict=self.strict,
                              max_line_bytes=self.max_line_bytes)
        return rows_table(rows)


def _check_max_line_bytes(value: object) -> None:
    """Refuse a bad ``max_line_bytes`` where it is given (the driver), not in every worker."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"max_line_bytes must be an int, got {type(value).__name__}")
    if value < 1:
        raise RayScanError(f"max_line_bytes must be at least 1, got {value}")


# --------------------------------------------------------------------------- datasets

def read_files(paths: Sequence[str]) -> ray.data.Dataset:
    """A dataset of ``path``/``bytes`` rows, one per file of ``paths`` (directories are walked).

    The read tasks reserve no CPU: they only move bytes, and the scanning actors of
    :func:`scan_dataset` hold one CPU each, so with one actor per CPU a read that waited for a
    CPU would wait for ever.
    """
    return ray.data.read_binary_files(list(paths), include_paths=True, num_cpus=0)


def scan_dataset(files: ray.data.Dataset, ruleset: Ruleset | None = None, *,
                 strict: bool = False, workers: int | None = None,
                 max_line_bytes: int = LINE_MAX_BYTES) -> ray.data.Dataset:
    """The :data:`SCHEMA` rows of every file of ``files`` (``path``/``bytes`` rows, as
    :func:`read_files` makes them); ``strict`` and ``max_line_bytes`` as for :func:`file_rows`.

    ``workers`` is the number of scanning actors (one CPU each), by default one per CPU of the
    cluster, and at most one per input file. A worker holds one input block (one file, or a few
    small ones: Ray's read decides) and the rows of one file at a time.
    """
    if workers is None:
        cpus = ray.cluster_resources().get("CPU", 1)  # type: ignore[no-untyped-call]
        workers = max(1, int(cpus))
    if workers < 1:
        raise RayScanError(f"workers must be at least 1, got {workers}")
    _check_max_line_bytes(max_line_bytes)
    inputs = len(files.input_files())  # from the file listing: nothing is read yet
    if inputs:
        workers = min(workers, inputs)  # a file is never split: more actors would idle
    return files.map_batches(ScanFiles, fn_constructor_args=(ruleset,),
                             fn_constructor_kwargs={"strict": strict,
                                                    "max_line_bytes": max_line_bytes},
                             batch_format="pyarrow",
                             batch_size=1, compute=ray.data.ActorPoolStrategy(size=workers),
                             num_cpus=1)


class JsonLinesSink(BlockBasedFileDatasink):
    """Rows as JSON lines, one file per block, every :data:`SCHEMA` column on every line (null
    when unset) and values exactly as in Parquet.

    Ray's own ``write_json`` goes through pandas, which turns a nullable integer column into
    floats (``"offset": 600.0``) and keeps 10 significant digits of a float, so it is not used.
    """

    def __init__(self, path: str) -> None:
        super().__init__(path, file_format="jsonl")

    def write_block_to_file(self, block: BlockAccessor, file: Any) -> None:
        for row in block.to_arrow().to_pylist():
            file.write((json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8"))


_COUNTS = ("streams", "detections", "abort", "remind", "record", "errors", "fatal")


def _tally(batch: pa.Table) -> pa.Table:
    """One row of counts per block: what :func:`summarize` adds up. An attempt has one
    ``clean`` row or detection rows with ``index`` 0, 1, …, so it is counted at index 0."""
    types = batch.column("row_type").to_pylist()
    indexes = batch.column("index").to_pylist()
    actions = batch.column("action").to_pylist()
    counts = {"streams": sum(t == "clean" or i == 0 for t, i in zip(types, indexes)),
              "detections": types.count("detection"), "errors": types.count("error"),
              "fatal": types.count("fatal")}
    for action in ("abort", "remind", "record"):
        counts[action] = actions.count(action)
    return pa.Table.from_pylist([counts])


def summarize(rows: ray.data.Dataset) -> dict[str, int]:
    """Counts over a dataset of :data:`SCHEMA` rows, as the single-process scan reports them:
    ``streams`` (attempts), ``detections``, ``abort``/``remind``/``record`` (detections by
    action), ``errors`` (malformed lines skipped) and ``fatal`` (files that stopped early)."""
    total = dict.fromkeys(_COUNTS, 0)
    for part in rows.map_batches(_tally, batch_format="pyarrow", batch_size=None).iter_rows():
        for key in total:
            total[key] += int(part[key])
    return total


def _fatal_rows(batch: pa.Table) -> pa.Table:
    return batch.filter(pc.equal(batch.column("row_type"), "fatal"))


def _first_fatal(rows: ray.data.Dataset) -> TraceFormatError:
    """The error of the first ``fatal`` row, by source and line (the single-process scan reads
    the files in the order given and stops at its first such line)."""
    fatal = rows.map_batches(_fatal_rows, batch_format="pyarrow", batch_size=None).take_all()
    first = min(fatal, key=lambda row: (row["source"], row["error_line"]))
    return TraceFormatError(first["source"], first["error_line"], first["error"])


def _start(address: str | None, num_cpus: int | None, verbose: bool = False) -> bool:
    """Connect to Ray (``address``) or start a local instance; True when this call started it.
    Ray's own log lines (and the workers' output) reach the terminal only when ``verbose``."""
    if ray.is_initialized():
        return False
    options: dict[str, Any] = {"logging_level": logging.INFO if verbose else logging.ERROR,
                               "log_to_driver": verbose}
    if address is None:
        ray.init(num_cpus=num_cpus, include_dashboard=False, **options)
    else:
        if num_cpus is not None:
            raise RayScanError("num_cpus applies to a local Ray only, not with an address")
        ray.init(address=address, **options)
    return True


def run_scan(paths: Sequence[str], output: str | None = None, *, ruleset: Ruleset | None = None,
             fmt: str = "parquet", address: str | None = None, num_cpus: int | None = None,
             workers: int | None = None, strict: bool = False,
             max_line_bytes: int = LINE_MAX_BYTES, progress: bool = False,
             verbose: bool = False) -> dict[str, int]:
    """Scan ``paths`` (files, directories or URIs Ray Data can read: ``s3://``, ``gs://``, …) and
    write the rows to the directory ``output`` as ``fmt`` (``parquet`` or ``jsonl``, one file
    per block); return the :func:`summarize` counts. Ray's own log lines are shown only when
    ``verbose``.

    Ray is used as found when already initialized; otherwise ``address`` (``auto``,
    ``ray://head:10001``, …) joins a running cluster, and no ``address`` starts a local Ray on
    this machine (``num_cpus`` caps it), shut down afterwards. ``output`` ``None`` computes the
    counts only. A ``fatal`` row (a damaged gzip stream, or with ``strict`` a malformed line)
    raises its :class:`TraceFormatError` and writes nothing, as the single-process scan stops.
    A line longer than ``max_line_bytes`` is a malformed line, as in the single-process scan
    (the worker holds the whole file anyway: the limit gives the same rows, it bounds no memory).
    """
    if fmt not in ("parquet", "jsonl"):
        raise RayScanError(f"fmt must be 'parquet' or 'jsonl', got {fmt!r}")
    if isinstance(paths, str) or not paths:
        raise RayScanError(f"paths must be a non-empty list of paths, got {paths!r}")
    if "-" in paths:
        raise RayScanError("the Ray engine cannot read standard input ('-'); pass files")
    _check_max_line_bytes(max_line_bytes)
    started = _start(address, num_cpus, verbose)
    try:
        ray.data.DataContext.get_current().enable_progress_bars = progress
        if not (progress or verbose):  # the per-execution INFO lines are progress reports too
            logging.getLogger("ray.data").setLevel(logging.WARNING)
        try:
            files = read_files(paths)
        except (OSError, ValueError) as exc:  # a missing file, an unknown scheme
            raise RayScanError(f"cannot read the inputs: {exc}") from None
        rows = scan_dataset(files, ruleset, strict=strict, workers=workers,
                            max_line_bytes=max_line_bytes).materialize()
        summary = summarize(rows)
        if summary["fatal"]:
            raise _first_fatal(rows)
        if output is not None:
            if fmt == "parquet":
                rows.write_parquet(output)
            else:
                rows.write_datasink(JsonLinesSink(output))
        return summary
    finally:
        if started:
            ray.shutdown()
