#!/usr/bin/env python3
"""Coverage-guided fuzzing of the native engine with atheris (libFuzzer for Python).

Each fuzz input is decoded into a *scenario*: ruleset options, a list of rules built from fuzzed
parameters (which may be out of range: then the rule constructor must raise RuleTypeError or
RuleValueError and the rule is left out), and a sequence of operations — ``feed`` of a fuzzed str
(any code point, lone surrogates included, optionally repeated to make loops) on a fuzzed
channel, ``finish``, ``reset``, ``copy`` (the copy then gets the following operations too),
``tail(n)`` and ``Ruleset.replay`` with fuzzed splits (possibly invalid). The scenario runs on the
native engine and on the reference engine side by side; the input is a *crash* when

* the native engine crashes the process (a sanitizer report when run under tools/sanitize.sh's
  build, see tools/fuzz.sh), or
* any call raises an exception that is not documented for it, or
* the native engine and the reference disagree on any return value, error, ``fired``,
  ``finished`` or ``tail()``.

Besides scenarios, an input that starts with ``#probe:NAME`` followed by a newline is a
*probe*: its rest is the input of one hostile check, readable and mutable by the fuzzer like any
other input (tools/fuzz-seeds/ holds one per defect of issue 17, see docs/hardening.md):

* ``#probe:toml`` - the rest (UTF-8) is a rules document: ``loads_rules`` returns rules or raises
  ``RulesFileError``, nothing else (no ``RecursionError``), in bounded time;
* ``#probe:chunk`` - the rest is JSON (optionally one ``{"repeat": [prefix, n, suffix]}`` object,
  the text ``prefix * n + suffix``): one OpenAI chunk, read by the stream filter and by the trace
  reader: both give the same text or both refuse it with an error of ours;
* ``#probe:splits`` - the rest is JSON ``{"len": N, "dtype": D, "values": [...], "step": S}``:
  ``replay`` of N characters with those splits as a numpy array of dtype D (``"list"``: a list)
  taken every S-th item: both engines accept, or refuse with the same error and message;
* ``#probe:uninit`` - the rest names methods: each, on ``__new__``-made Ruleset/Watcher objects
  of both engines, raises ``UninitialisedError`` (never a crash);
* ``#probe:hits`` - the rest is JSON ``{"rules": [[view, phrase], ...], "text": [unit, n]}``:
  ``once=False`` phrase rules, the text ``unit * n`` as one delta: the native engine's comparisons
  per hit stay under a bound set by the rule set alone (never by the number of hits), and its
  detections equal those of the text fed in 1000-character deltas.

Coverage: atheris instruments the Python modules (the reference engine and the shared
validation), whose branches mirror the native core's; the native core itself is not
coverage-instrumented in a gcc build. See docs/hardening.md.

Usage::

    python tools/fuzz_engine.py [libFuzzer flags] [corpus dirs or crash files]
    python tools/fuzz_engine.py --explain CRASH_FILE   # print the scenario as Python
    python tools/fuzz_engine.py --replay DIR_OR_FILE...  # run inputs once, without libFuzzer

``--replay`` is how a corpus grown on the normal build is re-run on the sanitizer build (with
gcc's ASan preloaded, libFuzzer's coverage hooks are taken by the ASan runtime and the fuzzing
loop itself does not work; see tools/fuzz.sh).
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import atheris  # type: ignore[import-untyped]

import contextcare._engine as native
import contextcare.reference as ref
import contextcare.rules as rules_mod
from contextcare.errors import ArgumentTypeError, ArgumentValueError, RuleTypeError, RuleValueError

#: Characters the fuzzer could hardly guess byte by byte but that matter to the semantics.
SPECIALS = ("\n", "\r\n", "\x00", "\u2028", "\ud800", "\udfff", "😀", "```\n", "`", '"', "“",
            "”", "「", "」", "|", ",", "，", "、", "做。\n", "same line\n", "hurry up", "时间不够",
            "the ", " ")
CHANNELS = ("text", "reasoning")
VIEWS = ("text", "reasoning", "combined")
ACTIONS = ("abort", "remind", "record")
#: Upper bound of text per input, so that the reference stays cheap (it is ~50x slower).
MAX_TEXT = 20_000


@dataclass
class Scenario:
    """A decoded fuzz input: what to build and what to call, in order."""

    options: dict[str, Any]
    rules: list[rules_mod.Rule] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)      # reprs of refused rule params
    ops: list[tuple[Any, ...]] = field(default_factory=list)


def _text(fdp: Any) -> str:
    parts = []
    for _ in range(fdp.ConsumeIntInRange(0, 4)):
        if fdp.ConsumeBool():
            parts.append(fdp.PickValueInList(list(SPECIALS)))
        else:
            parts.append(fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, 12)))
    text = "".join(parts)
    if fdp.ConsumeIntInRange(0, 3) == 0:
        text *= fdp.ConsumeIntInRange(2, 200)
    return text


def _rule(fdp: Any, index: int, corpus: list[str]) -> Callable[[], Any]:
    """A constructor call with fuzzed parameters, some of them out of range on purpose."""
    rid = f"r{index}" if fdp.ConsumeIntInRange(0, 15) else "r0"   # sometimes a duplicate id
    common: dict[str, Any] = {"channel": fdp.PickValueInList(list(VIEWS)),
              "action": fdp.PickValueInList(list(ACTIONS)), "once": fdp.ConsumeBool()}

    def phrase() -> str:
        if corpus and fdp.ConsumeBool():
            source = fdp.PickValueInList(corpus)
            if source:
                start = fdp.ConsumeIntInRange(0, len(source) - 1)
                return str(source[start:start + fdp.ConsumeIntInRange(0, 10)])
        return str(fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, 6)))

    def count(hi: int = 30) -> int:
        return int(fdp.ConsumeIntInRange(-1, hi))

    def ratio() -> float:
        return float(fdp.PickValueInList([0.0, 0.01, 0.2, 0.5, 0.99, 1.0, 1.5]))

    def every() -> int:
        return int(fdp.PickValueInList([0, 1, 2, 7, 64, 300, 1 << 32, (1 << 32) + 1]))

    kw: dict[str, Any]
    kind = fdp.ConsumeIntInRange(0, 8)
    if kind == 0:
        phrases = [phrase() for _ in range(fdp.ConsumeIntInRange(0, 4))]
        ignore, suppress = fdp.ConsumeBool(), fdp.ConsumeBool()
        return lambda: rules_mod.Phrases(rid, phrases, ignore_case=ignore,
                                         suppress_quoted=suppress, **common)
    if kind == 1:
        token, ignore = phrase(), fdp.ConsumeBool()
        return lambda: rules_mod.Marker(rid, token, ignore_case=ignore, **common)
    if kind == 2:
        cls = rules_mod.TimeAnxiety if fdp.ConsumeBool() else rules_mod.ContextAnxiety
        extra = tuple(phrase() for _ in range(fdp.ConsumeIntInRange(0, 3)))
        lang = fdp.PickValueInList(["zh", "en", ("zh", "en"), "fr"])
        suppress = fdp.ConsumeBool()
        return lambda: cls(rid, lang=lang, extra=extra, suppress_quoted=suppress, **common)
    if kind == 3:
        kw = {"min_lines": count(), "min_count": count(), "min_ratio": ratio(),
              "min_run": count(), "every_bytes": every()}
        return lambda: rules_mod.LineRepeat(rid, **kw, **common)
    if kind == 4:
        kw = {"max_line_chars": count(41), "min_lines": count(), "top": count(65),
              "cover_ratio": ratio(), "every_bytes": every()}
        return lambda: rules_mod.LineCycle(rid, **kw, **common)
    if kind == 5:
        kw = {"fillers": fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, 5)),
              "max_line_chars": count(41), "min_count": count(), "min_ratio": ratio(),
              "every_bytes": every()}
        return lambda: rules_mod.FillerLines(rid, **kw, **common)
    if kind == 6:
        kw = {"delimiters": fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, 5)),
              "max_prefix_chars": count(9), "min_lines": count(), "min_count": count(),
              "min_ratio": ratio(), "every_bytes": every()}
        return lambda: rules_mod.PrefixMonotony(rid, **kw, **common)
    window = fdp.ConsumeIntInRange(1, 300)
    kw = {"window_chars": window, "max_period": fdp.ConsumeIntInRange(0, window // 2 + 1),
          "min_repeats": fdp.ConsumeIntInRange(1, 8), "min_chars": fdp.ConsumeIntInRange(1, window),
          "every_bytes": every()}
    return lambda: rules_mod.TailRepeat(rid, **kw, **common)


def decode(data: bytes) -> Scenario:
    """Turn fuzz bytes into a scenario (deterministic: the same bytes, the same scenario)."""
    fdp = atheris.FuzzedDataProvider(data)
    options = {"line_window": fdp.ConsumeIntInRange(0, 30),
               "min_line_chars": fdp.ConsumeIntInRange(1, 6),
               "evidence_chars": fdp.ConsumeIntInRange(0, 100),
               "mask_code_fences": fdp.ConsumeBool()}
    scenario = Scenario(options)
    # The texts come first so that phrases can be cut from them (and so occur in the stream).
    budget = MAX_TEXT
    for _ in range(fdp.ConsumeIntInRange(1, 24)):
        op = fdp.ConsumeIntInRange(0, 9)
        if op <= 3:
            text = _text(fdp)[:budget]
            budget -= len(text)
            scenario.ops.append(("feed", fdp.PickValueInList(list(CHANNELS)), text))
        elif op == 4:
            scenario.ops.append(("finish",))
        elif op == 5:
            scenario.ops.append(("reset",))
        elif op == 6:
            scenario.ops.append(("copy",))
        elif op == 7:
            n = fdp.ConsumeIntInRange(-1, 120)
            scenario.ops.append(("tail", None if n == 120 else n))
        elif op == 8:
            text = _text(fdp)[:budget]
            budget -= len(text)
            cuts = sorted(fdp.ConsumeIntInRange(0, len(text)) for _ in range(
                fdp.ConsumeIntInRange(0, 6)))
            splits: list[int] | None = [*cuts, len(text)]
            if fdp.ConsumeIntInRange(0, 7) == 0:          # an invalid one now and then
                splits = fdp.PickValueInList([[len(text) + 1], [-1, len(text)], [],
                                              cuts[::-1] + [len(text) + 2]])
            elif fdp.ConsumeIntInRange(0, 3) == 0:
                splits = None
            scenario.ops.append(("replay", fdp.PickValueInList(list(CHANNELS)), text, splits))
        else:
            scenario.ops.append(("switch", fdp.ConsumeIntInRange(0, 3)))
    corpus = [op[2] for op in scenario.ops if op[0] in ("feed", "replay")]
    for i in range(fdp.ConsumeIntInRange(0, 6)):
        build = _rule(fdp, i, corpus)
        try:
            scenario.rules.append(build())
        except (RuleTypeError, RuleValueError) as exc:
            scenario.refused.append(str(exc))
    return scenario


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        return ("ok", call())
    except (ArgumentTypeError, ArgumentValueError, RuntimeError) as exc:
        return (type(exc).__name__, str(exc))


def _call(target: Any, op: tuple[Any, ...]) -> Any:
    """Apply one operation to a watcher (or, for ``replay``, to a ruleset)."""
    name = op[0]
    if name == "feed":
        return target.feed(op[2], op[1])
    if name == "finish":
        return target.finish()
    if name == "reset":
        return target.reset()
    if name == "tail":
        return target.tail(op[1])
    return target.replay(op[2], op[3], channel=op[1])


def run(scenario: Scenario) -> None:
    """Run a scenario on both engines; raise AssertionError on any disagreement. Exceptions
    other than the documented ones propagate (and so count as crashes)."""
    built_native = _outcome(lambda: native.Ruleset(scenario.rules, **scenario.options))
    built_ref = _outcome(lambda: ref.Ruleset(scenario.rules, **scenario.options))
    if built_native[0] != "ok" or built_ref[0] != "ok":
        assert built_native == built_ref, (built_native, built_ref)
        assert built_native[0] == "RuleValueError", built_native
        return
    rs_n, rs_r = built_native[1], built_ref[1]
    pairs = [(rs_n.watcher(), rs_r.watcher())]
    current = 0
    for step, op in enumerate(scenario.ops):
        wn, wr = pairs[current]
        name = op[0]
        if name == "switch":
            current = op[1] % len(pairs)
            continue
        if name == "copy":
            if len(pairs) < 4:
                pairs.append((wn.copy(), wr.copy()))
            continue
        if name == "replay":
            got = _outcome(partial(_call, rs_n, op))
            want = _outcome(partial(_call, rs_r, op))
            if got[0] != "ok":
                # bad splits: the same class and message on both engines (issue 17)
                assert got == want and got[0] == "ArgumentValueError", (step, got, want)
                continue
        else:
            got, want = _outcome(partial(_call, wn, op)), _outcome(partial(_call, wr, op))
            if got[0] != "ok":
                documented = (name == "feed" and got[0] == "RuntimeError" and wr.finished) or \
                    (name == "tail" and got[0] == "ArgumentValueError" and op[1] < 0)
                assert documented, (step, got)
        assert got == want, (step, op[:2], got, want)
        for n, r in pairs:
            assert n.fired == r.fired, (step, n.fired, r.fired)
            assert n.finished == r.finished, step
            assert n.tail() == r.tail(), (step, n.tail(), r.tail())
    for n, r in pairs:
        assert n.finish() == r.finish()


# ------------------------------------------------------------------------------ probes

PROBE = b"#probe:"


def _probe_toml(rest: bytes) -> None:
    from contextcare.tomlrules import RulesFileError, loads_rules

    try:
        loads_rules(rest.decode("utf-8", "surrogatepass"), source="probe.toml")
    except UnicodeDecodeError:
        return
    except RulesFileError:
        pass


def _json(rest: bytes) -> Any:
    try:
        obj = json.loads(rest.decode("utf-8", "surrogatepass"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if isinstance(obj, dict) and set(obj) == {"repeat"} and isinstance(obj["repeat"], list) \
            and len(obj["repeat"]) == 3 and isinstance(obj["repeat"][1], int):
        prefix, n, suffix = obj["repeat"]
        text = str(prefix) * max(0, min(n, 100_000)) + str(suffix)
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            return None
    return obj


def _probe_chunk(rest: bytes) -> None:
    from contextcare.guard import Guard
    from contextcare.streams import openai_parts, watch_openai
    from contextcare.traces import TraceFormatError, iter_events

    chunk = _json(rest)
    if chunk is None:
        return
    try:
        parts: Any = [(i, c, t) for i, c, t in openai_parts(chunk)]
        list(watch_openai([chunk], Guard(native.Ruleset([rules_mod.Marker("m", "x")]))))
    except (ArgumentTypeError, ArgumentValueError) as exc:
        assert str(exc).startswith("chunk"), exc
        parts = "refused"
    if not isinstance(chunk, dict) or "choices" not in chunk:
        return  # a trace line must be a chunk object to be read as one
    try:
        line = json.dumps(chunk)
    except (ValueError, RecursionError):
        return
    try:
        events = list(iter_events(io.StringIO(line)))
    except TraceFormatError:
        assert parts == "refused", parts
        return
    assert parts != "refused"
    texts = [e.text for e in events if e.type.endswith("-delta")]
    assert texts == [t for _, _, t in parts], (texts, parts)


def _probe_splits(rest: bytes) -> None:
    import numpy as np

    spec = _json(rest)
    if not isinstance(spec, dict):
        return
    length, values = spec.get("len"), spec.get("values")
    dtype, step = spec.get("dtype", "list"), spec.get("step", 1)
    if not (isinstance(length, int) and 0 <= length <= MAX_TEXT and isinstance(values, list)
            and isinstance(step, int) and 1 <= step <= 8 and isinstance(dtype, str)):
        return
    try:
        splits: Any = values if dtype == "list" else np.array(values, dtype=dtype)[::step]
    except (TypeError, ValueError, OverflowError):
        return
    text = ("ab\n" * (length // 3 + 1))[:length]
    rules = [rules_mod.Phrases("p", ["b"], once=False)]
    got = _outcome(lambda: native.Ruleset(rules).replay(text, splits))
    want = _outcome(lambda: ref.Ruleset(rules).replay(text, splits))
    assert got == want, (got, want)
    assert got[0] in ("ok", "ArgumentTypeError", "ArgumentValueError"), got


def _probe_uninit(rest: bytes) -> None:
    from contextcare.errors import UninitialisedError

    names = rest.decode("ascii", "replace").split()
    for engine in (native, ref):
        for cls in (engine.Ruleset, engine.Watcher):
            for name in names:
                attr = cls.__dict__.get(name)
                if attr is None or name in ("__init__", "__new__", "__repr__", "__sizeof__",
                                            "__getattr__", "__doc__", "__module__", "__slots__",
                                            "__reduce__") \
                        or not (callable(attr) or isinstance(attr, property)) \
                        and type(attr).__name__ != "getset_descriptor":
                    continue
                obj = cls.__new__(cls)
                args = {"feed": ("x",), "_feed_tracked": ("x",), "_noop": ("x",),
                        "replay": ("x",), "_kept_text": ("text",), "_track": (print,),
                        "_rule": (0,)}.get(name, ())
                try:
                    value = getattr(obj, name)
                    if callable(value):
                        value(*args)
                except UninitialisedError:
                    continue
                except TypeError:
                    if not name.startswith("_"):
                        raise
                    continue  # a private helper of the reference called with wrong arguments
                raise AssertionError(f"{cls.__module__}.{cls.__name__}.{name} on an uninitialised"
                                     " object did not raise UninitialisedError")


def _probe_hits(rest: bytes) -> None:
    spec = _json(rest)
    if not isinstance(spec, dict):
        return
    pairs, text = spec.get("rules"), spec.get("text")
    if not (isinstance(pairs, list) and 0 < len(pairs) <= 8 and isinstance(text, list)
            and len(text) == 2 and isinstance(text[0], str) and isinstance(text[1], int)):
        return
    rules = []
    for i, pair in enumerate(pairs):
        if not (isinstance(pair, list) and len(pair) == 2 and pair[0] in VIEWS
                and isinstance(pair[1], str) and 0 < len(pair[1]) <= 8):
            return
        rules.append(rules_mod.Phrases(f"r{i}", [pair[1]], channel=pair[0], once=False))
    unit, n = text
    whole = (unit * max(0, min(n, 60_000)))[:60_000]
    rs = native.Ruleset(rules)
    w = rs.watcher()
    got = [*w.feed(whole, "text"), *w.finish()]
    # group scan + run scan + log2 of one position's hits (at most one per rule here) and of
    # the views' stretches, with room to spare: a bound by the rule set, never by len(got)
    bound = len(got) * (6 + 2 * (len(rules) + 1).bit_length()) + 8
    assert w._sort_comparisons() <= bound, (w._sort_comparisons(), len(got))
    ends = [*range(1000, len(whole), 1000), len(whole)] if whole else []
    assert got == rs.replay(whole, ends)


PROBES: dict[bytes, Callable[[bytes], None]] = {
    b"toml": _probe_toml, b"chunk": _probe_chunk, b"splits": _probe_splits,
    b"uninit": _probe_uninit, b"hits": _probe_hits,
}


def test_one_input(data: bytes) -> None:
    if data.startswith(PROBE):
        name, _, rest = data[len(PROBE):].partition(b"\n")
        probe = PROBES.get(name.strip())
        if probe is not None:
            probe(rest)
            return
    run(decode(data))


def explain(path: str) -> str:
    """Python source that replays the scenario of one fuzz input (for a regression test)."""
    with open(path, "rb") as f:
        data = f.read()
    if data.startswith(PROBE):
        return f"# a probe input (see the module docs):\n{data.decode('utf-8', 'replace')}"
    scenario = decode(data)
    lines = ["import contextcare as cc", "from contextcare.rules import *", "",
             f"rules = {scenario.rules!r}", f"options = {scenario.options!r}",
             "rs = cc.Ruleset(rules, **options)", "w = rs.watcher()"]
    lines += [f"# refused rule: {r}" for r in scenario.refused]
    lines += [f"# {op!r}" for op in scenario.ops]
    return "\n".join(lines)


def replay(paths: list[str]) -> int:
    """Run every input file under ``paths`` (files or folders) once; return how many ran."""
    files = []
    for path in paths:
        if os.path.isdir(path):
            files += sorted(os.path.join(path, name) for name in os.listdir(path))
        else:
            files.append(path)
    for path in files:
        with open(path, "rb") as f:
            data = f.read()
        try:
            test_one_input(data)
        except BaseException:
            print(f"fuzz_engine: input {path} fails", file=sys.stderr)
            raise
    return len(files)


def main(argv: list[str]) -> None:
    if len(argv) == 3 and argv[1] == "--explain":
        print(explain(argv[2]))
        return
    if len(argv) >= 2 and argv[1] == "--replay":
        print(f"fuzz_engine: {replay(argv[2:])} inputs ran clean")
        return
    # Instrument the Python code that is loaded now (the reference engine, the rule checks):
    # instrument_imports() misses modules loaded through the editable install's import hook.
    atheris.instrument_all()
    atheris.Setup(argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
