"""A real PostgreSQL server for tests: Debian's ``postgresql`` package, started with ``pg_ctl`` in
a directory of its own on a free port (as the ``postgres`` user when the tests run as root, since
PostgreSQL refuses to run as root)."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg

if TYPE_CHECKING:
    from secured import Certificates

SUPERUSER = "strata"


def _bindir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(p.split("/")[4]))
    if not found:
        raise RuntimeError("PostgreSQL's server is not installed: apt-get install postgresql "
                           "(make test does it)")
    return Path(found[-1]).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EmbeddedPostgres:
    """A PostgreSQL server listening on ``host`` (127.0.0.1 unless told), with superuser
    ``strata`` (trusted on its Unix socket, password-checked over TCP when ``password`` is set).
    With ``tls`` (``secured.Certificates``), it takes TCP connections over TLS only, and its URLs
    ask for the server's certificate to be verified.

    >>> with EmbeddedPostgres() as pg:  # doctest: +SKIP
    ...     url = pg.create_database()
    """

    def __init__(self, *, host: str = "127.0.0.1", port: int | None = None,
                 password: str | None = None, settings: dict[str, str] | None = None,
                 tls: Certificates | None = None) -> None:
        self.host = host
        self.tls = tls
        self.port = port or _free_port()
        self.password = password
        self.settings = {"fsync": "off", "full_page_writes": "off", "max_connections": "200",
                         **(settings or {})}
        self.directory = Path(tempfile.mkdtemp(prefix="strata-pg-"))
        self.data = self.directory / "data"
        self.log = self.directory / "postgres.log"
        self._user = "postgres" if os.geteuid() == 0 else None

    def _run(self, *args: str | Path) -> None:
        command = [str(a) for a in args]
        if self._user:
            command = ["runuser", "-u", self._user, "--", *command]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            log = self.log.read_text()[-3000:] if self.log.exists() else ""
            raise RuntimeError(f"{' '.join(command)} failed: {result.stderr or result.stdout}\n{log}")

    def start(self) -> EmbeddedPostgres:
        bindir = _bindir()
        if self._user:
            entry = pwd.getpwnam(self._user)
            os.chown(self.directory, entry.pw_uid, entry.pw_gid)
        auth = ["--auth-local=trust", "--auth-host=" + ("scram-sha-256" if self.password else "trust")]
        pwfile = self.directory / "pwfile"
        if self.password:
            pwfile.write_text(self.password)
            if self._user:
                os.chown(pwfile, pwd.getpwnam(self._user).pw_uid, -1)
        self._run(bindir / "initdb", "-D", self.data, "-U", SUPERUSER, "--encoding=UTF8", "--no-sync",
                  *auth, *(["--pwfile", pwfile] if self.password else []))
        pwfile.unlink(missing_ok=True)
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(f"listen_addresses = '{self.host}'\nport = {self.port}\n"
                       f"unix_socket_directories = '{self.directory}'\n")
            conf.writelines(f"{key} = '{value}'\n" for key, value in self.settings.items())
            if self.tls:
                conf.write(self._tls_settings())
        self.resume()
        return self

    def resume(self) -> None:
        """Start the server (again, after ``stop``)."""
        self._run(_bindir() / "pg_ctl", "-D", self.data, "-l", self.log, "-w", "-t", "60", "start")

    def _tls_settings(self) -> str:
        """Turns TLS on, with the certificate and key copied where the server's user owns them,
        and lets TCP clients in over TLS with a password only."""
        for name, source in (("server.pem", self.tls.cert), ("server.key", self.tls.key)):
            target = self.data / name
            shutil.copyfile(source, target)
            target.chmod(0o600)
            if self._user:
                entry = pwd.getpwnam(self._user)
                os.chown(target, entry.pw_uid, entry.pw_gid)
        (self.data / "pg_hba.conf").write_text(
            "local all all trust\n"
            f"hostssl all all 0.0.0.0/0 {'scram-sha-256' if self.password else 'trust'}\n")
        return "ssl = on\nssl_cert_file = 'server.pem'\nssl_key_file = 'server.key'\n"

    def url(self, database: str = "postgres", *, password: str | None = None,
            user: str = SUPERUSER) -> str:
        secret = password if password is not None else self.password
        credentials = f"{user}:{secret}" if secret else user
        tls = f"?sslmode=verify-full&sslrootcert={self.tls.ca}" if self.tls else ""
        return f"postgresql://{credentials}@{self.host}:{self.port}/{database}{tls}"

    def admin(self, database: str = "postgres") -> psycopg.Connection:
        """A superuser connection on the server's Unix socket."""
        return psycopg.connect(host=str(self.directory), port=self.port, user=SUPERUSER,
                               dbname=database, autocommit=True)

    def create_database(self, name: str | None = None) -> str:
        """A new empty database; returns its URL."""
        name = name or f"strata_{uuid.uuid4().hex[:12]}"
        with self.admin() as conn:
            conn.execute(f'create database "{name}"')
        return self.url(name)

    def stop(self, mode: str = "fast") -> None:
        if (self.data / "postmaster.pid").exists():
            self._run(_bindir() / "pg_ctl", "-D", self.data, "-m", mode, "-w", "stop")

    def close(self) -> None:
        with contextlib.suppress(RuntimeError):
            self.stop("immediate")
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> EmbeddedPostgres:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()
