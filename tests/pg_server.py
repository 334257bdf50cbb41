"""A real, throwaway PostgreSQL server for tests and benchmarks.

Why a real server: the PostgreSQL store must be tested against the behaviour that bites in
production (row locks, advisory locks, LISTEN/NOTIFY, killed backends, restarts, password
authentication), and no fake reproduces those faithfully.

Use it from a session-scoped pytest fixture (in a conftest.py, say)::

    @pytest.fixture(scope="session")
    def pg_server() -> Iterator[PgServer]:
        server = PgServer.start()
        try:
            yield server
        finally:
            server.stop()

    @pytest.fixture
    def pg_url(pg_server: PgServer) -> str:  # a fresh database per test
        return pg_server.create_database(f"t_{uuid.uuid4().hex[:12]}")

or from benchmark code (``with PgServer.start() as server: ...``).

Every method is synchronous (subprocesses and a short-lived admin connection); from an
asyncio test call the slow ones in a thread, e.g. ``await asyncio.to_thread(server.restart)``,
so the event loop (and any pool under test) keeps running while the server goes away.

Durability: by default the server runs with ``fsync=off``, ``synchronous_commit=off`` and
``full_page_writes=off``, which makes it start and commit fast. The price:

* ``synchronous_commit=off``: COMMIT returns before its WAL is written, so a *server crash*
  (``kill()``, i.e. an immediate stop) can lose transactions that were reported committed in
  the last few hundred milliseconds (up to three ``wal_writer_delay`` periods, 600 ms by
  default). The database itself stays consistent. Measured on this helper: a tight loop of
  ~1,000 autocommit INSERTs followed at once by ``kill()`` lost ~50 acknowledged rows;
  with ``durable=True`` none.
* ``fsync=off`` and ``full_page_writes=off`` only matter when the *operating system* crashes
  or the power fails (the kernel page cache survives a process crash); a container cannot
  simulate that, but do not point this at data you care about.

Crash-recovery tests that assert "a committed row survives ``kill()``" must pass
``durable=True``, which keeps PostgreSQL's defaults for all three.

Cleanup: ``stop()`` is idempotent, is registered with ``atexit``, and a tiny watchdog process
(started in its own session) stops the server and removes its directory if the owning Python
process dies without calling it (SIGKILL, ``os._exit``, a SIGTERM with no handler), so no
postgres process outlives the tests.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import pwd
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from urllib.parse import quote

import psycopg
from psycopg import sql

INSTALL_HINT = (
    "install the Debian package `postgresql` (scripts/install-system-deps.sh installs it: "
    "sudo scripts/install-system-deps.sh)"
)
ROLE = "sidecar"
DATABASE = "sidecar"
SUPERUSER = "postgres"
# The Unix socket path (<dir>/.s.PGSQL.<port>) must fit in sockaddr_un.sun_path (108 bytes).
_MAX_SOCKET_DIR = 90
_START_TIMEOUT = 60.0
_STOP_TIMEOUT = 30.0

# Runs with -S (no site) in its own session. Reads its cleanup spec from stdin, then blocks on
# a pipe whose only writer is the owning process: one byte means "stopped cleanly, nothing to
# do"; end-of-file without it means the owner died, so stop the server and remove its files.
_WATCHDOG = r"""
import json, os, shutil, signal, subprocess, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
spec = json.loads(sys.stdin.read())
try:
    done = os.read(int(sys.argv[1]), 1)
except OSError:
    done = b""
if not done:
    try:
        subprocess.run(spec["stop"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=60, env=spec["env"])
    finally:
        for path in spec["remove"]:
            shutil.rmtree(path, ignore_errors=True)
"""


class PgServerError(RuntimeError):
    """The throwaway server could not be found, started, or stopped; the message says why."""


def find_bindir(bindir: Path | None = None) -> Path:
    """The directory holding initdb, pg_ctl and postgres.

    Order: an explicit ``bindir``, ``$PGSERVER_BINDIR``, ``pg_config --bindir`` (when it has
    initdb: on Debian the libpq-dev pg_config may point at /usr/bin, which has none), then the
    newest ``/usr/lib/postgresql/<version>/bin``. Raises rather than letting tests skip: a
    missing server is a broken environment, not a reason to test less.
    """
    candidates: list[Path] = []
    if bindir is not None:
        candidates.append(Path(bindir))
    elif env := os.environ.get("PGSERVER_BINDIR"):
        candidates.append(Path(env))
    else:
        pg_config = shutil.which("pg_config")
        if pg_config:
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                out = subprocess.run(
                    [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True
                ).stdout.strip()
                if out:
                    candidates.append(Path(out))

        def version(path: Path) -> tuple[int, ...]:
            return tuple(int(part) for part in re.findall(r"\d+", path.parent.name))

        versioned = [p for p in Path("/usr/lib/postgresql").glob("*/bin") if version(p)]
        candidates.extend(sorted(versioned, key=version, reverse=True))
    for candidate in candidates:
        if all(os.access(candidate / tool, os.X_OK) for tool in ("initdb", "pg_ctl", "postgres")):
            return candidate
    looked = (
        ", ".join(str(c) for c in candidates) or "pg_config --bindir, /usr/lib/postgresql/*/bin"
    )
    raise PgServerError(
        f"PostgreSQL server binaries (initdb, pg_ctl) not found in {looked}; {INSTALL_HINT}"
    )


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (start() retries if it is taken)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _clean_env() -> dict[str, str]:
    """The environment for server processes: no PG* variables, so nothing overrides our flags."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["LC_ALL"] = "C"
    return env


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class PgServer:
    """One running PostgreSQL cluster in a private temporary directory.

    Attributes: ``url`` (the ``sidecar`` role over TCP with its password), ``superuser_url``
    (``postgres`` over the Unix socket, trust auth), ``port``, ``password``, ``data_dir``,
    ``socket_dir``, ``log_path``, ``durable``, ``startup_seconds``.
    """

    def __init__(
        self,
        *,
        bindir: Path,
        root: Path,
        socket_dir: Path,
        extra_dirs: list[Path],
        run_as: pwd.struct_passwd | None,
        durable: bool,
        settings: dict[str, str],
    ) -> None:
        self.bindir = bindir
        self.root = root
        self.data_dir = root / "data"
        self.socket_dir = socket_dir
        self.log_path = root / "server.log"
        self.durable = durable
        self.password = secrets.token_hex(16)
        self.port = 0
        self.startup_seconds = 0.0
        self._extra_dirs = extra_dirs
        self._run_as = run_as
        self._settings = settings
        self._stopped = False
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._watchdog_fd: int | None = None

    # ----------------------------------------------------------------- start

    @classmethod
    def start(
        cls,
        base_dir: Path | None = None,
        *,
        durable: bool = False,
        settings: dict[str, str] | None = None,
        bindir: Path | None = None,
    ) -> PgServer:
        """initdb a fresh cluster under ``base_dir`` (default: the temp dir) and start it.

        As root the files belong to the ``postgres`` user and every binary runs through
        ``runuser -u postgres`` (the server refuses to run as root); otherwise they belong to,
        and run as, the current user. ``settings`` adds ``-c name=value`` server options.
        As root, ``base_dir`` must be reachable by ``postgres``: pytest's ``tmp_path`` is not
        (/tmp/pytest-of-root is mode 0700), the default temp dir is.
        """
        began = time.perf_counter()
        found = find_bindir(bindir)
        run_as = cls._server_user()
        root = Path(tempfile.mkdtemp(prefix="pgtest-", dir=base_dir)).resolve()
        extra_dirs: list[Path] = []
        try:
            socket_dir = root / "sock"
            if len(str(socket_dir)) > _MAX_SOCKET_DIR:
                socket_dir = Path(tempfile.mkdtemp(prefix="pgsock-", dir="/tmp"))
                extra_dirs.append(socket_dir)
            else:
                socket_dir.mkdir()
            for path in (root, socket_dir):
                path.chmod(0o700)
                if run_as is not None:
                    os.chown(path, run_as.pw_uid, run_as.pw_gid)
        except BaseException:
            for path in (root, *extra_dirs):
                shutil.rmtree(path, ignore_errors=True)
            raise
        server = cls(
            bindir=found,
            root=root,
            socket_dir=socket_dir,
            extra_dirs=extra_dirs,
            run_as=run_as,
            durable=durable,
            settings=dict(settings or {}),
        )
        try:
            server._start_watchdog()  # first, so no later step can leave a server behind
            server._initdb()
            server._start_on_free_port()
            server._create_role_and_database()
        except BaseException:
            server._cleanup(graceful=False)
            raise
        atexit.register(server.stop)
        server.startup_seconds = time.perf_counter() - began
        return server

    @staticmethod
    def _server_user() -> pwd.struct_passwd | None:
        if os.geteuid() != 0:
            return None
        try:
            return pwd.getpwnam("postgres")
        except KeyError:
            raise PgServerError(
                "running as root but there is no `postgres` system user to run the server as; "
                + INSTALL_HINT
            ) from None

    def _command(self, tool: str, *args: str) -> list[str]:
        argv = [str(self.bindir / tool), *args]
        if self._run_as is None:
            return argv
        runuser = shutil.which("runuser") or "/usr/sbin/runuser"
        return [runuser, "-u", self._run_as.pw_name, "--", *argv]

    def _run(self, tool: str, *args: str, timeout: float = _START_TIMEOUT) -> None:
        argv = self._command(tool, *args)
        try:
            done = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
                env=_clean_env(),
                cwd=self.root,
            )
        except subprocess.TimeoutExpired as exc:
            raise PgServerError(
                f"{tool} timed out after {timeout}s; server log:\n{_tail(self.log_path)}"
            ) from exc
        if done.returncode != 0:
            raise PgServerError(
                f"{shlex.join(argv)} failed ({done.returncode}):\n{done.stdout}{done.stderr}\n"
                f"server log:\n{_tail(self.log_path)}"
            )

    def _initdb(self) -> None:
        # --no-sync: initdb's own fsync only guards against an OS crash during the test run.
        try:
            self._run(
                "initdb",
                "-D", str(self.data_dir),
                "-U", SUPERUSER,
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "-E", "UTF8",
                "--no-locale",
                "--no-sync",
                "--no-instructions",
            )  # fmt: skip
        except PgServerError as exc:
            who = self._run_as.pw_name if self._run_as else "the current user"
            raise PgServerError(
                f"{exc}\n(hint: {who} must be able to reach and write {self.root}; "
                "pass a base_dir under /tmp when running as root)"
            ) from None

    def _server_options(self) -> str:
        options = {
            "listen_addresses": "127.0.0.1",
            # Children show "postgres: <cluster_name>: ..." as their command line, so naming
            # the cluster after its data directory lets /proc tell this server's processes apart.
            "cluster_name": str(self.data_dir),
        }
        if not self.durable:
            options |= {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
        options |= self._settings
        args = ["-k", str(self.socket_dir), "-p", str(self.port)]
        for name, value in options.items():
            args += ["-c", f"{name}={value}"]
        return shlex.join(args)  # pg_ctl hands -o to /bin/sh

    def _pg_ctl(self, action: str, *args: str, timeout: float = _START_TIMEOUT) -> None:
        self._run(
            "pg_ctl", action, "-D", str(self.data_dir), "-s", "-w", "-t", str(int(timeout)), *args,
            timeout=timeout + 10,
        )  # fmt: skip

    def _start_on_free_port(self, attempts: int = 5) -> None:
        for attempt in range(attempts):
            self.port = free_port()
            try:
                self._pg_ctl("start", "-l", str(self.log_path), "-o", self._server_options())
                return
            except PgServerError:
                log = _tail(self.log_path, 10)
                if attempt + 1 < attempts and ("could not bind" in log or "in use" in log):
                    continue  # someone took the port between free_port() and bind()
                raise

    def _admin(self, dbname: str = "postgres") -> psycopg.Connection[tuple[object, ...]]:
        """A superuser connection over the Unix socket (trust auth), autocommit."""
        return psycopg.connect(
            host=str(self.socket_dir),
            port=self.port,
            user=SUPERUSER,
            dbname=dbname,
            autocommit=True,
            connect_timeout=10,
        )

    def _create_role_and_database(self) -> None:
        with self._admin() as conn:
            # Utility statements take no bound parameters, hence a client-side literal.
            conn.execute(
                sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                    sql.Identifier(ROLE), sql.Literal(self.password)
                )
            )
            conn.execute(
                sql.SQL("CREATE DATABASE {} OWNER {}").format(
                    sql.Identifier(DATABASE), sql.Identifier(ROLE)
                )
            )

    def _start_watchdog(self) -> None:
        read_fd, write_fd = os.pipe()
        spec = {
            "stop": self._command(
                "pg_ctl", "stop", "-D", str(self.data_dir), "-m", "immediate", "-w", "-t", "30"
            ),
            "remove": [str(self.root), *map(str, self._extra_dirs)],
            "env": _clean_env(),
        }
        try:
            self._watchdog = subprocess.Popen(
                [sys.executable, "-S", "-c", _WATCHDOG, str(read_fd)],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(read_fd,),
                start_new_session=True,
                cwd="/",
            )
        finally:
            os.close(read_fd)
        self._watchdog_fd = write_fd
        assert self._watchdog.stdin is not None
        self._watchdog.stdin.write(json.dumps(spec).encode())
        self._watchdog.stdin.close()

    # ------------------------------------------------------------ addresses

    def url_for(self, dbname: str) -> str:
        """The ``sidecar`` role's TCP URL (scram-sha-256, with password) for ``dbname``."""
        return (
            f"postgresql://{ROLE}:{quote(self.password, safe='')}@127.0.0.1:{self.port}/"
            f"{quote(dbname, safe='')}"
        )

    @property
    def url(self) -> str:
        """postgresql://sidecar:PASSWORD@127.0.0.1:PORT/sidecar"""
        return self.url_for(DATABASE)

    @property
    def superuser_url(self) -> str:
        """The ``postgres`` superuser over the Unix socket (trust auth; no password)."""
        return (
            f"postgresql://{SUPERUSER}@/postgres?host={quote(str(self.socket_dir), safe='')}"
            f"&port={self.port}"
        )

    # ------------------------------------------------------------ databases

    def create_database(self, name: str, *, owner: str = ROLE) -> str:
        """Create an empty database owned by ``owner`` and return its ``sidecar`` URL."""
        with self._admin() as conn:
            conn.execute(
                sql.SQL("CREATE DATABASE {} OWNER {}").format(
                    sql.Identifier(name), sql.Identifier(owner)
                )
            )
        return self.url_for(name)

    def drop_database(self, name: str) -> None:
        """Drop ``name`` even if connections are open (they are terminated)."""
        with self._admin() as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )

    def terminate_backends(self, dbname: str) -> int:
        """pg_terminate_backend every other connection to ``dbname``; return how many.

        Waits (up to 5 s each) until the backends have actually exited, so the caller's
        next query on a victim connection fails deterministically.
        """
        with self._admin() as conn:
            row = conn.execute(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 5000))"
                " FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                (dbname,),
            ).fetchone()
        return int(row[0]) if row else 0  # type: ignore[call-overload]

    # ------------------------------------------------------------ lifecycle

    def restart(self, *, mode: str = "fast") -> None:
        """pg_ctl restart (same port and options); also starts a server stopped by kill()."""
        self._pg_ctl("restart", "-m", mode, "-l", str(self.log_path), "-o", self._server_options())

    def kill(self) -> None:
        """Immediate stop, like a crash: no checkpoint, recovery runs at the next start.

        The files stay, so ``restart()`` brings the same cluster back; ``stop()`` still cleans up.
        """
        if self.is_running():
            self._pg_ctl("stop", "-m", "immediate", timeout=_STOP_TIMEOUT)

    def pause(self, *, mode: str = "fast") -> None:
        """Stop the server but keep its files, so ``restart()`` brings it back: a database
        that goes away and comes back. ``fast`` shuts down cleanly (nothing committed is
        lost, whatever ``durable`` says); ``immediate`` is ``kill()``."""
        if self.is_running():
            self._pg_ctl("stop", "-m", mode, timeout=_STOP_TIMEOUT)

    def is_running(self) -> bool:
        """True while the postmaster in postmaster.pid is alive."""
        pid = self.postmaster_pid()
        if pid is None:
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def postmaster_pid(self) -> int | None:
        try:
            first = (self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0]
        except (OSError, ValueError):
            return None
        return int(first) if first.strip().isdigit() else None

    def processes(self) -> list[int]:
        """PIDs of live processes whose command line mentions this server's data directory.

        That is the postmaster (``-D <data_dir>``) and every child, whose title includes
        cluster_name (set to the data directory); zombies have an empty command line.
        """
        marker = str(self.data_dir).encode()
        found: list[int] = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if marker in cmdline:
                found.append(int(entry.name))
        return found

    def stop(self) -> None:
        """Stop the server and delete its files. Idempotent; safe from atexit and finalizers."""
        if self._stopped:
            return
        self._stopped = True
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)
        self._cleanup(graceful=True)

    close = stop

    def _cleanup(self, *, graceful: bool) -> None:
        errors: list[str] = []
        if self.data_dir.exists() and self.is_running():
            modes = ["fast", "immediate"] if graceful else ["immediate"]
            for mode in modes:
                try:
                    self._pg_ctl("stop", "-m", mode, timeout=_STOP_TIMEOUT / 2)
                    break
                except PgServerError as exc:
                    errors.append(str(exc))
        # Last resort: anything still carrying our data directory in its command line.
        deadline = time.monotonic() + 5
        while (left := self.processes()) and time.monotonic() < deadline:
            for pid in left:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)
        for path in (self.root, *self._extra_dirs):
            shutil.rmtree(path, ignore_errors=True)
        if self._watchdog is not None:
            if self._watchdog_fd is not None:
                with contextlib.suppress(OSError):
                    os.write(self._watchdog_fd, b"x")  # "stopped cleanly": the watchdog just exits
                os.close(self._watchdog_fd)
                self._watchdog_fd = None
            try:
                self._watchdog.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._watchdog.kill()
                self._watchdog.wait()
        if left := self.processes():
            raise PgServerError(f"postgres processes survived stop: {left}; {errors}")

    def __enter__(self) -> PgServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else f"port {self.port}"
        return f"<PgServer {self.data_dir} {state}>"
