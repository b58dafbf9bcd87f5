"""The dashboard's routes, and their wiring to the parts they read (``Sources``): the live page,
the catalog as JSON and as Arrow IPC streams, and Server-Sent Events of the change feed. Every
route only reads the store (opened read-only); the Kafka log is only asked for its end offset,
for the projection's lag."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import html
import json
import time
import urllib.parse
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from functools import partial
from importlib import resources
from typing import Any, TypeVar

import pyarrow as pa
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

import settings
from dashboard import search_reads
from dashboard.feed import FeedHub
from dashboard.query import parse_sort, parse_where
from dashboard.recording_reads import RecordingReads
from dashboard.segment import display, segment_json
from dashboard.segment_tables import SegmentTables
from dashboard.stats import StatsProbe
from dashboard.store_reads import StoreNotOpenError, StoreReads
from projector import Change, Dataset, ProjectionReader, feed
from projector.feed import FEED_PAGE, Cursor
from projector.segment_filters import HasLayer, SegmentPage, SegmentQueryError, select_segments
from projector.views import SegmentDetail, at_point, datasets_table, layer_counts, segment_detail

ARROW_STREAM = "application/vnd.apache.arrow.stream"
RETRY_MILLIS = 1000
"""How soon a page's EventSource reconnects after the stream drops (a restarted dashboard)."""
STATS_EVERY_SECS = 2.0
MAX_LIMIT = 10_000

CHANGES_SCHEMA = pa.schema([
    ("cursor", pa.string()), ("offset", pa.int64()), ("seq", pa.int32()), ("kind", pa.string()),
    ("entry_id", pa.string()), ("entry_name", pa.string()), ("segment_id", pa.string()),
    ("layer_name", pa.string()), ("detail", pa.string()), ("committed_at", pa.timestamp("us", tz="UTC")),
])
REJECTIONS_SCHEMA = pa.schema([
    ("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()), ("size_bytes", pa.int64()),
    ("reason", pa.string()), ("event_id", pa.string()),
])


TAGS_SCHEMA = pa.schema([("name", pa.string()), ("offset", pa.int64()),
                         ("created_at", pa.timestamp("us", tz="UTC"))])


class BadParameter(HTTPException):
    def __init__(self, name: str, problem: str) -> None:
        super().__init__(400, f"{name}: {problem}")


def change_row(change: Change) -> dict[str, Any]:
    return {"cursor": f"{change.position.offset}.{change.seq}", "offset": change.position.offset,
            "seq": change.seq, "kind": str(change.kind),
            "entry_id": str(change.entry_id) if change.entry_id else None,
            "entry_name": change.entry_name, "segment_id": change.segment_id,
            "layer_name": change.layer_name, "detail": change.detail, "committed_at": change.committed_at}


def parse_cursor(name: str, value: str) -> tuple[int, int]:
    """``OFFSET`` (the changes of the records from that offset on) or ``OFFSET.SEQ`` (the changes
    after that one, as in an event's id)."""
    offset, dot, seq = value.partition(".")
    try:
        cursor = (int(offset), int(seq) if dot else -1)
    except ValueError:
        raise BadParameter(name, f"expected OFFSET or OFFSET.SEQ (integers), got {value!r}") from None
    if cursor[0] < 0 or cursor[1] < -1:
        raise BadParameter(name, f"a log offset is >= 0, got {value!r}")
    return cursor


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def _json(data: Any, status_code: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(data, default=_json_default, allow_nan=False), status_code,
                    headers=headers, media_type="application/json")


def _arrow(table: pa.Table, headers: dict[str, str] | None = None) -> Response:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return Response(sink.getvalue().to_pybytes(), headers=headers, media_type=ARROW_STREAM)


@dataclass(frozen=True)
class Rows:
    """A table route's answer with headers of its own: ``X-Total-Count`` for a page of rows."""

    table: pa.Table
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Sources:
    """What the routes read, a part per job: the store (``StoreReads``), the recordings
    (``RecordingReads``), the segment tables kept between reads (``SegmentTables``), the lag and
    rates (``StatsProbe``) and the change feed (``FeedHub``)."""

    store: StoreReads
    recordings: RecordingReads
    segment_tables: SegmentTables
    stats: StatsProbe
    feed: FeedHub
    viewer_port: int | None
    """Where Rerun's web viewer is served on the page's host, if it is."""
    catalog_url: str | None
    """The gRPC-web endpoint of Rerun's catalog protocol on the same store, if one serves it: the
    viewer opens segments through it."""

    @classmethod
    def of(cls, store: str, bootstrap_servers: str | None, kafka_config: Mapping[str, Any] | None,
           viewer_port: int | None, catalog_url: str | None = None) -> Sources:
        """The parts reading the store at ``store``, none started."""
        reads = StoreReads(store)
        feed_hub = FeedHub(reads.open_connection)
        return cls(reads, RecordingReads(), SegmentTables(_as_of), StatsProbe(
            store, reads.open_connection, feed_hub, bootstrap_servers=bootstrap_servers,
            kafka_config=kafka_config), feed_hub, viewer_port, catalog_url)

    async def start(self) -> None:
        """Open the store and start following its feed. Raises what opening the store raises."""
        await self.store.open()
        self.feed.start(asyncio.get_running_loop())

    def close(self) -> None:
        """Stop following the feed, then close the store's reads, the stats' and the recordings'
        once what each has under way is done."""
        self.feed.stop()
        self.store.close()
        self.stats.close()
        self.recordings.close()


def sources_of(app: Starlette) -> Sources:
    """The parts the routes of ``app`` (made by ``create_app``) read."""
    found = app.state.sources
    if not isinstance(found, Sources):
        raise TypeError(f"{app!r} is not an app of create_app: it has no dashboard sources")
    return found


def _sources(request: Request) -> Sources:
    return sources_of(request.app)


async def _dataset(sources: Sources, name: str) -> Dataset:
    """The live dataset ``name``; a 404 listing the datasets if there is none."""
    dataset = await sources.store.run(lambda store: store.dataset_by_name(name))
    if dataset is None:
        known = await sources.store.run(lambda store: [d.name for d in store.datasets() if not d.hidden])
        known_text = ", ".join(known) or "none yet"
        raise HTTPException(404, f"no dataset named {name!r} (datasets: {known_text})")
    return dataset


async def _segment(request: Request) -> SegmentDetail:
    """The segment of the route's ``name`` and ``segment_id``, ``as_of`` the query parameter;
    a 404 naming the dataset if it has no such segment."""
    sources = _sources(request)
    dataset = await _dataset(sources, request.path_params["name"])
    return await _segment_of(sources, dataset, request)


async def _segment_of(sources: Sources, dataset: Dataset, request: Request) -> SegmentDetail:
    """``_segment``, its dataset found already."""
    segment_id, point = request.path_params["segment_id"], request.query_params.get("as_of")
    detail = await sources.store.run(
        lambda store: segment_detail(_as_of(store, dataset.id, point), dataset.id, segment_id))
    if detail is None:
        raise HTTPException(404, f"dataset {dataset.name!r} has no segment {segment_id!r}")
    return detail


def _limit(request: Request, default: int) -> int:
    if "limit" not in request.query_params:
        return default
    limit = _integer(request, "limit")
    if not 1 <= limit <= MAX_LIMIT:
        raise BadParameter("limit", f"must be between 1 and {MAX_LIMIT}, got {limit}")
    return limit


def _offset(request: Request) -> int:
    offset = _integer(request, "offset") if "offset" in request.query_params else 0
    if offset < 0:
        raise BadParameter("offset", f"the first row is 0, got {offset}")
    return offset


T = TypeVar("T")


def _parameter(name: str, parse: Callable[[], T]) -> T:
    """``parse()``, its ``SegmentQueryError`` a 400 naming the query parameter ``name``."""
    try:
        return parse()
    except SegmentQueryError as exc:
        raise BadParameter(name, str(exc)) from None


def _known_parameters(request: Request, *names: str) -> None:
    for name in request.query_params:
        if name not in names:
            expected = ", ".join(names) or "none"
            raise BadParameter(name, f"unknown query parameter (this route takes: {expected})")


# -- tables, as JSON or Arrow -------------------------------------------------------------------

async def datasets(request: Request) -> pa.Table:
    _known_parameters(request)
    return await _sources(request).store.run(datasets_table)


def _changes(store: ProjectionReader, after: Cursor, entry_id: uuid.UUID | None, limit: int) -> list[Change]:
    """The feed's changes after ``after``, of entry ``entry_id`` only if given, ``limit`` at most."""
    return store.changes(after, entry_id=entry_id, limit=limit)


def _as_of(store: ProjectionReader, dataset_id: uuid.UUID, point: str | None) -> ProjectionReader:
    """``store`` as of the query parameter ``as_of`` (``views.at_point``); None: now."""
    if point is None:
        return store
    try:
        return at_point(store, dataset_id, point)
    except (ValueError, LookupError) as exc:
        raise BadParameter("as_of", str(exc)) from None


async def segments(request: Request) -> Rows:
    """The segment table, now or ``as_of`` a log offset or a tag: the segments meeting every
    ``where`` condition and having every ``layer``, by ``sort``, ``limit`` of them from ``offset``
    (default: all); how many matched in ``X-Total-Count`` (``dashboard.query``, ``views.select_segments``)."""
    _known_parameters(request, "as_of", "where", "layer", "sort", "offset", "limit")
    sources = _sources(request)
    dataset = await _dataset(sources, request.path_params["name"])
    point, sort = request.query_params.get("as_of"), request.query_params.get("sort")
    wheres, layers = request.query_params.getlist("where"), request.query_params.getlist("layer")
    offset = _offset(request)
    limit = _limit(request, MAX_LIMIT) if "limit" in request.query_params else None  # None: every row

    def select(store: ProjectionReader) -> SegmentPage:
        table = sources.segment_tables.table(store, dataset.id, point)
        conditions = [_parameter("where", partial(parse_where, table.schema, text)) for text in wheres]
        conditions += [HasLayer(name) for name in layers]
        key = None if sort is None else _parameter("sort", partial(parse_sort, table.schema, sort))
        # Conditions are checked above: what select_segments still refuses is the sort key's type.
        return _parameter("sort", partial(select_segments, table, tuple(conditions), sort=key,
                                          offset=offset, limit=limit))

    page = await sources.store.run(select)
    return Rows(page.rows, {"X-Total-Count": str(page.total)})


async def layers(request: Request) -> pa.Table:
    """The dataset's layer names and how many segments have each (``views.layer_counts``), now or
    ``as_of`` a point: what the dataset page's layer choice offers."""
    _known_parameters(request, "as_of")
    sources = _sources(request)
    dataset = await _dataset(sources, request.path_params["name"])
    point = request.query_params.get("as_of")
    return await sources.store.run(
        lambda store: layer_counts(sources.segment_tables.table(store, dataset.id, point)))


async def tags(request: Request) -> pa.Table:
    _known_parameters(request)
    sources = _sources(request)
    dataset = await _dataset(sources, request.path_params["name"])
    rows = await sources.store.run(lambda store: store.tags(dataset.id))
    return pa.Table.from_pylist(
        [{"name": t.name, "offset": t.offset, "created_at": t.created_at} for t in rows], schema=TAGS_SCHEMA)


async def rejections(request: Request) -> pa.Table:
    _known_parameters(request)
    rows = await _sources(request).store.run(lambda store: store.rejections())
    return pa.Table.from_pylist([
        {"topic": r.position.topic, "partition": r.position.partition, "offset": r.position.offset,
         "size_bytes": len(r.raw), "reason": r.reason, "event_id": str(r.event_id) if r.event_id else None}
        for r in rows], schema=REJECTIONS_SCHEMA)


async def changes(request: Request) -> pa.Table:
    """The feed after ``since`` (default: from the start), at most ``limit`` entries."""
    _known_parameters(request, "since", "dataset", "limit")
    sources = _sources(request)
    since = request.query_params.get("since")
    after = parse_cursor("since", since) if since is not None else (-1, 0)
    limit = _limit(request, FEED_PAGE)
    name = request.query_params.get("dataset")
    entry_id = (await _dataset(sources, name)).id if name is not None else None
    page = await sources.store.run(_changes, after, entry_id, limit)
    return pa.Table.from_pylist([change_row(c) for c in page], schema=CHANGES_SCHEMA)


async def segment(request: Request) -> Response:
    """One segment: its layers, properties, timelines and entity tree, the timelines each entity
    has data on and the one its page opens on (``dashboard.segment``)."""
    _known_parameters(request, "as_of")
    sources = _sources(request)
    dataset = await _dataset(sources, request.path_params["name"])
    detail = await _segment_of(sources, dataset, request)
    try:
        timelines: dict[str, list[str]] | None = await sources.recordings.run(
            _recording().entity_timelines, detail)
    except HTTPException:
        timelines = None  # its recordings out of reach: the routes reading them say why when asked
    return _json({**segment_json(request.path_params["name"], detail, timelines),
                  "viewer_port": sources.viewer_port, "catalog_url": sources.catalog_url,
                  "dataset_id": dataset.id.hex})


def _recording() -> Any:
    """``dashboard.recording``, loaded (with the SDK's reader) by the first route reading inside a
    recording: the dashboard starts without it."""
    from dashboard import recording

    return recording


def _index(request: Request, detail: SegmentDetail) -> str:
    """The query parameter ``index``, by default the segment's first timeline."""
    index = request.query_params.get("index") or next(iter(_recording().timelines(detail)), None)
    if index is None:
        raise BadParameter("index", f"segment {detail.segment_id!r} has no timeline")
    return index


async def series(request: Request) -> pa.Table:
    """The scalar series of the ``entity`` parameters (one or more) on timeline ``index``, as
    ``reader()`` reads them (``recording.series``)."""
    _known_parameters(request, "as_of", "index", "entity")
    detail = await _segment(request)
    return await _sources(request).recordings.run(_recording().series, detail, _index(request, detail),
                                                  request.query_params.getlist("entity"))


async def frames(request: Request) -> Response:
    """How many camera frames the image ``entity`` has on ``index``, and their times as text and
    as the plots' x values (``recording.chart_x``)."""
    _known_parameters(request, "as_of", "index", "entity")
    detail = await _segment(request)
    entity, index = _required(request, "entity"), _index(request, detail)
    table = await _sources(request).recordings.run(_recording().frames, detail, index, entity)
    field = table.schema.field(0)
    return _json({"entity": entity, "index": index, "count": table.num_rows,
                  "times": [display(field, t) for t in table.column(0).to_pylist()],
                  "x": _recording().chart_x(table.column(0)).tolist()})


async def frame(request: Request) -> Response:
    """One camera frame of the image ``entity``: number ``n`` (0 first) of ``frames``, or the one
    shown at ``at`` on ``index`` (an integer, nanoseconds for a timestamp timeline); its time in
    the header ``X-Frame-Time``."""
    _known_parameters(request, "as_of", "index", "entity", "n", "at")
    detail = await _segment(request)
    entity, index = _required(request, "entity"), _index(request, detail)
    table = await _sources(request).recordings.run(_recording().frames, detail, index, entity)
    if not table.num_rows:
        raise HTTPException(404, f"entity {entity!r} has no frame on timeline {index!r}")
    if "n" in request.query_params:
        number = _integer(request, "n")
        if not 0 <= number < table.num_rows:
            raise BadParameter("n", f"entity {entity!r} has frames 0 to {table.num_rows - 1}, got {number}")
        at = table.column(0).cast(pa.int64())[number].as_py()
    else:
        at = _integer(request, "at")
    shown, data, media_type = _recording().frame_at(table, entity, at)
    return Response(data, media_type=media_type, headers={"X-Frame-Time": str(shown)})


async def segment_rrd(request: Request) -> Response:
    """The segment's layers merged into one ``.rrd`` (``recording.merged_rrd``) for Rerun's viewer,
    which reads it from the web viewer's origin (another port): readable from any origin, as the
    rest of the dashboard is."""
    _known_parameters(request, "as_of")
    detail = await _segment(request)
    path = await _sources(request).recordings.run(_recording().merged_rrd, request.path_params["name"],
                                                  detail)
    return FileResponse(path, media_type="application/octet-stream", filename=f"{detail.segment_id}.rrd",
                        headers={"Access-Control-Allow-Origin": "*"})


def _required(request: Request, name: str) -> str:
    value = request.query_params.get(name)
    if not value:
        raise BadParameter(name, "required")
    return value


def _integer(request: Request, name: str) -> int:
    value = _required(request, name)
    try:
        return int(value)
    except ValueError:
        raise BadParameter(name, f"expected an integer, got {value!r}") from None


async def _searched(request: Request, search: Callable[[ProjectionReader, str, Dataset], Any]) -> Response:
    """``search(store, root, dataset)`` of the route's dataset (``dashboard.search_reads``), each
    hit with the URL of Rerun's web viewer opening it (``viewer``, None without a viewer): a 400
    saying why for a search that cannot be made, a 503 if the index has no complete pass yet."""
    sources = _sources(request)
    dataset = await _dataset(sources, request.path_params["name"])
    try:
        root = settings.search_indexes(sources.store.location)
        found = await sources.store.run(search, root, dataset)
        for hit in found:
            if "viewer_source" in hit:
                hit["viewer"] = _viewer_url(request, hit.pop("viewer_source"))
        return _json(found)
    except (search_reads.SearchRequestError, ValueError) as exc:
        raise HTTPException(400, str(exc)) from None
    except TimeoutError as exc:
        raise HTTPException(503, str(exc)) from None


def _viewer_url(request: Request, source: str) -> str | None:
    """Rerun's web viewer on this page's host opening ``source`` (a URL, or a path of this host)."""
    viewer_port = _sources(request).viewer_port
    if viewer_port is None:
        return None
    absolute = source if "://" in source else f"{str(request.base_url).rstrip('/')}{source}"
    return f"{request.url.scheme}://{request.url.hostname}:{viewer_port}/?url=" + \
        urllib.parse.quote(absolute, safe="")


async def search_indexes(request: Request) -> Response:
    """The dataset's search indexes: column, kind, timeline, rows and how each is searched."""
    _known_parameters(request)
    return await _searched(request, search_reads.indexes)


async def text_search(request: Request) -> Response:
    """The best matches of the words ``q`` in the full-text index of ``column`` (``limit``, default
    20), each with the URL Rerun's viewer opens it at."""
    _known_parameters(request, "column", "q", "limit")
    column, words, limit = _required(request, "column"), _required(request, "q"), _limit(request, 20)
    catalog_url = _sources(request).catalog_url
    return await _searched(request, lambda store, root, dataset: search_reads.text_search(
        store, root, dataset, column, words, limit, catalog_url))


async def nearest_frames(request: Request) -> Response:
    """The ``k`` rows (default 10) of the vector index of ``column`` nearest the segment's vector
    shown at ``at`` on timeline ``index``, each with the URL Rerun's viewer opens it at."""
    _known_parameters(request, "column", "index", "at", "k")
    column, timeline, at = _required(request, "column"), _required(request, "index"), _integer(request, "at")
    k = int(request.query_params.get("k") or 10)
    segment_id, catalog_url = request.path_params["segment_id"], _sources(request).catalog_url
    return await _searched(request, lambda store, root, dataset: search_reads.nearest_frames(
        store, root, dataset, segment_id, column, timeline, at, k, catalog_url))


def _table_routes(path: str, endpoint: Callable[[Request], Any]) -> list[Route]:
    """``path`` as JSON (a list of row objects) and ``path.arrow`` as an Arrow IPC stream, of the
    table ``endpoint`` returns (or of its ``Rows``, with their headers)."""
    async def rows(request: Request) -> Rows:
        answer = await endpoint(request)
        return answer if isinstance(answer, Rows) else Rows(answer)

    async def as_json(request: Request) -> Response:
        answer = await rows(request)
        return _json(answer.table.to_pylist(), headers=answer.headers)

    async def as_arrow(request: Request) -> Response:
        answer = await rows(request)
        return _arrow(answer.table, answer.headers)

    return [Route(path, as_json, methods=["GET"]), Route(f"{path}.arrow", as_arrow, methods=["GET"])]


# -- live ---------------------------------------------------------------------------------------

async def stats(request: Request) -> Response:
    _known_parameters(request)
    return _json(await _sources(request).stats.stats())


async def events(request: Request) -> Response:
    """The change feed as Server-Sent Events (event ``change``, id ``OFFSET.SEQ``), from
    ``Last-Event-ID`` if the browser reconnects, else from ``since`` (default: now); and a
    ``stats`` event every few seconds."""
    _known_parameters(request, "since", "dataset")
    sources = _sources(request)
    last_id = request.headers.get("last-event-id")
    since = request.query_params.get("since")
    if last_id:
        after = parse_cursor("Last-Event-ID", last_id)
    elif since is not None:
        after = parse_cursor("since", since)
    else:
        after = await sources.store.run(feed.start, None)
    name = request.query_params.get("dataset")
    entry_id = (await _dataset(sources, name)).id if name is not None else None
    queue = sources.feed.subscribe()  # before the catch-up read: nothing falls between the two

    def event(change: Change) -> ServerSentEvent:
        return ServerSentEvent(json.dumps(change_row(change), default=_json_default),
                               event="change", id=f"{change.position.offset}.{change.seq}",
                               retry=RETRY_MILLIS)

    async def stream() -> AsyncIterator[ServerSentEvent]:
        cursor = after
        try:
            while True:  # catch up from the store
                page = await sources.store.run(_changes, cursor, entry_id, FEED_PAGE)
                for change in page:
                    yield event(change)
                if page:
                    cursor = page[-1].cursor
                if len(page) < FEED_PAGE:
                    break
            next_stats = 0.0
            while True:
                if time.monotonic() >= next_stats:
                    yield ServerSentEvent(json.dumps(await sources.stats.stats(), default=_json_default),
                                          event="stats")
                    next_stats = time.monotonic() + STATS_EVERY_SECS
                try:
                    live = await asyncio.wait_for(queue.get(), next_stats - time.monotonic())
                except TimeoutError:
                    continue
                if live is None:
                    return  # too far behind: the browser reconnects and catches up from the store
                for change in live:
                    if change.cursor > cursor and (entry_id is None or change.entry_id == entry_id):
                        yield event(change)
                        cursor = change.cursor
        finally:
            sources.feed.unsubscribe(queue)

    return EventSourceResponse(stream(), ping=15, headers={"Cache-Control": "no-store"})


# -- the page -----------------------------------------------------------------------------------

@functools.cache
def _static(name: str) -> str:
    return resources.files("dashboard").joinpath(f"static/{name}").read_text()


async def index(request: Request) -> Response:
    return HTMLResponse(_static("index.html"))


def _error_page(exc: HTTPException, back: str, back_text: str) -> Response:
    """A page saying what ``exc`` says, with its status, and a link back to ``back``."""
    title = "not found" if exc.status_code == 404 else "bad request"
    link = f'<a href="{html.escape(back)}">{html.escape(back_text)}</a>'
    return HTMLResponse(
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>strata: {title}</title>'
        f'<link rel="stylesheet" href="/static/style.css"></head><body><header><h1><a href="/">strata '
        f'catalog</a></h1></header><main><section class="wide"><p class="reason">{html.escape(exc.detail)}'
        f"</p><p>{link}</p></section></main></body></html>", exc.status_code)


def _dataset_page(page: str) -> Callable[[Request], Awaitable[Response]]:
    """The route of a page of one dataset, or of one of its segments (``page`` in ``static/``):
    it answers what the page's JSON route answers for the same dataset, segment and ``as_of``
    (404 for one that does not exist, 400 for a point of history the dataset does not have), with
    a page saying so; else the page, which reads the rest from the JSON routes."""
    async def serve(request: Request) -> Response:
        sources = _sources(request)
        name, point = request.path_params["name"], request.query_params.get("as_of")
        try:
            dataset = await _dataset(sources, name)
        except HTTPException as exc:
            return _error_page(exc, "/", "All datasets")
        try:
            if "segment_id" in request.path_params:
                await _segment_of(sources, dataset, request)
            elif point is not None:
                await sources.store.run(_as_of, dataset.id, point)
        except HTTPException as exc:
            return _error_page(exc, f"/datasets/{urllib.parse.quote(name, safe='')}", f"Segments of {name}")
        return HTMLResponse(_static(page))

    return serve


async def _error(request: Request, exc: Exception) -> Response:
    """A route's ``HTTPException`` as JSON with its status; a read of the store before the app
    has opened it (``StoreNotOpenError``), a 503."""
    status, message = (exc.status_code, exc.detail) if isinstance(exc, HTTPException) else (503, str(exc))
    return _json({"error": message, "status": status}, status)


def create_app(store: str, *, bootstrap_servers: str | None = None,
               kafka_config: Mapping[str, Any] | None = None, viewer_port: int | None = None,
               catalog_url: str | None = None) -> Starlette:
    """The dashboard of the store at ``store`` (a path or a postgresql:// URL), with the lag
    measured against the Kafka cluster at ``bootstrap_servers`` if given, and segment pages
    linking to Rerun's web viewer on ``viewer_port`` of the page's host if given: opening the
    segment through ``catalog_url`` (the gRPC-web endpoint of Rerun's catalog protocol on the
    same store) if given, else its merged ``.rrd``, as it does for a segment as of a point."""
    sources = Sources.of(store, bootstrap_servers, kafka_config, viewer_port, catalog_url)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await sources.start()
        try:
            yield
        finally:
            sources.close()

    routes = [
        Route("/", index, methods=["GET"]),
        Route("/datasets/{name}", _dataset_page("index.html"), methods=["GET"]),
        Route("/datasets/{name}/segments/{segment_id}", _dataset_page("segment.html"), methods=["GET"]),
        Mount("/static", StaticFiles(packages=[("dashboard", "static")]), name="static"),
        *_table_routes("/api/datasets", datasets),
        *_table_routes("/api/datasets/{name}/segments", segments),
        Route("/api/datasets/{name}/segments/{segment_id}", segment, methods=["GET"]),
        *_table_routes("/api/datasets/{name}/segments/{segment_id}/series", series),
        Route("/api/datasets/{name}/segments/{segment_id}/frames", frames, methods=["GET"]),
        Route("/api/datasets/{name}/segments/{segment_id}/frame", frame, methods=["GET"]),
        Route("/api/datasets/{name}/segments/{segment_id}/recording.rrd", segment_rrd, methods=["GET"]),
        Route("/api/datasets/{name}/segments/{segment_id}/nearest", nearest_frames, methods=["GET"]),
        Route("/api/datasets/{name}/indexes", search_indexes, methods=["GET"]),
        Route("/api/datasets/{name}/search", text_search, methods=["GET"]),
        *_table_routes("/api/datasets/{name}/tags", tags),
        *_table_routes("/api/datasets/{name}/layers", layers),
        *_table_routes("/api/rejections", rejections),
        *_table_routes("/api/changes", changes),
        Route("/api/stats", stats, methods=["GET"]),
        Route("/events", events, methods=["GET"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan,
                    exception_handlers={HTTPException: _error, StoreNotOpenError: _error})
    app.state.sources = sources
    return app
