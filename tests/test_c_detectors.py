"""The windowed detectors tested on their own, from C (tests/c/test_detect.c): each is a pure
function of a line window or ring and a rule spec (csrc/detect.h), so it can be checked without
a watcher, a ruleset or Python. Skipped when no C compiler is installed."""

from __future__ import annotations

import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CSRC = ROOT / "csrc"


def _compiler() -> str | None:
    configured = (sysconfig.get_config_var("CC") or "").split()
    for name in [*configured[:1], "cc", "gcc", "clang"]:
        if name and shutil.which(name):
            return name
    return None


@pytest.mark.skipif(not CSRC.is_dir(), reason="csrc/ is not part of this install")
def test_detectors_from_c(tmp_path: Path) -> None:
    cc = _compiler()
    if cc is None:
        pytest.skip("no C compiler")
    exe = tmp_path / "test_detect"
    sources = [str(ROOT / "tests" / "c" / "test_detect.c")]
    sources += [str(p) for p in sorted(CSRC.glob("*.c"))]
    build = subprocess.run([cc, "-std=c99", "-O1", "-Wall", "-Wextra", "-Werror",
                            f"-I{CSRC}", *sources, "-o", str(exe)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "all detector checks passed" in run.stdout
