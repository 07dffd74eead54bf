"""The phrase automaton alone: where the text's walk goes and how much of the automaton it reads.

    python benchmarks/walk.py                  # this tree's csrc/
    python benchmarks/walk.py --rev 0f264c7    # another commit's csrc/ (git archive), to compare

Compiles ``benchmarks/automaton_walk.c`` with ``csrc/automaton.c`` (``cc -O2``), writes the
phrase sets of ``sweep.py`` (the 300 benchmark phrases; 100 000 English, Chinese and mixed
phrases of ``traces.phrase_set``) and the first 50 000 deltas of its trace as files, and runs
the walk on each: the layout, ns per character (best of ``--passes``, noisy on a shared machine)
and, exactly, the steps from dense and sparse states, the failure links followed and the
distinct sparse states and 64-byte lines of the double array read in one pass (the working set
that decides whether a large set stays in cache). The checksum of the matches must be the same
for every build.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import traces  # noqa: E402

SETS = ("300", "en", "zh", "mixed")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rev", help="take csrc/ from this git revision instead of the tree")
    ap.add_argument("--passes", type=int, default=7)
    ap.add_argument("--sets", default=",".join(SETS))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        csrc = HERE.parent / "csrc"
        if args.rev:
            archive = subprocess.run(["git", "-C", str(HERE.parent), "archive", args.rev, "csrc"],
                                     check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
            csrc = Path(tmp) / "csrc"
        exe = os.path.join(tmp, "walk")
        subprocess.run([os.environ.get("CC", "cc"), "-O2", "-std=c99", "-D_POSIX_C_SOURCE=200809L",
                        f"-I{csrc}", str(HERE / "automaton_walk.c"), str(csrc / "automaton.c"),
                        "-o", exe], check=True)
        text = os.path.join(tmp, "text.txt")
        with open(text, "w", encoding="utf-8", newline="") as f:
            f.write("".join(traces.phrase_trace(1_000_000).deltas[:50_000]))
        print("| set | states | dense | MiB | ns/char | sparse steps | failure links"
              " | sparse states read | lines read (KiB) | checksum |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        for name in args.sets.split(","):
            phrases = traces.make_phrases() if name == "300" else traces.phrase_set(100_000, name)
            path = os.path.join(tmp, f"phrases-{name}.txt")
            with open(path, "w", encoding="utf-8", newline="\n") as f:
                f.write("\n".join(phrases) + "\n")
            out = subprocess.run([exe, path, text, str(args.passes)], check=True,
                                 capture_output=True, text=True).stdout
            r = dict(kv.split("=", 1) for kv in out.split())
            chars = int(r["chars"])
            print(f"| {name} | {int(r['states']):,} | {int(r['dense_states']):,}"
                  f" | {int(r['bytes']) / 2**20:.2f} | {float(r['ns_per_char']):.1f}"
                  f" | {int(r['sparse_steps']) / chars:.0%} | {int(r['fail_links']):,}"
                  f" | {int(r['sparse_states_read']):,} | {int(r['lines_read']):,}"
                  f" ({int(r['lines_read']) * 64 // 1024:,}) | {r['checksum']} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
