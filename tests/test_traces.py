"""Trace parsing (contextcare events, OpenAI chunks, SSE, gzip) and per-stream replay."""

from __future__ import annotations

import gzip
import io
import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from contextcare import Detection, LineRepeat, Phrases, Ruleset, default_ruleset
from contextcare.traces import (
    SAMPLES,
    Event,
    StreamResult,
    TraceFormatError,
    iter_events,
    iter_text_events,
    replay,
    sample_events,
    scan,
)


def jl(*objs: Any) -> str:
    return "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objs)


def ev(stream: str, kind: str, text: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"stream": stream, "type": kind}
    if text is not None:
        out["text"] = text
    return out


def chunk(cid: str, *, content: str | None = None, reasoning: str | None = None,
          reasoning_key: str = "reasoning_content", finish: str | None = None,
          index: int = 0) -> dict[str, Any]:
    delta: dict[str, Any] = {"content": content}
    if reasoning is not None:
        delta[reasoning_key] = reasoning
    return {"id": cid, "object": "chat.completion.chunk", "created": 1733150000,
            "model": "test-model",
            "choices": [{"index": index, "delta": delta, "finish_reason": finish}]}


def events_of(text: str | bytes, **kwargs: Any) -> list[Event]:
    data = text.encode("utf-8") if isinstance(text, str) else text
    return list(iter_events(io.BytesIO(data), **kwargs))


def brief(events: list[Event]) -> list[tuple[str, str, str]]:
    return [(e.stream, e.type, e.text) for e in events]


# --------------------------------------------------------------------------- contextcare events

def test_contextcare_events_are_read_in_order_with_line_numbers() -> None:
    text = jl(ev("a", "start"), ev("a", "reasoning-delta", "think"), ev("b", "text-delta", "hi"),
              ev("a", "text-delta", "ok"), ev("a", "end"))
    events = events_of(text)
    assert brief(events) == [("a", "start", ""), ("a", "reasoning-delta", "think"),
                             ("b", "text-delta", "hi"), ("a", "text-delta", "ok"),
                             ("a", "end", "")]
    assert [e.line for e in events] == [1, 2, 3, 4, 5]
    assert [e.channel for e in events] == [None, "reasoning", "text", "text", None]


def test_integer_stream_ids_blank_lines_bom_crlf_and_extra_keys() -> None:
    text = ("\ufeff" + json.dumps({"stream": 7, "type": "text-delta", "text": "x", "t": 0.5})
            + "\r\n\r\n   \n" + json.dumps({"stream": 7, "type": "end", "text": "ignored"}) + "\r\n")
    events = events_of(text)
    assert brief(events) == [("7", "text-delta", "x"), ("7", "end", "")]
    assert events[1].line == 4


def test_text_file_objects_are_accepted() -> None:
    events = list(iter_events(io.StringIO(jl(ev("s", "text-delta", "abc")))))
    assert brief(events) == [("s", "text-delta", "abc")]


def test_unicode_edge_cases_survive_parsing() -> None:
    # JSON writers escape a lone surrogate (it has no UTF-8 form); the parser must keep it
    text = "".join(json.dumps(ev("s", "text-delta", t)) + "\n" for t in ("\ud800", "\x00", "😀时间"))
    assert [e.text for e in events_of(text)] == ["\ud800", "\x00", "😀时间"]


@pytest.mark.parametrize(("line", "reason"), [
    ("{not json", "not JSON"),
    ("[1, 2]", "expected a JSON object, got int"),  # a list is read item by item
    (json.dumps({"stream": "s", "type": "delta"}), "'type' must be one of"),
    (json.dumps({"type": "text-delta", "text": "x"}), "'stream' must be a string or an integer,"
                                                       " got missing"),
    (json.dumps({"stream": True, "type": "start"}), "got a bool"),
    (json.dumps({"stream": "s", "type": "text-delta"}), "'text' of a text-delta must be a string,"
                                                        " got missing"),
    (json.dumps({"stream": "s", "type": "reasoning-delta", "text": 3}), "got a int"),
    (json.dumps({"hello": "world"}), "neither a contextcare event"),
    ("data: " + json.dumps({"stream": "s", "type": "start"}), "neither a contextcare event"),
    (json.dumps({"id": "c", "choices": {}}), "'choices' must be a list"),
    (json.dumps({"id": "c", "choices": [{"delta": {"content": ["x"]}}]}),
     "'delta.content' must be a string or null"),
])
def test_malformed_lines_name_file_and_line(line: str, reason: str) -> None:
    data = jl(ev("s", "start")) + line + "\n"
    with pytest.raises(TraceFormatError) as info:
        list(iter_events(io.BytesIO(data.encode()), on_error=None))
    assert info.value.line == 2
    assert reason in info.value.reason
    assert str(info.value).startswith(f"{info.value.source}:2: ")


def test_invalid_utf8_is_a_malformed_line_with_its_path(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"stream":"s","type":"start"}\n{"stream":"s","type":"text-delta","text":"\xff"}\n')
    with pytest.raises(TraceFormatError, match=r"bad\.jsonl:2: not valid UTF-8") as info:
        list(iter_events(path))
    assert info.value.source == str(path)
    assert isinstance(info.value, ValueError)


def test_on_error_reports_and_reading_goes_on() -> None:
    text = (jl(ev("s", "text-delta", "a")) + "garbage\n" + jl(ev("s", "text-delta", "b"))
            + "[]\n" + jl(ev("s", "end")))
    seen: list[TraceFormatError] = []
    events = events_of(text, on_error=seen.append)
    assert brief(events) == [("s", "text-delta", "a"), ("s", "text-delta", "b"), ("s", "end", "")]
    assert [e.line for e in seen] == [2, 4]


# --------------------------------------------------------------------------- OpenAI chunks

def test_openai_chunk_lines_map_reasoning_and_content() -> None:
    text = jl(chunk("c1", reasoning="hmm"), chunk("c1", content="Hel"),
              chunk("c1", reasoning="r2", reasoning_key="reasoning", content="lo"),
              chunk("c1", finish="stop"))
    assert brief(events_of(text)) == [
        ("c1", "start", ""), ("c1", "reasoning-delta", "hmm"), ("c1", "text-delta", "Hel"),
        ("c1", "reasoning-delta", "r2"), ("c1", "text-delta", "lo"), ("c1", "end", ""),
    ]


def test_sse_lines_done_comments_and_usage_chunks() -> None:
    usage = {"id": "c1", "object": "chat.completion.chunk", "choices": [],
             "usage": {"prompt_tokens": 3, "completion_tokens": 2}}
    text = (": keep-alive\n"
            "event: message\n"
            f"data: {json.dumps(chunk('c1', content='Hi'))}\n\n"
            f"data:{json.dumps(chunk('c1', content=' there'))}\n\n"
            f"data: {json.dumps(usage)}\n\n"
            "data: [DONE]\n\n")
    assert brief(events_of(text)) == [("c1", "start", ""), ("c1", "text-delta", "Hi"),
                                      ("c1", "text-delta", " there"), ("c1", "end", "")]


def test_done_ends_only_the_most_recent_open_chunk_stream() -> None:
    text = (f"data: {json.dumps(chunk('a', content='1'))}\n"
            f"data: {json.dumps(chunk('b', content='2'))}\n"
            f"data: {json.dumps(chunk('a', content='3'))}\n"
            "data: [DONE]\n"
            "data: [DONE]\n"
            "data: [DONE]\n")
    ends = [e.stream for e in events_of(text) if e.type == "end"]
    assert ends == ["a", "b"]  # a was active last; the third [DONE] has nothing left to end


def test_choices_beyond_the_first_are_separate_streams() -> None:
    text = jl(chunk("c", content="zero"), chunk("c", content="one", index=1))
    assert [(e.stream, e.text) for e in events_of(text) if e.type == "text-delta"] == [
        ("c", "zero"), ("c#1", "one")]


def test_structured_reasoning_and_null_content_carry_no_text() -> None:
    obj = chunk("c", content=None)
    obj["choices"][0]["delta"]["reasoning"] = {"summary": "not text"}
    assert brief(events_of(jl(obj))) == [("c", "start", "")]


# --------------------------------------------------------------------------- gzip and progress

def test_gzip_is_detected_by_content_not_by_name(tmp_path: Path) -> None:
    body = jl(ev("s", "start"), ev("s", "text-delta", "zipped"), ev("s", "end"))
    for name in ("trace.jsonl", "trace.jsonl.gz"):
        path = tmp_path / name
        path.write_bytes(gzip.compress(body.encode()))
        assert brief(list(iter_events(path)))[1] == ("s", "text-delta", "zipped")
    plain = tmp_path / "plain.gz"
    plain.write_text(body, encoding="utf-8")
    assert len(list(iter_events(plain))) == 3


def test_damaged_gzip_raises_even_with_on_error(tmp_path: Path) -> None:
    data = gzip.compress(jl(*[ev("s", "text-delta", "x" * 50)] * 200).encode())
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceFormatError, match="damaged gzip"):
        list(iter_events(path, on_error=lambda exc: None))


def test_progress_reaches_the_file_size_for_plain_and_gzip(tmp_path: Path) -> None:
    body = jl(*[ev("s", "text-delta", f"delta {i}") for i in range(2000)]).encode()
    for name, data in (("p.jsonl", body), ("g.jsonl.gz", gzip.compress(body))):
        path = tmp_path / name
        path.write_bytes(data)
        seen: list[int] = []
        assert len(list(iter_events(path, progress=seen.append))) == 2000
        assert len(seen) >= 2
        assert seen == sorted(seen)
        assert seen[-1] == len(data)


def test_a_non_file_source_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="source must be a path or an open file"):
        list(iter_events(42))  # type: ignore[arg-type]


# --------------------------------------------------------------------------- replay

LOOP = "Let me check again.\n" * 40


def direct(ruleset: Ruleset, parts: list[tuple[str, str]]) -> tuple[Detection, ...]:
    watcher = ruleset.watcher()
    out: list[Detection] = []
    for text, channel in parts:
        out += watcher.feed(text, channel=channel)
    out += watcher.finish()
    return tuple(out)


def deltas(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def test_interleaved_streams_get_their_own_watchers() -> None:
    ruleset = default_ruleset()
    a = [(t, "reasoning") for t in deltas(LOOP, 3)]
    b = [(t, "text") for t in deltas("A clean answer.\nNothing repeats here.\n", 2)]
    lines = [ev("a", "start"), ev("b", "start")]
    for i in range(max(len(a), len(b))):
        for sid, parts in (("a", a), ("b", b)):
            if i < len(parts):
                text, channel = parts[i]
                lines.append(ev(sid, f"{channel}-delta", text))
    lines += [ev("b", "end"), ev("a", "end")]
    results = scan(io.BytesIO(jl(*lines).encode()), ruleset)
    assert [(r.stream, r.complete) for r in results] == [("b", True), ("a", True)]
    by_stream = {r.stream: r for r in results}
    assert by_stream["a"].detections == direct(ruleset, a)
    assert by_stream["a"].detections  # the loop is caught...
    assert by_stream["b"].detections == ()  # ...and does not leak into the other stream
    assert by_stream["a"].deltas == len(a)
    assert by_stream["a"].chars == len(LOOP)


def test_a_new_start_is_a_new_attempt_with_fresh_fire_once_state() -> None:
    ruleset = Ruleset([Phrases("oops", ["oops"], channel="text")])
    lines = [ev("s", "start"), ev("s", "text-delta", "oops"), ev("s", "start"),
             ev("s", "text-delta", "oo"), ev("s", "text-delta", "ps"), ev("s", "end"),
             ev("s", "text-delta", "oops")]
    results = scan(io.StringIO(jl(*lines)), ruleset)
    assert [(r.attempt, r.complete, len(r.detections)) for r in results] == [
        (1, False, 1), (2, True, 1), (3, False, 1)]
    assert [r.detections[0].offset for r in results] == [4, 4, 4]


def test_streams_without_end_are_finished_at_end_of_input() -> None:
    # every_bytes far beyond the text: the rule can only be checked by finish()
    ruleset = Ruleset([LineRepeat("rep", min_lines=3, min_count=3, min_ratio=0.5, min_run=0,
                                  every_bytes=1 << 20)])
    results = scan(io.StringIO(jl(*[ev("s", "text-delta", "same line\n")] * 5)), ruleset)
    assert len(results) == 1
    assert not results[0].complete
    assert [d.rule for d in results[0].detections] == ["rep"]


def test_end_without_start_and_empty_deltas_are_harmless() -> None:
    ruleset = Ruleset([Phrases("p", ["x"])])
    results = scan(io.StringIO(jl(ev("s", "end"), ev("t", "text-delta", ""), ev("t", "end"))),
                   ruleset)
    assert [(r.stream, r.deltas, r.detections) for r in results] == [("t", 0, ())]


def test_the_same_stream_id_in_two_sources_is_two_streams() -> None:
    ruleset = Ruleset([Phrases("p", ["abc"], channel="text")])
    one = [Event("s", "text-delta", "ab", "f1"), Event("s", "text-delta", "c", "f2")]
    results = list(replay(one, ruleset))
    assert [(r.source, r.detections) for r in results] == [("f1", ()), ("f2", ())]


def test_openai_reasoning_feeds_the_reasoning_channel() -> None:
    ruleset = Ruleset([Phrases("think", ["wait"], channel="reasoning"),
                       Phrases("say", ["wait"], channel="text")])
    text = jl(chunk("c", reasoning="wa"), chunk("c", reasoning="it"), chunk("c", content="ok"),
              chunk("c", finish="stop"))
    (result,) = scan(io.BytesIO(text.encode()), ruleset)
    assert [d.rule for d in result.detections] == ["think"]
    assert result.complete


def test_stream_result_to_dict_is_json_ready() -> None:
    ruleset = Ruleset([Phrases("p", ["hi"])])
    (result,) = scan(io.StringIO(jl(ev("s", "text-delta", "hi"))), ruleset)
    assert isinstance(result, StreamResult)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["stream"] == "s" and data["attempt"] == 1 and data["complete"] is False
    assert data["detections"] == [{**result.detections[0].to_dict(), "source_line": 1}]


# --------------------------------------------------------------------------- bundled samples

def test_samples_are_small_and_well_formed() -> None:
    folder = resources.files("contextcare") / "samples"
    names = sorted(p.name for p in folder.iterdir() if p.name.endswith(".jsonl"))
    assert names == sorted(f"{n}.jsonl" for n in SAMPLES)
    assert sum(len((folder / n).read_bytes()) for n in names) < 64 * 1024
    events = sample_events()
    streams = {e.source: e.stream for e in events}
    assert len(streams) == len(SAMPLES)
    # realistic deltas: token-sized, never whole lines
    sizes = [len(e.text) for e in events if e.text]
    assert max(sizes) <= 8 and sum(sizes) / len(sizes) < 5
    for source in streams:
        kinds = [e.type for e in events if e.source == source]
        assert kinds[0] == "start" and kinds[-1] == "end" and kinds.count("start") == 1


def test_samples_show_what_they_are_named_after() -> None:
    fired = {r.source.split("/")[-1][:-6]: {(d.rule, d.action) for d in r.detections}
             for r in replay(sample_events())}
    assert fired["clean-answer"] == set()
    assert ("line-repeat", "abort") in fired["reasoning-loop"]
    assert ("line-cycle", "remind") in fired["three-line-cycle"]
    assert ("line-repeat", "abort") not in fired["three-line-cycle"]  # the original's blind spot
    assert fired["newline-free-flood"] == {("tail-repeat", "abort"), ("vocab-collapse", "abort"),
                                           ("vocab-collapse-line", "abort")}
    for name in ("anxious-zh", "anxious-en"):
        assert fired[name] == {("time-anxiety", "remind"), ("context-anxiety", "remind")}


def test_a_json_document_is_read_whole_and_a_broken_one_says_where() -> None:
    doc = {"id": "c", "object": "chat.completion",
           "choices": [{"index": 0, "message": {"content": "hi there"}, "finish_reason": "stop"}]}
    pretty = json.dumps([doc, doc | {"id": "d"}], indent=2)
    events = list(iter_events(io.BytesIO(pretty.encode())))
    assert [(e.stream, e.type, e.text, e.line) for e in events] == [
        ("c", "start", "", 2), ("c", "text-delta", "hi there", 2), ("c", "end", "", 2),
        ("d", "start", "", 15), ("d", "text-delta", "hi there", 15), ("d", "end", "", 15)]
    broken = pretty[:pretty.rindex("}", 0, len(pretty) - 3)]  # the second item cut short
    seen: list[TraceFormatError] = []
    kept = list(iter_events(io.BytesIO(broken.encode()), on_error=seen.append))
    assert [e.stream for e in kept] == ["c", "c", "c"]  # the first item is not lost
    assert len(seen) == 1 and seen[0].line > 15


# An empty reasoning_content beside a filled reasoning field: the live path (streams) and the
# replay path (traces) read chunks with the same function, so both watch "LOOP" as reasoning.
EMPTY_RC_CHUNKS = [
    {"id": "c", "choices": [{"index": 0, "delta": {"reasoning_content": "", "reasoning": "LO"},
                             "finish_reason": None}]},
    {"id": "c", "choices": [{"index": 0, "delta": {"reasoning_content": "", "reasoning": "OP"},
                             "finish_reason": None}]},
    {"id": "c", "choices": [{"index": 0, "delta": {"content": "done"}, "finish_reason": "stop"}]},
]


def test_replay_reads_reasoning_beside_an_empty_reasoning_content() -> None:
    ruleset = Ruleset([Phrases("think", ["LOOP"], channel="reasoning")])
    (result,) = scan(io.StringIO(jl(*EMPTY_RC_CHUNKS)), ruleset)
    assert [(d.rule, d.channel) for d in result.detections] == [("think", "reasoning")]


def test_replay_and_live_read_chunks_alike() -> None:
    from contextcare.guard import Guard
    from contextcare.streams import openai_parts, watch_openai

    ruleset = Ruleset([Phrases("think", ["LOOP"], channel="reasoning", action="record")])
    live = watch_openai(EMPTY_RC_CHUNKS, Guard(ruleset))
    assert list(live) == EMPTY_RC_CHUNKS
    assert [(d.rule, d.channel) for d in live.replies[0].detections] == [("think", "reasoning")]
    replayed = [(e.type, e.text) for e in events_of(jl(*EMPTY_RC_CHUNKS))
                if e.type.endswith("-delta")]
    channel = {"reasoning-delta": "reasoning", "text-delta": "text"}
    assert [(channel[t], text) for t, text in replayed] == [
        (c, text) for ch in EMPTY_RC_CHUNKS for _, c, text in openai_parts(ch)]


# --------------------------------------------------------------------------- line-size limit

def _event_line(stream: str, kind: str, text: str = "") -> str:
    return json.dumps({"stream": stream, "type": kind, "text": text}) + "\n"


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_a_line_over_the_limit_is_a_file_line_error_and_is_skipped(tmp_path: Path,
                                                                     compress: bool) -> None:
    """A line longer than max_line_bytes is never held whole: strict reading stops with a
    TraceFormatError naming file:line; with on_error the line is skipped and the lines after it
    are read as usual."""
    from contextcare.traces import LINE_MAX_BYTES

    assert LINE_MAX_BYTES == 64 << 20
    body = (_event_line("r", "start") + _event_line("r", "text-delta", "x" * 5000)
            + _event_line("r", "text-delta", "after") + _event_line("r", "end"))
    path = tmp_path / ("t.jsonl.gz" if compress else "t.jsonl")
    path.write_bytes(gzip.compress(body.encode()) if compress else body.encode())
    with pytest.raises(TraceFormatError) as info:
        list(iter_events(path, max_line_bytes=1000))
    assert f"{path}:2:" in str(info.value) and "longer than the 1000-byte limit" in str(info.value)
    assert info.value.line == 2
    errors: list[TraceFormatError] = []
    events = list(iter_events(path, on_error=errors.append, max_line_bytes=1000))
    assert [e.line for e in errors] == [2]
    assert [(e.type, e.text, e.line) for e in events] == [
        ("start", "", 1), ("text-delta", "after", 3), ("end", "", 4)]
    # under the default limit the same file reads whole
    assert [e.text for e in iter_events(path)][1] == "x" * 5000


def test_line_limit_applies_to_text_sources_and_plain_text_files(tmp_path: Path) -> None:
    lines = ["short\n", "y" * 300 + "\n", "z" * 50]
    errors: list[TraceFormatError] = []
    events = list(iter_text_events(io.StringIO("".join(lines)), on_error=errors.append,
                                   max_line_bytes=100))
    assert [e.line for e in errors] == [2]
    assert [e.text for e in events if e.type == "text-delta"] == ["short\n", "z" * 50]
    # a line of exactly the limit (newline included) is read
    exact = "a" * 99 + "\n"
    assert [e.text for e in iter_text_events(io.StringIO(exact), max_line_bytes=100)
            if e.text] == [exact]
    with pytest.raises(TraceFormatError, match=r":2: a line of 301 bytes"):
        list(iter_text_events(io.StringIO("".join(lines)), max_line_bytes=100))
