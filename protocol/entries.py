"""The catalog's entries over the protocol: ``Version``, ``WhoAmI``, ``FindEntries``, creating,
reading, updating and deleting dataset entries, renaming and deleting any entry, and reading a
table entry's details (``entries()`` reads them for every table it lists).

Every write is the command core's (``commands.entries``: creating, renaming and deleting an
entry, the default blueprints), the same command the SDK sends, waited for until the projection
has it; every read is of the projection, through the catalog.
"""

from __future__ import annotations

import importlib.metadata
import uuid

from google.protobuf.message import Message

from commands import Catalog, entries, reads
from projector import Dataset, DatasetKind, EntryKind, Table, companion_id, views
from protocol.descriptors import cloud, common, enum_value, message_class
from protocol.errors import InvalidRequestError
from protocol.ids import entry_id, entry_uuid, timestamp
from protocol.requests import Request, Unary
from recordings import NotFoundError

CLOUD_ENTRY_KIND = "rerun.cloud.v1alpha1.EntryKind"
DATASET_KINDS = {DatasetKind.DATASET: ("DATASET_KIND_RECORDING", "STORE_KIND_RECORDING"),
                 DatasetKind.BLUEPRINT: ("DATASET_KIND_BLUEPRINT", "STORE_KIND_BLUEPRINT"),
                 DatasetKind.ASSET: ("DATASET_KIND_ASSET", "STORE_KIND_RECORDING")}
ENTRY_DATASET_KINDS = {EntryKind.DATASET: DatasetKind.DATASET,
                       EntryKind.BLUEPRINT_DATASET: DatasetKind.BLUEPRINT,
                       EntryKind.ASSET_DATASET: DatasetKind.ASSET}
SYSTEM_TABLE_ENTRIES = "SYSTEM_TABLE_KIND_ENTRIES"
CAPABILITIES = ["dataset:find_chunks"]
"""What ``WhoAmI`` advertises: ``FindChunks`` is served (``protocol.chunks``), so Rerun's client
asks it rather than ``QueryDataset``."""
UNREADABLE_NAME_CHARACTERS = frozenset("(){}")
"""Characters of strata's entry names that rerun-sdk 0.41's client refuses in a name: it fails a
whole ``FindEntries`` answer that holds one, so a listing leaves such entries out."""

Entry = Dataset | Table


def strata_version() -> str:
    """``strata/<version>``, as strata's client's ``version_info()`` names it."""
    try:
        return f"strata/{importlib.metadata.version('strata')}"
    except importlib.metadata.PackageNotFoundError:  # a source tree, not installed
        return "strata/unknown"


def version(request: Request) -> Message:
    """strata's version; no optional Rerun server feature."""
    return cloud("VersionResponse", version=strata_version())


def who_am_i(request: Request) -> Message:
    """Whoever is admitted may read; writing needs a catalog with a Kafka cluster, and a token
    that may write if the endpoint asks for tokens. ``CAPABILITIES`` are advertised."""
    can_write = request.may_write and request.catalog.bootstrap_servers is not None
    return cloud("WhoAmIResponse", can_read=True, can_write=can_write,
                 capabilities=cloud("ServerCapabilities", capabilities=CAPABILITIES))


def entry_kind(entry: Entry) -> EntryKind:
    """What an entry is: a dataset's kind, or a table."""
    return entry.entry_kind if isinstance(entry, Dataset) else EntryKind.TABLE


def details(entry: Entry) -> Message:
    """The ``EntryDetails`` of an entry."""
    return cloud("EntryDetails", id=entry_id(entry.id), name=entry.name, entry_kind=int(entry_kind(entry)),
                 created_at=timestamp(entry.created_at), updated_at=timestamp(entry.updated_at))


def find_entries(request: Request) -> Message:
    """Entries by id, name and kinds (every kind when none is asked for), hidden ones too, as
    Rerun's client filters them itself; a listing leaves out the entries whose names Rerun's
    client cannot read (``UNREADABLE_NAME_CHARACTERS``), which strata's client lists.
    ``InvalidRequestError`` for ``ENTRY_KIND_UNSPECIFIED``."""
    wanted = request.message.filter
    kinds = set(wanted.entry_kinds)
    if not kinds and wanted.HasField("entry_kind"):
        kinds = {wanted.entry_kind}
    if enum_value(CLOUD_ENTRY_KIND, "ENTRY_KIND_UNSPECIFIED") in kinds:
        raise InvalidRequestError("find_entries: entry_kinds must not contain ENTRY_KIND_UNSPECIFIED")
    catalog = request.catalog
    found: list[Entry] = []
    if wanted.HasField("id"):
        found = _by_id(catalog, entry_uuid(wanted.id))
    else:
        if not kinds or kinds & {int(kind) for kind in ENTRY_DATASET_KINDS}:
            found += catalog.wait_for_store().datasets()
        if not kinds or int(EntryKind.TABLE) in kinds:
            found += catalog.tables(include_hidden=True)
    listed = [details(entry) for entry in found if (not kinds or int(entry_kind(entry)) in kinds)
              and (wanted.HasField("id") or not UNREADABLE_NAME_CHARACTERS.intersection(entry.name))]
    if wanted.HasField("name"):
        listed = [entry for entry in listed if entry.name == wanted.name]
    return cloud("FindEntriesResponse", entries=listed)


def _by_id(catalog: Catalog, wanted: uuid.UUID) -> list[Entry]:
    """The entry of an id, in a list: empty for an unknown one."""
    try:
        return [catalog.find_dataset(None, wanted)]
    except NotFoundError:
        pass
    try:
        return [catalog.find_table(None, wanted)]
    except NotFoundError:
        return []


def _companion(catalog: Catalog, dataset: Dataset, kind: DatasetKind) -> Message | None:
    """The ``EntryId`` of a dataset's hidden dataset of ``kind``, None if it has none (a hidden
    dataset, or one whose hidden dataset was deleted on its own)."""
    if dataset.hidden:
        return None
    try:
        companion = catalog.find_dataset(None, companion_id(dataset.id, kind))
    except NotFoundError:
        return None
    return entry_id(companion.id)


def dataset_entry(catalog: Catalog, dataset: Dataset) -> Message:
    """Rerun's ``DatasetEntry`` of a strata dataset: its details, handle and hidden datasets. The
    handle's URL (which Rerun's client requires) is ``strata://datasets/<id>``, as a table
    without a Lance copy is ``strata://tables/<id>``: the dataset lives in strata's log."""
    dataset_kind, store_kind = DATASET_KINDS[dataset.kind]
    handle = common("DatasetHandle", entry_id=entry_id(dataset.id), dataset_url=f"strata://datasets/{dataset.id}",
                    dataset_kind=enum_value("rerun.common.v1alpha1.DatasetKind", dataset_kind),
                    store_kind=enum_value("rerun.common.v1alpha1.StoreKind", store_kind))
    own = cloud("DatasetDetails")
    for field, kind in (("blueprint_dataset", DatasetKind.BLUEPRINT), ("asset_dataset", DatasetKind.ASSET)):
        companion = _companion(catalog, dataset, kind)
        if companion is not None:
            getattr(own, field).CopyFrom(companion)
    defaults = (("default_blueprint_segment", dataset.default_blueprint),
                ("default_segment_table_blueprint_segment", dataset.default_segment_table_blueprint))
    for field, name in defaults:
        if name is not None:
            getattr(own, field).CopyFrom(common("SegmentId", id=name))
    return cloud("DatasetEntry", details=details(dataset), dataset_handle=handle, dataset_details=own)


def create_dataset_entry(request: Request) -> Message:
    """``create_dataset(name)``: ``AlreadyExistsError`` for a taken name, ``ValueError`` for an
    invalid one, ``InvalidRequestError`` without a name or with an id (strata chooses ids)."""
    message = request.message
    if not message.HasField("name"):
        raise InvalidRequestError(
            "missing required field: 'rerun.cloud.v1alpha1.CreateDatasetEntryRequest.name'")
    if message.HasField("id"):
        raise InvalidRequestError("CreateDatasetEntry: strata chooses entry ids; send the name alone")
    catalog = request.catalog
    created = catalog.command(uuid.uuid4(), entries.create_dataset(message.name))
    dataset = catalog.find_dataset(None, created.events[0].entry_id)
    return cloud("CreateDatasetEntryResponse", dataset=dataset_entry(catalog, dataset))


def read_dataset_entry(request: Request) -> Message:
    """The dataset the headers name: ``NotFoundError`` for an unknown id."""
    return cloud("ReadDatasetEntryResponse", dataset=dataset_entry(request.catalog, request.dataset()))


def update_dataset_entry(request: Request) -> Message:
    """Sets the default blueprints of the dataset the headers name. Its blueprint and asset
    datasets are its own for life: a request naming others, or its own deleted ones (Rerun's
    "does not exist"), is an ``InvalidRequestError``."""
    catalog = request.catalog
    dataset = request.dataset()
    wanted = request.message.dataset_details
    for field, kind in (("blueprint_dataset", DatasetKind.BLUEPRINT), ("asset_dataset", DatasetKind.ASSET)):
        if not wanted.HasField(field) or getattr(wanted, field) == _companion(catalog, dataset, kind):
            continue
        if getattr(wanted, field) == entry_id(companion_id(dataset.id, kind)):  # its own, deleted
            what = "blueprint" if kind is DatasetKind.BLUEPRINT else "asset"
            raise InvalidRequestError(f"UpdateDatasetEntry: dataset {what} dataset does not exist: it "
                                      "was deleted, and a dataset's hidden datasets are made only with it")
        raise InvalidRequestError(f"UpdateDatasetEntry: {field} is the dataset's own, created and "
                                  "deleted with it; it cannot be another dataset")
    default = wanted.default_blueprint_segment.id if wanted.HasField("default_blueprint_segment") else None
    if default != dataset.default_blueprint:
        catalog.command(dataset.id, entries.set_default_blueprint(default, False))
    table = (wanted.default_segment_table_blueprint_segment.id
             if wanted.HasField("default_segment_table_blueprint_segment") else None)
    if table != dataset.default_segment_table_blueprint:
        catalog.command(dataset.id, entries.set_default_blueprint(table, True))
    updated = catalog.find_dataset(None, dataset.id)
    return cloud("UpdateDatasetEntryResponse", dataset=dataset_entry(catalog, updated))


def table_entry(catalog: Catalog, table: Table) -> Message:
    """Rerun's ``TableEntry`` of a strata table: the system table ``__entries``, or a table with
    a Lance URL (a registered table's, a created table's copy) or strata's own ``strata://``, its
    blueprint dataset and default blueprint."""
    provider = message_class("google.protobuf.Any")()
    own = cloud("TableDetails")
    if table.id == views.ENTRIES_TABLE.id:
        system = enum_value("rerun.cloud.v1alpha1.SystemTableKind", SYSTEM_TABLE_ENTRIES)
        provider.Pack(cloud("SystemTable", kind=system), type_url_prefix="/")
    else:
        provider.Pack(cloud("LanceTable", table_url=reads.table_url(table)), type_url_prefix="/")
        blueprints = catalog.find_dataset(None, companion_id(table.id, DatasetKind.BLUEPRINT))
        own.blueprint_dataset.CopyFrom(entry_id(blueprints.id))
        if table.default_blueprint is not None:
            own.default_blueprint_segment.CopyFrom(common("SegmentId", id=table.default_blueprint))
    return cloud("TableEntry", details=details(table), provider_details=provider, table_details=own)


def read_table_entry(request: Request) -> Message:
    """The table the headers name: ``NotFoundError`` for an unknown id."""
    entry = request.entry()
    if not isinstance(entry, Table):
        raise NotFoundError(f"{entry.name!r} is a dataset, not a table")
    return cloud("ReadTableEntryResponse", table=table_entry(request.catalog, entry))


def delete_entry(request: Request) -> Message:
    """Deletes the dataset or table the headers name (a dataset with its hidden datasets):
    ``NotFoundError`` if there is none, or it is deleted already."""
    entry = request.entry()
    write = entries.delete_dataset(entry.name) if isinstance(entry, Dataset) else entries.delete_table(entry)
    request.catalog.command(entry.id, write)
    return cloud("DeleteEntryResponse")


def update_entry(request: Request) -> Message:
    """Renames the dataset or table the headers name: ``AlreadyExistsError`` for a taken name,
    ``ValueError`` for an invalid one."""
    if not request.message.HasField("entry_details_update"):
        raise InvalidRequestError(
            "missing required field: 'rerun.cloud.v1alpha1.UpdateEntryRequest.entry_details_update'")
    entry = request.entry()
    update = request.message.entry_details_update
    if update.HasField("name") and update.name != entry.name:
        rename = (entries.rename_dataset(update.name) if isinstance(entry, Dataset)
                  else entries.rename_table(entry, update.name))
        request.catalog.command(entry.id, rename)
        entry = (request.catalog.find_dataset(None, entry.id) if isinstance(entry, Dataset)
                 else request.catalog.find_table(None, entry.id))
    return cloud("UpdateEntryResponse", entry_details=details(entry))


HANDLERS: dict[str, Unary] = {
    "Version": version,
    "WhoAmI": who_am_i,
    "FindEntries": find_entries,
    "CreateDatasetEntry": create_dataset_entry,
    "ReadDatasetEntry": read_dataset_entry,
    "UpdateDatasetEntry": update_dataset_entry,
    "ReadTableEntry": read_table_entry,
    "DeleteEntry": delete_entry,
    "UpdateEntry": update_entry,
}
"""The entries' RPCs, by name."""
