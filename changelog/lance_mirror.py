"""The Lance copies of created tables: what ``create_table(name, schema, url)`` asks for.

A table's rows live in the log and the projection like every table's; so that tools that read
Lance see it too, the mirror keeps a Lance dataset at the table's ``storage_url`` equal to the
table. It follows the store like any client: after each commit, every such table whose revision
differs from the one its Lance dataset was last written at gets one new Lance version holding its
rows as the store has them, tagged with the table id and revision in the version's transaction
properties. A mirror that starts (after a crash, or a ``strata replay --swap``, whose revisions
are the same) compares those tags and writes only what differs, so a removed or stale copy is
written again and an equal one is left alone. Lance's own engine (``pylance``) does the writing;
an ``s3://`` URL uses the projector's AWS environment.
"""

from __future__ import annotations

import logging
import uuid

from changelog.follower import Follower
from projector import ProjectionReader, Table

log = logging.getLogger("strata.lance")

TABLE_KEY = "strata.table_id"
REVISION_KEY = "strata.revision"
"""The transaction properties of each version the mirror writes."""


def copy_state(url: str, table_id: uuid.UUID) -> tuple[bool, int | None]:
    """Whether a Lance dataset is at ``url``, and the revision of ``table_id`` a mirror last wrote
    it at (None if its last version is not one of this table's, or has no transaction to say
    whose it is). Raises what Lance raises for a dataset it cannot read."""
    import lance

    try:
        dataset = lance.dataset(url)
    except (ValueError, OSError):  # nothing there yet
        return False, None
    transaction = dataset.read_transaction(dataset.version)
    if transaction is None:  # a version Lance kept no transaction for: not one the mirror wrote
        return True, None
    properties = transaction.transaction_properties or {}
    if properties.get(TABLE_KEY) != str(table_id) or REVISION_KEY not in properties:
        return True, None
    return True, int(properties[REVISION_KEY])


class LanceMirror(Follower[ProjectionReader]):
    """Copies the tables of ``store`` that have a ``storage_url`` to Lance, until ``stop()``.

    >>> mirror = LanceMirror(SqliteStore(path, read_only=True))  # doctest: +SKIP
    >>> mirror.start()  # a daemon thread
    """

    thread_name = "strata-lance"

    def __init__(self, store: ProjectionReader) -> None:
        super().__init__(store)
        self.versions_written = 0
        self._written: dict[uuid.UUID, int] = {}
        """The revision each table's copy is known to hold."""
        self._failing: dict[uuid.UUID, str] = {}

    def _run(self) -> None:
        while not self._stop.is_set():
            version = self.store.data_version()
            self.sync()
            self.store.wait_for_commit(version, 0.5)

    def sync(self) -> int:
        """Write a new version of every copy that is behind its table; returns how many."""
        written = 0
        for table in self.store.tables():
            if table.registered or not table.storage_url or self._written.get(table.id) == table.revision:
                continue
            try:
                exists, revision = copy_state(table.storage_url, table.id)
                if revision != table.revision:
                    if not self._write(table, exists):
                        continue  # written meanwhile: copied at the next pass, at its new revision
                    written += 1
            except Exception as exc:  # noqa: BLE001 - any storage fault: said once, tried at the next commit
                reason = f"{type(exc).__name__}: {exc}"
                if self._failing.get(table.id) != reason:
                    log.warning("cannot write the Lance copy of table %r at %s (%s); trying again at "
                                "the next commit", table.name, table.storage_url, reason)
                self._failing[table.id] = reason
                continue
            self._failing.pop(table.id, None)
            self._written[table.id] = table.revision
        self.versions_written += written
        return written

    def _write(self, table: Table, exists: bool) -> bool:
        """Write ``table``'s rows, tagged with its revision; False (nothing written) if the table
        changed while they were read, so that no version holds rows of a later revision than its
        tag says. The table and its rows commit together, so rows read between two reads of one
        revision are that revision's."""
        import lance

        rows = self.store.table_data(table)
        now = self.store.table(table.id)
        if now is None or now.revision != table.revision:
            return False
        properties = {TABLE_KEY: str(table.id), REVISION_KEY: str(table.revision)}
        lance.write_dataset(rows, table.storage_url, mode="overwrite" if exists else "create",
                            transaction_properties=properties)
        log.info("table %r: Lance copy at %s written at revision %d (%d rows)", table.name,
                 table.storage_url, table.revision, rows.num_rows)
        return True

