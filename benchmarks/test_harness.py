"""Checks of the benchmark machinery itself: the traces, the ground truth, the original port
(against the worked examples of shared/reference/context-care-spec.md section 2.3) and the
report. Fast; they run with the suites under ``pytest benchmarks/``."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import original_port
import report
import traces

# --------------------------------------------------------------------------- traces


def test_traces_are_deterministic() -> None:
    a = traces.phrase_trace(30_000)
    b = traces.phrase_trace(30_000)
    c = traces.phrase_trace(30_000, seed=99)
    assert a.deltas == b.deltas
    assert a.text != c.text
    assert traces.reply_trace(30_000, loops=True).replies == \
        traces.reply_trace(30_000, loops=True).replies


def test_deltas_are_one_to_four_code_points_and_lose_nothing() -> None:
    text = "".join(random.Random(5).choice("ab中文🙂\n ") for _ in range(5000))
    deltas = traces.split_deltas(text, random.Random(6))
    assert "".join(deltas) == text
    assert {len(d) for d in deltas} == {1, 2, 3, 4}


def test_phrase_trace_is_bmp_only_and_holds_the_phrases() -> None:
    t = traces.phrase_trace(200_000)
    assert max(map(ord, t.text)) <= 0xFFFF
    assert len(t.phrases) == len(set(t.phrases)) == 300
    found = {k for _, k in traces.occurrences(t.text, t.phrases)}
    assert len(found) > 100  # planted, so most phrases occur in 200 KB


def test_reply_trace_plants_every_loop_family_outside_code_fences() -> None:
    t = traces.reply_trace(400_000, loops=True)
    planted = [f for r in t.replies for f in r.loops]
    assert set(planted) == set(traces.LOOP_FAMILIES)
    assert any(ord(c) > 0xFFFF for r in t.replies for c in r.text("reasoning") + r.text("text"))
    for r in t.replies:
        if "line-cycle" in r.loops:
            text = r.text("reasoning") + r.text("text")
            before = text[:text.index("（输出。）\n**做。**\ngo.\n")]
            assert before.count("```") % 2 == 0


def test_occurrences_agree_with_a_regex_count() -> None:
    t = traces.phrase_trace(100_000)
    occ = traces.occurrences(t.text, t.phrases)
    for k in sorted({k for _, k in occ})[:40]:
        p = t.phrases[k]
        ends = [m.start() + len(p) for m in re.finditer(f"(?={re.escape(p)})", t.text)]
        assert ends == [e for e, j in occ if j == k]
    byte_occ = traces.byte_occurrences(t.text, t.phrases)
    assert [k for _, k in byte_occ] == [k for _, k in occ]
    data = t.text.encode()
    assert all(data[:e].decode().endswith(t.phrases[k]) for e, k in byte_occ[:200])


def test_longest_per_end_keeps_the_longest_phrase() -> None:
    phrases = ("cd", "bcd", "x")
    occ = traces.occurrences("abcdx", phrases)
    assert occ == [(4, 0), (4, 1), (5, 2)]
    assert traces.longest_per_end(occ, phrases) == {4: "bcd", 5: "x"}


# --------------------------------------------------------------------------- original port


def _feed_original(watch: original_port.OriginalWatch, text: str, kind: str = "text",
                   size: int = 3) -> list[tuple[int, dict[str, Any]]]:
    """Feed ``text`` in frames of ``size`` characters; hits with the characters fed so far."""
    out = []
    for i in range(0, len(text), size):
        for hit in watch.chunk(kind, text[i:i + size]):
            out.append((min(i + size, len(text)), hit))
    return out


def test_original_same_line_fires_at_the_first_check() -> None:
    watch = original_port.OriginalWatch(original_port.production_triggers())
    hits = _feed_original(watch, "same line\n" * 100)
    assert len(hits) == 1
    at, hit = hits[0]
    assert at == 300
    assert (hit["count"], hit["total"], hit["ratio"], hit["run"]) == (30, 30, 1.0, 30)


def test_original_two_line_cycle_fires_at_600_characters() -> None:
    watch = original_port.OriginalWatch(original_port.production_triggers())
    hits = _feed_original(watch, "（输出。）\n**做。**\n" * 100)
    assert [(at, h["count"], h["total"], h["ratio"]) for at, h in hits] == [(600, 40, 80, 0.5)]


def test_original_three_line_cycle_never_fires() -> None:
    watch = original_port.OriginalWatch(original_port.production_triggers())
    assert _feed_original(watch, "（输出。）\n**做。**\ngo.\n" * 200) == []


def test_original_phrase_semantics() -> None:
    triggers = original_port.phrase_trigger(("lo wor", "hello"))
    # Frames "say| he|llo| wo|rld": matches straddle frames, and a phrase left in the carry
    # matches again on the next frame (the original's documented side effect).
    hits = _feed_original(original_port.OriginalWatch(triggers, fire_once=False),
                          "say hello world")
    assert [(at, h["phrase"]) for at, h in hits] == [(9, "hello"), (12, "hello"), (15, "lo wor")]
    # One frame holding both: the first phrase in list order wins, not the earliest occurrence.
    hits = _feed_original(original_port.OriginalWatch(triggers), "say hello world", size=100)
    assert [h["phrase"] for _, h in hits] == ["lo wor"]
    # Fire-once: one hit per attempt, again after start().
    watch = original_port.OriginalWatch(triggers)
    assert len(_feed_original(watch, "hello hello")) == 1
    watch.start()
    assert len(_feed_original(watch, "hello")) == 1


def test_original_anxiety_watches_reasoning_only() -> None:
    watch = original_port.OriginalWatch(original_port.production_triggers())
    assert _feed_original(watch, "时间不够了", kind="text") == []
    assert [h["trigger"] for _, h in _feed_original(watch, "时间不够了", kind="reasoning")] == \
        ["time-anxiety"]


# --------------------------------------------------------------------------- report


def _bench(name: str, median: float, **info: Any) -> dict[str, Any]:
    return {"name": name, "stats": {"median": median}, "extra_info": info}


def _results(tmp_path: Path, engine: str) -> Path:
    common = {"table": "feed", "workload": "phrases-300", "deltas": 1000, "chars": 2500,
              "bytes": 4000}
    data = {
        "benchmarks": [
            _bench("floor", 30e-6, method="floor", role="floor", floor_kind="cpython", **common),
            _bench("ours", 40e-6, method="ours", role="engine", **common),
            _bench("aho", 300e-6, method="aho", role="peer", peer="pyahocorasick", **common),
            _bench("hs", 400e-6, method="hs", role="peer", peer="hyperscan", **common),
            _bench("hsb", 340e-6, method="hsb", role="peer", peer="hyperscan-bytes", **common),
        ],
        "contextcare": {"engine": engine, "cpu": "test cpu", "cores": "2", "python": "3.11"},
    }
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_report_ratios(tmp_path: Path) -> None:
    text = report.render(_results(tmp_path, "native"))
    assert "| `feed`, phrases only ≤ 1.5× the floor | 1.3× | yes |" in text
    # 300 / 40 = 7.5× against pyahocorasick; Hyperscan's faster row is the pre-encoded 340.
    assert "pyahocorasick streaming (300 phrases) | 7.5× | yes |" in text
    assert "(its faster row) (300 phrases) | 8.5× | yes |" in text
    # 40 ns per delta; 4000 bytes in 40 µs = 100 MB/s; 40 / 30 = 1.3× the floor.
    assert "| ours | 40 | 40 | 100 | 1.3× | — |" in text
    assert "| aho | 300 | 300 | 13.3 | 10× | 7.5× |" in text


def test_report_marks_engine_rows_pending_before_the_native_engine(tmp_path: Path) -> None:
    text = report.render(_results(tmp_path, "reference"))
    assert "| ours | pending |" in text
    assert "| aho | 300 |" in text
    assert "1.3×" not in text.split("### Cost per delta")[0]


def test_report_rewrites_only_between_the_markers(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"head\n{report.START}\nold\n{report.END}\ntail\n", encoding="utf-8")
    assert report.main([str(_results(tmp_path, "native")), "--readme", str(readme)]) == 0
    new = readme.read_text(encoding="utf-8")
    assert new.startswith(f"head\n{report.START}\n### Goals")
    assert new.endswith(f"{report.END}\ntail\n")
    assert "old" not in new
