#!/usr/bin/env bash
# The packaging check (CI job `make wheel-check`): build the pure wheel and sdist with build
# isolation (pyproject's build requires only: setuptools >= 77, no mypy), install the wheel
# in a fresh venv, import it, run `kpurgatory --version`, run the tutorial's code blocks as a
# reader copies them, and type-check the typed user programs (core and asyncio) against the
# installed package with mypy --strict from outside the source tree.
# Also: an editable install in the Makefile's mode (editable_mode=compat) is visible to mypy.
# Usage: scripts/check_wheel.sh [WORKDIR]  (default: a new folder under /tmp)
set -euo pipefail
unset PYTHONPATH MYPYPATH   # a fresh venv sees only what is installed in it
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${1:-$(mktemp -d /tmp/kpurgatory-wheel.XXXXXX)}"
PYTHON="${PYTHON:-python3}"
mkdir -p "$WORK"
rm -rf "$WORK/dist" "$WORK/venv" "$WORK/editable" "$WORK/user"

"$PYTHON" -m venv "$WORK/venv"
VPY="$WORK/venv/bin/python"
"$VPY" -m pip install --quiet --upgrade pip
# A pure wheel and sdist from a copy of the tracked files (no build/ or .so leftovers).
mkdir -p "$WORK/src"
(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard 2>/dev/null || find . -type f -not -path './.git/*' -print0) \
    | (cd "$ROOT" && xargs -0 tar -cf - 2>/dev/null) | (rm -rf "$WORK/src" && mkdir -p "$WORK/src" && cd "$WORK/src" && tar -xf -)
"$VPY" -m pip wheel --quiet --no-deps -w "$WORK/dist" "$WORK/src"
WHEEL="$(ls "$WORK"/dist/kpurgatory-*.whl)"
case "$WHEEL" in *-py3-none-any.whl) ;; *) echo "not a pure wheel: $WHEEL" >&2; exit 1 ;; esac
LISTING="$(unzip -l "$WHEEL")"   # (not piped into grep -q: pipefail + SIGPIPE)
case "$LISTING" in *licenses/LICENSE*) ;; *) echo "LICENSE missing from $WHEEL" >&2; exit 1 ;; esac
case "$LISTING" in *kpurgatory/py.typed*) ;; *) echo "py.typed missing from $WHEEL" >&2; exit 1 ;; esac

"$VPY" -m pip install --quiet "$WHEEL"
mkdir -p "$WORK/user"
cd "$WORK/user"   # outside the source tree: only the installed package can be imported
"$VPY" -c 'import kpurgatory, sys; assert "site-packages" in kpurgatory.__file__, kpurgatory.__file__; print("import", kpurgatory.__file__)'
"$WORK/venv/bin/kpurgatory" --version
"$WORK/venv/bin/kpurgatory" demo > /dev/null

# The tutorial's runnable blocks, in order, as one program run from here, as a reader
# copies them: the wheel plus aiohttp, which its framework section tells the reader to
# install. Not the blocks tests/docs/test_snippets.py does not run either: copies of
# examples/ sections ("<!-- copy of: ... -->", run by the examples' own tests; the wheel
# does not carry examples/), "<!-- snippet: skip ... -->" blocks and includes.
"$VPY" -m pip install --quiet -c "$ROOT/constraints.txt" aiohttp
"$PYTHON" - "$ROOT/docs/tutorial.md" > "$WORK/user/tutorial_blocks.py" <<'EXTRACT'
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
pattern = r"^(<!--\s*(?:copy of:|snippet:\s*skip)[^\n]*-->\n)?```python\n(.*?)^```"
for marked, block in re.findall(pattern, text, re.M | re.S):
    if not marked and "--8<--" not in block:
        print(block)
EXTRACT
"$VPY" tutorial_blocks.py

# Typing as a user sees it: the installed wheel, then an editable install (Makefile mode).
"$VPY" -m pip install --quiet -c "$ROOT/constraints.txt" mypy
cp "$ROOT/tests/typing/user_program.py" "$ROOT/tests/typing/aio_user_program.py" "$WORK/user/"
"$VPY" -m mypy --strict --config-file "" user_program.py aio_user_program.py
"$VPY" -m pip uninstall --quiet --yes kpurgatory
"$VPY" -m pip install --quiet --config-settings editable_mode=compat -e "$WORK/src"
"$VPY" -m mypy --strict --config-file "" --no-incremental user_program.py aio_user_program.py
echo "wheel check passed: $WHEEL"
