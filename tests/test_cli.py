"""The ``contextcare`` command line: demo, scan, rules, grade, plan, mindmap, memory."""

from __future__ import annotations

import datetime
import gzip
import io
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from contextcare import cli
from contextcare.traces import SAMPLES

SAMPLE_DIR = Path(cli.__file__).resolve().parent / "samples"


@pytest.fixture(autouse=True)
def _wide_output(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = cli.main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def jl(*objs: Any) -> str:
    return "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objs)


def loop_trace(stream: str = "s", repeats: int = 40) -> list[dict[str, Any]]:
    lines = [{"stream": stream, "type": "start"}]
    text = "Let me check the caller again.\n" * repeats
    lines += [{"stream": stream, "type": "reasoning-delta", "text": text[i:i + 4]}
              for i in range(0, len(text), 4)]
    return lines + [{"stream": stream, "type": "end"}]


def sample(name: str) -> str:
    return str(SAMPLE_DIR / f"{name}.jsonl")


# --------------------------------------------------------------------------- demo

def test_demo_table_lists_every_sample_and_an_honest_throughput(
        capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "demo")
    assert status == 0
    for stream in ("clean", "loop", "cycle", "flood", "anxious-zh", "anxious-en"):
        assert f" {stream} " in out
    for rule in ("line-repeat", "tail-repeat", "line-cycle", "time-anxiety", "context-anxiety"):
        assert rule in out
    assert "no detections" in out  # the clean answer is shown as clean, not left out
    assert "deltas/s" in out and "MB/s" in out


def test_demo_json_throughput_is_consistent(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "demo", "--format", "json")
    assert status == 0
    doc = json.loads(out)
    speed = doc["throughput"]
    assert speed["engine"] in ("native engine", "pure-Python reference engine")
    assert speed["passes"] >= 3 and speed["seconds"] >= cli.DEMO_MIN_SECONDS
    assert math.isclose(speed["deltas_per_second"],
                        speed["deltas"] * speed["passes"] / speed["seconds"], rel_tol=1e-9)
    assert math.isclose(speed["mb_per_second"],
                        speed["bytes"] * speed["passes"] / speed["seconds"] / 1e6, rel_tol=1e-9)
    assert speed["bytes"] >= speed["deltas"]  # every delta holds at least one byte
    texts = [json.loads(line).get("text", "")
             for name in SAMPLES for line in Path(sample(name)).read_text("utf-8").splitlines()]
    assert speed["deltas"] == sum(1 for t in texts if t)
    assert speed["bytes"] == sum(len(t.encode("utf-8")) for t in texts)
    assert [s["stream"] for s in doc["streams"]] == [
        "clean", "loop", "cycle", "flood", "anxious-zh", "anxious-en"]
    assert doc["summary"]["streams"] == 6
    assert doc["summary"]["detections"] == sum(len(s["detections"]) for s in doc["streams"])


def test_demo_narrow_terminal_keeps_every_column(capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    status, out, _ = run(capsys, "demo")
    assert status == 0
    assert "rule / kind" in out
    table = out.split("Throughput")[0]
    assert max(len(line) for line in table.splitlines()) <= 80


# --------------------------------------------------------------------------- scan

def test_scan_jsonl_writes_one_line_per_detection(capsys: pytest.CaptureFixture[str],
                                                  tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(jl(*loop_trace("a"), {"stream": "b", "type": "text-delta", "text": "fine"}),
                    encoding="utf-8")
    status, out, err = run(capsys, "scan", str(path), "--format", "jsonl")
    assert status == 0 and err == ""
    *rows, summary = [json.loads(line) for line in out.splitlines()]
    assert summary["type"] == "summary" and summary["detections"] == len(rows)
    assert rows and all(r["type"] == "detection" for r in rows)
    assert rows and all(r["source"] == str(path) and r["stream"] == "a" for r in rows)
    assert {"rule", "kind", "action", "channel", "offset"} <= set(rows[0])
    assert "line-repeat" in {r["rule"] for r in rows}


def test_scan_json_reports_every_stream_and_a_summary(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "scan", sample("clean-answer"), sample("anxious-en"),
                         "--format", "json")
    assert status == 0
    doc = json.loads(out)
    assert [s["stream"] for s in doc["streams"]] == ["clean", "anxious-en"]
    assert doc["streams"][0]["detections"] == []
    assert doc["summary"] == {"streams": 2, "detections": 2, "abort": 0, "remind": 2,
                              "record": 0, "errors": 0, "unreadable_files": 0}


def test_scan_table_shows_flagged_streams_with_their_file(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(SAMPLE_DIR)
    status, out, _ = run(capsys, "scan", "clean-answer.jsonl", "newline-free-flood.jsonl",
                         "anxious-zh.jsonl", "--format", "table")
    assert status == 0
    lines = out.splitlines()
    assert "newline-free-flood.jsonl" in lines and "anxious-zh.jsonl" in lines  # file headings
    assert " flood " in out and " anxious-zh " in out
    assert "clean-answer" not in out
    # the flood is a tail repeat and a vocabulary collapse, short and long (three aborts)
    assert "3 streams, 5 detections (3 abort, 2 remind)" in out


@pytest.mark.parametrize(("name", "fail_on", "expected"), [
    ("reasoning-loop", "abort", 1),
    ("reasoning-loop", "remind", 1),
    ("anxious-en", "abort", 0),    # remind-only detections do not fail --fail-on abort
    ("anxious-en", "remind", 1),
    ("clean-answer", "remind", 0),
    ("reasoning-loop", None, 0),   # without --fail-on, detections are a report, not a failure
])
def test_fail_on_sets_the_exit_status(capsys: pytest.CaptureFixture[str], name: str,
                                      fail_on: str | None, expected: int) -> None:
    argv = ["scan", sample(name), "--format", "jsonl"]
    if fail_on:
        argv += ["--fail-on", fail_on]
    assert run(capsys, *argv)[0] == expected


def test_malformed_lines_are_reported_and_skipped(capsys: pytest.CaptureFixture[str],
                                                  tmp_path: Path) -> None:
    trace = loop_trace()
    path = tmp_path / "mixed.jsonl"
    path.write_text(jl(*trace[:3]) + "{oops\n" + jl(*trace[3:]), encoding="utf-8")
    status, out, err = run(capsys, "scan", str(path), "--format", "json")
    assert status == 0  # without --fail-on, skipped lines are warnings
    assert f"{path}:4: not JSON" in err
    assert "1 malformed lines skipped" in err
    doc = json.loads(out)
    assert "line-repeat" in {d["rule"] for d in doc["streams"][0]["detections"]}
    assert doc["errors"] == [{"source": str(path), "line": 4,
                              "reason": doc["errors"][0]["reason"]}]
    assert doc["summary"]["errors"] == 1


def test_strict_stops_at_the_first_malformed_line(capsys: pytest.CaptureFixture[str],
                                                  tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(jl(*loop_trace()[:3]) + '{"stream": "s", "type": "oops"}\n', encoding="utf-8")
    status, out, err = run(capsys, "scan", str(path), "--strict")
    assert status == 2
    assert f"{path}:4: 'type' must be one of" in err
    assert "Traceback" not in err


def test_scan_reads_gzip_and_openai_sse(capsys: pytest.CaptureFixture[str],
                                        tmp_path: Path) -> None:
    body = ""
    text = "The the the the " * 40
    for i in range(0, len(text), 3):
        chunk = {"id": "chatcmpl-1", "object": "chat.completion.chunk",
                 "choices": [{"index": 0, "delta": {"content": text[i:i + 3]},
                              "finish_reason": None}]}
        body += f"data: {json.dumps(chunk)}\n\n"
    body += "data: [DONE]\n\n"
    path = tmp_path / "capture.sse"
    path.write_bytes(gzip.compress(body.encode()))
    status, out, _ = run(capsys, "scan", str(path), "--format", "json")
    assert status == 0
    (stream,) = json.loads(out)["streams"]
    assert stream["stream"] == "chatcmpl-1" and stream["complete"] is True
    assert stream["chars"] == len(text)
    assert "tail-repeat" in {d["rule"] for d in stream["detections"]}


def test_scan_reads_standard_input(capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    data = jl(*loop_trace("piped")).encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(io.BytesIO(data))))
    status, out, _ = run(capsys, "scan", "-", "--format", "jsonl", "--fail-on", "abort")
    assert status == 1
    rows = [json.loads(line) for line in out.splitlines()]
    assert {r["source"] for r in rows if r["type"] == "detection"} == {"<stdin>"}


def test_scan_with_a_rules_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rules]]\ntype = "Phrases"\nid = "hurry"\nphrases = ["running out"]\n'
                     'channel = "reasoning"\naction = "abort"\n', encoding="utf-8")
    status, out, _ = run(capsys, "scan", sample("anxious-en"), "--rules", str(rules),
                         "--format", "jsonl", "--fail-on", "abort")
    assert status == 1
    assert [json.loads(line).get("rule") for line in out.splitlines()] == ["hurry", None]


def test_invalid_rules_file_is_a_usage_error(capsys: pytest.CaptureFixture[str],
                                             tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rules]]\ntype = "LineRepeat"\nid = "mine"\nmin_ratio = 2\n',
                     encoding="utf-8")
    status, out, err = run(capsys, "scan", sample("clean-answer"), "--rules", str(rules))
    assert status == 2 and out == ""
    assert str(rules) in err and "'mine'" in err and "min_ratio" in err


@pytest.mark.parametrize("argv", [
    ["scan", "does-not-exist.jsonl"],
    ["scan", "-", "-"],
    ["plan", "does-not-exist.json", "--capacity", "1000"],
    ["scan", "x.jsonl", "--output", "rows"],
])
def test_input_errors_exit_2_without_traceback(capsys: pytest.CaptureFixture[str],
                                               argv: list[str]) -> None:
    status, _, err = run(capsys, *argv)
    assert status == 2
    assert err.startswith(f"contextcare {argv[0]}: error: ") and "Traceback" not in err


def test_progress_bar_on_a_terminal_does_not_change_the_result(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl.gz"
    path.write_bytes(gzip.compress(jl(*loop_trace(repeats=400)).encode()))
    plain = run(capsys, "scan", str(path), "--format", "jsonl")
    made = cli._console

    def terminal_console(file: Any = None, *, stderr: bool = False) -> Any:
        if stderr:
            from rich.console import Console

            return Console(file=sys.stderr, force_terminal=True)
        return made(file)

    monkeypatch.setattr(cli, "_console", terminal_console)
    monkeypatch.setattr(cli, "PROGRESS_MIN_BYTES", 0)
    status, out, err = run(capsys, "scan", str(path), "--format", "jsonl")
    assert (status, out) == plain[:2]
    assert "\x1b[" in err  # the bar was drawn (and cleared) on the terminal
    status, out, err = run(capsys, "scan", str(path), "--format", "jsonl", "--no-progress")
    assert (status, out, err) == (plain[0], plain[1], "")


# --------------------------------------------------------------------------- rules

def test_rules_lists_the_defaults_and_a_file(capsys: pytest.CaptureFixture[str]) -> None:
    from contextcare import default_rules

    status, out, _ = run(capsys, "rules", "--format", "json")
    assert status == 0
    assert [r["id"] for r in json.loads(out)] == [r.id for r in default_rules()]
    example = Path(__file__).resolve().parent.parent / "examples" / "rules.toml"
    status, out, _ = run(capsys, "rules", "--rules", str(example))
    assert status == 0 and "leaked-stop-marker" in out and "apology-spiral" in out


# --------------------------------------------------------------------------- grade

def test_grade_follows_the_formulas(capsys: pytest.CaptureFixture[str]) -> None:
    # fatigue = 100·(60000 / (0.8·100000))^1.5 = 100·0.75^1.5 = 64.95… → 65.0 (high)
    # wakefulness = 100·sqrt(10000 / (100000/3)) = 100·sqrt(0.3) = 54.77… → 54.8 (normal)
    status, out, _ = run(capsys, "grade", "--load", "60000", "--retained", "10000",
                         "--capacity", "100000", "--format", "json")
    assert status == 0
    doc = json.loads(out)
    assert (doc["fatigue"], doc["fatigue_grade"]) == (65.0, "high")
    assert (doc["wakefulness"], doc["wakefulness_grade"]) == (54.8, "normal")
    assert "65.0" not in doc["text"]  # numbers never reach the model-visible text


def test_grade_without_capacity_is_uncalibrated(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "grade", "--load", "500", "--retained", "100")
    assert status == 0
    assert "uncalibrated" in out and "—" in out


def test_grade_rejects_negative_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["grade", "--load", "-5", "--retained", "0"])
    assert info.value.code == 2
    assert "expected a number >= 0" in capsys.readouterr().err


# --------------------------------------------------------------------------- plan / mindmap

def conversation(path: Path, body_chars: int = 400) -> Path:
    messages = [
        {"role": "system", "content": "You are a coding assistant."},
        {"role": "user", "content": "Refactor the parser. " + "Details follow. " * body_chars},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "read_file", "arguments": '{"path": "parser.py"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "def parse(x):\n    return x\n"},
        {"role": "assistant", "content": "The parser is a stub; I rewrote it."},
        {"role": "user", "content": "Now add tests."},
        {"role": "assistant", "content": "Added tests for parse()."},
    ]
    path.write_text(json.dumps({"model": "m", "messages": messages}), encoding="utf-8")
    return path


def test_plan_keeps_the_system_head_and_tool_pairs(capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path) -> None:
    pytest.importorskip("contextcare.context.planner")
    path = conversation(tmp_path / "conv.json")
    status, out, _ = run(capsys, "plan", str(path), "--capacity", "200", "--min-fresh-tokens",
                         "10", "--format", "json")
    assert status == 0
    doc = json.loads(out)
    assert doc["kind"] == "plan"
    assert doc["start_index"] == 1  # never the system message
    assert doc["end_index"] != 2  # never between the tool call (2) and its result (3)
    status, out, _ = run(capsys, "plan", str(path), "--capacity", "200",
                         "--min-fresh-tokens", "10")
    assert out.startswith("Compact messages 1 … ")


def test_plan_keeps_the_latest_user_message_unless_told_not_to(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "Old task. " + "detail " * 400},
        {"role": "assistant", "content": "Done. " + "words " * 400},
        {"role": "user", "content": "Latest task: add tests. " + "spec " * 400},
        {"role": "assistant", "content": "Working. " + "notes " * 400},
        {"role": "assistant", "content": "More. " + "notes " * 400},
        {"role": "assistant", "content": "End. " + "x " * 50},
    ]
    path = tmp_path / "conv.json"
    path.write_text(json.dumps(messages), encoding="utf-8")
    base = ["plan", str(path), "--capacity", "2000", "--min-fresh-tokens", "10", "--format",
            "json"]
    kept = json.loads(run(capsys, *base)[1])
    assert kept["kind"] == "plan" and kept["end_index"] < 3  # the latest user message stays
    original = json.loads(run(capsys, *base, "--no-keep-latest-user")[1])
    assert original["kind"] == "plan" and original["start_index"] <= 3 <= original["end_index"]


def test_plan_refusal_is_an_answer_not_an_error(capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path) -> None:
    pytest.importorskip("contextcare.context.planner")
    path = conversation(tmp_path / "conv.json", body_chars=1)
    status, out, _ = run(capsys, "plan", str(path), "--capacity", "100000", "--format", "json")
    assert status == 0
    assert json.loads(out)["kind"] == "refusal"


def test_plan_rejects_a_file_that_is_not_a_conversation(capsys: pytest.CaptureFixture[str],
                                                        tmp_path: Path) -> None:
    path = tmp_path / "conv.json"
    path.write_text('{"messages": "hello"}', encoding="utf-8")
    status, _, err = run(capsys, "plan", str(path), "--capacity", "100")
    assert status == 2 and "expected a JSON list of message objects" in err


def test_mindmap_renders_every_message(capsys: pytest.CaptureFixture[str],
                                       tmp_path: Path) -> None:
    pytest.importorskip("contextcare.context.mindmap")
    path = conversation(tmp_path / "conv.json")
    status, out, _ = run(capsys, "mindmap", str(path))
    assert status == 0
    assert "Now add tests." in out and "read_file" in out
    status, out, _ = run(capsys, "mindmap", str(path), "--format", "json")
    assert [n["index"] for n in json.loads(out)["nodes"]] == list(range(7))


# --------------------------------------------------------------------------- memory

def test_memory_init_check_rank(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("contextcare.memory")
    folder = tmp_path / "mem"
    status, out, _ = run(capsys, "memory", "init", str(folder))
    assert status == 0 and "created" in out and folder.is_dir()
    status, out, _ = run(capsys, "memory", "init", str(folder))
    assert status == 0 and "nothing created" in out
    assert run(capsys, "memory", "check", str(folder))[0] == 0
    status, out, _ = run(capsys, "memory", "rank", str(folder), "--today", "2026-01-31")
    assert status == 0 and "2026-01-31" in out
    status, _, err = run(capsys, "memory", "rank", str(tmp_path / "missing"))
    assert status == 2 and "Traceback" not in err


def test_memory_rank_passes_a_date(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    memory = pytest.importorskip("contextcare.memory")
    seen: dict[str, Any] = {}
    weigh = memory.weigh

    def spy(anchors: Any, diaries: Any, *, today: Any) -> Any:
        seen.update(today=today)
        return weigh(anchors, diaries, today=today)

    monkeypatch.setattr(memory, "weigh", spy)
    memory.scaffold(tmp_path / "d")
    status, out, _ = run(capsys, "memory", "rank", str(tmp_path / "d"), "--today", "2025-02-03")
    assert status == 0 and "as of 2025-02-03" in out
    assert seen == {"today": datetime.date(2025, 2, 3)}


# --------------------------------------------------------------------------- entry points

def test_python_dash_m_runs_the_same_command() -> None:
    proc = subprocess.run([sys.executable, "-m", "contextcare", "scan",
                           sample("reasoning-loop"), "--format", "jsonl", "--fail-on", "abort"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 1, proc.stderr
    assert "line-repeat" in proc.stdout
    version = subprocess.run([sys.executable, "-m", "contextcare", "--version"],
                             capture_output=True, text=True, timeout=120, check=True)
    assert version.stdout.startswith("contextcare ")


# --------------------------------------------------------------------------- evidence per kind

def test_scan_shows_the_evidence_of_every_loop_kind_readably(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each kind's evidence reads as a sentence (no ``×None``), and a repeating tail is quoted
    from the start of its line, as the engine quotes it, not from wherever the window began."""
    path = tmp_path / "loop.jsonl"
    path.write_text(jl(*loop_trace("s", 60)), encoding="utf-8")
    status, out, _ = run(capsys, "scan", "--format", "jsonl", "--no-progress", str(path))
    assert status == 0
    rows = [json.loads(line) for line in out.splitlines()]
    kinds = {r["kind"]: r for r in rows if r.get("type") == "detection"}
    assert {"block-repeat", "vocab-collapse", "tail-repeat", "line-repeat"} <= set(kinds)
    assert kinds["tail-repeat"]["unit"] == "Let me check the caller again.\n"
    status, out, _ = run(capsys, "scan", "--format", "text", "--no-progress", str(path))
    assert "None" not in out
    block = next(line for line in out.splitlines() if " block-repeat " in line)
    assert '"Let me check the caller again." ×' in block and "back to back" in block
    vocab = next(line for line in out.splitlines() if " vocab-collapse " in line)
    assert "distinct words in the last 80" in vocab
