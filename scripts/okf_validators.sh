#!/usr/bin/env sh
# The third-party OKF validators tests/test_okf_validators.py runs: basic-memory (`basic-memory okf check`) and
# okf-cli (`okf validate`, `okf list`, `okf read`), in their own virtual environment, since both need Python >= 3.12.
# Where: $VAULT2OKF_OKF_VALIDATORS, else ~/.cache/vault2okf/okf-validators (kept between runs: about 660 MB, 90 s
# to install once). Which Python: $PYTHON312, else python3.13 or python3.12 on the PATH, else pyenv's. Without
# one it says so and exits 0: those tests then skip, saying why.
set -eu
VERSIONS="basic-memory==0.24.1 okf-cli==0.7.0"
VENV="${VAULT2OKF_OKF_VALIDATORS:-$HOME/.cache/vault2okf/okf-validators}"
STAMP="$VENV/.installed-$(printf '%s' "$VERSIONS" | cksum | cut -d' ' -f1)"
[ -f "$STAMP" ] && exit 0
PY="${PYTHON312:-}"
if [ -z "$PY" ]; then
	for candidate in python3.13 python3.12 "$HOME"/.pyenv/versions/3.13*/bin/python "$HOME"/.pyenv/versions/3.12*/bin/python; do
		if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
			PY="$candidate"
			break
		fi
	done
fi
if [ -z "$PY" ]; then
	echo "okf-validators: skipped: no Python >= 3.12 (set PYTHON312=/path/to/python3.12); their tests will skip"
	exit 0
fi
if [ -e "$VENV" ] && [ ! -f "$VENV/pyvenv.cfg" ] && [ -n "$(ls -A "$VENV" 2>/dev/null)" ]; then
	echo "okf-validators: $VENV exists and is not a virtual environment: remove it or set VAULT2OKF_OKF_VALIDATORS" >&2
	exit 1
fi
"$PY" -m venv "$VENV"
# shellcheck disable=SC2086
"$VENV/bin/python" -m pip install -q $VERSIONS
touch "$STAMP"
echo "okf-validators: $VERSIONS in $VENV"
