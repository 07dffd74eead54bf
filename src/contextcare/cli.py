"""The ``contextcare`` command line (also ``python -m contextcare``).

Commands:

* ``demo`` — replay the bundled sample traces through the default rules, print what fired and the
  throughput measured on the spot;
* ``scan [FILE|DIR|-]...`` — replay recorded replies (contextcare JSONL events, OpenAI chunk
  streams, saved OpenAI completions; plain or gzip; folders walked; standard input when piped;
  plain text with ``--as-text``) and report detections, each pointing to its input line (a table
  on a terminal, one ``path:line:`` record per line in a pipe); ``--fail-on`` for CI, which a file
  that is not a trace or a skipped line never passes; ``--engine ray`` spreads the files over a
  Ray cluster (:mod:`contextcare.ray`);
* ``rules`` — show the rules a ``--rules`` file compiles to (and so check the file);
* ``grade`` — fatigue and wakefulness for a load, a retained history and a capacity;
* ``plan`` / ``mindmap`` — the compaction planner and the clear-mind survey of a conversation;
* ``memory rank|check|init`` — the "Oft-told" memory anchors of a directory;
* ``help [COMMAND]`` — the help of a command (``contextcare`` alone prints the full help).

Exit status: 0 success; 1 ``--fail-on`` matched (or ``memory check`` found problems); 2 a usage
error, an unreadable input or a file that is not a trace, an invalid rules file, or a malformed
trace line under ``--strict`` or ``--fail-on``. A closed output pipe ends the command by SIGPIPE.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import json
import os
import re
import sys
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal, TextIO, cast

from . import memory
from .detection import Detection
from .errors import ArgumentValueError, ContextCareError
from .memory import anchors as _memory_anchors
from .scanning import FAIL_ACTIONS, exit_status, load_ruleset, summary_line
from .traces import _ERROR as _OP_ERROR
from .traces import (
    LINE_MAX_BYTES,
    Event,
    Replayer,
    Site,
    StreamResult,
    TraceFormatError,
    _event_blocks,
    _source_name,
    _source_ops,
    iter_text_events,
    replay,
    sample_events,
)

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

    from ._engine import Ruleset

__all__ = ["main", "format_evidence", "build_parser"]

#: Inputs at least this large (bytes on disk, all files together) get a progress bar on a terminal.
PROGRESS_MIN_BYTES = 1 << 20
#: The demo replays the samples until this much time has passed (and at least 3 times).
DEMO_MIN_SECONDS = 0.5



class CommandError(ContextCareError):
    """A problem the user must fix (bad input, missing module); printed without a traceback."""


# --------------------------------------------------------------------------- output helpers

def _console(file: TextIO | None = None, *, stderr: bool = False) -> Console:
    """A rich console; when writing to a file or pipe, lines are not cut at 80 columns."""
    from rich.console import Console

    console = Console(file=file, stderr=stderr, highlight=False, soft_wrap=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = 160
    return console


def _show(console: Console, renderable: Any) -> None:
    """Print a table: as is on a terminal; elsewhere without the padding at the ends of lines."""
    if console.is_terminal:
        console.print(renderable)
        return
    with console.capture() as captured:
        console.print(renderable)
    console.file.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))


def _quote(text: str, limit: int = 40) -> str:
    """``text`` as a short double-quoted literal: control characters escaped, CJK kept."""
    body = json.dumps(text[:limit], ensure_ascii=False)
    return body if len(text) <= limit else body[:-1] + '…"'


def _pct(ratio: float | None) -> str:
    return "" if ratio is None else f" ({ratio * 100:.0f}%)"


def _line_evidence(d: Detection, line: str | None, line_cut: bool) -> str:
    whole = line if line is not None else (d.line or "")
    shown = _quote(whole)
    if line_cut or (line is None and len(whole) >= 40):  # the engine keeps 40 characters
        shown = (shown if shown.endswith('…"') else shown[:-1] + '…"') + " (a longer line)"
    elif len(whole) > 40:
        shown += f" (a {len(whole)}-character line)"
    text = f"{shown} ×{d.count} of {d.total} lines{_pct(d.ratio)}"
    return text + (f", run {d.run}" if d.run and d.run > 1 else "")


def _unit_evidence(d: Detection, unit: str | None) -> str:
    whole = unit if unit is not None else (d.unit or "")
    period = d.period or len(whole)
    shown = _quote(whole)
    if period > min(len(whole), 40) and not shown.endswith('…"'):
        shown = shown[:-1] + '…"'  # the engine keeps only the unit's first characters
    return f"{shown} ×{d.repeats} (a {period}-character unit)"


def _block_evidence(d: Detection) -> str:
    size = f", {d.total} characters a copy" if d.total is not None else ""
    if d.period == 1:
        return f"{_quote(d.line or '')} ×{d.repeats} back to back{size}"
    return f"a {d.period}-line block from {_quote(d.line or '')} ×{d.repeats} back to back{size}"


def _segment_evidence(d: Detection) -> str:
    return f"{_quote(d.line or '')} and its near-variants: {d.count} of the last {d.total} lines"


def _vocab_evidence(d: Detection) -> str:
    return f"{d.count} distinct words in the last {d.total}: {_quote(d.line or '')}"


def format_evidence(d: Detection, unit: str | None = None, line: str | None = None,
                    line_cut: bool = False) -> str:
    """One line of evidence for a table cell or a text record, by the detection's kind.

    ``unit`` is the whole repeating unit of a ``tail-repeat`` and ``line`` the whole repeated line
    of a ``line-repeat`` when known (see :class:`contextcare.traces.Site`); one shown in part ends
    with ``…`` and gives its length.
    """
    kind = d.kind
    if kind == "block-repeat":
        return _block_evidence(d)
    if kind == "vocab-collapse":
        return _vocab_evidence(d)
    if kind == "segment-repeat":
        return _segment_evidence(d)
    if kind == "structure-flood":
        return f"no word in the last {d.total} characters: {_quote(d.line or '')}"
    if d.phrase is not None:
        return _quote(d.phrase)
    if d.line is not None:
        return _line_evidence(d, line, line_cut)
    if d.cycle is not None:
        lines = " / ".join(_quote(line) for line in d.cycle)
        return f"{lines} cover {d.count} of {d.total} lines{_pct(d.ratio)}"
    if d.prefix is not None:
        return f"prefix {_quote(d.prefix)} on {d.count} of {d.total} lines{_pct(d.ratio)}"
    if d.unit is not None:
        return _unit_evidence(d, unit)
    if d.count is not None and d.total is not None:
        return f"{d.count} of {d.total} lines{_pct(d.ratio)}"
    return ", ".join(f"{k}={v!r}" for k, v in d.evidence().items())


def _evidence(d: Detection, site: Site | None) -> str:
    if site is None:
        return format_evidence(d)
    return format_evidence(d, site.unit, site.repeated, site.repeated_cut)


def _table(*columns: str, **options: Any) -> Any:
    """The one table style of the command line: a bold header, a rule under it, no frame."""
    from rich import box
    from rich.table import Table

    table = Table(show_header=True, header_style="bold", box=box.SIMPLE_HEAD, show_edge=False,
                  **options)
    for column in columns:
        table.add_column(column)
    return table


def _sites(result: StreamResult) -> Sequence[Site | None]:
    if len(result.sites) == len(result.detections):
        return result.sites
    return [None] * len(result.detections)


def _stream_name(result: StreamResult) -> str:
    """The stream as one token: quoted when empty or holding spaces; ``#N`` for attempt N > 1."""
    name = result.stream
    if not name or any(c.isspace() for c in name):
        name = json.dumps(name, ensure_ascii=False)
    return name + (f"#{result.attempt}" if result.attempt > 1 else "")


def _detections_table(results: Sequence[StreamResult], *, show_clean: bool, width: int,
                      lines: bool = False) -> Any:
    """Stream, rule (kind), action, channel:char offset, evidence; with ``lines`` first the
    line of the input where each detection fired (the caller heads the table with its file).
    Below ~110 columns the kind and the channel go under the rule and the action (dimmed) so the
    evidence keeps room. Every row names its stream."""
    from rich.text import Text

    narrow = width < 110
    table = _table()
    if lines:
        table.add_column("line", justify="right", no_wrap=True)
    table.add_column("stream", overflow="fold")
    table.add_column("rule / kind" if narrow else "rule (kind)", no_wrap=True)
    table.add_column("action /\nchannel:char" if narrow else "action", no_wrap=True)
    if not narrow:
        table.add_column("channel:char", justify="right", no_wrap=True)
    table.add_column("evidence", overflow="fold")
    styles = {"abort": "bold red", "remind": "yellow", "record": "cyan"}
    for r in results:
        name = _stream_name(r)
        if not r.detections:
            if show_clean:
                blank = [Text("")] * (2 if narrow else 3)
                table.add_row(*([Text("")] if lines else []), Text(name),
                              Text("—", style="dim"), *blank[1:],
                              Text("no detections", style="green"))
            continue
        for i, (d, site) in enumerate(zip(r.detections, _sites(r))):
            rule = Text(d.rule)
            if d.kind != d.rule:
                rule.append(f"\n{d.kind}" if narrow else f" ({d.kind})", style="dim")
            where = f"{d.channel}:{d.offset}"
            action = Text(d.action, style=styles.get(d.action, ""))
            cells = [action]
            if narrow:
                action.append(f"\n{where}", style="dim")
            else:
                cells.append(Text(where))
            evidence = Text(_evidence(d, site))
            if site is not None and site.before is not None:
                evidence.append(f"\n{_quote(site.before, 60)} | {_quote(site.after or '', 60)}",
                                style="dim")
            line = [Text(str(site.line) if site is not None and site.line else "")]
            table.add_row(*(line if lines else []), Text(name, style="" if i == 0 else "dim"),
                          rule, *cells, evidence)
    return table


def _print_by_source(console: Console, results: Sequence[StreamResult]) -> None:
    """The flagged streams as one table per input file, headed by its path (as ``rg`` groups
    matches by file on a terminal)."""
    from rich.text import Text

    by_source: dict[str, list[StreamResult]] = {}
    for r in results:
        by_source.setdefault(r.source, []).append(r)
    for source, group in by_source.items():
        console.print(Text(source, style="bold magenta"))
        _show(console, _detections_table(group, show_clean=False, width=console.width,
                                         lines=True))
        console.print()


def _records(result: StreamResult) -> Iterator[str]:
    """The text records of one stream for a pipe: ``path:line: stream rule action (channel,
    char N) evidence``, one line each, nothing padded; with context, a ``path-line-`` line
    after each (as ``rg -C``)."""
    name = _stream_name(result)
    for d, site in zip(result.detections, _sites(result)):
        line = site.line if site is not None else 0
        yield (f"{result.source}:{line}: {name} {d.rule} {d.action} ({d.channel}, char"
               f" {d.offset}) {_evidence(d, site)}")
        if site is not None and site.before is not None:
            yield (f"{result.source}-{line}- context: {json.dumps(site.before, ensure_ascii=False)}"
                   f" | {json.dumps(site.after or '', ensure_ascii=False)}")


def _summary(results: Iterable[StreamResult]) -> dict[str, int]:
    out = _new_summary()
    for r in results:
        _count_result(out, r)
    return out


def _write_json(obj: object, out: TextIO) -> None:
    json.dump(obj, out, ensure_ascii=False, indent=2)
    out.write("\n")


# --------------------------------------------------------------------------- rules

def _rule_rows(spec: str) -> list[dict[str, Any]]:
    from .presets import default_rules

    if spec == "default":
        rules: Sequence[Any] = default_rules()
    else:
        from .tomlrules import load_rules

        rules, _ = load_rules(spec)
    rows = []
    for rule in rules:
        fields = {f.name: getattr(rule, f.name) for f in dataclasses.fields(rule)}
        row = {"id": fields.pop("id"), "type": type(rule).__name__, "kind": rule.kind,
               "channel": fields.pop("channel"), "action": fields.pop("action")}
        row["fields"] = {k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()}
        rows.append(row)
    return rows


def _rule_options(spec: str) -> dict[str, Any]:
    """The ruleset options a rules spec compiles with (the file's ``[options]`` over the
    defaults of :class:`~contextcare.Ruleset`)."""
    options = load_ruleset(spec).options
    return {f.name: getattr(options, f.name) for f in dataclasses.fields(options)}


def cmd_rules(args: argparse.Namespace, out: TextIO) -> int:
    """List the rules of ``--rules`` (the defaults, or a rules file after validating it)."""
    rows = _rule_rows(args.rules)
    if args.format == "json":
        _write_json(rows, out)  # a list of rules (the options: rules --format text)
        return 0
    from rich.text import Text

    table = _table("id", "type", "channel", "action", "settings")
    for column in table.columns:
        column.overflow = "fold"
    for row in rows:
        settings = ", ".join(f"{k}={v!r}" for k, v in row["fields"].items())
        table.add_row(Text(row["id"]), row["type"], row["channel"], row["action"], Text(settings))
    console = _console(out)
    _show(console, table)
    options = ", ".join(f"{k} = {json.dumps(v)}" for k, v in _rule_options(args.rules).items())
    console.print(Text(f"[options] in effect: {options}"))
    return 0


# --------------------------------------------------------------------------- scan

class _ProgressBytes:
    """Byte progress over several files, for a rich progress bar."""

    def __init__(self, progress: Progress, total: int) -> None:
        self.progress = progress
        self.task = progress.add_task("scanning", total=total)
        self.done = 0

    def file_callback(self) -> Callable[[int], None]:
        base = self.done

        def update(position: int) -> None:
            self.progress.update(self.task, completed=base + position)

        return update

    def finish_file(self, size: int) -> None:
        self.done += size
        self.progress.update(self.task, completed=self.done)


def _input_sizes(paths: Sequence[str]) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for path in paths:
        if path == "-":
            continue
        with contextlib.suppress(OSError):  # reported when the file is read
            sizes[path] = os.path.getsize(path)
    return sizes


#: How many skipped-line warnings ``scan`` prints before it only counts them (as compilers do).
MAX_WARNINGS = 20
#: How many skipped lines the ``json`` output lists (the summary counts them all).
MAX_ERRORS_KEPT = 1000
#: What the numbers of a detection count, for the JSON outputs.
_UNITS = {"offset": "code points (characters) fed to the detection's channel view when it fired",
          "source_line": "1-based line of the input file holding the event at which it fired"}
_FORMATS_READ = ("contextcare events, OpenAI chat-completion chunks (JSON lines or SSE 'data:'"
                 " lines) or OpenAI chat completions (one per line, one JSON document or a list),"
                 " plain or gzip")


class _Reader:
    """Reads the input files one after another for ``scan`` and keeps account of what it could
    not read: skipped lines (warned about, the first :data:`MAX_WARNINGS` of them) and whole
    files that failed (not a trace file, unreadable, a damaged gzip stream), which do not stop
    the other files."""

    def __init__(self, err: Console, *, strict: bool, as_text: str | None,
                 bar: _ProgressBytes | None, sizes: dict[str, int],
                 on_skip: Callable[[TraceFormatError], None] | None = None,
                 max_line_bytes: int = LINE_MAX_BYTES) -> None:
        self.err = err
        self.max_line_bytes = max_line_bytes
        self.on_skip = on_skip
        self.strict = strict
        self.as_text = as_text
        self.bar = bar
        self.sizes = sizes
        self.errors: list[TraceFormatError] = []  # the first MAX_ERRORS_KEPT skipped lines
        self.skipped = 0
        self.failed_files = 0
        self.failed: list[dict[str, str]] = []  # the files that failed, and why
        self.warned = 0

    def warn(self, message: str) -> None:
        self.err.print(f"contextcare scan: {message}", markup=False, soft_wrap=True)

    def skip(self, exc: TraceFormatError) -> None:
        self.skipped += 1
        if self.on_skip is not None:
            self.on_skip(exc)
        if len(self.errors) < MAX_ERRORS_KEPT:
            self.errors.append(exc)
        if self.warned < MAX_WARNINGS:
            self.warned += 1
            self.warn(f"warning: {exc} (line skipped)")

    def fail_file(self, source: str, message: str) -> None:
        self.failed_files += 1
        self.failed.append({"source": source, "reason": message})
        self.warn(f"error: {message}")

    def not_a_trace(self, first: TraceFormatError) -> str:
        looked = f" reads {first.excerpt}" if first.excerpt else ""
        return (f"{first.source}: not a trace file: no line is a contextcare event, an OpenAI"
                f" chunk or an OpenAI completion (line {first.line}{looked}: {first.reason})."
                f" scan reads {_FORMATS_READ}; to scan a plain-text reply, use --as-text")

    def results(self, paths: Sequence[str], replayer: Replayer) -> Iterator[StreamResult]:
        """Read the files one after another through ``replayer``; the results of the attempts
        that end, in order (what is still open stays in ``replayer``)."""
        for path in paths:
            yield from self._file(path, replayer)
            if self.bar is not None:
                self.bar.finish_file(self.sizes.get(path, 0))

    def _file(self, path: str, replayer: Replayer) -> Iterator[StreamResult]:
        callback = self.bar.file_callback() if self.bar is not None and path != "-" else None
        pending: list[TraceFormatError] = []  # skipped before the file's first event (the first
        more = [0]  # MAX_WARNINGS of them, then only counted: memory stays bounded)
        first: list[TraceFormatError] = []
        count = 0

        def on_error(exc: TraceFormatError) -> None:
            if not first:
                first.append(exc)
            if count:
                self.skip(exc)
            elif len(pending) < MAX_WARNINGS:
                pending.append(exc)
            else:
                more[0] += 1

        def flush_pending() -> None:
            for exc in pending:
                self.skip(exc)
            self.skipped += more[0]
            pending.clear()
            more[0] = 0

        source = _source_name(path)
        try:
            if self.as_text is not None:
                channel = self.as_text
                blocks = _event_blocks(lambda report: iter_text_events(
                    path, channel=channel, on_error=report, progress=callback,
                    max_line_bytes=self.max_line_bytes), True)
            else:  # the fast reader: blocks of operations, the errors among them in line order
                blocks = _source_ops(path, not self.strict, callback, self.max_line_bytes)
            for ops in blocks:
                for op in ops:
                    if op[0] == _OP_ERROR:
                        on_error(op[1])
                        continue
                    if not count:
                        flush_pending()
                    count += 1
                    done = replayer._push_op(source, op)
                    if done:
                        yield from done
                replayer.flush()
        except OSError as exc:
            self.fail_file(path, f"{path}: cannot read: {exc.strerror or exc}")
            return
        except TraceFormatError as exc:  # --strict, or a damaged gzip stream
            if self.strict:
                hint = "" if count else f" (scan reads {_FORMATS_READ})"
                raise CommandError(f"{exc}{hint}") from None
            flush_pending()
            self.fail_file(exc.source, f"{exc}; the rest of the file was not read")
            return
        if not count and first:
            self.fail_file(first[0].source, self.not_a_trace(first[0]))
        elif not count:  # read to its end, nothing in it: say so rather than pass in silence
            self.warn(f"warning: {path}: no events (an empty file, or only blank and comment"
                      " lines)")


def _new_summary() -> dict[str, int]:
    return {"streams": 0, "detections": 0, "abort": 0, "remind": 0, "record": 0}


def _count_result(summary: dict[str, int], result: StreamResult) -> None:
    summary["streams"] += 1
    for d in result.detections:
        summary["detections"] += 1
        summary[d.action] = summary.get(d.action, 0) + 1


def _progress_bar(console: Console) -> Progress:
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    return Progress(BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn(),
                    console=console, transient=True)


def _ray_scan(args: argparse.Namespace, out: TextIO) -> int:
    """``contextcare scan --engine ray``: the arguments of ``contextcare scan`` plus
    ``--address`` and ``--output``. Rows go to ``--output DIR`` (Parquet, or JSON lines with
    ``--format jsonl``); standard output gets the summary line. Exit status as for ``scan``."""
    try:
        from . import ray as ray_scan
    except ModuleNotFoundError as exc:
        if exc.name == "contextcare.ray":
            raise
        raise CommandError(str(exc)) from None
    fmt = "jsonl" if args.format == "jsonl" else "parquet"
    if args.format == "json":
        raise ray_scan.RayScanError("--engine ray writes rows to --output as parquet or jsonl;"
                                    " --format json is for the local engine")
    if args.output is None:
        raise ray_scan.RayScanError("--engine ray needs --output DIR for the rows")
    summary = ray_scan.run_scan(args.files, args.output, ruleset=load_ruleset(args.rules),
                                fmt=fmt, address=args.address, strict=args.strict,
                                max_line_bytes=args.max_line_bytes or LINE_MAX_BYTES,
                                progress=not args.no_progress and sys.stderr.isatty(),
                                verbose=bool(getattr(args, "verbose", False)))
    out.write(summary_line(summary) + f"; rows written to {args.output}\n")
    if summary["errors"]:
        sys.stderr.write(f"contextcare scan: {summary['errors']} malformed lines skipped (rows"
                         " with row_type 'error')\n")
    return exit_status(summary, args.fail_on)


def _trouble(summary: dict[str, int]) -> str:
    """What a scan could not read, for the end of its summary line."""
    parts = []
    if summary.get("errors"):
        parts.append(f"{summary['errors']} lines skipped")
    if summary.get("unreadable_files"):
        n = summary["unreadable_files"]
        parts.append(f"{n} file{'' if n == 1 else 's'} not read")
    return "".join(f"; {part}" for part in parts)


def _scan_format(args: argparse.Namespace) -> str:
    """The output format, checked against the engine (impossible pairs are usage errors)."""
    if args.engine == "ray":
        if args.format in (None, "parquet", "jsonl"):
            return str(args.format or "parquet")
        raise CommandError(f"--format {args.format} is for the local engine; --engine ray"
                           " writes rows to --output DIR as parquet (default) or jsonl")
    if args.format == "parquet":
        raise CommandError("--format parquet is for --engine ray (rows written to --output"
                           " DIR); the local engine writes text, json or jsonl")
    return str(args.format or "text")


def _expand_inputs(files: Sequence[str]) -> list[str]:
    """The files to read: each FILE as given; a directory walked recursively in sorted order,
    hidden files and folders (names starting with ``.``) skipped; no FILE: standard input when it
    is not a terminal."""
    if not files:
        if sys.stdin is None or sys.stdin.isatty():
            raise CommandError("no FILE given (name trace files or folders, or pipe a trace into"
                               " standard input)")
        return ["-"]
    paths: list[str] = []
    for name in files:
        if name == "-" or not os.path.isdir(name):
            paths.append(name)
            continue
        found = []
        for folder, dirs, names in os.walk(name):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            found += [os.path.join(folder, n) for n in sorted(names) if not n.startswith(".")]
        if not found:
            raise CommandError(f"{name}: a folder with no files to scan")
        paths += found
    return paths


def _text_mode(args: argparse.Namespace, out: TextIO) -> str:
    """``table`` on a terminal (or when asked), ``records`` (one line per detection) otherwise."""
    if args.format == "table":
        return "table"
    isatty = getattr(out, "isatty", None)
    return "table" if isatty is not None and isatty() else "records"


def _check_output_folder(args: argparse.Namespace) -> None:
    output = args.output
    if output is None or "://" in output or args.overwrite or not os.path.isdir(output):
        return
    with os.scandir(output) as entries:
        if any(True for _ in entries):
            raise CommandError(f"--output {output}: the folder is not empty; pass --overwrite to"
                               " write into it anyway, or name a new folder")


def cmd_scan(args: argparse.Namespace, out: TextIO) -> int:
    """Replay trace files through the rules and report detections."""
    if args.files.count("-") > 1:
        raise CommandError("standard input ('-') can be read only once")
    args.format = _scan_format(args)
    if args.channel is not None and not args.as_text:
        raise CommandError("--channel is for --as-text")
    if args.engine == "ray":
        for option, value in (("as-text", args.as_text), ("context", args.context)):
            if value:
                raise CommandError(f"--{option} is for the local engine")
        _check_output_folder(args)
        return _ray_scan(args, out)
    for option in ("output", "address"):
        if getattr(args, option) is not None:
            raise CommandError(f"--{option} is for --engine ray")
    for option, value in (("overwrite", args.overwrite), ("verbose", args.verbose)):
        if value:
            raise CommandError(f"--{option} is for --engine ray")
    ruleset = load_ruleset(args.rules)
    files = _expand_inputs(args.files)
    sizes = _input_sizes(files)
    err = _console(stderr=True)
    show_bar = (not args.no_progress and err.is_terminal
                and sum(sizes.values()) >= PROGRESS_MIN_BYTES)
    fail_actions = FAIL_ACTIONS.get(args.fail_on or "", ())
    failed = interrupted = False
    summary = _new_summary()
    mode = args.format if args.format != "text" else _text_mode(args, out)
    kept: list[StreamResult] = []  # all results for json, the flagged ones for the table

    def emit(result: StreamResult) -> None:
        nonlocal failed
        _count_result(summary, result)
        failed = failed or any(d.action in fail_actions for d in result.detections)
        if mode == "jsonl":
            for d in result.detection_dicts():
                record = {"type": "detection", "source": result.source, "stream": result.stream,
                          "attempt": result.attempt, **d}
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
        elif mode == "records":
            for line in _records(result):
                out.write(line + "\n")
        elif mode == "json" or result.detections:
            kept.append(result)

    def on_skip(exc: TraceFormatError) -> None:
        if mode == "jsonl":
            out.write(json.dumps({"type": "error", "source": exc.source, "line": exc.line,
                                  "reason": exc.reason}, ensure_ascii=False) + "\n")

    with _progress_bar(err) if show_bar else contextlib.nullcontext() as progress:
        bar = _ProgressBytes(progress, sum(sizes.values())) if progress is not None else None
        reader = _Reader(err, strict=args.strict,
                         as_text=(args.channel or "text") if args.as_text else None, bar=bar,
                         sizes=sizes, on_skip=on_skip,
                         max_line_bytes=args.max_line_bytes or LINE_MAX_BYTES)
        replayer = Replayer(ruleset, context=args.context or 0)
        try:
            for result in reader.results(files, replayer):
                emit(result)
            for result in replayer.close():
                emit(result)
        except KeyboardInterrupt:  # report what was found so far, then exit 130
            interrupted = True
            for result in replayer.close():
                emit(result)
    summary["errors"] = reader.skipped
    summary["unreadable_files"] = reader.failed_files
    if mode == "json":
        _write_json({"streams": [r.to_dict() for r in kept],
                     "errors": [{"source": e.source, "line": e.line, "reason": e.reason}
                                for e in reader.errors],
                     "unreadable": reader.failed,
                     "units": _UNITS,
                     "summary": summary, "complete": not interrupted}, out)
    elif mode == "jsonl":
        out.write(json.dumps({"type": "summary", **summary, "unreadable": reader.failed,
                              "units": _UNITS, "complete": not interrupted},
                             ensure_ascii=False) + "\n")
    elif mode == "table":
        console = _console(out)
        _print_by_source(console, kept)
        out.write(summary_line(summary) + _trouble(summary) + "\n")
    else:  # records: stdout holds only records; the summary goes with the messages
        out.flush()
        reader.warn(summary_line(summary) + _trouble(summary))
    if reader.skipped:
        shown = (f" (the first {reader.warned} shown)" if reader.warned < reader.skipped else "")
        reader.warn(f"{reader.skipped} malformed lines skipped{shown}")
    if interrupted:
        reader.warn("interrupted; what was read before Ctrl-C is reported above")
        return 130
    if reader.failed_files:
        return 2
    if args.fail_on and reader.skipped:
        reader.warn(f"error: --fail-on {args.fail_on} cannot pass a scan that skipped lines"
                    " (fix or remove them; --strict stops at the first)")
        return 2
    return 1 if failed else 0


# --------------------------------------------------------------------------- demo

def _throughput(ruleset: Ruleset, events: Sequence[Event]) -> dict[str, float]:
    """Replay the sample deltas through fresh watchers until DEMO_MIN_SECONDS have passed."""
    streams: dict[str, list[tuple[str, str]]] = {}
    for e in events:
        channel = e.channel
        if channel is not None and e.text:
            streams.setdefault(f"{e.source}\0{e.stream}", []).append((e.text, channel))
    deltas = sum(len(s) for s in streams.values())
    nbytes = sum(len(t.encode("utf-8", "surrogatepass")) for s in streams.values() for t, _ in s)
    passes = 0
    start = time.perf_counter()
    elapsed = 0.0
    while passes < 3 or elapsed < DEMO_MIN_SECONDS:
        for stream in streams.values():
            watcher = ruleset.watcher()
            feed = watcher.feed
            for text, channel in stream:
                feed(text, channel=channel)
            watcher.finish()
        passes += 1
        elapsed = time.perf_counter() - start
    return {
        "deltas": deltas,
        "bytes": nbytes,
        "passes": passes,
        "seconds": elapsed,
        "deltas_per_second": deltas * passes / elapsed,
        "mb_per_second": nbytes * passes / elapsed / 1e6,
        "ns_per_delta": elapsed / (deltas * passes) * 1e9,
    }


def _engine_name(ruleset: object) -> str:
    module = type(ruleset).__module__
    if module.endswith("reference"):
        return "pure-Python reference engine"
    return "native engine"


def cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    """Replay the bundled samples through the default rules; show detections and throughput."""
    from . import default_ruleset

    ruleset = default_ruleset()
    events = sample_events()
    results = list(replay(events, ruleset, context=0))
    speed = _throughput(ruleset, events)
    engine = _engine_name(ruleset)
    if args.format == "json":
        _write_json({"streams": [r.to_dict() for r in results], "summary": _summary(results),
                     "throughput": {"engine": engine, **speed}}, out)  # type: ignore[dict-item]
        return 0
    out.write("Bundled sample traces through default_ruleset():\n")
    console = _console(out)
    _show(console, _detections_table(results, show_clean=True, width=console.width))
    out.write(summary_line(_summary(results)) + "\n")
    out.write(
        f"Throughput ({engine}, Watcher.feed, one Python call per delta):"
        f" {speed['deltas_per_second']:,.0f} deltas/s, {speed['mb_per_second']:.2f} MB/s,"
        f" {speed['ns_per_delta']:,.0f} ns/delta ({int(speed['deltas'])} deltas,"
        f" {int(speed['bytes']):,} bytes, replayed {int(speed['passes'])} times in"
        f" {speed['seconds']:.2f} s)\n")
    return 0


# --------------------------------------------------------------------------- grades

def cmd_grade(args: argparse.Namespace, out: TextIO) -> int:
    """Fatigue and wakefulness of a request load and a retained history."""
    from .context import grades
    try:
        status = grades.measure(args.load, args.retained, args.capacity)
    except (TypeError, ValueError) as exc:
        raise CommandError(str(exc)) from None
    text = grades.status_text(status, lang=args.lang)
    if args.format == "json":
        _write_json({**status.to_dict(), "text": text}, out)
        return 0
    from rich.text import Text

    console = _console(out)
    colours = grades.status_colours(status)
    table = _table("figure", "value", "grade", "scale (0-100)")
    table.columns[1].justify = "right"
    gauge = console.is_terminal
    if gauge:
        table.add_column("gauge", no_wrap=True)
    cuts = [f"{c:g}" for c in grades.GRADE_CUTS]
    for name, value, grade, colour, names in (
        ("fatigue", status.fatigue, status.fatigue_grade, colours[0], grades.FATIGUE_GRADES),
        ("wakefulness", status.wakefulness, status.wakefulness_grade, colours[1],
         grades.WAKEFULNESS_GRADES),
    ):
        style = grades.COLOURS.get(colour, "")
        shown = "—" if value is None else f"{value:.1f}"
        scale = f"{names[0]} < {cuts[0]} ≤ {names[1]} < {cuts[1]} ≤ {names[2]} < {cuts[2]} ≤ {names[3]}"
        row = [name, shown, Text(grade, style=style), scale]
        if gauge:
            filled = 0 if value is None else round(value / 5)
            row.append(Text("█" * filled, style=style) + Text("░" * (20 - filled), style="dim"))
        table.add_row(*row)
    _show(console, table)
    out.write("\nNotice for the model (grades and advice, never the numbers):\n")
    out.write(text + "\n")
    return 0


# --------------------------------------------------------------------------- plan / mindmap

def _read_messages(path: str) -> list[dict[str, Any]]:
    """A conversation file: a JSON list of OpenAI-format messages, or an object with
    ``messages`` (a chat-completions request body)."""
    try:
        if path == "-":
            doc = json.load(sys.stdin)
        else:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
    except OSError as exc:
        raise CommandError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CommandError(f"{path}: not JSON: {exc}") from None
    messages = doc.get("messages") if isinstance(doc, dict) else doc
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise CommandError(f"{path}: expected a JSON list of message objects, or an object"
                           " with a 'messages' list")
    return messages


def _plan_text(result: Any) -> str:
    if hasattr(result, "reason"):  # a Refusal
        return f"No compaction: {result.reason}" + (f" ({result.code})" if result.code else "")
    return (f"Compact messages {result.start!r} … {result.end!r}"
            f" (positions {result.start_index}–{result.end_index}):"
            f" frees ~{result.freed_tokens:,} tokens, ~{result.fresh_tokens:,} of them fresh;"
            f" keeps the last ~{result.retained_tokens:,} tokens verbatim.")


def cmd_plan(args: argparse.Namespace, out: TextIO) -> int:
    """Which span of a conversation to compact (``plan_rest``)."""
    from .context import planner
    messages = _read_messages(args.conversation)
    kwargs: dict[str, Any] = {"retain_ratio": args.retain_ratio,
                              "min_fresh_tokens": args.min_fresh_tokens}
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    kwargs["keep_latest_user"] = args.keep_latest_user
    try:
        result = planner.plan_rest(messages, capacity=args.capacity, **kwargs)
    except (TypeError, ValueError) as exc:
        raise CommandError(f"{args.conversation}: {exc}") from None
    if args.format == "json":
        kind = "refusal" if isinstance(result, planner.Refusal) else "plan"
        _write_json({"kind": kind, **dataclasses.asdict(result)}, out)
    else:
        out.write(_plan_text(result) + "\n")
        if not isinstance(result, planner.Refusal):
            out.write(_span_text(messages, result, args.capacity) + "\n")
    return 0


def _span_text(messages: Sequence[dict[str, Any]], plan: Any, capacity: int) -> str:
    """What the span of a plan holds, in words."""
    span = messages[plan.start_index:plan.end_index + 1]
    roles: dict[str, int] = {}
    for message in span:
        role = str(message.get("role"))
        roles[role] = roles.get(role, 0) + 1
    rounds = sum(1 for m in span if m.get("role") == "assistant" and m.get("tool_calls"))
    first_user = next((i for i, m in enumerate(messages) if m.get("role") == "user"), None)
    held = ", ".join(f"{n} {role}" for role, n in roles.items())
    count = f"{len(span)} message" + ("s" if len(span) != 1 else "")
    tools = f"{rounds} tool round" + ("s" if rounds != 1 else "")
    first = ("holds the first user message (the original request: keep its gist in the"
             " summary)" if first_user is not None
             and plan.start_index <= first_user <= plan.end_index
             else "leaves the first user message in place")
    share = plan.freed_tokens / capacity * 100 if capacity else 0.0
    return (f"The span holds {count} ({held}) and {tools}, ~{share:.0f}%"
            f" of the {capacity:,}-token capacity; it {first}. Each tool call stays with its"
            " results (the cut falls where no call is open); the system prompt and the recent"
            " tail stay verbatim.")


def cmd_mindmap(args: argparse.Namespace, out: TextIO) -> int:
    """The clear-mind survey of a conversation: ids, token weights and previews."""
    from .context import mindmap
    messages = _read_messages(args.conversation)
    try:
        survey = mindmap.survey(messages)
    except (TypeError, ValueError) as exc:
        raise CommandError(f"{args.conversation}: {exc}") from None
    if args.format == "json":
        _write_json({"latest_end": survey.latest_end, "surface_tokens": survey.surface_tokens,
                     "nodes": [dataclasses.asdict(node) for node in survey.nodes]}, out)
    else:
        if out.isatty():  # in a pipe the text goes on as is, ready for the model
            out.write("Clear-mind survey, the text written for the model:\n\n")
        out.write(survey.render(lang=args.lang).rstrip("\n") + "\n")
    return 0


# --------------------------------------------------------------------------- memory

def cmd_memory(args: argparse.Namespace, out: TextIO) -> int:
    """The "Oft-told" memory anchors of a directory: rank, check or scaffold them."""
    if getattr(args, "format", "text") == "json":
        return _memory_json(memory, args, out)
    try:
        if args.memory_command == "rank":
            _rank_report(memory, args.directory, args.today, out)
            return 0
        if args.memory_command == "check":
            text, ok = _check_report(memory, args.directory)
            out.write(text)
            return 0 if ok else 1
        created = memory.scaffold(args.directory)
    except OSError as exc:  # "path: reason", like the library's own file errors
        where = f"{exc.filename}: " if exc.filename else ""
        raise CommandError(where + (exc.strerror or str(exc))) from None
    except (TypeError, ValueError) as exc:
        raise CommandError(str(exc)) from None
    for path in created:
        out.write(f"created {path}\n")
    if not created:
        out.write(f"{args.directory}: already set up; nothing created\n")
    return 0


def _check_report(memory: Any, directory: str) -> tuple[str, bool]:
    """``memory check``'s report, as ``memory_check_command`` words it, but with each file named
    relative to the current folder (so ``path:line`` opens in an editor or a terminal)."""
    folder = memory.load(directory)
    findings = memory.check(folder)
    errors = sum(1 for f in findings if f.level == "error")
    lines = []
    for f in findings:
        body = f.en
        if f.file:
            path = os.path.relpath(os.path.join(folder.path, f.file))
            body = f"{path}:{f.lineno}: {body}" if f.lineno else f"{path}: {body}"
        lines.append(f"{f.level:<7} {body}")
    if errors:
        lines.append(f"not ok: {errors} error(s), {len(findings) - errors} warning(s)")
    else:
        a = folder.anchors
        lines.append(f"ok: {len(a.in_view)} in view, {len(a.sunk)} sunk, {len(folder.diaries)}"
                     f" diary day(s), {len(folder.vocabulary or ())} vocabulary tag(s),"
                     f" {len(findings) - errors} warning(s)")
    return "".join(line + "\n" for line in lines), errors == 0


# --------------------------------------------------------------------------- memory reports
# The plain-text reports of ``memory rank`` and ``memory check`` as functions (moved here from
# contextcare.memory: they format for a terminal). The subcommands print richer forms of the
# same facts (_rank_report, _check_report).

def _width(text: str) -> int:
    return sum(0 if unicodedata.combining(ch) else
               2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _cell(text: str, width: int, right: bool = False) -> str:
    if _width(text) > width:
        while _width(text) > width - 1:
            text = text[:-1]
        text += "…"
    pad = " " * (width - _width(text))
    return pad + text if right else text + pad


def _format_weight(r: float | None) -> str:
    """R with four decimals, or three significant digits when it is below 0.001."""
    if r is None:
        return "-"
    return f"{r:.4f}" if r >= 0.001 or r == 0 else f"{r:.2e}"


def memory_rank_command(directory: str | os.PathLike[str], *, today: datetime.date | None = None,
                 cap: int = memory.DEFAULT_CAP) -> str:
    """The ranking table printed by ``contextcare memory rank DIR``: one row per anchor (in view
    first, strongest first; then sunk, in file order) with handle, own date, n, t, S, R and place,
    and a closing line that says what would sink next. Raises ``ArgumentValueError`` when DIR is not a
    directory."""
    day = datetime.date.today() if today is None else _memory_anchors._check_today(today)
    cap = _memory_anchors._check_cap(cap)
    folder = memory.load(directory)
    weights = memory.weigh(folder.anchors.anchors, folder.diaries, today=day)
    view = [w for w in weights if w.anchor.place == "view"]
    order = memory.sink_order(view)
    rows = list(reversed(order)) + [w for w in weights if w.anchor.place == "sunk"]
    head = ("handle", "own date", "n", "t", "S", "R", "place")
    widths = (20, 10, 3, 4, 6, 8, 7)
    right = (False, False, True, True, True, True, False)

    def row(cells: Sequence[str]) -> str:
        return "  ".join(_cell(c, w, r) for c, w, r in zip(cells, widths, right)).rstrip()

    out = [f"Oft-told ranking of {folder.path} as of {day.isoformat()} (cap {cap})", row(head),
           row(["-" * w for w in widths])]
    for w in rows:
        a = w.anchor
        out.append(row([
            a.handle or a.title,
            a.own_date.isoformat() if a.own_date else "-",
            str(w.n),
            "-" if w.t is None else str(w.t),
            f"{w.stability:g}",
            _format_weight(w.weight),
            "in view" if a.place == "view" else "sunk",
        ]))
    summary = f"{len(view)}/{cap} in view, {len(weights) - len(view)} sunk."
    if not folder.has_anchor_file:
        summary = f"No {memory.ANCHOR_FILE} here (create one with `contextcare memory init`)."
    elif len(view) >= cap:
        nxt = order[0].anchor
        summary += f" The list is full: the next new anchor sinks {nxt.handle or nxt.title!r}."
    else:
        summary += " The list has room: nothing sinks."
    out.append(summary)
    return "\n".join(out) + "\n"


def memory_check_command(directory: str | os.PathLike[str], *, cap: int = memory.DEFAULT_CAP,
                  on_unreadable: Literal["report", "raise"] = "report") -> tuple[str, bool]:
    """The report printed by ``contextcare memory check DIR`` and whether the folder passed (no
    errors; exit status 1 when it did not).

    A folder that cannot be read (not a directory, a file that is not UTF-8) gives the one-line
    report ``error: path: reason`` and False; with ``on_unreadable="raise"`` the error is raised
    instead (the command line does that, to exit with status 2)."""
    if on_unreadable not in ("report", "raise"):
        raise ArgumentValueError(f"on_unreadable must be 'report' or 'raise', got {on_unreadable!r}")
    try:
        folder = memory.load(directory)
    except (ArgumentValueError, memory.MemoryFileError) as exc:
        if on_unreadable == "raise":
            raise
        return f"error: {exc}\n", False
    findings = memory.check(folder, cap=cap)
    errors = sum(1 for f in findings if f.level == "error")
    warnings = len(findings) - errors
    lines = [f"{f.level:<7} {f.text('en')}" for f in findings]
    if errors:
        lines.append(f"not ok: {errors} error(s), {warnings} warning(s)")
    else:
        a = folder.anchors
        lines.append(
            f"ok: {len(a.in_view)} in view, {len(a.sunk)} sunk, {len(folder.diaries)} diary"
            f" day(s), {len(folder.vocabulary or ())} vocabulary tag(s), {warnings} warning(s)")
    return "\n".join(lines) + "\n", errors == 0


def _memory_json(memory: Any, args: argparse.Namespace, out: TextIO) -> int:
    """``memory rank|check|init --format json``: the same facts as the text, as data."""
    try:
        if args.memory_command == "init":
            created = memory.scaffold(args.directory)
            _write_json({"folder": args.directory, "created": [str(p) for p in created]}, out)
            return 0
        folder = memory.load(args.directory)
    except (OSError, TypeError, ValueError) as exc:
        raise CommandError(str(exc)) from None
    if args.memory_command == "check":
        findings = memory.check(folder)
        errors = sum(1 for f in findings if f.level == "error")
        _write_json({"folder": str(folder.path), "ok": errors == 0, "errors": errors,
                     "warnings": len(findings) - errors,
                     "findings": [{"level": f.level, "code": f.code,
                                   "file": os.path.relpath(os.path.join(folder.path, f.file))
                                   if f.file else "",
                                   "line": f.lineno, "message": f.en} for f in findings]}, out)
        return 0 if errors == 0 else 1
    _write_json(_ranking(memory, folder, args.today), out)
    return 0


def _ranking(memory: Any, folder: Any, today: datetime.date | None) -> dict[str, Any]:
    """The Oft-told ranking of a loaded folder as data: in view first, strongest first; then the
    sunk anchors in file order; and which anchor sinks next when the list is full."""
    day = today or datetime.date.today()
    weights = memory.weigh(folder.anchors.anchors, folder.diaries, today=day)
    view = [w for w in weights if w.anchor.place == "view"]
    order = memory.sink_order(view)
    rows = list(reversed(order)) + [w for w in weights if w.anchor.place == "sunk"]
    cap = memory.DEFAULT_CAP
    return {
        "folder": str(folder.path), "today": day.isoformat(), "cap": cap,
        "has_anchor_file": bool(folder.has_anchor_file),
        "in_view": len(view), "sunk": len(weights) - len(view),
        "sinks_next": (order[0].anchor.handle or order[0].anchor.title)
        if order and len(view) >= cap else None,
        "anchors": [{"handle": w.anchor.handle, "title": w.anchor.title,
                     "own_date": w.anchor.own_date.isoformat() if w.anchor.own_date else None,
                     "recalls": w.n, "days_since": w.t, "stability": w.stability,
                     "retention": w.weight, "place": w.anchor.place,
                     "line": w.anchor.lineno} for w in rows]}


def _rank_report(memory: Any, directory: str, today: datetime.date | None,
                 out: TextIO) -> None:
    """``memory rank`` as text: a heading, the ranking in the command line's table style, and
    what sinks next."""
    from rich.text import Text

    data = _ranking(memory, memory.load(directory), today)
    out.write(f"Oft-told ranking of {os.path.relpath(data['folder'])} as of {data['today']}"
              f" (cap {data['cap']} in view)\n")
    table = _table("handle", "own date", "recalls n", "days t", "stability S",
                   "retention R", "place")
    for column in table.columns[2:6]:
        column.justify = "right"
    for a in data["anchors"]:
        r = a["retention"]
        table.add_row(Text(a["handle"] or a["title"]), a["own_date"] or "-", str(a["recalls"]),
                      "-" if a["days_since"] is None else str(a["days_since"]),
                      f"{a['stability']:g}",
                      "-" if r is None else f"{r:.4f}" if r >= 0.001 or r == 0 else f"{r:.2e}",
                      "in view" if a["place"] == "view" else "sunk")
    if data["anchors"]:
        _show(_console(out), table)
    summary = f"{data['in_view']}/{data['cap']} in view, {data['sunk']} sunk."
    if not data["has_anchor_file"]:
        summary = "No ofttold.md here (create one with `contextcare memory init`)."
    elif data["sinks_next"] is not None:
        summary += f" The list is full: the next new anchor sinks {data['sinks_next']!r}."
    else:
        summary += " The list has room: nothing sinks."
    out.write(summary + "\n")


# --------------------------------------------------------------------------- parser

_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _size(text: str) -> int:
    """A size in bytes: a whole number, optionally with K, M, G or T (powers of 1024; ``KiB``,
    ``MB`` and the like are read the same), e.g. ``64M`` or ``1G``; at least 1."""
    match = re.fullmatch(r"\s*([0-9][0-9_]*)\s*([kKmMgGtT]?)(?:i?[bB])?\s*", text)
    if match is None:
        raise argparse.ArgumentTypeError(f"expected a size such as 65536, 64M or 1G, got"
                                         f" {text!r}")
    value = int(match.group(1).replace("_", "")) * _SIZE_UNITS[match.group(2).upper()]
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a size of at least 1 byte, got {text!r}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {value}")
    return value


def _ratio(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def _date(text: str) -> datetime.date:
    try:
        return datetime.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a date YYYY-MM-DD, got {text!r}") from None


_EXIT = ("exit status: 0 success; 2 a usage error or an input that cannot be read.")
_GLOSSARY = """\
words used here:
  replay             feed a recorded reply through the rules again, delta by delta, as it
                     streamed
  fatigue            how heavy the next request is against the context window, 0-100
  wakefulness        how much of the conversation history the model still holds, 0-100
  context rest       compaction: an older span of the conversation replaced by its summary
  fresh tokens       new material in a span: not a summary, a checkpoint or a notice
  clear-mind survey  an outline of the conversation for the model, one line per message
  Oft-told anchors   a short Markdown list of facts an agent is reminded of (memory)
"""


class _Formatter(argparse.HelpFormatter):
    """Wraps descriptions and epilogs to the terminal but keeps their line breaks (examples,
    exit statuses, the glossary); continuation lines keep the line's indent."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=30)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap

        out = []
        for line in text.splitlines():
            lead = line[:len(line) - len(line.lstrip())]
            hang = lead + " " * (len(line) - len(line.lstrip()) and 2)
            out.append(textwrap.fill(line.strip(), width, initial_indent=indent + lead,
                                     subsequent_indent=indent + hang) if line.strip() else "")
        return "\n".join(out)


class _ArgumentParser(argparse.ArgumentParser):
    """An argument parser whose errors suggest the close option or command ("did you mean")."""

    def error(self, message: str) -> Any:  # -> NoReturn
        import difflib
        import re

        words: list[str] = []
        match = re.search(r"invalid choice: '([^']*)'", message)
        if match:
            choices = re.findall(r"'([^']*)'", message.split("choose from", 1)[-1])
            words = difflib.get_close_matches(match.group(1), choices, n=1)
        elif message.startswith("unrecognized arguments: "):
            options = [o for a in self._actions for o in a.option_strings]
            for word in message.split(": ", 1)[1].split():
                if word.startswith("-"):
                    words += difflib.get_close_matches(word.split("=")[0], options, n=1)
        if words:
            message += f" (did you mean {' '.join(words)}?)"
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


def _command_parser(parser: argparse.ArgumentParser,
                    args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)parser of the command ``args`` were parsed for."""
    target = parser
    for name in (getattr(args, "command", None), getattr(args, "memory_command", None)):
        commands = _commands(target)
        if name not in commands:
            break
        target = commands[name]
    return target


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands of ``parser`` by name (none: empty)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return cast("dict[str, argparse.ArgumentParser]", action.choices)
    return {}


def _help_command(args: argparse.Namespace, out: TextIO) -> int:
    """``contextcare help [COMMAND [ACTION]]``: the help of the command (or of all)."""
    target = args.parser
    for name in args.topic:
        commands = _commands(target)
        if name not in commands:
            import difflib

            close = difflib.get_close_matches(name, list(commands), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise CommandError(f"no command {name!r}{hint}; the commands are"
                               f" {', '.join(commands)}")
        target = commands[name]
    out.write(target.format_help())
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``contextcare`` command."""
    from . import __version__

    parser = _ArgumentParser(
        prog="contextcare", formatter_class=_Formatter,
        description="Watch LLM reply streams for degenerate loops and anxious reasoning; grade"
                    " context load; plan compaction.",
        epilog="examples:\n  contextcare demo\n  contextcare scan traces/ --fail-on abort\n"
               "  contextcare help scan\n\n" + _GLOSSARY + "\nexit status: 0 success;"
               " 1 scan --fail-on matched (or memory check found problems); 2 a usage error or"
               " an input that cannot be read.")
    parser.add_argument("-V", "--version", action="version", version=f"contextcare {__version__}",
                        help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_ArgumentParser)

    p = sub.add_parser("demo", help="replay the bundled sample traces and show what fires",
                       formatter_class=_Formatter,
                       description="Replay the bundled sample traces (a clean answer, a reasoning"
                                   " loop, a 3-line cycle, a newline-free flood, anxious"
                                   " reasoning in Chinese and English) through the default"
                                   " rules (feed each recorded reply again, delta by delta, as"
                                   " it streamed); print the detections and the measured"
                                   " throughput.",
                       epilog="example:\n  contextcare demo --format json\n\n" + _EXIT)
    p.add_argument("--format", choices=("text", "table", "json"), default="text",
                   help="text: a table and the throughput; json: one JSON document"
                        " (default: %(default)s)")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("scan", help="replay recorded trace files and report detections",
                       formatter_class=_Formatter,
                       description="Replay recorded replies through the rules (feed them again,"
                                   " delta by delta, as they streamed) and report what fires."
                                   " Reads contextcare events (JSON lines), OpenAI"
                                   " chat-completion chunks (JSON lines or SSE 'data:' lines)"
                                   " and saved OpenAI chat completions (one per line, one JSON"
                                   " document or a list), plain or gzip, many streams"
                                   " interleaved; plain text with --as-text.",
                       epilog="output: on a terminal, a table per file; in a pipe, one record"
                              " per line:\n  PATH:LINE: STREAM RULE ACTION (CHANNEL, char"
                              " OFFSET) EVIDENCE\nLINE is the input line at which the rule"
                              " fired; OFFSET counts characters (code points) of the\nchannel."
                              " The summary goes to stderr in a pipe.\n\n"
                              "examples:\n  contextcare scan traces/ --fail-on abort\n"
                              "  contextcare scan capture.sse.gz -C 40\n"
                              "  contextcare scan reply.txt --as-text --channel reasoning\n"
                              "  curl -sN ... | contextcare scan --format jsonl\n\n"
                              "exit status: 0 nothing matched --fail-on (or no --fail-on);"
                              " 1 a detection asked for the\n--fail-on action; 2 a usage"
                              " error, a file that cannot be read or is not a trace, or a"
                              "\nmalformed line under --fail-on or --strict.")
    p.add_argument("files", nargs="*", metavar="FILE",
                   help="a trace file, a folder (walked recursively, sorted, hidden files"
                        " skipped), or - for standard input (default: standard input when it"
                        " is not a terminal)")
    p.add_argument("--rules", default="default", metavar="default|RULES.toml",
                   help="the default rules, or a TOML rules file (default: %(default)s)")
    p.add_argument("--format", choices=("text", "table", "json", "jsonl", "parquet"),
                   default=None,
                   help="text: a table on a terminal, one record per line in a pipe; table:"
                        " always the table; json: one JSON document; jsonl: one JSON line per"
                        " detection and a closing summary line. --engine ray: parquet or jsonl"
                        " rows in --output (default: text; parquet with --engine ray)")
    p.add_argument("--fail-on", choices=("abort", "remind"), default=None,
                   help="exit with status 1 if a detection asks for this action (remind also"
                        " matches abort); a skipped line then fails the run with status 2"
                        " (default: report only, exit 0)")
    p.add_argument("--strict", action="store_true",
                   help="stop at the first malformed line, with status 2 (default: warn, skip"
                        " the line and go on)")
    p.add_argument("-C", "--context", type=_count, default=0, metavar="N",
                   help="show N characters of the stream before and after each detection, as"
                        " replayed on the detection's channel (default: 0, none)")
    p.add_argument("--as-text", action="store_true",
                   help="read each FILE as the plain text of one reply (a stream named"
                        " 'reply'), not as a trace (default: off; plain text is refused)")
    p.add_argument("--channel", choices=("text", "reasoning"), default=None,
                   help="with --as-text: the channel the text is fed on; reasoning-only rules"
                        " (time-anxiety, context-anxiety) watch 'reasoning' (default: text, the"
                        " visible answer)")
    p.add_argument("--no-progress", action="store_true",
                   help="never show a progress bar (default: a bar on stderr when it is a"
                        " terminal and the input is over 1 MiB)")
    p.add_argument("--max-line-bytes", type=_size, default=None, metavar="SIZE",
                   help="the longest line read, e.g. 64M or 1G (K, M, G: powers of 1024); a"
                        " longer line is a malformed line (FILE:LINE), read past in pieces and"
                        " never held whole (with --engine ray: skipped the same way, but each"
                        " worker holds its file whole) (default: 64M)")
    p.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="local: this process; ray: Ray Data over the cores or nodes of a"
                        " cluster (pip install 'contextcare[ray]'), rows to --output (default:"
                        " %(default)s)")
    p.add_argument("--output", default=None, metavar="DIR",
                   help="--engine ray: the folder to write rows to, as Parquet or, with"
                        " --format jsonl, JSON lines (required with --engine ray)")
    p.add_argument("--overwrite", action="store_true",
                   help="--engine ray: write into a non-empty --output folder (default: refuse)")
    p.add_argument("--address", default=None, metavar="ADDR",
                   help="--engine ray: the Ray cluster to join, e.g. auto or"
                        " ray://head:10001 (default: start a local one)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="--engine ray: show Ray's own log lines (default: hidden)")
    p.set_defaults(func=cmd_scan)

    p = sub.add_parser("rules", help="list the rules of the defaults or of a rules file",
                       formatter_class=_Formatter,
                       description="Compile and list a rule set and the ruleset [options] in"
                                   " effect: the defaults, or a TOML rules file (which this"
                                   " validates: an error names the file, the rule and the"
                                   " field).",
                       epilog="example:\n  contextcare rules --rules examples/rules.toml\n\n"
                              + _EXIT)
    p.add_argument("--rules", default="default", metavar="default|RULES.toml",
                   help="the default rules, or a TOML rules file (default: %(default)s)")
    p.add_argument("--format", choices=("text", "table", "json"), default="text",
                   help="text: a table; json: the rules and options as one JSON document"
                        " (default: %(default)s)")
    p.set_defaults(func=cmd_rules)

    p = sub.add_parser("grade", help="fatigue and wakefulness of a context load",
                       formatter_class=_Formatter,
                       description="Grade a request. Fatigue (0-100): how heavy the next request"
                                   " is against the usable window; graded normal, elevated from"
                                   " 30, high from 60, very-high from 85. Wakefulness (0-100):"
                                   " how much history the model still holds, against a third of"
                                   " the window; graded low, normal from 30, elevated from 60,"
                                   " high from 85 (high is good). Without --capacity the status"
                                   " is uncalibrated. Also prints the notice the model would"
                                   " read (grades and advice, never the numbers).",
                       epilog="example:\n  contextcare grade --load 60000 --retained 10000"
                              " --capacity 100000\n\n" + _EXIT)
    p.add_argument("--load", type=_count, required=True, metavar="N",
                   help="tokens of the next request (required)")
    p.add_argument("--retained", type=_count, required=True, metavar="N",
                   help="tokens of history the model still holds (required)")
    p.add_argument("--capacity", type=_count, default=None, metavar="N",
                   help="usable context window, in tokens (default: unknown, uncalibrated)")
    p.add_argument("--lang", choices=("en", "zh"), default="en",
                   help="language of the notice for the model (default: %(default)s)")
    p.add_argument("--format", choices=("text", "table", "json"), default="text",
                   help="text: the figures, a gauge and the notice; json: one JSON document"
                        " (default: %(default)s)")
    p.set_defaults(func=cmd_grade)

    p = sub.add_parser("plan", help="which span of a conversation to compact",
                       formatter_class=_Formatter,
                       description="Plan a context rest (a compaction: an older span of the"
                                   " conversation replaced by its summary) of a conversation: a"
                                   " JSON list of OpenAI-format messages, or a request body with"
                                   " 'messages'. The system prompt and a recent tail stay"
                                   " verbatim; a tool call and its results are never split.",
                       epilog="example:\n  contextcare plan conversation.json --capacity"
                              " 128000\n\n" + _EXIT)
    p.add_argument("conversation", metavar="CONVERSATION.json",
                   help="the conversation, or - for standard input")
    p.add_argument("--capacity", type=_count, required=True, metavar="N",
                   help="usable context window, in tokens (required)")
    p.add_argument("--retain-ratio", type=_ratio, default=None, metavar="R",
                   help="share of the window kept verbatim at the end, between 0 and 1"
                        " (default: 0.16)")
    p.add_argument("--min-fresh-tokens", type=_count, default=None, metavar="N",
                   help="least new material (tokens not already a summary, a checkpoint or a"
                        " notice) worth compacting (default: 1024)")
    p.add_argument("--keep-latest-user", action=argparse.BooleanOptionalAction, default=True,
                   help="never put the latest user message (the task at hand) in the span;"
                        " --no-keep-latest-user plans the original's span (default: keep it)")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text: the plan in words; json: one JSON document (default:"
                        " %(default)s)")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("mindmap", help="the clear-mind survey of a conversation",
                       formatter_class=_Formatter,
                       description="Render the clear-mind survey of a conversation: the outline"
                                   " the model is shown of its own context, one line per message"
                                   " with a stable id, its weight in tokens and a preview.",
                       epilog="example:\n  contextcare mindmap conversation.json\n\n" + _EXIT)
    p.add_argument("conversation", metavar="CONVERSATION.json",
                   help="a JSON list of OpenAI-format messages, or a request body with"
                        " 'messages'; - for standard input")
    p.add_argument("--lang", choices=("en", "zh"), default="en",
                   help="language of the survey (default: %(default)s)")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text: the survey as the model reads it; json: its nodes (default:"
                        " %(default)s)")
    p.set_defaults(func=cmd_mindmap)

    p = sub.add_parser("memory", help="the Oft-told memory anchors of a directory",
                       formatter_class=_Formatter,
                       description="Oft-told memory anchors: a short Markdown list"
                                   " (ofttold.md) of facts an agent is reminded of, ranked by a"
                                   " forgetting curve over the diary files that recall them.",
                       epilog="examples:\n  contextcare memory init notes/\n"
                              "  contextcare memory check notes/\n"
                              "  contextcare memory rank notes/ --today 2026-01-31\n\n"
                              "exit status: 0 success; 1 memory check found problems; 2 a"
                              " usage error or a folder that cannot be read.")
    msub = p.add_subparsers(dest="memory_command", metavar="ACTION", required=True,
                            parser_class=_ArgumentParser)
    m = msub.add_parser("rank", help="rank the anchors by recall (forgetting curve)",
                        formatter_class=_Formatter,
                        description="Rank the anchors by how well they are recalled: n recalls"
                                    " in the diary, t days since the last, S stability, R"
                                    " retention; the weakest sinks first when the list is"
                                    " full.",
                        epilog="example:\n  contextcare memory rank notes/\n\n" + _EXIT)
    m.add_argument("directory", metavar="DIR", help="the memory folder")
    m.add_argument("--today", type=_date, default=None, metavar="YYYY-MM-DD",
                   help="the day to rank as of (default: today)")
    m.add_argument("--format", choices=("text", "json"), default="text",
                   help="text: a table; json: one JSON document (default: %(default)s)")
    m = msub.add_parser("check", help="check the anchor list (exit status 1 on problems)",
                        formatter_class=_Formatter,
                        description="Check a memory folder: the anchor file, its vocabulary, the"
                                    " cap, the dates; errors and warnings.",
                        epilog="example:\n  contextcare memory check notes/\n\nexit status: 0"
                               " ok; 1 errors found; 2 a usage error.")
    m.add_argument("directory", metavar="DIR", help="the memory folder")
    m.add_argument("--format", choices=("text", "json"), default="text",
                   help="text: one finding per line; json: one JSON document (default:"
                        " %(default)s)")
    m = msub.add_parser("init", help="create an empty anchor list and diary folder",
                        formatter_class=_Formatter,
                        description="Create the shells of a memory folder (ofttold.md,"
                                    " emotions.md, notes.md, diary/); what exists is left alone.",
                        epilog="example:\n  contextcare memory init notes/\n\n" + _EXIT)
    m.add_argument("directory", metavar="DIR", help="the folder to set up (created if missing)")
    m.add_argument("--format", choices=("text", "json"), default="text",
                   help="text: one line per file created; json: the list (default:"
                        " %(default)s)")
    p.set_defaults(func=cmd_memory)

    p = sub.add_parser("serve", help="a guarding OpenAI-compatible gateway in front of a server",
                       formatter_class=_Formatter,
                       description="Relay an OpenAI-compatible server and guard every stream that"
                                   " passes (pip install 'contextcare[serve]'): a loop aborts the"
                                   " reply and closes the upstream request. Flags override the"
                                   " [serve] table of --config; see the README's Serving section.",
                       epilog="example:\n  contextcare serve --upstream http://127.0.0.1:8000/v1\n\n"
                              "exit status: 0 stopped cleanly; 2 a usage or configuration error.")
    p.add_argument("--upstream", metavar="URL",
                   help="the OpenAI-compatible server to guard, e.g. http://127.0.0.1:8000/v1"
                        " (required, here or in --config)")
    p.add_argument("--config", metavar="FILE.toml",
                   help="settings in a [serve] table (default: none)")
    p.add_argument("--host", help="listen address (default: 127.0.0.1)")
    p.add_argument("--port", type=int, help="listen port (default: 8765)")
    p.add_argument("--rules", metavar="RULES.toml",
                   help="a rules file (default: the default rules)")
    p.add_argument("--lang", choices=("en", "zh"),
                   help="language of the notices sent to the model (default: en)")
    p.add_argument("--auto-continue", action=argparse.BooleanOptionalAction, default=None,
                   help="after an abort, ask the upstream to continue and splice the"
                        " continuation into the same client stream (default: off)")
    p.add_argument("--max-consecutive-aborts", type=int, metavar="N",
                   help="auto-continue stops after N aborts in a row (default: the Guard's, 2)")
    p.add_argument("--abort-finish-reason", choices=("content_filter", "stop", "length"),
                   help="finish_reason of the last chunk after an abort (default: content_filter)")
    p.add_argument("--log-level", default="INFO",
                   choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                   help="log level (default: %(default)s)")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("help", help="show the help of a command",
                       formatter_class=_Formatter,
                       description="Show the help of a command (or of contextcare).",
                       epilog="examples:\n  contextcare help scan\n  contextcare help memory"
                              " rank\n\n" + _EXIT)
    p.add_argument("topic", nargs="*", metavar="COMMAND", help="a command, and an action of it")
    p.set_defaults(func=_help_command, parser=parser)
    return parser


def cmd_serve(args: argparse.Namespace, out: TextIO) -> int:
    """Run the gateway (:mod:`contextcare.serve`) until interrupted."""
    from . import serve

    settings = {k: getattr(args, k) for k in (
        "upstream", "host", "port", "rules", "lang", "auto_continue", "max_consecutive_aborts",
        "abort_finish_reason")}
    serve.run(serve.load_config(args.config, **settings), log_level=args.log_level)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    if argv is None:  # the real command: a closed pipe (`| head`) ends it by SIGPIPE, quietly
        import signal

        with contextlib.suppress(AttributeError, ValueError):  # no SIGPIPE on Windows
            signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:  # name the subcommand's usage, not the top-level one (and suggest an option)
        _command_parser(parser, args).error(f"unrecognized arguments: {' '.join(extras)}")
    out = sys.stdout
    if args.command is None:  # `contextcare` alone: the full help
        out.write(parser.format_help())
        return 0
    try:
        status: int = args.func(args, out)
        out.flush()
        return status
    except ContextCareError as exc:  # CommandError, RulesFileError, TraceFormatError, …
        sys.stderr.write(f"contextcare {args.command}: error: {exc}\n")
        return 2
    except BrokenPipeError:  # e.g. `contextcare scan … | head` (called as a function)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 128 + 13  # as a shell reports death by SIGPIPE; never 1 ("--fail-on matched")
    except KeyboardInterrupt:
        return 130
