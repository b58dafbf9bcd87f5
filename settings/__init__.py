"""strata's settings: every ``STRATA_*`` variable, and the standard ``AWS_*`` ones for recordings in
object storage, are read here and nowhere else, with the defaults they override and the record a
running stack leaves in its state directory. Explicit arguments (``Server(...)``, command-line
options, ``object_store_config``) win over these. Imports nothing of strata."""

from __future__ import annotations

import base64
import binascii
import json
import os
import urllib.parse
from pathlib import Path

ENVIRONMENT = {
    "STRATA_HOME": "state directory (default ./.strata)",
    "STRATA_BOOTSTRAP_SERVERS": "use this Kafka cluster instead of the embedded broker",
    "STRATA_SPARK_MASTER": "use this Spark master instead of local[*]",
    "STRATA_STORE": "the projection store (default: store.db in the state directory)",
    "STRATA_KAFKA_OPTIONS": 'Kafka client settings as a JSON object, e.g. {"sasl.password": "..."}',
    "STRATA_SEARCH_URL": "where the search indexes are kept: a directory, or an s3:// prefix every host "
                         "reads (default: beside a SQLite store; a PostgreSQL store needs it)",
    "STRATA_JARS_DIR": "where scripts/setup.sh put the jars (default .cache/jars)",
    "STRATA_CLASS_DATA_SHARING": "the JVMs' class-data sharing archives that setup makes: use "
                                 "(default), off, or create (replace them at the JVMs' exit)",
    "STRATA_WORKERS": "worker processes a client reads and registers with (default: the usable "
                      "cores; 0 reads in the client's own process)",
    "STRATA_TOKEN_SECRET": "the secret that signs and checks the tokens of the catalog protocol's "
                           "endpoint (base64 of 32 bytes or more; 'strata token --new-secret' makes "
                           "one): with it, every call needs a token",
    "REDAP_TOKEN": "the token a client sends to a catalog endpoint (Rerun's variable; token= wins)",
    "SSL_CERT_FILE": "the CA certificates a client trusts for rerun+https:// (default: the system's)",
}
"""Each variable and what it sets, for ``--help``."""

OBJECT_STORE_ENVIRONMENT = {
    "endpoint_url": ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
    "region": ("AWS_REGION", "AWS_DEFAULT_REGION"),
    "access_key_id": ("AWS_ACCESS_KEY_ID",),
    "secret_access_key": ("AWS_SECRET_ACCESS_KEY",),
    "session_token": ("AWS_SESSION_TOKEN",),
}
"""Each ``s3://`` setting and the AWS variables that give it, the first one set winning."""

_PROJECT_JARS = Path(__file__).resolve().parents[1] / ".cache" / "jars"


def home() -> Path:
    return Path(os.environ.get("STRATA_HOME") or ".strata")


def bootstrap_servers() -> str | None:
    return os.environ.get("STRATA_BOOTSTRAP_SERVERS") or None


TOKEN_SECRET_BYTES = 32


def token_secret() -> bytes | None:
    """The secret of the catalog endpoint's tokens, from ``STRATA_TOKEN_SECRET`` (base64); None
    without one. Raises ``ValueError`` if it is not base64 of at least ``TOKEN_SECRET_BYTES``."""
    text = os.environ.get("STRATA_TOKEN_SECRET")
    if not text:
        return None
    try:
        secret = base64.b64decode(text.strip(), validate=True)
    except binascii.Error:
        secret = b""
    if len(secret) < TOKEN_SECRET_BYTES:
        raise ValueError(f"STRATA_TOKEN_SECRET is not base64 of {TOKEN_SECRET_BYTES} bytes or more: set it "
                         "to what 'strata token --new-secret' prints")
    return secret


def client_token() -> str | None:
    """The token a client sends to a catalog endpoint: ``REDAP_TOKEN``, as Rerun's client reads it."""
    return os.environ.get("REDAP_TOKEN") or None


def trusted_roots() -> bytes | None:
    """The CA certificates (PEM) a client trusts for ``rerun+https://``: the file ``SSL_CERT_FILE``
    names, which Rerun's client reads too; None for the default roots. Raises ``ValueError`` if
    the file cannot be read."""
    path = os.environ.get("SSL_CERT_FILE")
    if not path:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ValueError(f"SSL_CERT_FILE names a file that cannot be read: {exc}") from None


def spark_master() -> str:
    return os.environ.get("STRATA_SPARK_MASTER") or "local[*]"


def kafka_options() -> dict[str, str]:
    """Kafka client settings (librdkafka's names) from ``STRATA_KAFKA_OPTIONS``, a JSON object:
    credentials kept out of command lines. ``--kafka-option`` and ``kafka_config`` win over it.
    Raises ``ValueError`` if it is not a JSON object of strings, numbers or booleans."""
    text = os.environ.get("STRATA_KAFKA_OPTIONS")
    if not text:
        return {}
    try:
        options = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"STRATA_KAFKA_OPTIONS is not JSON ({exc}); set it to an object such as "
                         '{"security.protocol": "SASL_SSL"}') from None
    if not isinstance(options, dict) or not all(
            isinstance(v, str | int | float | bool) for v in options.values()):
        raise ValueError("STRATA_KAFKA_OPTIONS must be a JSON object of settings to strings, "
                         'numbers or booleans, such as {"security.protocol": "SASL_SSL"}')
    return options


def workers() -> int:
    """How many worker processes a client starts (``STRATA_WORKERS``; default: the cores this
    process may run on). ``CatalogClient(workers=...)`` wins over it. Raises ``ValueError`` if
    it is not a whole number of at least 0."""
    text = os.environ.get("STRATA_WORKERS")
    if not text:
        return len(os.sched_getaffinity(0))
    try:
        count = int(text)
    except ValueError:
        count = -1
    if count < 0:
        raise ValueError(f"STRATA_WORKERS={text!r}: set it to a number of worker processes, at least 0 "
                         "(0 reads in the client's own process)")
    return count


def store(data_dir: Path) -> str:
    """The projection store of the stack whose state is in ``data_dir``: a SQLite file's path or
    a ``postgresql://`` URL."""
    return os.environ.get("STRATA_STORE") or str(data_dir / "store.db")


def search_indexes(store: str) -> str:
    """Where the search indexes of the catalog in ``store`` (a SQLite file's path or a
    ``postgresql://`` URL) are kept: ``STRATA_SEARCH_URL`` (an ``s3://`` prefix, or a directory,
    made absolute), else the directory ``<store>.search`` beside a SQLite file. Raises
    ``ValueError`` for a PostgreSQL store without the variable."""
    given = os.environ.get("STRATA_SEARCH_URL")
    if given:
        return given if "://" in given else str(Path(given).absolute())
    if store.startswith(("postgresql://", "postgres://")):
        raise ValueError("a PostgreSQL store's search indexes need STRATA_SEARCH_URL: a directory or "
                         "s3:// prefix that the projector and every client reach")
    return str(Path(store).absolute()) + ".search"


def object_store() -> dict[str, str]:
    """The ``s3://`` settings the AWS variables give (only those that are set)."""
    found = {}
    for key, names in OBJECT_STORE_ENVIRONMENT.items():
        value = next((os.environ[n] for n in names if os.environ.get(n)), None)
        if value is not None:
            found[key] = value
    return found


DASHBOARD_PORT = 8765
"""The port ``strata dashboard`` and ``strata up`` serve the live page on, unless told otherwise."""

VIEWER_PORT = 9090
"""The port the dashboard serves Rerun's web viewer on, unless told otherwise (Rerun's own
default for ``rerun --serve-web``)."""

PROTOCOL_PORT = 51234
"""The port ``strata serve`` serves Rerun's catalog protocol on, unless told otherwise (Rerun's own
default for its catalog server)."""

PROTOCOL_WEB_PORT = 51235
"""The port ``strata up`` serves Rerun's catalog protocol over gRPC-web on (for Rerun's web viewer),
unless told otherwise: the one after ``PROTOCOL_PORT``, as grpcio serves gRPC alone."""

SERVER_FILE = "server.json"
"""What a running stack writes about itself in its state directory (its Kafka cluster, store and
Spark master), removed when it stops; clients read it to connect (``from_state_dir``)."""


def running_stack(state_dir: Path) -> dict[str, str]:
    """What the stack running on ``state_dir`` wrote about itself; empty if none runs there."""
    path = state_dir / SERVER_FILE
    if not path.exists():
        return {}
    found = json.loads(path.read_text())
    return {str(key): str(value) for key, value in found.items()}


def write_running_stack(state_dir: Path, bootstrap_servers: str, store: str, spark_master: str) -> None:
    """Record a starting stack in ``state_dir`` (see ``running_stack``)."""
    (state_dir / SERVER_FILE).write_text(json.dumps(
        {"bootstrap_servers": bootstrap_servers, "store": store, "spark_master": spark_master}, indent=2))


STACK_URL_SCHEME = "strata"

CATALOG_LOCATION_RPC = "/strata.v1.Catalog/Location"
"""The one RPC a strata endpoint of Rerun's catalog protocol serves beside Rerun's service: an
empty request, answered with the JSON object ``{"bootstrap_servers": ..., "store": ...}`` of the
catalog it serves (``bootstrap_servers`` null if it serves it read-only), so that strata's own
``CatalogClient("rerun+http://HOST:PORT")`` reaches the same catalog."""


def stack_url(bootstrap_servers: str, store: str) -> str:
    """The one string a client needs to reach a stack: ``strata://<bootstrap servers>?store=<store>``
    (``Server.url()``; ``CatalogClient(url)`` takes it)."""
    return f"{STACK_URL_SCHEME}://{bootstrap_servers}?{urllib.parse.urlencode({'store': store})}"


def parse_stack_url(url: str) -> tuple[str, str]:
    """The bootstrap servers and the store of a ``stack_url``. Raises ``ValueError`` saying what
    a stack URL looks like if ``url`` is not one."""
    parts = urllib.parse.urlsplit(url)
    store = urllib.parse.parse_qs(parts.query).get("store", [""])[0]
    if parts.scheme != STACK_URL_SCHEME or not parts.netloc or not store:
        raise ValueError(f"{url!r} is not a strata stack URL: Server.url() gives one, of the form "
                         f"{STACK_URL_SCHEME}://HOST:PORT?store=STORE (or pass the bootstrap servers "
                         "and the store separately)")
    return parts.netloc, store


def jars_dir() -> Path:
    return Path(os.environ.get("STRATA_JARS_DIR") or _PROJECT_JARS)


CLASS_DATA_MODES = ("use", "off", "create")


def class_data_archive(name: str) -> Path:
    """The class-data sharing archive of the JVM ``name`` (``broker``, ``spark``): the classes
    it loads while it starts, already parsed and verified, which JDK 17 maps instead of reading
    them from the jars again (``stack.class_data`` makes it)."""
    return jars_dir() / "class-data" / f"{name}.jsa"


def class_data_options(name: str) -> list[str]:
    """The JVM options for ``name``'s archive (``class_data_archive``) under
    ``STRATA_CLASS_DATA_SHARING``: map it if it exists, or write it when the JVM exits
    (``create``). A JVM that cannot map an archive (another JDK, other jars: a Spark driver whose
    jars go to a cluster) starts without it, and says nothing: the JVM would print its warning
    to standard output, which a command's output is."""
    mode = os.environ.get("STRATA_CLASS_DATA_SHARING") or "use"
    if mode not in CLASS_DATA_MODES:
        raise ValueError(f"STRATA_CLASS_DATA_SHARING is {mode!r}; set it to one of "
                         f"{', '.join(CLASS_DATA_MODES)}")
    archive = class_data_archive(name)
    if mode == "create":
        return [f"-XX:ArchiveClassesAtExit={archive}"]
    if mode == "use" and archive.exists():
        return [f"-XX:SharedArchiveFile={archive}", "-Xlog:cds*=off"]
    return []


def help_text() -> str:
    width = max(len(name) for name in ENVIRONMENT) + 2
    return "environment:\n" + "".join(f"  {name:<{width}}{text}\n" for name, text in ENVIRONMENT.items())
