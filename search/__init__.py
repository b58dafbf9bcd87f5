"""Search indexes: derived copies, never a second truth.

A dataset's indexes are defined by commands in the log (``CreateSearchIndex``, decided by the
fold's rules in ``projector.search_indexes``); their rows are derived from the registered layers
and kept as Lance datasets (``copies``) by a follower of the projection (``indexer``, run in the
projector's process by ``changelog.search_follower``). ``rows`` reads a segment's rows, ``training``
keeps the Lance indexes inside a copy, ``query`` answers searches once a copy covers the caller's
writes.
"""
