"""The ``contextcare`` command as a user meets it: the real command in a subprocess, with real pipes
(and a real terminal through ``pty`` where the terminal matters), on inputs built here.

Each subprocess costs a Python start-up (~0.3 s), so cases are batched per run where they can be.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

if sys.platform == "win32":  # pty, termios, SIGPIPE: the terminal and pipe cases are POSIX's
    pytest.skip("the command-line tests use POSIX terminals and pipes", allow_module_level=True)

import fcntl
import pty
import termios

COMMAND = [sys.executable, "-m", "contextcare"]
LOOP_LINE = "Let me check the caller again.\n"


def cc(*argv: str, cwd: Path | None = None, stdin: bytes | None = None,
       env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``contextcare ARGV`` with pipes for stdin, stdout and stderr."""
    environ = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR")}
    environ.update(env or {})
    proc = subprocess.run([*COMMAND, *argv], cwd=cwd, input=stdin if stdin is not None else b"",
                          capture_output=True, timeout=120, check=False, env=environ)
    return subprocess.CompletedProcess(proc.args, proc.returncode,
                                       proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8"))


def jl(*objs: Any) -> str:
    return "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objs)


def events(stream: str, text: str, channel: str = "reasoning", size: int = 4) -> list[dict[str, Any]]:
    """A contextcare event trace of ``text`` on ``channel`` in deltas of ``size`` characters."""
    out: list[dict[str, Any]] = [{"stream": stream, "type": "start"}]
    out += [{"stream": stream, "type": f"{channel}-delta", "text": text[i:i + size]}
            for i in range(0, len(text), size)]
    return out + [{"stream": stream, "type": "end"}]


def chunks(cid: str, content: str, reasoning: str = "", size: int = 3) -> list[dict[str, Any]]:
    """OpenAI ``chat.completion.chunk`` objects streaming ``reasoning`` then ``content``."""
    out = []
    for key, text in (("reasoning_content", reasoning), ("content", content)):
        out += [{"id": cid, "object": "chat.completion.chunk",
                 "choices": [{"index": 0, "delta": {key: text[i:i + size]},
                              "finish_reason": None}]}
                for i in range(0, len(text), size)]
    out.append({"id": cid, "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return out


def completion(cid: str, content: str | None, reasoning: str | None = None,
               key: str = "reasoning_content") -> dict[str, Any]:
    """A saved non-streaming ``chat.completion`` document."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:
        message[key] = reasoning
    return {"id": cid, "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}


def jsonl_records(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines()]


# --------------------------------------------------------------------------- never a silent all-clear

def test_a_file_that_is_not_a_trace_is_an_error_and_other_files_still_count(
        tmp_path: Path) -> None:
    (tmp_path / "reply.txt").write_text("Sure! Here is the answer.\nIt has two lines.\n")
    (tmp_path / "own.jsonl").write_text(jl({"role": "assistant", "content": "hi"}, {"x": 1}))
    (tmp_path / "blob.bin").write_bytes(bytes(range(128, 256)) * 3)
    (tmp_path / "loop.jsonl").write_text(jl(*events("s", LOOP_LINE * 40)))
    (tmp_path / "empty.sse").write_text("\n: keep-alive\n\n")
    files = ["reply.txt", "own.jsonl", "blob.bin", "loop.jsonl", "empty.sse"]
    for extra in (["--fail-on", "abort"],):
        proc = cc("scan", *files, "--format", "jsonl", *extra, cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr
        # one message per bad file, naming it, the formats read and what its first line held
        messages = [line for line in proc.stderr.splitlines() if "not a trace file" in line]
        assert [m.split(": error: ")[1].split(":")[0] for m in messages] == files[:3]
        assert all("OpenAI" in m and "contextcare event" in m and "gzip" in m for m in messages)
        assert "'Sure! Here is the answer.'" in messages[0] and "--as-text" in messages[0]
        assert """'{"role": "assistant", "content": "hi"}'""" in messages[1]
        assert "not valid UTF-8" in messages[2] and "b'\\x80\\x81" in messages[2]
        assert "warning: empty.sse: no events (an empty file" in proc.stderr
        # the good file's detections are all there
        records = jsonl_records(proc.stdout)
        assert {r["rule"] for r in records if r.get("type") != "summary"} >= {"line-repeat"}


def test_skipped_lines_fail_a_fail_on_gate_and_warnings_are_capped(tmp_path: Path) -> None:
    trace = events("s", LOOP_LINE * 40)
    body = jl(*trace[:2]) + "".join(f"{{broken {i}\n" for i in range(30)) + jl(*trace[2:])
    (tmp_path / "t.jsonl").write_text(body)
    gate = cc("scan", "t.jsonl", "--fail-on", "abort", "--format", "jsonl", cwd=tmp_path)
    plain = cc("scan", "t.jsonl", "--format", "jsonl", cwd=tmp_path)
    assert gate.returncode == 2 and plain.returncode == 0
    for proc in (gate, plain):  # everything found is printed in both cases
        assert "line-repeat" in {r.get("rule") for r in jsonl_records(proc.stdout)}
        warnings = [line for line in proc.stderr.splitlines() if "line skipped" in line]
        assert len(warnings) == 20 and "t.jsonl:3: not JSON" in warnings[0]
        assert "30 malformed lines skipped (the first 20 shown)" in proc.stderr
    assert "--fail-on abort cannot pass a scan that skipped lines" in gate.stderr
    # jsonl reports the skipped lines as records and ends with a summary
    *rows, summary = jsonl_records(plain.stdout)
    assert summary["type"] == "summary" and summary["complete"] is True
    assert summary["errors"] == 30 and summary["streams"] == 1
    assert summary["detections"] == sum(r["type"] == "detection" for r in rows) > 0
    errors = [r for r in rows if r["type"] == "error"]
    assert [(r["source"], r["line"]) for r in errors] == [("t.jsonl", n) for n in range(3, 33)]


def test_a_damaged_gzip_does_not_discard_the_other_files(tmp_path: Path) -> None:
    data = gzip.compress(jl(*events("z", LOOP_LINE * 400)).encode())
    (tmp_path / "cut.jsonl.gz").write_bytes(data[:len(data) // 2])
    (tmp_path / "loop.jsonl").write_text(jl(*events("s", LOOP_LINE * 40)))
    proc = cc("scan", "cut.jsonl.gz", "loop.jsonl", "missing.jsonl", "--format", "json",
              cwd=tmp_path)
    assert proc.returncode == 2
    doc = json.loads(proc.stdout)
    assert "s" in {s["stream"] for s in doc["streams"]}
    assert [u["source"] for u in doc["unreadable"]] == ["cut.jsonl.gz", "missing.jsonl"]
    assert "damaged gzip data" in proc.stderr and "missing.jsonl: cannot read" in proc.stderr


@pytest.mark.parametrize(("argv", "message"), [
    (["--format", "parquet"], "--format parquet is for --engine ray"),
    (["--engine", "ray", "--format", "table"], "--format table is for the local engine"),
    (["--channel", "reasoning"], "--channel is for --as-text"),
    (["--engine", "ray", "--output", "."], "--output .: the folder is not empty"),
])
def test_impossible_combinations_are_usage_errors(tmp_path: Path, argv: list[str],
                                                 message: str) -> None:
    (tmp_path / "loop.jsonl").write_text(jl(*events("s", LOOP_LINE * 40)))
    proc = cc("scan", "loop.jsonl", *argv, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_saved_completions_are_scanned_as_the_stream_they_were(tmp_path: Path) -> None:
    reasoning = "时间不够了，我得快点。\n" + "Wait, let me re-read the config.\n" * 30
    content = "The answer is 42. " * 60
    loop = "好。\n" * 50
    # the streamed form, split in small chunks, one file per reply
    (tmp_path / "streamed.jsonl").write_text(
        jl(*chunks("c1", content, reasoning), *chunks("c2", loop),
           *chunks("c3", "A clean and short answer.")))
    docs = [completion("c1", content, reasoning), completion("c2", loop),
            completion("c3", "A clean and short answer.")]
    (tmp_path / "lines.jsonl").write_text(jl(*docs))
    (tmp_path / "list.json").write_text(json.dumps(docs, indent=2, ensure_ascii=False))
    single = [completion("c1", content, reasoning, key="reasoning")]
    (tmp_path / "one.json").write_text(json.dumps(single[0], indent=2))
    (tmp_path / "parts.json").write_text(json.dumps(
        completion("c2", None) | {"choices": [{"index": 0, "finish_reason": "stop", "message": {
            "role": "assistant", "content": [{"type": "text", "text": loop}]}}]}))
    proc = cc("scan", "streamed.jsonl", "lines.jsonl", "list.json", "one.json", "parts.json",
              "--format", "json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    streams = json.loads(proc.stdout)["streams"]

    def verdicts(source: str) -> dict[str, list[tuple[Any, ...]]]:
        return {s["stream"]: [(d["rule"], d["channel"], d["offset"], d.get("unit"),
                               d.get("phrase"), d.get("count")) for d in s["detections"]]
                for s in streams if s["source"] == source}

    expected = verdicts("streamed.jsonl")
    assert expected["c1"] and expected["c2"] and expected["c3"] == []
    assert {"time-anxiety", "tail-repeat"} <= {v[0] for v in expected["c1"]}
    assert verdicts("lines.jsonl") == expected
    assert verdicts("list.json") == expected
    assert verdicts("one.json") == {"c1": expected["c1"]}
    assert verdicts("parts.json") == {"c2": expected["c2"]}


def test_plain_text_is_refused_or_read_under_as_text(tmp_path: Path) -> None:
    reply = "Here is my plan.\n" + "We are running out of time.\n" + LOOP_LINE * 40
    (tmp_path / "reply.txt").write_text(reply)
    # refused without --as-text: test_a_file_that_is_not_a_trace_is_an_error_…
    text = cc("scan", "reply.txt", "--as-text", "--format", "json", cwd=tmp_path)
    reasoning = cc("scan", "reply.txt", "--as-text", "--channel", "reasoning",
                   "--format", "json", "--fail-on", "abort", cwd=tmp_path)
    assert text.returncode == 0 and reasoning.returncode == 1
    (visible,) = json.loads(text.stdout)["streams"]
    (thought,) = json.loads(reasoning.stdout)["streams"]
    assert visible["stream"] == "reply" and visible["chars"] == len(reply)
    assert "line-repeat" in {d["rule"] for d in visible["detections"]}
    # time-anxiety watches the reasoning channel only
    assert "time-anxiety" not in {d["rule"] for d in visible["detections"]}
    assert "time-anxiety" in {d["rule"] for d in thought["detections"]}


def _wait_drained(proc: subprocess.Popen[bytes], pipe: Any) -> None:
    """Wait until ``proc`` has read everything written to ``pipe`` and sleeps in a read."""
    buf = bytearray(4)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        fcntl.ioctl(pipe.fileno(), termios.FIONREAD, buf)
        waiting = int.from_bytes(buf, sys.byteorder)
        state = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if waiting == 0 and state == "S":
            return
        time.sleep(0.05)
    raise AssertionError("the scan never drained its input")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_ctrl_c_prints_what_was_found_then_exits_130(tmp_path: Path) -> None:
    # A shell's background job inherits SIGINT ignored, and Python then installs no
    # KeyboardInterrupt handler: give the child the default disposition a terminal user has.
    proc = subprocess.Popen([*COMMAND, "scan", "-", "--format", "table"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stdin is not None
    proc.stdin.write(jl(*events("done", LOOP_LINE * 40)).encode())
    proc.stdin.flush()  # stdin stays open: the scan waits for more
    _wait_drained(proc, proc.stdin)
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert b"line-repeat" in out and b"1 streams" in out
    assert b"interrupted" in err and b"Traceback" not in err


# --------------------------------------------------------------------------- output that pipes

RECORD = re.compile(r'^(?P<path>[^:\s]+):(?P<line>\d+): (?P<stream>"(?:[^"\\]|\\.)*"|\S+)'
                    r" (?P<rule>\S+)"
                    r" (?P<action>abort|remind|record) \((?P<channel>text|reasoning|combined),"
                    r" char (?P<offset>\d+)\) (?P<evidence>\S.*)$")


def run_in_terminal(argv: list[str], cwd: Path, *, stdin_tty: bool = False,
                    columns: int = 120) -> tuple[int, str, str]:
    """Run ``contextcare ARGV`` with stdout (and, if asked, stdin) on a pseudo-terminal."""
    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": str(columns)}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([*COMMAND, *argv], cwd=cwd, stdout=slave,
                            stdin=slave if stdin_tty else subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=env)
    os.close(slave)
    chunks_read = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the other side closed
            break
        if not data:
            break
        chunks_read.append(data)
    os.close(master)
    assert proc.stderr is not None
    with proc.stderr:
        err = proc.stderr.read().decode()
    proc.wait(timeout=60)
    return proc.returncode, b"".join(chunks_read).decode().replace("\r\n", "\n"), err


def interleaved_trace() -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Two interleaved streams (one in two attempts) and the line each phrase detection must
    point to."""
    a = events("alpha beta", "Plan: read the file.\nWe are running out of time here.\n" + "ok\n")
    b = events("b", LOOP_LINE * 40)
    retry = events("b", "Fine now, the context window is almost full though.\n")
    lines: list[dict[str, Any]] = []
    for i in range(max(len(a), len(b))):
        lines += a[i:i + 1] + b[i:i + 1]
    lines += retry
    expected = {}
    for name, phrase in (("alpha beta", "running out of time"),
                         ("b", "context window is almost full")):
        text = ""
        for n, e in enumerate(lines, 1):
            if e["stream"] == name and e["type"].endswith("-delta"):
                text += e["text"]
                if phrase in text and "\n" in text[text.index(phrase):]:
                    expected[name] = n  # these rules skip quoted phrases: they fire at line end
                    break
    return lines, expected


def test_piped_text_is_one_record_per_line_that_points_to_the_input(tmp_path: Path) -> None:
    trace, expected = interleaved_trace()
    (tmp_path / "t.jsonl").write_text(jl(*trace))
    text = cc("scan", "t.jsonl", cwd=tmp_path)
    doc = cc("scan", "t.jsonl", "--format", "json", cwd=tmp_path)
    rows = cc("scan", "t.jsonl", "--format", "jsonl", cwd=tmp_path)
    assert text.returncode == doc.returncode == rows.returncode == 0
    assert text.stdout and not text.stdout.startswith("\n")
    records = []
    for line in text.stdout.splitlines():
        match = RECORD.match(line)
        assert match, line
        assert line == line.rstrip() and not set(line) & set("│─┃━┏┗╭")
        records.append(match.groupdict())
    assert "2 streams" not in text.stdout and "3 streams" in text.stderr  # summary on stderr
    streams = json.loads(doc.stdout)["streams"]
    flat = [(s["stream"] + ("#2" if s["attempt"] == 2 else ""), d)
            for s in streams for d in s["detections"]]
    jsonl = [r for r in jsonl_records(rows.stdout) if r["type"] == "detection"]
    # the three outputs list the same detections, each naming its stream and its input line
    assert len(records) == len(flat) == len(jsonl) > 3
    for record, (stream, d), row in zip(records, flat, jsonl):
        assert record["stream"] in (stream, json.dumps(stream))
        assert (record["rule"], record["channel"], int(record["offset"])) == (
            d["rule"], d["channel"], d["offset"])
        assert int(record["line"]) == d["source_line"] == row["source_line"] >= 1
    phrase_lines = {(r["stream"], r["rule"]): int(r["line"]) for r in records}
    assert phrase_lines['"alpha beta"', "time-anxiety"] == expected["alpha beta"]
    assert phrase_lines["b#2", "context-anxiety"] == expected["b"]
    # rows of a stream are in offset order per channel
    for stream in {s for s, _ in flat}:
        for channel in ("text", "reasoning", "combined"):
            offsets = [d["offset"] for s, d in flat if s == stream and d["channel"] == channel]
            assert offsets == sorted(offsets)
    assert json.loads(doc.stdout)["units"]["offset"].startswith("code points")


def test_repeating_units_are_whole_or_marked_cut(tmp_path: Path) -> None:
    short = "The parser reads each line and keeps state for open streams, so results match! "
    long = "".join(f"step {i} of the long plan; " for i in range(20))[:300]
    assert len(short) < 256 < len(long)
    line = "Let me re-read the whole configuration file once more to be sure of it."
    (tmp_path / "rules.toml").write_text(
        '[[rules]]\ntype = "TailRepeat"\nid = "tail"\nmax_period = 400\nwindow_chars = 1600\n'
        'min_chars = 900\n[[rules]]\ntype = "LineRepeat"\nid = "lines"\n')
    (tmp_path / "t.jsonl").write_text(jl(*events("short", short * 12, "text", size=3),
                                         *events("long", long * 4, "text", size=3),
                                         *events("line", (line + "\n") * 40, "text", size=3)))
    doc = cc("scan", "t.jsonl", "--rules", "rules.toml", "--format", "json", cwd=tmp_path)
    text = cc("scan", "t.jsonl", "--rules", "rules.toml", cwd=tmp_path)
    streams = json.loads(doc.stdout)["streams"]
    (repeated,) = [d for s in streams for d in s["detections"] if d["rule"] == "lines"]
    assert repeated["line"] == line and "line_cut" not in repeated  # not the engine's 40
    assert f'"{line[:40]}…" (a {len(line)}-character line) ×' in text.stdout
    units = {s["stream"]: s["detections"][0] for s in streams if s["stream"] != "line"}
    assert units["short"]["period"] == len(short) and len(units["short"]["unit"]) == len(short)
    assert units["short"]["unit"] in short * 2 and "unit_cut" not in units["short"]
    assert units["long"]["period"] == len(long) and units["long"]["unit_cut"] is True
    assert len(units["long"]["unit"]) == 256 and units["long"]["unit"] in long * 2
    lines = text.stdout.splitlines()
    assert '…" ×' in lines[0] and f"(a {len(short)}-character unit)" in lines[0]
    assert f"(a {len(long)}-character unit)" in lines[1]


def test_context_shows_the_replayed_text_around_each_hit(tmp_path: Path) -> None:
    text = "First I read it. We are running out of time, so I will skip the tests.\n"
    (tmp_path / "t.jsonl").write_text(jl(*events("s", text, size=2)))
    doc = cc("scan", "t.jsonl", "-C", "12", "--format", "json", cwd=tmp_path)
    piped = cc("scan", "t.jsonl", "--context", "12", cwd=tmp_path)
    (hit,) = json.loads(doc.stdout)["streams"][0]["detections"]
    end = text.index("running out of time") + len("running out of time")
    assert hit["offset"] == end
    assert hit["context"] == {"before": text[end - 12:end], "after": text[end:end + 12]}
    record, context = piped.stdout.splitlines()
    match = RECORD.match(record)
    assert match and context.startswith(f"t.jsonl-{match['line']}- context: ")
    assert json.dumps(text[end - 12:end]) in context and json.dumps(text[end:end + 12]) in context


def test_folders_are_walked_and_stdin_is_read_when_piped(tmp_path: Path) -> None:
    (tmp_path / "runs" / "b").mkdir(parents=True)
    (tmp_path / "runs" / ".cache").mkdir()
    (tmp_path / "runs" / "b" / "two.jsonl").write_text(jl(*events("two", LOOP_LINE * 40)))
    (tmp_path / "runs" / "a.jsonl").write_text(jl(*events("one", LOOP_LINE * 35)))
    (tmp_path / "runs" / ".hidden.jsonl").write_text("not even json\n")
    (tmp_path / "runs" / ".cache" / "x.jsonl").write_text("not even json\n")
    (tmp_path / "empty").mkdir()
    walked = cc("scan", "runs", "--format", "jsonl", cwd=tmp_path)
    listed = cc("scan", "runs/a.jsonl", "runs/b/two.jsonl", "--format", "jsonl", cwd=tmp_path)
    assert walked.returncode == 0, walked.stderr
    assert walked.stdout == listed.stdout
    assert {r["source"] for r in jsonl_records(walked.stdout) if "source" in r} == {
        "runs/a.jsonl", os.path.join("runs", "b", "two.jsonl")}
    empty = cc("scan", "empty", cwd=tmp_path)
    assert empty.returncode == 2 and "empty: a folder with no files" in empty.stderr
    piped = cc("scan", "--format", "jsonl", stdin=(tmp_path / "runs" / "a.jsonl").read_bytes(),
               cwd=tmp_path)
    assert piped.returncode == 0
    assert [r["rule"] for r in jsonl_records(piped.stdout) if r["type"] == "detection"] == [
        r["rule"] for r in jsonl_records(listed.stdout)
        if r.get("source") == "runs/a.jsonl"]


def test_a_closed_pipe_is_not_a_failure(tmp_path: Path) -> None:
    many = []
    for i in range(3000):
        many += events(f"s{i}", "We are running out of time.\n")
    (tmp_path / "many.jsonl").write_text(jl(*many))
    for argv in (["--fail-on", "abort"],):
        proc = subprocess.Popen([*COMMAND, "scan", "many.jsonl", *argv], cwd=tmp_path,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline()
        proc.stdout.close()  # as `| head -1` does
        err = proc.stderr.read()
        proc.stderr.close()
        assert proc.wait(timeout=60) in (0, -signal.SIGPIPE), err
        assert b"Traceback" not in err


def test_a_terminal_gets_a_table_grouped_by_file(tmp_path: Path) -> None:
    trace, _ = interleaved_trace()
    (tmp_path / "t.jsonl").write_text(jl(*trace))
    status, out, err = run_in_terminal(["scan", "t.jsonl", "--no-progress"], tmp_path)
    assert status == 0, err
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in out.splitlines()]
    assert lines[0] == "t.jsonl"
    assert lines[1].split()[:3] == ["line", "stream", "rule"]
    assert "3 streams, " in lines[-1]
    # every row names its stream, also the continuation rows
    rows = [line for line in lines[3:-1] if re.match(r"^\s+\d+\s", line)]
    assert rows and all(line.split()[1] in ('"alpha', "b", "b#2") for line in rows)
    status, _, err = run_in_terminal(["scan"], tmp_path, stdin_tty=True)
    assert status == 2 and "no FILE given" in err


# --------------------------------------------------------------------------- help

def _all_parsers() -> list[tuple[str, Any]]:
    from contextcare import cli

    out = []
    todo = [("contextcare", cli.build_parser())]
    while todo:
        name, parser = todo.pop(0)
        out.append((name, parser))
        todo += [(f"{name} {sub}", p) for sub, p in cli._commands(parser).items()]
    return out


def test_every_option_says_what_it_does_and_its_default() -> None:
    parsers = _all_parsers()
    assert {name for name, _ in parsers} >= {
        "contextcare scan", "contextcare memory rank", "contextcare help", "contextcare grade"}
    for name, parser in parsers:
        text = parser.format_help()
        assert "example" in text and "exit status: 0" in text, name
        if name.count(" ") == 0 or name == "contextcare memory":
            continue
        for action in parser._actions:
            if action.dest in ("help", "version"):
                continue
            assert action.help and len(action.help) > 15, (name, action.dest)
            assert "default" in action.help or "required" in action.help or (
                action.nargs in ("*", None) and not action.option_strings), (name, action.dest)
    top = parsers[0][1].format_help()
    for word in ("replay", "fatigue", "wakefulness", "context rest", "fresh tokens",
                 "clear-mind survey", "Oft-told"):
        assert re.search(rf"^  {word}\s+\S", top, re.MULTILINE), word  # glossed


def test_bare_command_help_version_and_usage_errors(tmp_path: Path) -> None:
    bare = cc(cwd=tmp_path)
    assert bare.returncode == 0 and bare.stdout.startswith("usage: contextcare")
    assert all(f"\n    {c} " in bare.stdout for c in ("demo", "scan", "memory", "help"))
    help_scan = cc("help", "scan", cwd=tmp_path)
    assert help_scan.returncode == 0 and help_scan.stdout.startswith("usage: contextcare scan")
    assert "PATH:LINE: STREAM RULE ACTION" in help_scan.stdout
    version = cc("-V", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("contextcare ")
    typo = cc("scan", "x.jsonl", "--fial-on", "abort", cwd=tmp_path)
    assert typo.returncode == 2 and typo.stdout == ""
    assert typo.stderr.startswith("usage: contextcare scan ")
    assert "unrecognized arguments: --fial-on abort (did you mean --fail-on?)" in typo.stderr
    command = cc("scna", cwd=tmp_path)
    assert command.returncode == 2 and "(did you mean scan?)" in command.stderr


# --------------------------------------------------------------------------- say what the output is

def _conversation(path: Path) -> Path:
    messages = [
        {"role": "system", "content": "You are a coding assistant."},
        {"role": "user", "content": "Refactor the parser. " + "Details follow. " * 400},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "read_file", "arguments": '{"path": "parser.py"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "def parse(x): ...\n" * 200},
        {"role": "assistant", "content": "The parser is a stub; I rewrote it."},
        {"role": "user", "content": "Now add tests."},
        {"role": "assistant", "content": "Added tests for parse()."},
    ]
    path.write_text(json.dumps({"messages": messages}))
    return path


def test_grade_plan_and_rules_say_what_their_output_is(tmp_path: Path) -> None:
    grade = cc("grade", "--load", "60000", "--retained", "10000", "--capacity", "100000",
               cwd=tmp_path)
    lines = grade.stdout.splitlines()
    assert lines[0].split() == ["figure", "value", "grade", "scale", "(0-100)"]
    assert "normal < 30 ≤ elevated < 60 ≤ high < 85 ≤ very-high" in grade.stdout
    assert "low < 30 ≤ normal < 60 ≤ elevated < 85 ≤ high" in grade.stdout
    notice = lines.index("Notice for the model (grades and advice, never the numbers):")
    assert "65.0" not in "\n".join(lines[notice:]) and "high" in lines[notice + 1]
    assert all(line == line.rstrip() for line in lines)
    _conversation(tmp_path / "conv.json")
    plan = cc("plan", "conv.json", "--capacity", "2000", "--min-fresh-tokens", "10",
              cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    span = plan.stdout.splitlines()[1]
    assert span.startswith("The span holds ") and "tool round" in span
    assert "holds the first user message" in span and "stays with its results" in span
    assert re.search(r"~\d+% of the 2,000-token capacity", span)
    (tmp_path / "rules.toml").write_text("defaults = true\n[options]\nline_window = 120\n")
    rules = cc("rules", "--rules", "rules.toml", cwd=tmp_path)
    assert rules.stdout.splitlines()[-1] == (
        "[options] in effect: line_window = 120, min_line_chars = 2, evidence_chars = 600,"
        " mask_code_fences = true")


def test_terminal_extras_gauge_and_model_text_label(tmp_path: Path) -> None:
    _conversation(tmp_path / "conv.json")
    status, out, _ = run_in_terminal(["grade", "--load", "60000", "--retained", "10000",
                                      "--capacity", "100000"], tmp_path)
    plain = re.sub(r"\x1b\[[0-9;]*m", "", out)
    assert status == 0 and "gauge" in plain and "█" * 13 + "░" * 7 in plain
    status, out, _ = run_in_terminal(["mindmap", "conv.json"], tmp_path)
    assert status == 0
    assert out.startswith("Clear-mind survey, the text written for the model:")
    piped = cc("mindmap", "conv.json", cwd=tmp_path)
    assert piped.stdout == out.split("\n", 2)[2]  # in a pipe: the model's text alone


def test_memory_commands_speak_json(tmp_path: Path) -> None:
    init = cc("memory", "init", "mem", "--format", "json", cwd=tmp_path)
    assert json.loads(init.stdout)["created"][:2] == ["mem", os.path.join("mem", "ofttold.md")]
    with (tmp_path / "mem" / "ofttold.md").open("a") as f:
        f.write("- 2026-01-02 **parser** keeps state per file\n- 2026-01-03 **cat** #nosuch\n")
    text = cc("memory", "check", "mem", cwd=tmp_path)
    assert text.returncode == 1
    (error,) = [line for line in text.stdout.splitlines() if line.startswith("error")]
    line = len((tmp_path / "mem" / "ofttold.md").read_text().splitlines())
    assert f" {os.path.join('mem', 'ofttold.md')}:{line}: " in error  # opens from here
    check = cc("memory", "check", "mem", "--format", "json", cwd=tmp_path)
    doc = json.loads(check.stdout)
    assert check.returncode == (0 if doc["ok"] else 1)
    assert doc["errors"] == sum(f["level"] == "error" for f in doc["findings"])
    rank = cc("memory", "rank", "mem", "--today", "2026-02-01", "--format", "json",
              cwd=tmp_path)
    ranked = json.loads(rank.stdout)
    assert ranked["today"] == "2026-02-01"
    anchor = next(a for a in ranked["anchors"] if a["own_date"] == "2026-01-02")
    assert anchor["days_since"] == 30 and len(ranked["anchors"]) == 2
