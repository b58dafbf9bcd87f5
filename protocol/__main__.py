"""``python -m protocol``: serve Rerun's catalog protocol on a catalog until SIGTERM or Ctrl-C,
with ``strata serve``'s options; prints one line, ``protocol.endpoint.ready_line``, once it
serves, and nothing else unless something fails."""

from __future__ import annotations

import argparse
import logging
import sys

from projector import StoreUnavailableError
from protocol.endpoint import ready_line, run
from protocol.service import ProtocolServer
from settings.options import (
    add_data_dir,
    add_kafka_option,
    add_known_cluster,
    add_protocol_endpoint,
    add_store,
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options of ``argv`` (default: the command line); exits with argparse's usage line if
    they are malformed."""
    parser = argparse.ArgumentParser(
        prog="python -m protocol",
        description="Serve Rerun's catalog protocol (rerun+http://) on the catalog until SIGTERM or "
                    "Ctrl-C. Prints the URL to connect to once it serves. Kafka client settings "
                    "are better passed in $STRATA_KAFKA_OPTIONS than on the command line.")
    for add in (add_data_dir, add_store, add_known_cluster, add_kafka_option, add_protocol_endpoint):
        add(parser)
    return parser.parse_args(argv)


def _announce(served: ProtocolServer, bootstrap_servers: str | None) -> None:
    print(ready_line(served.url, served.web_url), flush=True)


def main(argv: list[str] | None = None) -> int:
    """Returns 0 after a requested stop; exits with one line on stderr if the store cannot be
    read, a setting is malformed or the address cannot be bound."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        run(args, _announce)
    except (StoreUnavailableError, ValueError, OSError) as exc:
        raise SystemExit(f"strata: {exc}") from None
    return 0


if __name__ == "__main__":
    sys.exit(main())
