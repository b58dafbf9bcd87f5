"""The catalog's tables over the protocol: creating a table (``CreateTableEntry``, with a Lance
URL for its copy or without), registering a Lance table (``RegisterTable``), setting a table's
default blueprint (``UpdateTableEntry``), its schema (``GetTableSchema``), its rows
(``ScanTable``) and writes in every mode (``WriteTable``, a stream of ``DataframePart``s).

Every write is the command core's (``commands.entries``, ``commands.table_writes``), the same
commands the SDK's ``create_table``, ``register_table``, ``append``, ``overwrite`` and ``upsert``
send; ``WriteTable`` answers once the projection has the write, so that the catalog's refusal of
it (the table deleted meanwhile) is the call's error. Every read is of the projection, through
the catalog.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence

import pyarrow as pa
from google.protobuf.message import Message

from commands import Catalog, Write, entries
from commands.table_writes import table_write
from events import TableWriteMode
from projector import DatasetKind, Table, companion_id, table_rows, views
from protocol.dataframes import decode, encode, read_schema, schema_message
from protocol.descriptors import cloud, enum_value, pool
from protocol.entries import table_entry
from protocol.errors import InvalidRequestError
from protocol.ids import entry_uuid
from protocol.requests import Gathering, Request, Streaming, Unary
from recordings import NotFoundError

INSERT_MODE = "rerun.cloud.v1alpha1.TableInsertMode"
WRITES = {enum_value(INSERT_MODE, "TABLE_INSERT_MODE_UNSPECIFIED"): TableWriteMode.APPEND,
          enum_value(INSERT_MODE, "TABLE_INSERT_MODE_APPEND"): TableWriteMode.APPEND,
          enum_value(INSERT_MODE, "TABLE_INSERT_MODE_OVERWRITE"): TableWriteMode.OVERWRITE,
          enum_value(INSERT_MODE, "TABLE_INSERT_MODE_REPLACE"): TableWriteMode.UPSERT}
"""The insert modes strata takes, and the write mode each one is: Rerun's ``REPLACE`` is its
client's ``upsert``; a write that names no mode appends, as on Rerun's server."""
LANCE_TABLE = "rerun.cloud.v1alpha1.LanceTable"
ROWS_PER_PART = 16_384
"""Rows per ``DataframePart`` of a scan."""


def _lance_url(provider: Message, call: str) -> str:
    """The ``table_url`` of provider details that are a ``LanceTable``. ``InvalidRequestError``
    for other provider details (strata creates and registers Lance tables only) or no URL."""
    lance = cloud("LanceTable")
    if not provider.Is(lance.DESCRIPTOR):
        kind = provider.type_url.rpartition("/")[2] or "none"
        raise InvalidRequestError(f"{call}: strata takes the provider details of a {LANCE_TABLE} only, "
                                  f"not {kind}")
    provider.Unpack(lance)
    if not lance.table_url:
        raise InvalidRequestError(f"{call}: the {LANCE_TABLE} has no table_url")
    return str(lance.table_url)


def _name(message: Message, call: str) -> str:
    if not message.name:
        raise InvalidRequestError(f"{call}: the table needs a name")
    return str(message.name)


def create_table_entry(request: Request) -> Message:
    """``create_table(name, schema, url)``, ``url`` from a ``LanceTable`` provider (where the
    projector keeps a Lance copy of the rows). ``AlreadyExistsError`` for a taken name,
    ``ValueError`` for an invalid name or schema or a URL that holds a Lance dataset already,
    ``InvalidRequestError`` without a schema or with provider details of another kind."""
    message = request.message
    name = _name(message, "CreateTableEntry")
    if not message.HasField("schema"):
        raise InvalidRequestError(
            "missing required field: 'rerun.cloud.v1alpha1.CreateTableEntryRequest.schema'")
    schema = read_schema(message.schema)
    provider = _field(message, "provider_details")
    url = None if provider is None else _lance_url(provider, "CreateTableEntry")
    created = _made(request.catalog, entries.create_table(name, schema, url))
    return cloud("CreateTableEntryResponse", table=created)


def register_table(request: Request) -> Message:
    """``register_table(name, url)`` of the ``LanceTable`` the provider details name, read at its
    current version. ``NotFoundError`` if there is nothing at the URL, ``ValueError`` if what is
    there is not a Lance table, ``AlreadyExistsError`` for a taken name, ``InvalidRequestError``
    for provider details of another kind or a URL elsewhere than on this machine (strata registers
    ``file://`` Lance tables)."""
    message = request.message
    name = _name(message, "RegisterTable")
    if not message.HasField("provider_details"):
        raise InvalidRequestError("RegisterTable: the provider details name no table")
    url = _lance_url(message.provider_details, "RegisterTable")
    if not url.startswith("file:"):
        raise InvalidRequestError(f"RegisterTable: strata registers Lance tables at file:// URLs on its "
                                  f"own machine, not {url}")
    registered = _made(request.catalog, entries.register_table(name, url))
    return cloud("RegisterTableResponse", table_entry=registered)


def _made(catalog: Catalog, write: Write) -> Message:
    """The ``TableEntry`` of the table ``write`` creates, once the catalog has it."""
    made = catalog.command(uuid.uuid4(), write)
    return table_entry(catalog, catalog.find_table(None, made.events[0].entry_id))


def _table(request: Request, wanted: Message | None) -> Table:
    """The table of an ``EntryId`` field (``wanted``) or, without one, the one the headers name.
    ``NotFoundError`` for an unknown id or an entry that is not a table."""
    if wanted is not None:
        table_id = entry_uuid(wanted)
        try:
            return request.catalog.find_table(None, table_id)
        except NotFoundError:
            raise NotFoundError(f"Entry id '{table_id.hex}' not found: no table has it") from None
    entry = request.entry()
    if not isinstance(entry, Table):
        raise NotFoundError(f"{entry.name!r} is a dataset, not a table")
    return entry


def _field(message: Message, name: str) -> Message | None:
    return getattr(message, name) if message.HasField(name) else None


def update_table_entry(request: Request) -> Message:
    """Sets the default blueprint of the table named by ``id`` (or the headers); as in Rerun, the
    name is not checked against its blueprints. Its blueprint dataset is its own for life: a
    request naming another is an ``InvalidRequestError``, as is one on the system table, which
    has none, or one whose blueprint dataset was deleted (Rerun's "does not exist")."""
    table = _table(request, _field(request.message, "id"))
    if table.id == views.ENTRIES_TABLE.id:
        raise InvalidRequestError(f"UpdateTableEntry: {table.name!r} is the catalog's system table, "
                                  "listing its entries: it has no blueprints")
    wanted = request.message.table_details
    catalog = request.catalog
    try:
        own = catalog.find_dataset(None, companion_id(table.id, DatasetKind.BLUEPRINT)).id
    except NotFoundError:  # deleted on its own
        raise InvalidRequestError("UpdateTableEntry: table blueprint dataset does not exist: it was "
                                  "deleted, and a table's blueprint dataset is made only with it") from None
    if wanted.HasField("blueprint_dataset") and entry_uuid(wanted.blueprint_dataset) != own:
        raise InvalidRequestError("UpdateTableEntry: blueprint_dataset is the table's own, created and "
                                  "deleted with it; it cannot be another dataset")
    default = wanted.default_blueprint_segment.id if wanted.HasField("default_blueprint_segment") else None
    if default != table.default_blueprint:
        catalog.command(table.id, entries.set_default_blueprint(default, False))
    return cloud("UpdateTableEntryResponse", table=table_entry(catalog, catalog.find_table(None, table.id)))


def get_table_schema(request: Request) -> Message:
    """The table's Arrow schema with its field metadata (the index marker among them)."""
    table = _table(request, _field(request.message, "table_id"))
    return cloud("GetTableSchemaResponse", schema=schema_message(table_rows.table_schema(table.arrow_schema)))


def scan_table(request: Request) -> Iterator[Message]:
    """The table's rows, in ``DataframePart``s of at most ``ROWS_PER_PART`` rows (an empty table
    is one empty part)."""
    data = request.catalog.table_data(_table(request, _field(request.message, "table_id")))
    batches = data.combine_chunks().to_batches(max_chunksize=ROWS_PER_PART) or [
        pa.RecordBatch.from_pylist([], schema=data.schema)]
    return iter([cloud("ScanTableResponse", dataframe_part=encode(batch)) for batch in batches])


def _rows(messages: Sequence[Message]) -> tuple[TableWriteMode, list[pa.RecordBatch]]:
    """The write a stream asks for: the write mode of its one insert mode and the rows
    of every part, all read before anything is written. ``InvalidRequestError`` for a mode strata
    does not take, parts of different modes, or a part that cannot be read."""
    unknown = sorted({message.insert_mode for message in messages} - set(WRITES))
    if unknown:
        known = pool().FindEnumTypeByName(INSERT_MODE).values_by_number.get(unknown[0])
        name = str(unknown[0]) if known is None else known.name
        raise InvalidRequestError(f"WriteTable: insert mode {name} is not one strata takes: it takes "
                                  "APPEND, OVERWRITE and REPLACE (append, overwrite, upsert)")
    modes = {WRITES[message.insert_mode] for message in messages}
    if len(modes) > 1:
        raise InvalidRequestError("WriteTable: the parts of one write name different insert modes; send "
                                  "each mode's rows in a call of its own")
    tables = []
    for message in messages:
        if not message.HasField("dataframe_part"):
            raise InvalidRequestError("WriteTable: a part without a dataframe_part")
        tables.append(decode(message.dataframe_part))
    batches = [batch for table in tables for batch in table.to_batches()]
    # Rows of none still overwrite: an empty batch, as Rerun's client sends one.
    return modes.pop(), batches or [pa.RecordBatch.from_pylist([], schema=tables[0].schema)]


def write_table(request: Request, messages: Sequence[Message]) -> Message:
    """Writes the stream's rows to the table the headers name in its mode (append, overwrite or
    upsert, ``commands.table_writes``), and answers once the projection has the write. Raises
    what the write raises before sending anything (``ValueError`` for rows that do not fit the
    table's schema, an upsert without an index column, a registered or system table), and the
    catalog's refusal of the write after Kafka had it as the error of its kind
    (``NotFoundError`` for a table deleted meanwhile). A stream of no parts writes nothing."""
    table = _table(request, None)
    if not messages:
        return cloud("WriteTableResponse")
    mode, batches = _rows(messages)
    write = table_write(table, batches, {}, mode)
    if write is None:
        return cloud("WriteTableResponse")
    request.catalog.command(table.id, write)
    return cloud("WriteTableResponse")


UNARY: dict[str, Unary] = {
    "CreateTableEntry": create_table_entry,
    "RegisterTable": register_table,
    "UpdateTableEntry": update_table_entry,
    "GetTableSchema": get_table_schema,
}
"""The tables' RPCs with one request and one response, by name."""
STREAMING: dict[str, Streaming] = {"ScanTable": scan_table}
"""The tables' RPCs with a stream of responses, by name."""
GATHERING: dict[str, Gathering] = {"WriteTable": write_table}
"""The tables' RPCs with a stream of requests (read whole before the RPC runs), by name."""
