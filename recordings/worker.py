"""``python -m recordings.worker FD DIRECTORY``: one worker process of a client (see
``recordings.workers``).

A module of its own so that ``recordings.workers``, which the client imports, is never run as
``__main__``: the functions a worker's replies name must be that module's."""

import sys

from recordings.workers import main

main(sys.argv[1:])
