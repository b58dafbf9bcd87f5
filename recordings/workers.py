"""A client's worker processes: bulk reads of recordings on every core.

rerun-sdk's engine holds the GIL while it reads a recording, so the threads of one interpreter
read one segment at a time. A client therefore reads segments and registration files in worker
processes of its own: ``python -m recordings.worker`` (never a new import of the caller's ``__main__``,
so notebooks, scripts without a main guard and PyTorch ``DataLoader`` workers all work), started on
the first call with more than one segment or file to read, reused by every later call of the
client, and stopped when the client closes, is garbage-collected, or the interpreter exits.

A task is a picklable function and its arguments, run in a worker exactly as it would run in the
caller. Replies cross back pickled over a socket pair, except large Arrow buffers (a segment's
table as an IPC file): a worker writes those to a file in shared memory (``/dev/shm``), which the
caller maps without copying and unlinks at once (measured in ``bench/transport.py``). While the
workers start (about a second, mostly rerun-sdk's import), the caller runs the first tasks itself,
so a client's first read is not slower than a read in process.

A worker that dies is replaced and its task retried once; if the task's worker dies again, the
task fails with ``WorkerError`` naming what it was doing, with the last lines the worker wrote.
A forked child of the caller (a ``DataLoader`` worker) runs its tasks in process: its parent's
workers are not its own, and the loader already spreads the work.
"""

from __future__ import annotations

import atexit
import collections
import concurrent.futures
import functools
import io
import itertools
import os
import pickle
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
import warnings
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pyarrow as pa

from recordings.errors import WorkerError

DEPTH = 2
"""Tasks sent to a worker at once: the one it does, and the next."""
INLINE_BYTES = 512 << 10
"""Arrow buffers smaller than this cross in the reply itself; larger ones through a file."""
SHARED_MEMORY = Path("/dev/shm")
STOP_SECS = 5.0
"""How long a stopping worker is given to exit after SIGTERM before it is killed."""
_STDERR_LINES = 20


def _threads() -> concurrent.futures.ThreadPoolExecutor:
    return concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="strata-read")


_in_process = _threads()
"""Tasks not spread over workers run on these threads: pyarrow calls a reader's file system from
DataFusion's tokio threads, where rerun's engine (a tokio runtime of its own) must not block. A
forked child gets threads of its own (its parent's do not exist in it)."""


def _after_fork_in_child() -> None:
    global _in_process
    _in_process = _threads()


os.register_at_fork(after_in_child=_after_fork_in_child)


@dataclass
class _Task:
    what: str
    """What the task does, for errors: ``segment "ep_1"``, ``file:///data/ep_1.rrd``."""
    function: Callable[..., Any]
    args: tuple[Any, ...]
    future: concurrent.futures.Future[Any]
    attempts: int = 0
    """Workers that died doing it."""

    def run(self) -> None:
        """Run it here, on the caller's thread."""
        try:
            self.future.set_result(self.function(*self.args))
        except BaseException as exc:
            self.future.set_exception(exc)


class _Pickler(pickle.Pickler):
    """Pickles Arrow objects as Arrow IPC: pyarrow's own pickling rebuilds nested types from
    their factories and loses the nullability of their child fields (a ``fixed_size_list<item:
    float not null>`` comes back as ``fixed_size_list<item: float>``), which changes a schema's
    digest. Used for every task and reply, never for the caller's own pickling."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, pa.Schema):
            return _schema, (obj.serialize().to_pybytes(),)
        if isinstance(obj, pa.Field):
            return _field, (pa.schema([obj]).serialize().to_pybytes(),)
        if isinstance(obj, pa.DataType):
            return _type, (pa.schema([pa.field("type", obj)]).serialize().to_pybytes(),)
        if isinstance(obj, (pa.Table, pa.RecordBatch)):
            return _table, (_ipc_stream(obj), isinstance(obj, pa.RecordBatch))
        if isinstance(obj, (pa.Array, pa.ChunkedArray)):
            return _array, (_ipc_stream(pa.table({"array": obj})), isinstance(obj, pa.Array))
        return NotImplemented


def _dumps(obj: Any) -> bytes:
    file = io.BytesIO()
    _Pickler(file, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return file.getvalue()


def _ipc_stream(table: pa.Table | pa.RecordBatch) -> pa.Buffer:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write(table)
    return sink.getvalue()


@functools.lru_cache(maxsize=64)
def _schema(message: bytes) -> pa.Schema:
    """A schema from its IPC message; the tasks of one scan all carry the same one."""
    return pa.ipc.read_schema(pa.py_buffer(message))


def _field(message: bytes) -> pa.Field:
    return _schema(message).field(0)


def _type(message: bytes) -> pa.DataType:
    return _schema(message).field(0).type


def _table(stream: pa.Buffer, batch: bool) -> pa.Table | pa.RecordBatch:
    table = pa.ipc.open_stream(stream).read_all()
    if not batch:
        return table
    batches = table.combine_chunks().to_batches()
    return batches[0] if batches else pa.RecordBatch.from_pylist([], schema=table.schema)


def _array(stream: pa.Buffer, contiguous: bool) -> pa.Array | pa.ChunkedArray:
    column = pa.ipc.open_stream(stream).read_all().column(0)
    return column.combine_chunks() if contiguous else column


class _WorkerDied(Exception):
    """The worker process ended while it had a task (or before it was ready)."""


class WorkerPool:
    """Up to ``size`` worker processes, started on the first ``submit`` that spreads work."""

    def __init__(self, size: int) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"workers={size!r}: give a number of worker processes, at least 0 "
                             "(0 reads in the client's own process)")
        self.size = size
        self._owner = os.getpid()
        self._lock = threading.Lock()
        self._tasks: queue.SimpleQueue[_Task | None] = queue.SimpleQueue()
        self._ready = threading.Event()
        """Set once a worker serves tasks: from then on the caller runs none of them itself."""
        self._processes: dict[int, subprocess.Popen[bytes]] = {}
        """The workers' processes by slot, from their start (so that ``close`` stops them)."""
        self._serving: dict[int, int] = {}
        """The pids of the workers that serve tasks, by slot."""
        self._threads: list[threading.Thread] = []
        self._lanes = size
        """Worker slots still trying to serve."""
        self._directory: Path | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"WorkerPool(size={self.size}, serving={len(self._serving)})"

    def spreads(self, count: int) -> bool:
        """Whether a call of ``count`` tasks goes to the workers: this pool has some, it belongs
        to this process, and there is more than one task (one gains nothing from a worker)."""
        return self.size > 0 and count > 1 and not self._closed and os.getpid() == self._owner

    def submit(self, what: str, function: Callable[..., Any], *args: Any,
               spread: bool = True) -> concurrent.futures.Future[Any]:
        """``function(*args)``'s future: run in a worker if ``spread`` (see ``spreads``), else on
        one of the caller's threads. ``what`` names the work in a ``WorkerError``."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        task = _Task(what, function, args, future)
        if not spread or not self.spreads(2):
            _in_process.submit(_run_claimed, task)
            return future
        self.start()
        self._tasks.put(task)
        return future

    def start(self) -> None:
        """Start the workers now instead of at the first ``submit`` that spreads work (they
        start in the background: this returns at once). Nothing for a pool of none, a closed
        one, or one started already."""
        with self._lock:
            if self.spreads(2) and self._directory is None:
                self._start()

    @property
    def pids(self) -> list[int]:
        """The process ids of the workers serving tasks."""
        return [self._serving[slot] for slot in sorted(self._serving)]

    def close(self) -> None:
        """Stop the workers at once (SIGTERM: they hold nothing to save) and fail the tasks not
        yet done. Idempotent; a forked child leaves its parent's workers alone."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            started = self._directory is not None
        if not started or os.getpid() != self._owner:
            return
        while True:
            try:
                task = self._tasks.get_nowait()
            except queue.Empty:
                break
            if task is not None:
                task.future.cancel()
        for _ in range(self.size + 1):
            self._tasks.put(None)
        for process in list(self._processes.values()):
            _stop(process)
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(STOP_SECS)
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)

    # -- the caller's side --------------------------------------------------------------------

    def _start(self) -> None:
        self._directory = Path(tempfile.mkdtemp(prefix="strata-workers-", dir=_transfer_directory()))
        self._threads = [threading.Thread(target=self._serve, args=(slot,), daemon=True,
                                          name=f"strata-worker-{slot}") for slot in range(self.size)]
        self._threads.append(threading.Thread(target=self._serve_while_starting, daemon=True,
                                              name="strata-worker-caller"))
        for thread in self._threads:
            thread.start()
        _POOLS.add(self)

    def _serve_while_starting(self) -> None:
        """Run tasks in the caller until a worker is ready."""
        while not self._ready.is_set():
            try:
                task = self._tasks.get(timeout=0.02)
            except queue.Empty:
                continue
            if task is None:
                return
            if self._ready.is_set():  # a worker became ready meanwhile: the task is its
                self._tasks.put(task)
                return
            if task.future.set_running_or_notify_cancel():
                task.run()

    def _serve(self, slot: int) -> None:
        """One worker's thread in the caller: start the worker, then keep ``DEPTH`` tasks sent to
        it (the next one waits in its socket while it does one, so it never idles between two),
        replacing it when it dies. The thread that starts a worker is the one that stops it."""
        worker: _Worker | None = None
        unsent: collections.deque[_Task] = collections.deque()
        sent: collections.deque[_Task] = collections.deque()
        stopping = False
        try:
            while True:
                if worker is None:
                    worker = self._spawn(slot)
                    if worker is None and self._closed:
                        _fail([*sent, *unsent], "the client was closed")
                        return
                    if worker is None:
                        self._lane_gone([*sent, *unsent])
                        return
                while not stopping and len(sent) + len(unsent) < DEPTH:
                    try:
                        task = self._tasks.get(block=not (sent or unsent))
                    except queue.Empty:
                        break
                    if task is None:
                        stopping = True
                    elif task.future.set_running_or_notify_cancel():
                        unsent.append(task)
                if not sent and not unsent:
                    if stopping:
                        return
                    continue
                try:
                    while unsent:
                        if worker.send(unsent[0]):
                            sent.append(unsent.popleft())
                        else:  # its arguments did not pickle: its future has the error
                            unsent.popleft()
                    if sent:
                        worker.receive(sent[0])
                        sent.popleft()
                except _WorkerDied as died:
                    worker.close()
                    worker = None
                    self._serving.pop(slot, None)
                    if self._closed:
                        _fail([*sent, *unsent], "the client was closed")
                        return
                    culprit = sent[0] if sent else None  # the task it was doing, if any
                    unsent = sent + unsent  # sent again to the next worker, in order
                    sent = collections.deque()
                    if culprit is not None:
                        culprit.attempts += 1
                    if culprit is not None and culprit.attempts == 2:
                        unsent.popleft()
                        culprit.future.set_exception(WorkerError(
                            f"{culprit.what}: strata's worker process died while reading it, twice "
                            f"({died}); try it with workers=0 to see rerun-sdk's own error"))
        finally:
            if worker is not None:
                worker.close()
            self._processes.pop(slot, None)
            self._serving.pop(slot, None)

    def _lane_gone(self, claimed: list[_Task]) -> None:
        """A worker's slot gave up (no worker could be started in it): the tasks it held run in
        the caller, but one whose worker died doing it fails (it might take the caller down too);
        when no slot is left, the caller runs the next tasks too, so that none waits forever."""
        for task in claimed:
            if task.attempts:
                _fail([task], "its worker process died while reading it, and no new one could be started")
            else:
                _in_process.submit(task.run)
        with self._lock:
            self._lanes -= 1
            if self._lanes or self._closed:
                return
            self._ready.clear()
        thread = threading.Thread(target=self._serve_while_starting, daemon=True,
                                  name="strata-worker-caller")
        self._threads.append(thread)
        thread.start()

    def _spawn(self, slot: int) -> _Worker | None:
        """A ready worker in ``slot`` (a second try if the first dies while it starts); None if
        the pool is closing, or (after a warning) if none can be started: the caller then keeps
        running the tasks itself."""
        assert self._directory is not None
        self._serving.pop(slot, None)
        for attempt in (1, 2):
            if self._closed:
                return None
            try:
                worker = _Worker(self._directory, slot, self._processes)
            except _WorkerDied as died:
                if attempt == 2 and not self._closed:
                    warnings.warn(f"strata could not start a worker process ({died}); reading in the "
                                  "client's own process instead (workers=0 does that without trying)",
                                  RuntimeWarning, stacklevel=1)
                continue
            self._serving[slot] = worker.process.pid
            self._ready.set()
            return worker
        return None


def _fail(tasks: list[_Task], why: str) -> None:
    for task in tasks:
        task.future.set_exception(WorkerError(f"{task.what}: {why}"))


def _run_claimed(task: _Task) -> None:
    if task.future.set_running_or_notify_cancel():
        task.run()


class _Worker:
    """One worker process and the caller's end of its socket pair."""

    def __init__(self, directory: Path, slot: int, registry: dict[int, subprocess.Popen[bytes]]) -> None:
        self.directory = directory
        self.log = directory / f"worker-{slot}.stderr"
        ours, theirs = socket.socketpair()
        package_root = str(Path(__file__).resolve().parents[1])
        path = os.environ.get("PYTHONPATH")
        environment = {**os.environ, "PYTHONPATH": package_root + (os.pathsep + path if path else "")}
        with ours, theirs, self.log.open("wb") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "recordings.worker", str(theirs.fileno()), str(directory)],
                pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=stderr, env=environment, start_new_session=True)
            registry[slot] = self.process
            self.connection = Connection(os.dup(ours.fileno()))
        try:
            self._receive()  # ("ready", its pid)
        except _WorkerDied:
            self.close()
            raise

    def send(self, task: _Task) -> bool:
        """Send ``task``; False (its future failed) if its arguments do not pickle."""
        try:
            request = _dumps((task.function, task.args))
        except Exception as exc:
            task.future.set_exception(exc)
            return False
        try:
            self.connection.send_bytes(request)
        except OSError:
            raise self._died() from None
        return True

    def receive(self, task: _Task) -> None:
        """The worker's reply to ``task`` (the oldest it was sent) into its future."""
        data = self._receive()
        try:
            kind, *reply = pickle.loads(data)
            if kind == "file":
                with pa.memory_map(reply[0]) as mapped:
                    buffer = mapped.read_buffer()  # stays mapped while the buffer lives
                os.unlink(reply[0])
                reply = [buffer]
        except Exception as exc:  # a reply that cannot be read fails its task, not the pool
            task.future.set_exception(WorkerError(f"{task.what}: its reply could not be read: {exc}"))
            return
        if kind == "error":
            error, text = reply
            error.__cause__ = _RemoteTraceback(text)
            task.future.set_exception(error)
        else:
            task.future.set_result(reply[0])

    def _receive(self) -> bytes:
        try:
            return self.connection.recv_bytes()
        except (EOFError, OSError):
            raise self._died() from None

    def _died(self) -> _WorkerDied:
        """What is known of the worker's end: its exit status and its last lines on stderr."""
        try:
            code = self.process.wait(STOP_SECS)
        except subprocess.TimeoutExpired:
            _stop(self.process)
            code = self.process.returncode
        how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        try:
            lines = self.log.read_text(errors="replace").strip().splitlines()[-_STDERR_LINES:]
        except OSError:  # the pool closed meanwhile, its directory with it
            lines = []
        said = ("; it wrote:\n" + "\n".join(lines)) if lines else ""
        return _WorkerDied(f"pid {self.process.pid}, {how}{said}")

    def close(self) -> None:
        self.connection.close()
        _stop(self.process)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(STOP_SECS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class _RemoteTraceback(Exception):
    """The traceback of an error raised in a worker, shown as the cause of the caller's."""

    def __str__(self) -> str:
        return f"in strata's worker process:\n{self.args[0]}"


def _transfer_directory() -> str | None:
    """Where workers put large replies: shared memory where there is plenty, else the temporary
    directory (a container's ``/dev/shm`` is often 64 MB)."""
    try:
        usage = shutil.disk_usage(SHARED_MEMORY)
    except OSError:
        return None
    return str(SHARED_MEMORY) if usage.free >= 1 << 30 and os.access(SHARED_MEMORY, os.W_OK) else None


_POOLS: weakref.WeakSet[WorkerPool] = weakref.WeakSet()
"""Every started pool, closed at interpreter exit."""


@atexit.register
def _close_all() -> None:
    for pool in list(_POOLS):
        pool.close()


# -- the worker's side ------------------------------------------------------------------------

def _serve_caller(connection: Connection, directory: Path) -> None:
    """Answer the caller's tasks until it closes its end (or exits)."""
    names = (directory / f"{os.getpid()}-{n}.arrow" for n in itertools.count())
    while True:
        try:
            request = connection.recv_bytes()
        except (EOFError, OSError):
            return
        try:
            function, args = pickle.loads(request)
            value = function(*args)
            if isinstance(value, pa.Buffer) and value.size >= INLINE_BYTES:
                path = next(names)
                with path.open("wb") as file:
                    file.write(memoryview(value))
                reply = _dumps(("file", str(path)))
            else:
                reply = _dumps(("value", value))
        except BaseException as exc:
            reply = _error_reply(exc)
        try:
            connection.send_bytes(reply)
        except OSError:
            return


def _error_reply(error: BaseException) -> bytes:
    text = "".join(traceback.format_exception(error))
    error.__traceback__ = error.__context__ = error.__cause__ = None
    try:
        return _dumps(("error", error, text))
    except Exception:  # an exception that does not pickle: its text
        return _dumps(("error", RuntimeError(f"{type(error).__name__}: {error}"), text))


def main(argv: list[str]) -> None:
    """``python -m recordings.worker FD DIRECTORY``: serve the caller on the socket ``FD``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the caller decides what an interrupt stops
    connection = Connection(int(argv[0]))
    directory = Path(argv[1])
    import rerun.chunk  # noqa: F401  (the first task should not pay for it; ``recordings`` is imported)

    connection.send_bytes(_dumps(("ready", os.getpid())))
    _serve_caller(connection, directory)


