"""``python -m sdk._worker FD DIRECTORY``: one worker process of a client (see ``sdk._workers``).

A module of its own so that ``sdk._workers``, which the client imports, is never run as
``__main__``: the functions a worker's replies name must be that module's."""

import sys

from sdk._workers import main

main(sys.argv[1:])
