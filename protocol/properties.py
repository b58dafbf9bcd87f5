"""Segment properties over the protocol: ``GetSegmentProperties``, ``SetSegmentProperties`` and
``DeleteSegmentProperties``, with Rerun's revisions. strata keeps one such property, the scope of
an asset, which Rerun's client writes with ``register_asset()`` and edits by reading it, then
writing it at the revision it read (``add_segments_to_asset``): each call is the command core's
(``commands.assets``), as the SDK's ``get_segment_properties``, ``set_segment_properties`` and
``delete_segment_properties`` are, on the dataset the headers name, so a write is a
``ScopeAsset`` command in the log, checked against the revision by the fold."""

from __future__ import annotations

from collections.abc import Iterator

from google.protobuf.message import Message

from commands import DEFAULT_TIMEOUT_SECS, assets, reads
from protocol.dataframes import decode, encode
from protocol.descriptors import cloud, common
from protocol.errors import InvalidRequestError
from protocol.requests import Request, Streaming, Unary


def get_segment_properties(request: Request) -> Iterator[Message]:
    """The properties of each segment asked for (of every asset without any asked) that has
    some, with their revisions; a segment without properties is left out."""
    catalog, dataset = request.catalog, request.dataset()
    asked = [segment.id for segment in request.message.segment_ids] or reads.segment_ids(catalog, dataset.id)
    found = []
    for segment_id in asked:
        stored = assets.get_segment_properties(catalog, dataset, segment_id)
        if stored is not None:
            properties, revision = stored
            found.append(cloud("SegmentProperties", segment_id=common("SegmentId", id=segment_id),
                               properties=encode(properties), revision=revision))
    yield cloud("GetSegmentPropertiesResponse", segments=found)


def set_segment_properties(request: Request) -> Message:
    """Replace a segment's properties, at the request's revision if it names one; their new
    revision. ``InvalidArgument`` for a request without a segment or properties, or another
    property than an asset's scope; ``FailedPrecondition`` if the revision is stale."""
    message = request.message
    if not message.segment_id.id or not message.HasField("properties"):
        raise InvalidRequestError("SetSegmentProperties needs a segment_id and properties")
    expected = message.expected_revision if message.HasField("expected_revision") else None
    revision = assets.set_segment_properties(request.catalog, request.dataset(), message.segment_id.id,
                                             decode(message.properties), expected, DEFAULT_TIMEOUT_SECS)
    return cloud("SetSegmentPropertiesResponse", revision=revision)


def delete_segment_properties(request: Request) -> Message:
    """Delete the properties of each segment named, each at its revision if it names one; a
    segment without properties is a no-op. ``FailedPrecondition`` for a stale revision."""
    deletions = request.message.segments
    if any(not deletion.segment_id.id for deletion in deletions):
        raise InvalidRequestError("DeleteSegmentProperties: each deletion names a segment_id")
    expected = {d.segment_id.id: d.expected_revision for d in deletions if d.HasField("expected_revision")}
    assets.delete_segment_properties(request.catalog, request.dataset(), [d.segment_id.id for d in deletions],
                                     expected, DEFAULT_TIMEOUT_SECS)
    return cloud("DeleteSegmentPropertiesResponse")


UNARY: dict[str, Unary] = {
    "SetSegmentProperties": set_segment_properties,
    "DeleteSegmentProperties": delete_segment_properties,
}
STREAMING: dict[str, Streaming] = {"GetSegmentProperties": get_segment_properties}
