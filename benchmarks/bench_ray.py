"""Streams per second: the single-process scan against Ray Data in local mode.

A standalone script, not part of the pytest-benchmark suite (a Ray round takes tens of seconds
and needs the ``[ray]`` extra)::

    pip install '.[ray]'
    python benchmarks/bench_ray.py                      # 40 000 streams, 16 files, 2 workers
    python benchmarks/bench_ray.py --streams 200000 --files 64 --workers 4 --json out.json

Both sides do the same work per file: scan it as ``contextcare scan`` does
(:func:`contextcare.traces.scan`: lines decoded in blocks by msgspec, each stream's deltas fed in
one call) through the default rules and build the output rows (:func:`contextcare.ray.file_rows`). The Ray
side is timed end to end as ``contextcare scan --engine ray`` runs it (starting the scanning
actors, reading the files into the object store, scanning, counting), without writing the rows:
the first run ("cold": Ray starts and imports fresh worker processes) and a second one ("warm"),
then once more with Parquet output; ``ray.init`` is timed on its own. A warm run over a tiny
corpus (8 streams in 2 files) measures the fixed cost of a job (scheduling, starting actors and
read workers); the marginal rate is the streams of the big corpus over the time beyond that
fixed cost, which is what a corpus large enough to matter sees. The single-process scan runs
twice and the faster run counts; its CPU time gives the rate of one worker, which the load of
the machine disturbs less than wall-clock time. Rates are in MB of JSON lines (gzip files
counted uncompressed) and stream attempts per second. Peak resident memory of the
scanning actors is read from ``/proc`` (Linux) while they run. The machine's load average is
printed: other processes on the machine slow both sides.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import logging
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

#: What the scanning actors' command lines contain (Ray names the process after the actor).
ACTOR_NAME = b"MapBatches(ScanFiles)"


def _poll_actor_memory(peak_kib: dict[int, int], stop: threading.Event) -> None:
    """Every 0.2 s until ``stop``: the peak resident set (VmHWM) of each scanning actor."""
    while not stop.wait(0.2):
        for pid in os.listdir("/proc") if os.path.isdir("/proc") else ():
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if ACTOR_NAME not in f.read():
                        continue
                with open(f"/proc/{pid}/status", encoding="ascii") as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            kib = int(line.split()[1])
                            peak_kib[int(pid)] = max(kib, peak_kib.get(int(pid), 0))
            except (OSError, ValueError):
                continue  # the process ended meanwhile


@contextlib.contextmanager
def actor_memory() -> Iterator[dict[int, int]]:
    """Polls ``/proc`` (Linux) for the scanning actors' peak memory while the block runs; the
    dict it yields maps actor pid to peak KiB."""
    peak_kib: dict[int, int] = {}
    stop = threading.Event()
    thread = threading.Thread(target=_poll_actor_memory, args=(peak_kib, stop), daemon=True)
    thread.start()
    try:
        yield peak_kib
    finally:
        stop.set()
        thread.join()


def single_process(paths: list[str]) -> tuple[float, float, int]:
    """Wall and CPU seconds and rows of the single-process scan: every file through
    ``file_rows``."""
    from contextcare import default_ruleset
    from contextcare.ray import file_rows

    ruleset = default_ruleset()
    start, cpu = time.perf_counter(), time.process_time()
    rows = 0
    for path in paths:
        with open(path, "rb") as f:
            rows += len(file_rows(path, f.read(), ruleset))
    return time.perf_counter() - start, time.process_time() - cpu, rows


def _jsonl_bytes(path: str) -> int:
    """The size of a trace file's JSON lines (gunzipped)."""
    with open(path, "rb") as f:
        data = f.read()
    return len(gzip.decompress(data)) if data[:2] == b"\x1f\x8b" else len(data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=40_000)
    parser.add_argument("--files", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2, help="Ray CPUs and scanning actors")
    parser.add_argument("--json", default=None, metavar="PATH", help="also write the figures")
    args = parser.parse_args(argv)
    try:
        import ray

        from contextcare.ray import run_scan
        from contextcare.testing import write_corpus
    except ModuleNotFoundError as exc:
        print(f"bench_ray: {exc}", file=sys.stderr)
        return 2

    out: dict[str, Any] = {"streams": args.streams, "files": args.files,
                           "workers": args.workers, "cpus": os.cpu_count(),
                           "load_start": os.getloadavg()[0], "ray": ray.__version__}
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        paths = write_corpus(os.path.join(tmp, "corpus"), streams=args.streams, files=args.files)
        tiny = write_corpus(os.path.join(tmp, "tiny"), streams=8, files=2)
        out["corpus_mb"] = sum(os.path.getsize(p) for p in paths) / 1e6
        out["jsonl_mb"] = sum(_jsonl_bytes(p) for p in paths) / 1e6
        out["generate_s"] = time.perf_counter() - start

        out["single_s"], out["single_cpu_s"], out["rows"] = min(single_process(paths),
                                                                single_process(paths))
        out["worker_cpu_mb_per_s"] = out["jsonl_mb"] / out["single_cpu_s"]

        start = time.perf_counter()
        ray.init(num_cpus=args.workers, include_dashboard=False, logging_level=logging.ERROR)
        out["ray_init_s"] = time.perf_counter() - start
        try:
            with actor_memory() as peak_kib:
                for key, inputs in (("ray_cold_s", paths), ("ray_fixed_s", tiny),
                                    ("ray_s", paths)):
                    start = time.perf_counter()
                    counts = run_scan(inputs, workers=args.workers)
                    out[key] = time.perf_counter() - start
                start = time.perf_counter()
                run_scan(paths, os.path.join(tmp, "rows"), workers=args.workers)
                out["ray_parquet_s"] = time.perf_counter() - start
            out["actor_peak_mib"] = max(peak_kib.values()) / 1024 if peak_kib else None
        finally:
            ray.shutdown()
    attempts = counts["streams"]
    out["attempts"] = attempts
    out["load_end"] = os.getloadavg()[0]
    for key in ("single", "ray_cold", "ray", "ray_parquet"):
        out[f"{key}_streams_per_s"] = attempts / out[f"{key}_s"]
        out[f"{key}_mb_per_s"] = out["jsonl_mb"] / out[f"{key}_s"]
    beyond = out["ray_s"] - out["ray_fixed_s"]
    out["ray_marginal_streams_per_s"] = attempts / beyond if beyond > 0 else None
    out["ray_marginal_mb_per_s"] = out["jsonl_mb"] / beyond if beyond > 0 else None

    peak = out["actor_peak_mib"]
    print(f"{attempts:,} stream attempts in {args.files} files ({out['corpus_mb']:.1f} MB"
          f" stored, {out['jsonl_mb']:.1f} MB of JSON lines), {args.workers} Ray workers on"
          f" {out['cpus']} CPUs, load {out['load_start']:.1f} -> {out['load_end']:.1f}\n")
    print("| path | seconds | streams/s | MB/s of JSON lines |")
    print("|---|---:|---:|---:|")
    for key, label in (("single", "single process (scan, rows)"),
                       ("ray_cold", "Ray local, cold: first run (actors start, read, scan,"
                                    " count)"),
                       ("ray", "Ray local, warm: second run (same, counts only)"),
                       ("ray_parquet", "Ray local, warm, + Parquet output")):
        print(f"| {label} | {out[f'{key}_s']:.2f} | {out[f'{key}_streams_per_s']:,.0f} |"
              f" {out[f'{key}_mb_per_s']:.1f} |")
    marginal = out["ray_marginal_streams_per_s"]
    rate = out["ray_marginal_mb_per_s"]
    print(f"| Ray local, warm, marginal (beyond the {out['ray_fixed_s']:.1f} s fixed cost of a"
          f" job) | {max(beyond, 0):.2f} | {'n/a' if marginal is None else f'{marginal:,.0f}'} |"
          f" {'n/a' if rate is None else f'{rate:.1f}'} |")
    print(f"\none worker's rate (the single-process scan per CPU second):"
          f" {out['worker_cpu_mb_per_s']:.1f} MB/s of JSON lines,"
          f" {attempts / out['single_cpu_s']:,.0f} streams/s")
    print(f"ray.init: {out['ray_init_s']:.1f} s (once per job, not in the rows above);"
          f" peak RSS per scanning actor: {'n/a' if peak is None else f'{peak:.0f} MiB'}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
