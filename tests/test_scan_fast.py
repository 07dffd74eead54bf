"""The fast trace reader and the batched replay of ``contextcare scan`` against the line reader
and the per-event replay they replace (docs/scanning.md): the same events, errors, results,
detection lines and context, whatever the lines hold."""

from __future__ import annotations

import gzip
import io
import json
import random
from itertools import accumulate
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextcare import LineRepeat, Phrases, Ruleset, TailRepeat, default_ruleset, reference
from contextcare import cli
from contextcare.traces import (
    Replayer,
    StreamResult,
    TraceFormatError,
    _iter_events_lines,
    _replay_ops,
    _Ring,
    _source_ops,
    iter_events,
    replay,
    scan,
)

from strategies import texts

LONG_LINE = "The same long line that the engine quotes only in part, " * 4 + "\n"
#: Rule sets whose detections exercise every Site field: the defaults (units, cut evidence
#: lines), a phrase rule that fires often (many detections per run of deltas), a line rule on
#: long lines (the whole line read back from the view).
RULESETS = {
    "default": default_ruleset(),
    "dense": Ruleset([Phrases("p", ["ab", "the ", "。"], action="record"),
                      LineRepeat("lines", min_lines=4, min_count=3, min_ratio=0.3, min_run=0),
                      TailRepeat("tail", max_period=40, min_repeats=3, min_chars=20)]),
}

STREAMS = st.sampled_from(["s1", "s2", "chat-1", 7, "流"])
KINDS = st.sampled_from(["text-delta", "reasoning-delta", "text-delta", "start", "end"])
DELTA_TEXT = st.one_of(texts(max_fragments=6), st.just(LONG_LINE), st.just(""))


def _dump(obj: object, ascii_only: bool) -> bytes:
    return json.dumps(obj, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


@st.composite
def event_line(draw: st.DrawFn) -> bytes:
    obj: dict[str, Any] = {"stream": draw(STREAMS), "type": draw(KINDS)}
    if obj["type"].endswith("delta") or draw(st.booleans()):
        obj["text"] = draw(DELTA_TEXT)
    extra = draw(st.sampled_from([None, "ts", "model", "id"]))
    if extra is not None:
        obj[extra] = draw(st.sampled_from([1733150000, "x", None, [1, {"a": "é"}]]))
    if draw(st.booleans()):  # key order must not matter
        obj = dict(reversed(list(obj.items())))
    return _dump(obj, draw(st.booleans()))


@st.composite
def chunk_obj(draw: st.DrawFn) -> dict[str, Any]:
    delta: dict[str, Any] = {}
    for key in draw(st.lists(st.sampled_from(["content", "reasoning_content", "reasoning",
                                              "role"]), unique=True, max_size=3)):
        delta[key] = draw(st.one_of(DELTA_TEXT, st.none()))
    choice: dict[str, Any] = {"index": draw(st.sampled_from([0, 0, 1, None])),
                              "delta": delta if draw(st.integers(0, 5)) else None,
                              "finish_reason": draw(st.sampled_from([None, None, None, "stop"]))}
    obj: dict[str, Any] = {"id": draw(st.sampled_from(["c1", "c2", "", 5])),
                           "object": draw(st.sampled_from(["chat.completion.chunk", None])),
                           "choices": [choice] if draw(st.integers(0, 6)) else None}
    if draw(st.booleans()):
        obj["usage"] = {"total_tokens": 3}
    return obj


@st.composite
def chunk_line(draw: st.DrawFn) -> bytes:
    body = _dump(draw(chunk_obj()), draw(st.booleans()))
    return b"data: " + body if draw(st.booleans()) else body


@st.composite
def odd_line(draw: st.DrawFn) -> bytes:
    """Lines the typed fast path must not take, or must take as the line reader does."""
    return draw(st.sampled_from([
        b"", b"   ", b"\r", b": keep-alive", b"event: message", b"data: [DONE]", b"data:[DONE] ",
        b'{"stream": "s1", "type": "text-delta", "text": "a\tb"}',       # raw control character
        b'{"stream": "s1", "type": "text-delta", "text": "\xff"}',       # not UTF-8
        b'{"stream": "s1", "type": "start", "x": "\xc0\x80"}',           # not UTF-8, ignored key
        b'{"stream": "s1", "type": "start", "x": NaN}',                  # json.loads takes NaN
        b'{"stream": "s1", "type": "text-delta", "text": "\\ud800x"}',   # a lone surrogate
        b'{"stream": true, "type": "start"}',
        b'{"stream": 1.5, "type": "start"}',
        b'{"stream": 123456789012345678901234567890, "type": "start"}',
        b'{"stream": "s1", "type": "bogus"}',
        b'{"stream": "s1", "type": "text-delta"}',
        b'{"stream": "s1", "type": "text-delta", "text": null}',
        b'{"stream": "s1", "type": "start", "text": 5}',
        b'{"type": "start"}',
        b'{"stream": "s1"}',
        b'{"stream": "s1", "type": "start"} trailing',
        b'{"stream": "s1", "type": "start",}',
        b'{"stream": "s1", "type": "start", "type": "end"}',
        b'{"str\\u0065am": "s2", "type": "text-delta", "text": "escaped key"}',
        b' {"stream": "s1", "type": "end"}',
        b'{"stream": "s1", "type": "end"}\x0c',
        b'[{"stream": "s2", "type": "text-delta", "text": "in a list"}]',
        b"[]",
        b'{"stream": "s1",',
        b'"type": "start"}',
        b'data: {"stream": "s1", "type": "start"}',
        b'data: {"id": "c1", "choices": [{"index": -1, "delta": {"content": "x"}}]}',
        b'data: {"id": "c1", "choices": [{"index": true}]}',
        b'{"id": "c1", "choices": [{"delta": {"content": 5}}]}',
        b'{"id": "c1", "choices": {"0": 1}}',
        b'{"id": "c1", "object": "chat.completion", "choices": null}',
        b'{"id": "c3", "object": "chat.completion", "choices": [{"index": 0, "message":'
        b' {"content": "whole reply", "reasoning_content": "thought"}}]}',
        b'{"id": "c3", "choices": [{"text": "legacy"}]}',
        b'{"id": "c1", "choices": [{"delta": {"content": "x", "audio": null},'
        b' "native_finish_reason": "stop"}]}',
        b"not json at all",
    ]))


@st.composite
def burst(draw: st.DrawFn) -> list[bytes]:
    """Consecutive deltas of one stream and channel, loops in them: a run fed in one call,
    detections at several of its deltas."""
    stream, kind = draw(STREAMS), draw(st.sampled_from(["text-delta", "reasoning-delta"]))
    text = draw(st.sampled_from([LONG_LINE, "Let me check the caller again.\n", "ab the 。",
                                 "好。\n"])) * draw(st.integers(3, 40))
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=60)))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
    return [_dump({"stream": stream, "type": kind, "text": piece}, False) for piece in pieces]


LINE = st.one_of(event_line().map(lambda line: [line]), event_line().map(lambda line: [line]),
                 chunk_line().map(lambda line: [line]), odd_line().map(lambda line: [line]),
                 burst())


@st.composite
def trace_bytes(draw: st.DrawFn) -> bytes:
    lines = [line for group in draw(st.lists(LINE, max_size=25)) for line in group]
    if lines and draw(st.booleans()):  # a cut last line (no newline)
        return b"\n".join(lines)
    ending = draw(st.sampled_from([b"\n", b"\n", b"\r\n"]))
    return b"".join(line + ending for line in lines)


def _error_key(exc: TraceFormatError) -> tuple[str, int, str, str]:
    return (exc.source, exc.line, exc.reason, exc.excerpt)


def _read(reader: Any, data: bytes, strict: bool, **kwargs: Any) -> list[Any]:
    """Events (with their lines) and errors of ``reader`` in order; with ``strict`` the error
    that stopped it last."""
    log: list[Any] = []

    def on_error(exc: TraceFormatError) -> None:
        log.append(("error", _error_key(exc)))

    source = io.BytesIO(data)
    source.name = "t.jsonl"
    try:
        for e in reader(source, on_error=None if strict else on_error, **kwargs):
            log.append((e.stream, e.type, e.text, e.source, e.line))
    except TraceFormatError as exc:
        log.append(("raised", _error_key(exc)))
    return log


def _replays(data: bytes, ruleset: Ruleset, context: int | None,
             limit: int = 64 << 20) -> tuple[list[Any], list[Any]]:
    """The per-event replay of the line reader, and the batched replay of the fast reader:
    results and errors in the order they come."""
    def run(fast: bool) -> list[Any]:
        log: list[Any] = []

        def on_error(exc: TraceFormatError) -> None:
            log.append(("error", _error_key(exc)))

        source = io.BytesIO(data)
        source.name = "t.jsonl"
        try:  # a JSON document with a line over the limit stops reading even with on_error
            if fast:
                replayer = Replayer(ruleset, context=context)
                blocks = _source_ops(source, True, None, limit)
                log += _replay_ops(replayer, "t.jsonl", blocks, on_error)
                log += replayer.close()
            else:
                log += replay(_iter_events_lines(source, on_error=on_error,
                                                 max_line_bytes=limit), ruleset, context=context)
        except TraceFormatError as exc:
            log.append(("raised", _error_key(exc)))
        return log

    return run(False), run(True)


SETTINGS = settings(max_examples=80, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(data=trace_bytes(), strict=st.booleans(), gz=st.booleans())
def test_the_fast_reader_gives_the_events_and_errors_of_the_line_reader(
        data: bytes, strict: bool, gz: bool) -> None:
    if gz:
        data = gzip.compress(data)
    want = _read(_iter_events_lines, data, strict)
    assert _read(iter_events, data, strict) == want


@SETTINGS
@given(data=trace_bytes(), name=st.sampled_from(sorted(RULESETS)),
       context=st.sampled_from([None, 0, 3, 40]))
def test_the_batched_replay_gives_the_results_of_the_per_event_replay(
        data: bytes, name: str, context: int | None) -> None:
    want, got = _replays(data, RULESETS[name], context)
    assert got == want
    # the detections' lines are part of the results: the comparison is not vacuous on them
    for result in got:
        if isinstance(result, StreamResult) and result.detections and context is not None:
            assert len(result.sites) == len(result.detections)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=trace_bytes(), limit=st.integers(20, 400), strict=st.booleans())
def test_the_line_limit_gives_the_same_errors_in_both_readers(data: bytes, limit: int,
                                                              strict: bool) -> None:
    want = _read(_iter_events_lines, data, strict, max_line_bytes=limit)
    assert _read(iter_events, data, strict, max_line_bytes=limit) == want
    before, after = _replays(data, RULESETS["dense"], 0, limit)
    assert after == before


def _big_trace(streams: int, deltas: int, seed: int = 3) -> bytes:
    """Interleaved streams of loops and prose, many blocks long, with a few malformed lines."""
    rng = random.Random(seed)
    pieces = ["Let me check the caller again.\n", "好。\n", "the ", "ab", "x = 1\n", LONG_LINE]
    out = [json.dumps({"stream": f"s{s}", "type": "start"}) for s in range(streams)]
    for i in range(deltas):
        s = rng.randrange(streams) if rng.random() < 0.3 else i * streams // deltas
        kind = "reasoning-delta" if rng.random() < 0.7 else "text-delta"
        text = rng.choice(pieces)
        cut = rng.randrange(len(text) + 1)
        out.append(json.dumps({"stream": f"s{s}", "type": kind, "text": text[:cut]},
                              ensure_ascii=False))
        out.append(json.dumps({"stream": f"s{s}", "type": kind, "text": text[cut:]},
                              ensure_ascii=False))
        if rng.random() < 0.001:
            out.append('{"stream": "s0", "type": "oops"}')
        if rng.random() < 0.0005:
            out.append(json.dumps({"stream": f"s{s}", "type": "end"}))
    return ("\n".join(out) + "\n").encode()


@pytest.mark.parametrize("context", [None, 0, 40])
def test_many_blocks_of_interleaved_streams_replay_the_same(context: int | None) -> None:
    data = _big_trace(streams=6, deltas=20000)
    want, got = _replays(data, default_ruleset(), context)
    assert got == want
    assert sum(len(r.detections) for r in got if isinstance(r, StreamResult)) > 10
    assert any(not isinstance(r, StreamResult) for r in got)  # the malformed lines, in order


def test_scan_reads_gzip_and_equals_the_per_event_replay(tmp_path: Path) -> None:
    data = _big_trace(streams=3, deltas=6000, seed=5)
    path = tmp_path / "t.jsonl.gz"
    path.write_bytes(gzip.compress(data))
    errors: list[TraceFormatError] = []
    got = scan(path, on_error=errors.append)
    want_errors: list[TraceFormatError] = []
    want = list(replay(_iter_events_lines(path, on_error=want_errors.append), default_ruleset()))
    assert got == want and got
    assert list(map(_error_key, errors)) == list(map(_error_key, want_errors))


def test_a_reference_ruleset_is_replayed_one_delta_at_a_time() -> None:
    """The batched replay takes any engine: without Watcher._feed_deltas it feeds one by one."""
    rules = [Phrases("p", ["ab"], action="record"), LineRepeat("l", min_lines=4, min_count=3,
                                                               min_ratio=0.3, min_run=0)]
    data = _big_trace(streams=2, deltas=400, seed=9)
    want, got = _replays(data, reference.Ruleset(rules), 0)
    assert got == want
    assert got == _replays(data, Ruleset(rules), 0)[1]


@given(rules=st.sampled_from(sorted(RULESETS)),
       deltas=st.lists(st.tuples(st.sampled_from(["text", "reasoning"]),
                                 st.lists(texts(max_fragments=4), min_size=1, max_size=8)),
                       max_size=5))
@settings(max_examples=60, deadline=None)
def test_feed_deltas_returns_what_feed_returns_delta_by_delta(
        rules: str, deltas: list[tuple[str, list[str]]]) -> None:
    ruleset = RULESETS[rules]
    one, many = ruleset.watcher(), ruleset.watcher()
    for channel, run in deltas:
        want = [(i, found) for i, text in enumerate(run) if (found := one.feed(text, channel))]
        assert many._feed_deltas(run, channel) == want
    assert many.finish() == one.finish()


def test_feed_deltas_checks_its_arguments() -> None:
    watcher = default_ruleset().watcher()
    with pytest.raises(TypeError):
        watcher._feed_deltas(["ok", b"bytes"], "text")  # type: ignore[list-item]
    with pytest.raises(TypeError):
        watcher._feed_deltas(("a tuple",), "text")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="channel"):
        watcher._feed_deltas(["x"], "combined")
    watcher.finish()
    with pytest.raises(RuntimeError):
        watcher._feed_deltas(["late"], "text")


@given(held=st.lists(st.text(max_size=30), max_size=5),
       lengths=st.lists(st.integers(1, 700), min_size=1, max_size=60),
       keep=st.sampled_from([1, 5, 256, 600]))
@settings(max_examples=200, deadline=None)
def test_a_ring_extended_at_once_holds_what_it_holds_delta_by_delta(
        held: list[str], lengths: list[int], keep: int) -> None:
    one, many = _Ring(), _Ring()
    for text in filter(None, held):
        one.add(text, keep)
        many.add(text, keep)
    letters = iter("abcdefghijklmnopqrstuvwxyz" * 1000)
    texts_ = ["".join(next(letters) for _ in range(n)) for n in lengths]
    for text in texts_:
        one.add(text, keep)
    whole = many.extend("".join(texts_), list(accumulate(lengths)), keep)
    assert (many.held, many.end) == (one.held, one.end)
    assert "".join(many.parts) == "".join(one.parts)
    assert whole.endswith("".join(texts_))


# --------------------------------------------------------------------------- the command

def _scan(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = cli.main(["scan", "--no-progress", *args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_max_line_bytes_makes_a_longer_line_a_file_line_error(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]
                                                              ) -> None:
    lines = [{"stream": "r", "type": "start"},
             {"stream": "r", "type": "text-delta", "text": "y" * 3000},
             {"stream": "r", "type": "text-delta", "text": "Let me check again.\n" * 40},
             {"stream": "r", "type": "end"}]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in lines), encoding="utf-8")
    status, out, err = _scan(capsys, str(path), "--format", "jsonl", "--max-line-bytes", "2K")
    records = [json.loads(line) for line in out.splitlines()]
    assert [(r["line"], r["type"]) for r in records if r["type"] == "error"] == [(2, "error")]
    assert "longer than the 2048-byte limit" in records[0]["reason"]
    assert f"{path}:2:" in err
    assert records[-1]["type"] == "summary" and records[-1]["detections"] > 0
    # strict: the first such line stops the scan, naming it
    status, out, err = _scan(capsys, str(path), "--strict", "--max-line-bytes", "2k")
    assert status == 2 and f"{path}:2: a line of 3" in err
    # under the default limit the same file reads whole
    status, out, err = _scan(capsys, str(path), "--format", "jsonl")
    assert json.loads(out.splitlines()[-1])["errors"] == 0


@pytest.mark.parametrize(("text", "value"), [("65536", 65536), ("64M", 64 << 20),
                                             ("1G", 1 << 30), ("512k", 512 << 10),
                                             ("64MiB", 64 << 20), ("2 MB", 2 << 20),
                                             ("1_000", 1000)])
def test_sizes_read_by_max_line_bytes(text: str, value: int) -> None:
    assert cli.build_parser().parse_args(["scan", "--max-line-bytes", text]).max_line_bytes \
        == value


@pytest.mark.parametrize("text", ["0", "-1", "64X", "M", "1.5G", ""])
def test_bad_sizes_are_usage_errors(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.build_parser().parse_args(["scan", "--max-line-bytes", text])
    assert info.value.code == 2
    assert "--max-line-bytes" in capsys.readouterr().err


def test_a_pipe_gets_each_result_when_its_stream_ends() -> None:
    """A live capture (not seekable) hands out a stream's end before reading on."""
    class Pipe(io.BytesIO):
        def seekable(self) -> bool:
            return False

    lines = [{"stream": "a", "type": "start"},
             {"stream": "a", "type": "text-delta", "text": "hello"},
             {"stream": "a", "type": "end"},
             {"stream": "b", "type": "text-delta", "text": "more"}]
    pipe = Pipe("".join(json.dumps(o) + "\n" for o in lines).encode())
    blocks = _source_ops(pipe, True, None, 1 << 20)
    first: list[Any] = []
    while not any(op[0] == 1 for op in first):  # up to the block holding a's end
        first += next(blocks)
    assert first[-1][:2] == (1, "a")  # handed out before the line after it is read
    assert all(op[1] == "a" for op in first)


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_long_lines_across_blocks_under_a_limit_read_the_same(gz: bool) -> None:
    """Lines longer than a block of the fast reader, some over the limit, some just under it:
    the same events, errors and results as line by line."""
    rng = random.Random(11)
    lines = [json.dumps({"stream": "s", "type": "start"})]
    for i in range(400):
        size = rng.choice([3, 40, 90_000, 150_000, 200_000]) if i % 37 == 0 else rng.randrange(9)
        text = ("Let me check the caller again.\n" * (size // 31 + 1))[:size]
        lines.append(json.dumps({"stream": "s", "type": "text-delta", "text": text}))
    lines.append(json.dumps({"stream": "s", "type": "end"}))
    data = ("\n".join(lines) + "\n").encode()
    if gz:
        data = gzip.compress(data)
    limit = 150_000 + 60  # the 150 000-character lines fit, the 200 000 ones do not
    for strict in (False, True):
        want = _read(_iter_events_lines, data, strict, max_line_bytes=limit)
        assert _read(iter_events, data, strict, max_line_bytes=limit) == want
        assert any(entry[0] in ("error", "raised") for entry in want)
    before, after = _replays(data, default_ruleset(), 0, limit)
    assert after == before


def test_done_ends_the_chunk_stream_that_was_active_last() -> None:
    """A chunk that continues the run of the last line still makes its stream the most recent
    one, which [DONE] ends (here after another stream's chunk with no text came between)."""
    def chunk_line(cid: str, **delta: Any) -> bytes:
        return b"data: " + json.dumps({"id": cid, "object": "chat.completion.chunk",
                                       "choices": [{"index": 0, "delta": delta,
                                                    "finish_reason": None}]}).encode()

    lines = [chunk_line("A", content="one"), chunk_line("B", content="x"),
             chunk_line("A", content="two"), chunk_line("B", role="assistant"),
             chunk_line("A", content="three"), b"data: [DONE]",
             chunk_line("B", content="four"), b"data: [DONE]"]
    for data in (b"\n\n".join(lines) + b"\n", b"\n".join(line[6:] if line.startswith(
            b"data: {") else line for line in lines) + b"\n"):
        want = _read(_iter_events_lines, data, False)
        assert _read(iter_events, data, False) == want
        ends = [entry for entry in want if entry[1] == "end"]
        assert [entry[0] for entry in ends] == ["A", "B"]


def test_blocks_hold_a_bounded_amount_of_text() -> None:
    """Memory holds one block: the fast reader's blocks, and those of a plain-text reply (one
    run of deltas for the whole file), stay near the block size however long the file is."""
    from contextcare.traces import _BLOCK_BYTES, _event_blocks, iter_text_events

    def text_of(ops: list[Any]) -> int:
        return sum(len(t) for op in ops if op[0] == 2 for t in op[3])

    reply = io.StringIO("Let me check the caller again.\n" * 40000)  # 1.2 MB, one stream
    blocks = list(_event_blocks(lambda on_error: iter_text_events(reply, on_error=on_error),
                                True))
    assert len(blocks) > 10 and max(map(text_of, blocks)) <= _BLOCK_BYTES + 100
    data = _big_trace(streams=2, deltas=40000, seed=1)
    blocks = list(_source_ops(io.BytesIO(data), True, None, 64 << 20))
    assert len(blocks) > 10 and max(map(text_of, blocks)) <= _BLOCK_BYTES


@pytest.mark.parametrize("rest", [b"{", b"{\n", b"}", b"{}", b"\n", b"{}\n{}"])
def test_a_block_of_a_few_bytes_reads_as_line_by_line(rest: bytes) -> None:
    data = b'{"stream": "a", "type": "start"}\n' + rest
    for strict in (False, True):
        assert _read(iter_events, data, strict) == _read(_iter_events_lines, data, strict)
