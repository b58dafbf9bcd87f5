"""The event contract of strata: typed command events, their Avro schemas and the wire codec.

Owns: ``schemas/*.avsc`` (every version ever written), the frozen event types, topic routing and
the single-object-encoding codec. Imports no Kafka, Spark or store code.
"""

from events.codec import SCHEMA_VERSION, DecodeError, decode, encode
from events.errors import MissingExtraError, StrataError, import_extra
from events.model import (
    AssetMode,
    AssetScopeEdit,
    Command,
    CreateDataset,
    CreateTable,
    CreateTag,
    DefineSchema,
    DeleteDataset,
    DeleteTable,
    DeleteTag,
    Event,
    IndexKind,
    IndexRange,
    OnDuplicate,
    RegisterBlueprint,
    RegisterLayer,
    RegisterTable,
    RenameDataset,
    RenameTable,
    ScopeAsset,
    SetDefaultBlueprint,
    TableWriteMode,
    UnregisterLayers,
    WriteTable,
)
from events.topics import CATALOG_TOPIC, TOPICS, topic_for

__all__ = [
    "CATALOG_TOPIC",
    "SCHEMA_VERSION",
    "TOPICS",
    "AssetMode",
    "AssetScopeEdit",
    "Command",
    "CreateDataset",
    "CreateTable",
    "CreateTag",
    "DecodeError",
    "DefineSchema",
    "DeleteDataset",
    "DeleteTable",
    "DeleteTag",
    "Event",
    "IndexKind",
    "IndexRange",
    "MissingExtraError",
    "OnDuplicate",
    "RegisterBlueprint",
    "RegisterLayer",
    "RegisterTable",
    "RenameDataset",
    "RenameTable",
    "ScopeAsset",
    "SetDefaultBlueprint",
    "StrataError",
    "TableWriteMode",
    "UnregisterLayers",
    "WriteTable",
    "decode",
    "encode",
    "import_extra",
    "topic_for",
]
