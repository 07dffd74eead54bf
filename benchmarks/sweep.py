"""Phrase sets of growing size, side by side: compile time, memory and the cost per delta of
contextcare, pyahocorasick and Hyperscan, for 100 ... 100 000 phrases (Chinese and English).

Every case (method x language x size) runs in a fresh child process, so memory is measured the
same way for all three and nothing one case allocated is still around for the next:

* **compile**: wall time to build the matcher from a ready list of ``str`` phrases (whatever the
  method needs: ``Ruleset([Phrases(...)])``; ``Automaton.add_word`` x n + ``make_automaton``;
  Hyperscan's literal database compile in stream mode, including the UTF-8 encoding);
* **size**: what the library reports for the compiled structure (``Ruleset.memory``;
  pyahocorasick's ``get_stats()["total_size"]``; the length of Hyperscan's serialised database);
* **RSS**: the growth of the resident set across the compile (``/proc/self/statm``), the
  allocator-independent cost of keeping it, and the growth of the peak resident set
  (``ru_maxrss``), which also counts what the build needed only while it ran;
* **per delta**: the phrase trace of ``bench_feed.py`` (BMP text, 1-4-character deltas, the 300
  benchmark phrases planted; every size holds those 300 phrases) fed through each method's
  streaming loop, best of three passes; contextcare also reports its no-op floor and
  ``Ruleset.replay`` in MB/s.

``python benchmarks/sweep.py`` runs the sweep, writes ``benchmarks/sweep.json`` and
``benchmarks/sweep.png`` and rewrites the tables between the ``sweep`` markers of
``benchmarks/README.md`` (``bash benchmarks/run.sh`` does this after the pytest suites).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import pickle
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import traces

SIZES = (100, 300, 1000, 3000, 10_000, 30_000, 100_000)
LANGS = ("zh", "en")
METHODS = ("contextcare", "pyahocorasick", "hyperscan")
#: Deltas of the phrase trace fed per pass (about 180 KB of text).
DELTAS = 50_000


def _rss() -> int:
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _reset_peak() -> bool:
    """Reset the peak resident set (Linux >= 4.0: ``clear_refs`` 5 resets VmHWM)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
    except OSError:
        return False
    return True


def _peak() -> int:
    """Peak resident set since the last reset (VmHWM), else since the start (ru_maxrss)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _best(fn: Any, passes: int = 3) -> float:
    best = float("inf")
    for _ in range(passes):
        gc.disable()
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
        gc.enable()
    return best


def run_case(method: str, lang: str, n: int, deltas_file: str) -> dict[str, Any]:
    """One case, in this (fresh) process."""
    phrases = traces.phrase_set(n, lang)
    with open(deltas_file, "rb") as f:
        deltas: list[str] = pickle.load(f)
    encoded = [d.encode() for d in deltas]
    nbytes = sum(map(len, encoded))
    # imports (and an editable install's rebuild check) before anything is measured
    import ahocorasick  # type: ignore[import-not-found,unused-ignore]
    import hyperscan
    import numpy as np

    from contextcare import Phrases, Ruleset

    Ruleset([Phrases("warm-up", ["x"])])
    gc.collect()
    rss0 = _rss()
    peak0 = rss0 if _reset_peak() else _peak()
    start = time.perf_counter()
    if method == "contextcare":
        matcher: Any = Ruleset([Phrases("p", phrases, channel="text", once=False)])
    elif method == "pyahocorasick":
        matcher = ahocorasick.Automaton()
        for k, p in enumerate(phrases):
            matcher.add_word(p, k)
        matcher.make_automaton()
    else:
        matcher = hyperscan.Database(mode=hyperscan.HS_MODE_STREAM)
        matcher.compile(expressions=[p.encode() for p in phrases], ids=list(range(n)),
                        elements=n, flags=0, literal=True)
    compile_s = time.perf_counter() - start
    gc.collect()
    out: dict[str, Any] = {
        "method": method, "lang": lang, "n": n, "compile_s": compile_s,
        "rss": _rss() - rss0, "peak": max(0, _peak() - peak0),
        "chars": sum(map(len, phrases)), "deltas": len(deltas), "nbytes": nbytes,
    }
    hits: list[Any] = []
    if method == "contextcare":
        out["size"] = matcher.memory
        w = matcher.watcher()

        def feed() -> None:
            w.reset()
            put = w.feed
            for d in deltas:
                put(d)

        from contextcare import _engine

        floor = getattr(_engine, "_Floor", None)  # the harness's floor: feed's argument handling
        noop_put = floor(w).feed if floor is not None else w._noop

        def noop() -> None:
            put = noop_put
            for d in deltas:
                put(d)

        out["ns_per_delta"] = _best(feed) / len(deltas) * 1e9
        out["floor_ns"] = _best(noop) / len(deltas) * 1e9
        text = "".join(deltas)
        ends = np.cumsum(np.fromiter(map(len, deltas), dtype=np.int64, count=len(deltas)))
        out["replay_mbs"] = nbytes / _best(lambda: hits.extend(matcher.replay(text, ends))) / 1e6
        out["hits"] = len(matcher.replay(text, ends))
    elif method == "pyahocorasick":
        out["size"] = matcher.get_stats()["total_size"]

        def aho() -> None:
            hits.clear()
            it = matcher.iter("")
            put, app = it.set, hits.append
            for d in deltas:
                put(d)
                for m in it:
                    app(m)

        out["ns_per_delta"] = _best(aho) / len(deltas) * 1e9
        out["hits"] = len(hits)
    else:
        out["size"] = len(hyperscan.dumpb(matcher))

        def on_match(k: int, start: int, end: int, flags: int, context: object) -> None:
            hits.append(end)

        def hs() -> None:
            hits.clear()
            with matcher.stream(match_event_handler=on_match) as stream:
                scan = stream.scan
                for d in encoded:
                    scan(d)

        out["ns_per_delta"] = _best(hs) / len(deltas) * 1e9
        out["hits"] = len(hits)
    return out


# --------------------------------------------------------------------------- report

def _mib(n: float) -> str:
    return f"{n / 2**20:.1f}"


def table(results: list[dict[str, Any]]) -> str:
    by = {(r["method"], r["lang"], r["n"]): r for r in results}
    sizes = sorted({r["n"] for r in results})
    lines = []
    for lang in LANGS:
        if not any(r["lang"] == lang for r in results):
            continue
        label = {"zh": "Chinese (2-8 random CJK ideographs)",
                 "en": "English (2-4 words, one made-up)"}[lang]
        lines += [(f"**{label}** — compile s / reported MiB / RSS growth MiB / peak growth MiB"
                   " / ns per delta"), ""]
        lines.append("| phrases | " + " | ".join(METHODS) + " | contextcare × floor | replay MB/s |")
        lines.append("|---:|" + "---|" * len(METHODS) + "---:|---:|")
        for n in sizes:
            cells = []
            for m in METHODS:
                r = by.get((m, lang, n))
                cells.append("—" if r is None else
                             f"{r['compile_s']:.3f} s / {_mib(r['size'])} / {_mib(r['rss'])} /"
                             f" {_mib(r['peak'])} / {r['ns_per_delta']:.0f} ns")
            cc = by.get(("contextcare", lang, n))
            ratio = f"{cc['ns_per_delta'] / cc['floor_ns']:.2f}×" if cc else "—"
            replay = f"{cc['replay_mbs']:.0f}" if cc else "—"
            size = f"{n:,}".replace(",", " ")
            lines.append(f"| {size} | " + " | ".join(cells) + f" | {ratio} | {replay} |")
        lines.append("")
    return "\n".join(lines)


def plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    colors = {"contextcare": "tab:blue", "pyahocorasick": "tab:orange", "hyperscan": "tab:green"}
    styles = {"zh": "-", "en": "--"}
    panels = (("compile_s", "compile time (s)"), ("size", "compiled size (MiB, reported)"),
              ("ns_per_delta", "cost per 1-4-char delta (ns)"))
    for ax, (key, title) in zip(axes, panels):
        for m in METHODS:
            for lang in LANGS:
                rows = sorted((r for r in results if r["method"] == m and r["lang"] == lang),
                              key=lambda r: r["n"])
                if not rows:
                    continue
                ys = [r[key] / (2**20 if key == "size" else 1) for r in rows]
                ax.plot([r["n"] for r in rows], ys, styles[lang], color=colors[m], marker="o",
                        markersize=3, label=f"{m} ({lang})")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("phrases")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("Phrase-set size sweep (solid: Chinese, dashed: English)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def rewrite_readme(readme: Path, results: list[dict[str, Any]], meta: dict[str, Any]) -> None:
    text = readme.read_text(encoding="utf-8")
    body = (f"Run on {meta['date']} ({meta['machine']}; load average {meta['load_start']} at the"
            f" start, {meta['load_end']} at the end; {meta['deltas']} deltas per pass).\n\n"
            + table(results) + "\n![size sweep](sweep.png)\n")
    block = f"<!-- sweep:start -->\n{body}<!-- sweep:end -->"
    if "<!-- sweep:start -->" in text:
        text = re.sub(r"<!-- sweep:start -->.*?<!-- sweep:end -->", lambda _: block, text,
                      flags=re.DOTALL)
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    readme.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--langs", default=",".join(LANGS))
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--deltas", type=int, default=DELTAS)
    ap.add_argument("--json", default=str(HERE / "sweep.json"))
    ap.add_argument("--png", default=str(HERE / "sweep.png"))
    ap.add_argument("--readme", default=str(HERE / "README.md"))
    ap.add_argument("--no-readme", action="store_true")
    ap.add_argument("--case", nargs=4, metavar=("METHOD", "LANG", "N", "DELTAS_FILE"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.case:
        method, lang, n, deltas_file = args.case
        print(json.dumps(run_case(method, lang, int(n), deltas_file)))
        return 0
    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        deltas_file = os.path.join(tmp, "deltas.pkl")
        with open(deltas_file, "wb") as f:
            pickle.dump(traces.phrase_trace(1_000_000).deltas[: args.deltas], f)
        results = []
        for lang in args.langs.split(","):
            for n in map(int, args.sizes.split(",")):
                for method in args.methods.split(","):
                    proc = subprocess.run(
                        [sys.executable, __file__, "--case", method, lang, str(n), deltas_file],
                        capture_output=True, text=True, check=False)
                    if proc.returncode:
                        print(f"{method} {lang} {n}: failed\n{proc.stderr}", file=sys.stderr)
                        continue
                    r = json.loads(proc.stdout.strip().splitlines()[-1])
                    results.append(r)
                    print(f"{method:13s} {lang} {n:>7}: compile {r['compile_s']:.3f} s,"
                          f" {_mib(r['size'])} MiB reported, RSS +{_mib(r['rss'])} MiB"
                          f" (peak +{_mib(r['peak'])}), {r['ns_per_delta']:.0f} ns/delta",
                          flush=True)
    import platform

    meta = {"date": time.strftime("%Y-%m-%d", time.gmtime()),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python"
                       f" {platform.python_version()}",
            "load_start": round(load_start, 2), "load_end": round(os.getloadavg()[0], 2),
            "deltas": args.deltas}
    Path(args.json).write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    plot(results, Path(args.png))
    if not args.no_readme:
        rewrite_readme(Path(args.readme), results, meta)
    return 0


if __name__ == "__main__":
    sys.exit(main())
