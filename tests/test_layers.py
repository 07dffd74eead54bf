"""The package's layers, read from the imports themselves (AST), as httpx tests its exported names.

    engine         errors, _checks, detection, marker, vocab, rules, _engine, reference
    rules          presets, tomlrules
    context        contextcare.context (grades, meters, planner, mindmap): errors, _checks and
                   marker only
    memory         contextcare.memory: errors and _checks only
    actions / io   guard, notices, streams, chunks, traces, scanning, ray, testing, serve
    cli            cli, __main__, and the package root

A module may import its own layer and the layers below it; context and memory are islands that
never import the detector. Function-local imports count (they hid the cli <-> ray cycle). The
compiled module's own imports (_engine.pyx) are listed by hand. A module missing from LAYERS fails
the test: a new module must be placed in a layer.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import contextcare

PACKAGE = Path(contextcare.__file__).resolve().parent

ENGINE = {"errors", "_checks", "detection", "marker", "vocab", "rules", "_engine", "reference"}
LAYERS: dict[str, str] = {
    **{m: "engine" for m in ENGINE},
    "presets": "rules", "tomlrules": "rules",
    "context": "context", "memory": "memory",
    **{m: "actions" for m in ("guard", "notices", "streams", "chunks", "traces", "scanning",
                              "ray", "testing", "serve", "_openai")},
    "cli": "cli", "__main__": "cli", "__init__": "cli",
}
ALLOWED: dict[str, set[str]] = {
    "engine": {"engine"},
    "rules": {"engine", "rules"},
    "context": {"context", "errors", "_checks", "marker"},
    "memory": {"memory", "errors", "_checks"},
    "actions": {"engine", "rules", "context", "memory", "actions"},
    "cli": {"engine", "rules", "context", "memory", "actions", "cli"},
}
#: What the compiled module imports (src/contextcare/_engine.pyx is not Python).
PYX_IMPORTS = {"rules", "detection", "errors"}


def top_module(name: str) -> str:
    """``contextcare.context.planner`` -> ``context``; ``contextcare.__init__`` -> ``__init__``."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imported(module: str, source: str) -> set[str]:
    """The contextcare modules (top level, as in LAYERS) that ``source`` imports, ``module``
    being its dotted name (``contextcare.guard``, ``contextcare.context.planner``; a package's
    ``__init__`` is ``contextcare.context.__init__``)."""
    package = module.split(".")
    is_pkg = package[-1] == "__init__"
    if is_pkg:
        package = package[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out |= {top_module(a.name) for a in node.names if a.name.split(".")[0] == "contextcare"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + (1 if is_pkg else 0)]
                target = base + (node.module.split(".") if node.module else [])
            else:
                target = (node.module or "").split(".")
            if target[0] != "contextcare":
                continue
            if len(target) == 1:  # from contextcare import x / from . import x
                out |= {a.name if a.name in LAYERS else "__init__" for a in node.names}
            else:
                out.add(target[1])
    return out


def violations(sources: dict[str, str]) -> list[str]:
    """Every import edge of ``sources`` (dotted module name -> source) that goes up or across."""
    found = []
    for module, source in sorted(sources.items()):
        own = top_module(module)
        layer = LAYERS.get(own)
        if layer is None:
            found.append(f"{module}: not placed in a layer (add it to LAYERS)")
            continue
        for target in sorted(imported(module, source) - {own}):
            allowed = ALLOWED[layer]
            ok = LAYERS.get(target) in allowed or target in allowed
            if not ok:
                found.append(f"{module} ({layer}) imports {target} ({LAYERS.get(target)})")
    return found


def package_sources() -> dict[str, str]:
    """Every module of the installed package: dotted name -> source."""
    return {".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts):
            path.read_text(encoding="utf-8") for path in PACKAGE.rglob("*.py")}


def test_the_package_imports_only_downwards() -> None:
    assert violations(package_sources()) == []


def test_the_compiled_module_imports_only_the_engine_layer() -> None:
    assert all(LAYERS[m] == "engine" for m in PYX_IMPORTS)
    pyx = (PACKAGE / "_engine.pyx")
    if pyx.exists():  # an installed wheel has no .pyx
        lines = [line for line in pyx.read_text(encoding="utf-8").splitlines()
                 if line.startswith(("from contextcare", "import contextcare"))]
        assert imported("contextcare._engine", "\n".join(lines)) == PYX_IMPORTS


# ---- the test of the test: a deliberate bad import is caught ------------------------------

@pytest.mark.parametrize(("module", "source", "culprit"), [
    ("contextcare.rules", "from .cli import main\n", "imports cli"),
    ("contextcare.guard", "def f():\n    from contextcare import cli\n", "imports cli"),
    ("contextcare.context.planner", "from ..guard import Guard\n", "imports guard"),
    ("contextcare.context.planner", "from .. import Ruleset\n", "imports __init__"),
    ("contextcare.memory.anchors", "import contextcare.rules\n", "imports rules"),
    ("contextcare.presets", "from .streams import watch\n", "imports streams"),
    ("contextcare.newthing", "x = 1\n", "not placed in a layer"),
])
def test_a_bad_import_is_reported(module: str, source: str, culprit: str) -> None:
    found = violations({module: source})
    assert len(found) == 1 and culprit in found[0], found


@pytest.mark.parametrize(("module", "source"), [
    ("contextcare.cli", "from .context import planner\nfrom . import memory\n"),
    ("contextcare.context.mindmap", "from .planner import plan_rest\nfrom ..errors import X\n"),
    ("contextcare.guard", "from ._engine import Recorder\nfrom .notices import message\n"),
    ("contextcare.memory.curve", "from .anchors import Anchor\n"),
])
def test_allowed_imports_pass(module: str, source: str) -> None:
    assert violations({module: source}) == []
