"""``python -m bench.latency_proxy --to HOST:PORT --delay-ms N``: a TCP proxy on loopback whose
every byte arrives N ms after it was sent, in both directions (a round trip of 2N ms), as a remote
object store's network would have it; bandwidth is not limited. Prints the port it listens on,
then serves until killed."""

from __future__ import annotations

import argparse
import asyncio
import contextlib


async def _forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    """Copy ``reader`` to ``writer``, each chunk written ``delay`` s after it was read, in order."""
    loop = asyncio.get_running_loop()
    due: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def send() -> None:
        while True:
            at, data = await due.get()
            if not data:
                break
            if (wait := at - loop.time()) > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()

    sender = asyncio.create_task(send())
    try:
        while data := await reader.read(1 << 16):
            due.put_nowait((loop.time() + delay, data))
    finally:
        due.put_nowait((0.0, b""))
        with contextlib.suppress(ConnectionError):
            await sender
            writer.close()


async def serve(target_host: str, target_port: int, delay: float) -> None:
    async def connect(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            server_reader, server_writer = await asyncio.open_connection(target_host, target_port)
            await asyncio.gather(_forward(client_reader, server_writer, delay),
                                 _forward(server_reader, client_writer, delay))

    server = await asyncio.start_server(connect, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.latency_proxy", description=__doc__)
    parser.add_argument("--to", required=True, help="HOST:PORT to forward to")
    parser.add_argument("--delay-ms", type=float, required=True, help="one-way delay in each direction")
    args = parser.parse_args()
    host, port = args.to.rsplit(":", 1)
    asyncio.run(serve(host, int(port), args.delay_ms / 1000))


if __name__ == "__main__":
    main()
