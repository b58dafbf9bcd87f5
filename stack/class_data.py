"""``python -m stack.class_data``: make the class-data sharing archives of the broker's and the
Spark driver's JVMs (``settings.class_data_archive``), which scripts/setup.sh runs once.

A JVM started with an archive maps the classes it loaded while it started last time instead of
reading, parsing and verifying them again from the jars: measured on a 2-core machine, the broker
answered in 2.1-2.2 s instead of 3.4, and the Spark session started in 3.1-3.2 s instead of
4.9-5.4. The archives are made by running the stack once, through one registration, with
``STRATA_CLASS_DATA_SHARING=create``: each JVM writes its archive as it exits.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import settings
from stack import output


def make_archives() -> list[Path]:
    """Run a throwaway stack through one registration with archives being written; the paths of
    the archives made."""
    from stack.droid import write_episode
    from stack.server import Server

    os.environ["STRATA_CLASS_DATA_SHARING"] = "create"
    settings.class_data_archive("broker").parent.mkdir(parents=True, exist_ok=True)
    for name in ("STRATA_BOOTSTRAP_SERVERS", "STRATA_STORE", "STRATA_SPARK_MASTER"):
        os.environ.pop(name, None)  # a throwaway stack of its own, never a user's cluster
    with tempfile.TemporaryDirectory(prefix="strata-class-data-") as directory:
        work = Path(directory)
        write_episode(work / "episode.rrd", "class_data", 3)
        with Server(work / "stack", protocol_port=None) as server:  # the JVMs' classes: no endpoint
            dataset = server.client().create_dataset("class_data")
            dataset.register([(work / "episode.rrd").as_uri()]).wait()
            dataset.segment_table().to_arrow_table()
    # The Spark driver's JVM exits (and writes its archive) after the projector that started it.
    deadline = time.monotonic() + 120
    while _archiving_jvms() and time.monotonic() < deadline:
        time.sleep(0.5)
    return [path for path in (settings.class_data_archive(n) for n in ("broker", "spark")) if path.exists()]


def _archiving_jvms() -> list[int]:
    """Pids of the processes still writing an archive of ours (Linux: read from /proc)."""
    wanted = f"-XX:ArchiveClassesAtExit={settings.class_data_archive('spark').parent}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and wanted in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m stack.class_data",
        description="Make the class-data sharing archives of the embedded broker's and the Spark "
                    f"driver's JVMs in {settings.class_data_archive('broker').parent}, by running "
                    "a throwaway stack once (about half a minute). Later stacks start faster with them.")
    parser.parse_args(argv)
    started = time.monotonic()
    made = make_archives()
    for path in made:
        output.say(f"  {path} ({path.stat().st_size / 2**20:.0f} MiB)")
    if len(made) < 2:
        output.note("class-data archives: not every JVM wrote one; stacks start without what is missing")
        return 1
    output.say(f"class-data archives made in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
