"""A tiny HTTP/1.0 server for proxy tests: ``GET /<size>`` returns ``size`` deterministic
bytes (``body(size)``) and the peer address it saw in ``X-Peer``. Large backlog, asyncio,
so 200 concurrent connections are served at once.

Run: python3 -m tests.proxy.httpd PORT
"""

from __future__ import annotations

import asyncio
import random
import sys


def body(size: int) -> bytes:
    return random.Random(size).randbytes(size)


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        line = await reader.readline()
        while (await reader.readline()) not in (b"\r\n", b"\n", b""):
            pass
        size = int(line.split()[1].strip(b"/") or b"0")
        peer = writer.get_extra_info("peername")[0]
        data = body(size)
        writer.write(
            f"HTTP/1.0 200 OK\r\nContent-Length: {size}\r\nX-Peer: {peer}\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        view = memoryview(data)
        for i in range(0, size, 65536):
            writer.write(view[i : i + 65536])
            await writer.drain()
        writer.close()
        print(f"served {size} to {peer}", flush=True)
    except (ConnectionError, ValueError, IndexError) as exc:
        print(f"error: {exc!r}", flush=True)


async def main(port: int) -> None:
    server = await asyncio.start_server(handle, "0.0.0.0", port, backlog=1024)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
