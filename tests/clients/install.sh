#!/usr/bin/env bash
# Installs the real agent clients that the conformance suite drives, each at a pinned version.
# Idempotent: a client already at its pinned version is left as it is.
#   npm clients -> $CW_CLIENTS_DIR/npm (default: ~/.cache/contextwarden/clients/npm, kept across
#   checkouts so that CI installs once per machine)
#   pip clients -> their own venvs under $CW_CLIENTS_DIR/venvs (aider pins many packages)
# Needs: python3 (>=3.10) with venv, node >= 20 and npm. Network: the npm registry and PyPI.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dest="${CW_CLIENTS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/contextwarden/clients}"
python="${CW_CLIENTS_PYTHON:-python3}"

# shellcheck source=versions.env
source "$here/versions.env"

mkdir -p "$dest/npm" "$dest/venvs"

npm_pkg_version() {  # prints the installed version of npm package $1, or nothing
    local pj="$dest/npm/node_modules/$1/package.json"
    [ -f "$pj" ] && node -e "console.log(require(process.argv[1]).version)" "$pj" || true
}

want_npm=()
[ "$(npm_pkg_version @anthropic-ai/claude-code)" = "$CLAUDE_CODE_VERSION" ] ||
    want_npm+=("@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION")
[ "$(npm_pkg_version @openai/codex)" = "$CODEX_VERSION" ] ||
    want_npm+=("@openai/codex@$CODEX_VERSION")
[ "$(npm_pkg_version @google/gemini-cli)" = "$GEMINI_CLI_VERSION" ] ||
    want_npm+=("@google/gemini-cli@$GEMINI_CLI_VERSION")
[ "$(npm_pkg_version @qwen-code/qwen-code)" = "$QWEN_CODE_VERSION" ] ||
    want_npm+=("@qwen-code/qwen-code@$QWEN_CODE_VERSION")
# opencode's npm package carries its prebuilt binary as a per-platform optional dependency
[ "$(npm_pkg_version opencode-ai)" = "$OPENCODE_VERSION" ] ||
    want_npm+=("opencode-ai@$OPENCODE_VERSION")
if [ "${#want_npm[@]}" -gt 0 ]; then
    echo "install.sh: npm ${want_npm[*]}"
    # a package.json of its own, so that npm installs here and not in a parent project
    [ -f "$dest/npm/package.json" ] || echo '{"name":"cw-clients","private":true}' >"$dest/npm/package.json"
    (cd "$dest/npm" && npm install --no-audit --no-fund --loglevel=error "${want_npm[@]}")
fi

venv_pkg() {  # venv name, package spec, import check
    local venv="$dest/venvs/$1" spec="$2" check="$3"
    if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$check" 2>/dev/null; then
        return 0
    fi
    echo "install.sh: $spec in $venv"
    if [ ! -x "$venv/bin/python" ]; then
        "$python" -m venv "$venv" || {
            echo "install.sh: '$python -m venv' failed: on Debian, apt-get install python3-venv" >&2
            exit 1
        }
    fi
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$spec" 2> >(grep -v "is ignored: it is neither" >&2)
    "$venv/bin/python" -c "$check"
}

venv_pkg aider "aider-chat==$AIDER_VERSION" \
    "import importlib.metadata as m; assert m.version('aider-chat') == '$AIDER_VERSION'"
venv_pkg mini "mini-swe-agent==$MINI_SWE_AGENT_VERSION" \
    "import importlib.metadata as m; assert m.version('mini-swe-agent') == '$MINI_SWE_AGENT_VERSION'"

echo "install.sh: clients ready in $dest"
