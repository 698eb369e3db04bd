#!/usr/bin/env bash
# The project's one test command (README.md; .ci/run calls it too): sets up everything the
# tests need on a fresh machine, then runs the whole suite. Arguments go to pytest.
#
#   1. .venv (python3.11 when there is one), the package editable with its test extras;
#   2. Debian's packages the tests drive, only when missing: chromium (the fleet page),
#      PostgreSQL's server binaries (the store contract on PostgreSQL), systemd-analyze
#      (the unit `service install` writes). Installed with apt-get as root or through
#      passwordless sudo; otherwise it stops and prints the exact command to run;
#   3. the pinned real MCP clients and servers (tests/realclients/install.sh), and the
#      package's dependencies as wheels for the pipx install test (.wheelhouse/);
#   4. pytest -q over tests/, in two parts: the tests that start real clients offline, in
#      a network namespace with only loopback; the rest in the host's namespace.
#
# Every step does nothing when what it installs is already there, so a second run starts
# the tests at once.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

say() {
    printf 'tests/run.sh: %s\n' "$*" >&2
}

python=python3
command -v python3.11 >/dev/null 2>&1 && python=python3.11
if [[ ! -x .venv/bin/python ]]; then
    say "creating .venv with $python"
    "$python" -m venv .venv
fi
.venv/bin/python - <<'PY'
import sys
if sys.version_info < (3, 11):
    sys.exit(f"Python >= 3.11 is required, .venv has {sys.version.split()[0]}")
PY
.venv/bin/python -m pip install --disable-pip-version-check --quiet -e '.[test,dev]'

have_postgres() {
    command -v initdb >/dev/null 2>&1 && return 0
    local bindir
    if bindir=$(pg_config --bindir 2>/dev/null) && [[ -x $bindir/initdb ]]; then
        return 0
    fi
    compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null
}

missing=()
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 \
    || missing+=(chromium)
have_postgres || missing+=(postgresql)
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
if [[ ${#missing[@]} -gt 0 ]]; then
    as_root=()
    if [[ $(id -u) -ne 0 ]]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            as_root=(sudo -n)
        else
            say "missing Debian packages: ${missing[*]}; install them, then run this again:"
            say "  sudo apt-get update && sudo apt-get install -y ${missing[*]}"
            exit 1
        fi
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        say "missing: ${missing[*]}, and there is no apt-get here to install them with"
        exit 1
    fi
    say "installing Debian packages: ${missing[*]}"
    "${as_root[@]}" apt-get update -qq
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi

bash tests/realclients/install.sh
# The last use of the index: the wheels `pipx install` takes in the installed-package test.
.venv/bin/python -m tests.installed_package

# The suite runs in two parts. The tests that start a real MCP client (or npm's code) run
# offline: in a network namespace of their own with only loopback (tests/offline.py), so
# no client can reach any other address. The rest run in the host's namespace, the only
# one where the kernel reports process events (the census subscribes to them as root).
pytest=(.venv/bin/python -m pytest -q)
if [[ $(id -u) -eq 0 ]]; then
    offline=(unshare --net)
else
    offline=(unshare --map-current-user --keep-caps --net)
    if ! "${offline[@]}" true 2>/dev/null; then
        # As root this cannot fail short of a broken machine; as another user the kernel
        # may refuse user namespaces. Then the real clients' tests say so and do not run.
        say "cannot make an offline network namespace as $(id -un): the real clients' tests"
        say "will not run (as root they do; or allow unprivileged user namespaces)"
        exec "${pytest[@]}" "$@"
    fi
fi
online_rc=0
"${pytest[@]}" --part online "$@" || online_rc=$?
offline_rc=0
"${offline[@]}" .venv/bin/python -m tests.offline -- "${pytest[@]}" --part offline "$@" \
    || offline_rc=$?
# 5 is pytest's "no tests collected": fine for one part (arguments may name only the
# other's tests), not for both.
if [[ $online_rc -eq 5 && $offline_rc -eq 5 ]]; then
    exit 5
fi
for rc in "$online_rc" "$offline_rc"; do
    if [[ $rc -ne 0 && $rc -ne 5 ]]; then
        exit "$rc"
    fi
done
exit 0
