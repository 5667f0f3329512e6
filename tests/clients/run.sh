#!/usr/bin/env bash
# The real-clients conformance suite: installs the pinned clients (cached), then runs them
# directly and through `contextwarden proxy` against the scripted upstream.
#   bash tests/clients/run.sh [pytest args...]
# PYTHON: the interpreter with contextwarden's dev dependencies (default: .venv/bin/python, else
# python3). The report goes to out/clients-report.md.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$repo"
py="${PYTHON:-}"
if [ -z "$py" ]; then
    if [ -x .venv/bin/python ]; then py=.venv/bin/python; else py=python3; fi
fi
start=$(date +%s)
bash "$here/install.sh"
echo "run.sh: clients installed in $(( $(date +%s) - start )) s"
CW_CLIENTS=1 PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}" "$py" -m pytest tests/clients -m clients -p no:cacheprovider -rfEs "$@"
