"""The ``contextcare`` command as a user meets it: the real command in a subprocess, with real pipes
(and a real terminal through ``pty`` where the terminal matters), on inputs built here.

Each subprocess costs a Python start-up (~0.3 s), so cases are batched per run where they can be.
"""

from __future__ import annotations

import fcntl
import gzip
import json
import os
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

import pytest

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
    files = ["reply.txt", "own.jsonl", "blob.bin", "loop.jsonl"]
    for extra in ([], ["--fail-on", "abort"]):
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
    (["--engine", "ray", "--format", "json"], "--format json is for the local engine"),
    (["--channel", "reasoning"], "--channel is for --as-text"),
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
    refused = cc("scan", "reply.txt", "--fail-on", "abort", cwd=tmp_path)
    assert refused.returncode == 2 and "--as-text" in refused.stderr
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
    proc = subprocess.Popen([*COMMAND, "scan", "-", "--format", "table"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
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
