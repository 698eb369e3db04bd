"""A throwaway PostgreSQL server: the machine's binaries, a temp dir, a Unix socket only."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PgServer", "find_pg_bindir", "missing_binaries_verdict", "start_pg_server"]

# Debian installs server binaries outside PATH; newest first.
_DEBIAN_ROOT = Path("/usr/lib/postgresql")
#: initdb and postgres refuse to run as root; this account runs them instead.
_UNPRIVILEGED_USER = "nobody"


def find_pg_bindir() -> Path | None:
    """The directory holding initdb and pg_ctl: PATH, then ``pg_config --bindir``, then Debian's."""
    on_path = shutil.which("initdb")
    if on_path and shutil.which("pg_ctl"):
        return Path(on_path).resolve().parent
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, check=True, timeout=10
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            out = ""
        if out:
            candidates.append(Path(out))
    if _DEBIAN_ROOT.is_dir():
        versions = sorted(
            (p for p in _DEBIAN_ROOT.iterdir() if p.name.isdigit()),
            key=lambda p: int(p.name),
            reverse=True,
        )
        candidates.extend(p / "bin" for p in versions)
    for candidate in candidates:
        if (candidate / "initdb").is_file() and (candidate / "pg_ctl").is_file():
            return candidate
    return None


def missing_binaries_verdict(env: Mapping[str, str]) -> tuple[str, str]:
    """("fail" | "skip", reason) when no PostgreSQL binaries were found.

    Under CI a missing server must fail the run: a backend that silently skipped would
    pass as green. Only a local run may skip, and it says why.
    """
    reason = (
        "PostgreSQL binaries (initdb, pg_ctl) not found on PATH, under pg_config --bindir "
        "or /usr/lib/postgresql/*/bin (Debian: apt-get install postgresql)"
    )
    if env.get("CI", "").strip().lower() in {"1", "true", "yes"}:
        return "fail", f"CI needs PostgreSQL: {reason}"
    return "skip", reason


@dataclass(frozen=True, slots=True)
class PgServer:
    """A running server: its socket directory, and how to stop it."""

    bindir: Path
    root: Path
    user: str | None  # the OS account it runs as; None = the current one

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root

    def url(self, database: str = "postgres") -> str:
        """A DSN that reaches the server over its Unix socket only."""
        return f"postgresql://postgres@/{database}?host={self.socket_dir}"

    def sql(self, statement: str, database: str = "postgres") -> str:
        """Run one statement with psql over the socket; its output (unaligned, no header)."""
        result = subprocess.run(
            [
                str(self.bindir / "psql"),
                "-X",
                "-q",
                "-At",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                str(self.socket_dir),
                "-U",
                "postgres",
                "-d",
                database,
                "-c",
                statement,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"psql {statement!r} failed: {result.stderr.strip()}")
        return result.stdout

    def stop(self) -> None:
        """Fast shutdown (disconnects clients), then remove the directory."""
        try:
            _run(
                self,
                [str(self.bindir / "pg_ctl"), "stop", "-m", "fast", "-w", "-D", str(self.data_dir)],
            )
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def _run(server: PgServer, argv: list[str]) -> None:
    result = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=120,
        user=server.user,
        cwd=server.root,
        check=False,
    )
    if result.returncode != 0:
        log = server.root / "server.log"
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        raise RuntimeError(
            f"{' '.join(argv)} failed ({result.returncode}): {result.stderr.strip()}\n{tail}"
        )


def start_pg_server(
    bindir: Path, *, settings: tuple[str, ...] = (), durable: bool = False
) -> PgServer:
    """initdb + start in a fresh temp dir; the caller must ``stop()`` it.

    As root, the server runs as ``nobody``: the directory is handed to that account,
    and the socket (mode 0777 by default) stays reachable from root. ``settings`` are
    extra ``-c name=value`` server options. ``durable`` keeps fsync on (benchmarks: a
    commit then costs what it costs in production).
    """
    # /tmp, not $TMPDIR: as root the unprivileged account must be able to reach it.
    root = Path(tempfile.mkdtemp(prefix="fleet-pg-", dir="/tmp" if os.path.isdir("/tmp") else None))
    user: str | None = None
    if os.geteuid() == 0:
        account = pwd.getpwnam(_UNPRIVILEGED_USER)
        os.chown(root, account.pw_uid, account.pw_gid)
        user = _UNPRIVILEGED_USER
    root.chmod(0o755)
    server = PgServer(bindir=bindir, root=root, user=user)
    try:
        _run(
            server,
            [
                str(bindir / "initdb"),
                "-D",
                str(server.data_dir),
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C",
            ],
        )
        # No TCP at all; the socket lives in the temp dir. fsync off: a test server's
        # data dies with it anyway.
        fast = () if durable else ("-c fsync=off", "-c full_page_writes=off")
        options = [
            "-c listen_addresses=''",
            f"-k {root}",
            *fast,
            *(f"-c {s}" for s in settings),
        ]
        _run(
            server,
            [
                str(bindir / "pg_ctl"),
                "start",
                "-w",
                "-t",
                "60",
                "-D",
                str(server.data_dir),
                "-l",
                str(root / "server.log"),
                "-o",
                " ".join(options),
            ],
        )
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return server
