"""Turn a pytest-benchmark JSON file into the Markdown tables of benchmarks/README.md.

    python benchmarks/report.py results.json                 # print the tables
    python benchmarks/report.py results.json --readme benchmarks/README.md   # rewrite them there

Every number comes from the JSON: the median seconds per round of each benchmark, divided by
what one round processed (``extra_info``: deltas, bytes), and the memory readings the memory
benchmarks stored. Engine rows measured on the pure-Python stand-in (before the native engine was
built) are shown as "pending".
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

START = "<!-- results:start -->"
END = "<!-- results:end -->"

FEED_ORDER = ("phrases-300", "default-clean", "default-loops", "loop-family")


@dataclass(frozen=True)
class Row:
    """One benchmark, reduced to what the tables show."""

    table: str
    workload: str
    method: str
    role: str
    median: float
    best: float
    deltas: int
    nbytes: int
    info: dict[str, Any]

    @property
    def ns_per_delta(self) -> float:
        return self.median * 1e9 / self.deltas

    @property
    def best_ns_per_delta(self) -> float:
        return self.best * 1e9 / self.deltas

    @property
    def mb_per_s(self) -> float:
        return self.nbytes / self.median / 1e6


def load(path: Path) -> tuple[list[Row], dict[str, Any]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    rows = []
    for b in data["benchmarks"]:
        info = b.get("extra_info", {})
        if "table" not in info:
            continue  # another suite's benchmark (e.g. bench_guard.py)
        rows.append(Row(info["table"], info["workload"], info["method"], info.get("role", ""),
                        b["stats"]["median"], b["stats"].get("min", b["stats"]["median"]),
                        max(1, info["deltas"]), info["bytes"], info))
    return rows, data


def _fmt(x: float, digits: int = 0) -> str:
    if digits == 0 or round(x, digits) >= 100:
        return f"{x:,.0f}"
    return f"{x:,.{digits}f}"


def _ratio(x: float) -> str:
    return f"{x:.1f}×" if x < 10 else f"{x:,.0f}×"


def _kib(x: float) -> str:
    return f"{x / 1024:,.1f} KiB" if x >= 1024 else f"{x:,.0f} B"


def _pending(row: Row, native: bool) -> bool:
    return row.role == "engine" and not native


def _find(rows: Iterable[Row], **want: Any) -> Row | None:
    for r in rows:
        if all(getattr(r, k, r.info.get(k)) == v for k, v in want.items()):
            return r
    return None


def _floor(rows: list[Row], workload: str) -> Row | None:
    floors = [r for r in rows if r.table == "feed" and r.workload == workload and r.role == "floor"]
    engine_floor = [r for r in floors if r.info.get("floor_kind") == "engine"]
    chosen = engine_floor or floors
    return chosen[0] if chosen else None


def feed_tables(rows: list[Row], native: bool) -> list[str]:
    out = []
    for workload in FEED_ORDER:
        group = [r for r in rows if r.table == "feed" and r.workload == workload]
        if not group:
            continue
        floor = _floor(rows, workload)
        ours = _find(group, role="engine")
        out += [f"**{workload}** ({_describe(workload)})", "",
                ("| method | ns per delta (median) | best round | MB/s | × floor |"
                 " contextcare is faster by |"),
                "|---|---:|---:|---:|---:|---:|"]
        for r in sorted(group, key=lambda r: r.ns_per_delta):
            if _pending(r, native):
                out.append(f"| {r.method} | pending | pending | pending | pending | — |")
                continue
            vs_floor = _ratio(r.ns_per_delta / floor.ns_per_delta) if floor else "—"
            faster = "—"
            if ours is not None and r is not ours and r.role != "floor" and native:
                faster = _ratio(r.ns_per_delta / ours.ns_per_delta)
            out.append(f"| {r.method} | {_fmt(r.ns_per_delta)} | {_fmt(r.best_ns_per_delta)} |"
                       f" {_fmt(r.mb_per_s, 1)} | {vs_floor} | {faster} |")
        out.append("")
    return out


def _describe(workload: str) -> str:
    return {
        "phrases-300": "300 phrases, one channel, every occurrence reported; BMP-only text",
        "default-clean": "`default_ruleset()`, replies without loops, reasoning + answer",
        "default-loops": "`default_ruleset()`, every second reply holds a loop",
        "loop-family": "only the windowed loop rules of the defaults, replies with loops",
    }.get(workload, workload)


def throughput_tables(rows: list[Row], native: bool) -> list[str]:
    out = ["| workload | method | MB/s (median) | ns per delta |", "|---|---|---:|---:|"]
    group = [r for r in rows if r.table in ("replay", "oneshot")]
    order = {w: i for i, w in enumerate(FEED_ORDER)}
    group.sort(key=lambda r: (order.get(r.workload, 99), r.table, -r.mb_per_s))
    for r in group:
        per_delta = _fmt(r.ns_per_delta, 1) if r.table == "replay" else "one call"
        if _pending(r, native):
            out.append(f"| {r.workload} | {r.method} | pending | pending |")
        else:
            out.append(f"| {r.workload} | {r.method} | {_fmt(r.mb_per_s, 1)} | {per_delta} |")
    return out + [""]


def memory_table(rows: list[Row], native: bool) -> list[str]:
    header = ("| watchers | engine | sizeof idle | sizeof active | RSS growth idle | RSS growth"
              " active (per watcher, total) | tracemalloc idle / active | ns per delta,"
              " interleaved | × floor |")
    out = [header, "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    group = sorted((r for r in rows if r.table == "memory"),
                   key=lambda r: (r.role != "engine", r.info["watchers"]))
    for r in group:
        i = r.info
        n = i["watchers"]
        who = "contextcare" if r.role == "engine" else "reference"
        if _pending(r, native):
            out.append(f"| {n:,} | {who} | pending | pending | pending | pending | pending |"
                       " pending | pending |")
            continue
        # The resident set only shows the watchers once they outgrow the memory the process
        # freed earlier (the traces, earlier cases); at 1 000 watchers they fit in it.
        rss_ok = n >= 100_000
        rss_idle = _kib(i["rss_idle"]) if rss_ok else "n/a"
        rss_active = (f"{_kib(i['rss_active'])}, {i['rss_active_total'] / 2**20:,.1f} MiB"
                      if rss_ok else "n/a")
        # For the native engine tracemalloc sees only the Python objects; with one watcher
        # that is below the noise of everything else the process frees meanwhile.
        traced = "tracemalloc_idle" in i and (r.role != "engine" or n >= 1000)
        tm = (f"{_kib(i['tracemalloc_idle'])} / {_kib(i['tracemalloc_active'])}"
              if traced else "n/a")
        floor_ns = i["floor_seconds"] * 1e9 / r.deltas
        sizeof_idle = _kib(i["sizeof_idle"]) if r.role == "engine" else "n/a"
        sizeof_active = _kib(i["sizeof_active"]) if r.role == "engine" else "n/a"
        out.append(f"| {n:,} | {who} | {sizeof_idle} | {sizeof_active} | {rss_idle} |"
                   f" {rss_active} | {tm} | {_fmt(r.ns_per_delta)} |"
                   f" {_ratio(r.ns_per_delta / floor_ns)} |")
    return out + [""]


def growth_table(rows: list[Row], native: bool) -> list[str]:
    out = ["| engine | already fed | ns per delta (median) | × a 1 KB watcher, same deltas |",
           "|---|---:|---:|---:|"]
    group = sorted((r for r in rows if r.table == "growth"),
                   key=lambda r: (r.role != "engine", r.info["prefed"]))
    for r in group:
        who = "contextcare" if r.role == "engine" else "reference"
        if _pending(r, native):
            out.append(f"| {who} | {r.info['prefed']:,} B | pending | pending |")
            continue
        vs = f"{r.info['vs_young']:.2f}×" if "vs_young" in r.info else "—"
        out.append(f"| {who} | {r.info['prefed']:,} B | {_fmt(r.ns_per_delta)} | {vs} |")
    return out + [""]


def goals(rows: list[Row], native: bool) -> list[str]:
    """The issue's goals, each with the measured value and whether it is met."""
    lines = ["| goal | measured | met |", "|---|---:|:---:|"]

    def add(goal: str, value: float | None, ok: bool | None, text: str) -> None:
        if value is None or not native:
            lines.append(f"| {goal} | {'pending' if not native else 'not run'} | — |")
        else:
            lines.append(f"| {goal} | {text} | {'yes' if ok else '**no**'} |")

    def feed_ratio(workload: str) -> float | None:
        ours = _find(rows, table="feed", workload=workload, role="engine")
        floor = _floor(rows, workload)
        return ours.ns_per_delta / floor.ns_per_delta if ours and floor else None

    r = feed_ratio("default-clean")
    add("`feed`, default rules ≤ 2× the floor", r, r is not None and r <= 2,
        _ratio(r) if r else "")
    r = feed_ratio("phrases-300")
    add("`feed`, phrases only ≤ 1.5× the floor", r, r is not None and r <= 1.5,
        _ratio(r) if r else "")
    ours = _find(rows, table="feed", workload="phrases-300", role="engine")
    for peer, label, need in (("pyahocorasick", "pyahocorasick streaming", 4),
                              ("hyperscan", "Hyperscan stream mode (its faster row)", 4),
                              ("original", "the plain-Python port of the original", 25)):
        others = [r for r in rows if r.table == "feed" and r.workload == "phrases-300"
                  and str(r.info.get("peer", "")).split("-")[0] == peer]
        other = min(others, key=lambda r: r.ns_per_delta, default=None)
        x = other.ns_per_delta / ours.ns_per_delta if ours and other else None
        add(f"≥ {need}× faster per delta than {label} (300 phrases)", x,
            x is not None and x >= need, _ratio(x) if x else "")
    rep = _find(rows, table="replay", workload="default-clean", role="engine")
    add("`replay` ≥ 250 MB/s, default rules, 1–4-character deltas", rep.mb_per_s if rep else None,
        rep is not None and rep.mb_per_s >= 250, f"{rep.mb_per_s:,.0f} MB/s" if rep else "")
    mem = {r.info["watchers"]: r.info for r in rows if r.table == "memory" and r.role == "engine"}
    one = mem.get(1) or mem.get(1000)
    add("≤ 1 KiB per idle watcher", one["sizeof_idle"] if one else None,
        one is not None and one["sizeof_idle"] <= 1024, _kib(one["sizeof_idle"]) if one else "")
    # issue 14 set 16 KiB for the default rules with its loop rules (8 KiB before them)
    add("≤ 16 KiB per active watcher, default rules", one["sizeof_active"] if one else None,
        one is not None and one["sizeof_active"] <= 16384,
        _kib(one["sizeof_active"]) if one else "")
    big = mem.get(100_000)
    total = big["rss_active_total"] if big else None
    add("100 000 active watchers in < 1 GiB (RSS growth)", total,
        total is not None and total < 2**30, f"{total / 2**20:,.0f} MiB" if total else "")
    growth = sorted((r for r in rows if r.table == "growth" and r.role == "engine"),
                    key=lambda r: r.info["prefed"])
    if growth and "vs_young" in growth[-1].info:
        x = growth[-1].info["vs_young"]
        add(f"flat cost: after {growth[-1].info['prefed']:,} B vs a 1 KB watcher", x, x <= 1.25,
            f"{x:.2f}×")
    return lines + [""]


KNOWN_TABLES = ("feed", "replay", "oneshot", "memory", "growth")


def other_tables(rows: list[Row], native: bool) -> list[str]:
    """Rows of other suites (e.g. ``bench_guard.py``): ns per delta and × the floor of their
    own group."""
    out: list[str] = []
    groups: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        if r.table not in KNOWN_TABLES:
            groups.setdefault((r.table, r.workload), []).append(r)
    for (table, workload), group in sorted(groups.items()):
        floor = next((r for r in group if r.role == "floor"), None)
        out += [f"**{table}: {workload}**", "", "| method | ns per delta (median) | × floor |",
                "|---|---:|---:|"]
        for r in sorted(group, key=lambda r: r.ns_per_delta):
            if not native and r.role != "floor":
                out.append(f"| {r.method} | pending | pending |")
                continue
            vs = _ratio(r.ns_per_delta / floor.ns_per_delta) if floor else "—"
            out.append(f"| {r.method} | {_fmt(r.ns_per_delta)} | {vs} |")
        out.append("")
    return out


def machine(data: dict[str, Any]) -> list[str]:
    cc = data.get("contextcare", {})
    mi = data.get("machine_info", {})
    versions = ", ".join(f"{k} {v}" for k, v in cc.get("versions", {}).items())
    cpu = mi.get("cpu", {}).get("brand_raw") or cc.get("cpu", "unknown")
    first = (f"Machine: {cpu}, {cc.get('cores', '?')} cores ({mi.get('system', '')}"
             f" {mi.get('release', '')}), {mi.get('python_implementation', 'Python')}"
             f" {cc.get('python', mi.get('python_version', ''))}; {versions}.")
    second = (f"Engine measured: {cc.get('engine', '?')}"
              f"{' (with `_engine._Floor.feed` as the floor)' if cc.get('engine_noop') else ''};"
              f" run at {data.get('datetime', '?')};"
              f" large cases {'on' if cc.get('big') else 'off'};"
              f" load average {cc.get('load_start', '?')} at the start,"
              f" {cc.get('load_end', '?')} at the end (1-minute; above ~0.5 on this machine,"
              " other processes shared the cores and the numbers are inflated).")
    return [first, second, ""]


def render(path: Path) -> str:
    rows, data = load(path)
    native = data.get("contextcare", {}).get("engine") == "native"
    parts = ["### Goals", "", *goals(rows, native),
             "### Cost per delta through the Python API", "", *feed_tables(rows, native),
             "### Throughput without a Python call per delta", "", *throughput_tables(rows, native),
             "### Memory per watcher (default rules)", "", *memory_table(rows, native),
             "### Cost per delta after a long stream (default rules)", "",
             *growth_table(rows, native)]
    others = other_tables(rows, native)
    if others:
        parts += ["### Other suites", "", *others]
    parts += machine(data)
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", type=Path, help="pytest-benchmark JSON (--benchmark-json)")
    ap.add_argument("--readme", type=Path, help=f"rewrite the part between {START} and {END}")
    args = ap.parse_args(argv)
    text = render(args.json)
    if args.readme is None:
        print(text)
        return 0
    readme = args.readme.read_text(encoding="utf-8")
    if START not in readme or END not in readme:
        print(f"{args.readme}: markers {START} / {END} not found", file=sys.stderr)
        return 2
    head, rest = readme.split(START, 1)
    _, tail = rest.split(END, 1)
    args.readme.write_text(f"{head}{START}\n{text}\n{END}{tail}", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
