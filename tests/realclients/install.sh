#!/usr/bin/env bash
# Installs the pinned MCP clients and servers the real-client tests run, project-local:
# the npm packages of tests/realclients/package-lock.json under <repo>/.clients (npm ci),
# and mcp-server-time (requirements.txt) into the project's .venv (its `mcp<3,>=2.3`
# agrees with the project's own pin). Idempotent: does nothing when the installed
# versions are the pinned ones. Usage: tests/realclients/install.sh [--force]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
prefix="${FLEET_REALCLIENTS_DIR:-$repo/.clients}"
python="$repo/.venv/bin/python"
force=0
[[ ${1:-} == --force ]] && force=1

# No update notices, funding or audit calls; installs come from the registry only.
export npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
export NO_UPDATE_NOTIFIER=1 DISABLE_AUTOUPDATER=1 DISABLE_TELEMETRY=1
export CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1

pinned() {  # the lockfile's version of package $1
    node -e 'const l = require(process.argv[1]); console.log(l.packages["node_modules/" + process.argv[2]].version)' \
        "$here/package-lock.json" "$1"
}

installed() {  # the installed version of package $1, or nothing
    node -e 'try { console.log(require(process.argv[1]).version) } catch { }' \
        "$prefix/node_modules/$1/package.json"
}

npm_up_to_date() {
    cmp -s "$here/package-lock.json" "$prefix/package-lock.json" || return 1
    local pkg
    for pkg in @anthropic-ai/claude-code @google/gemini-cli @openai/codex \
        @modelcontextprotocol/inspector-cli @modelcontextprotocol/server-everything; do
        [[ "$(installed "$pkg")" == "$(pinned "$pkg")" ]] || return 1
    done
}

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "install.sh: node and npm are required (Debian: apt-get install nodejs npm)" >&2
    exit 1
fi

if [[ $force -eq 0 ]] && npm_up_to_date; then
    echo "npm clients: up to date in $prefix"
else
    mkdir -p "$prefix"
    cp "$here/package.json" "$here/package-lock.json" "$prefix/"
    # Install scripts stay off (npm 11 blocks them anyway): claude's native binary comes
    # in its platform package (@anthropic-ai/claude-code-linux-x64), an optional dependency.
    npm ci --prefix "$prefix" --ignore-scripts --no-audit --no-fund --loglevel=error
    echo "npm clients: installed in $prefix"
fi

# The native claude binary: the package's bin is a placeholder when its postinstall did
# not copy the platform binary over it; then link the platform package's binary instead.
claude="$prefix/node_modules/.bin/claude"
if ! "$claude" --version >/dev/null 2>&1; then
    native=$(ls "$prefix"/node_modules/@anthropic-ai/claude-code-linux-*/claude 2>/dev/null | head -n1)
    if [[ -n $native ]]; then
        ln -sf "$native" "$claude"
    fi
fi
want=$(pinned @anthropic-ai/claude-code)
got=$("$claude" --version 2>/dev/null | head -n1 || true)
if [[ $got != "$want"* ]]; then
    echo "install.sh: claude --version gave '$got', expected $want" >&2
    exit 1
fi
echo "claude $got"

# Codex CLI's npm package is a node launcher; the real binary comes in its platform
# package (@openai/codex-linux-*), an optional dependency the launcher finds by itself.
want=$(pinned @openai/codex)
got=$("$prefix/node_modules/.bin/codex" --version 2>/dev/null | head -n1 || true)
if [[ $got != "codex-cli $want" ]]; then
    echo "install.sh: codex --version gave '$got', expected codex-cli $want" >&2
    exit 1
fi
echo "$got"

if [[ -x $python ]]; then
    # requirements.txt holds one pin: mcp-server-time==VERSION.
    want=$(sed -n 's/^mcp-server-time==//p' "$here/requirements.txt")
    got=$("$python" -m pip show mcp-server-time 2>/dev/null | sed -n 's/^Version: //p' || true)
    if [[ $force -eq 1 || $got != "$want" ]]; then
        "$python" -m pip install --disable-pip-version-check --quiet -r "$here/requirements.txt"
        "$python" -m pip check
    fi
    echo "mcp-server-time $("$python" -m pip show mcp-server-time | sed -n 's/^Version: //p')"
else
    echo "install.sh: $python is missing; create the venv first (see README)" >&2
    exit 1
fi
