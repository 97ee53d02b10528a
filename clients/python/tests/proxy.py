"""A tiny asyncio TCP proxy in front of idemd that can lose replies.

``drop_next_reply()``: the next HTTP/2 response (its HEADERS frame, sent by the server
after it handled the call) is never forwarded: the connection is cut instead, as a
network that lost the reply would. ``delay_replies(*seconds)``: the next responses
(one each, in the order the server sends them) are held that long before they are
forwarded, as a slow network would; what follows them on the connection waits too.
``cut()`` closes every connection and refuses new ones until ``restore()``.
"""

from __future__ import annotations

import asyncio
import contextlib

HEADERS = 0x1


class Proxy:
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.drops_armed = 0
        self.dropped = 0
        #: Seconds each of the next responses is held before it is forwarded.
        self.delays: list[float] = []
        self.delayed = 0
        self.refusing = False
        #: Seconds a new connection waits before it is forwarded (a slow reconnect).
        self.connect_delay = 0.0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.addr = ""

    async def start(self) -> Proxy:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.addr = f"127.0.0.1:{port}"
        return self

    async def close(self) -> None:
        self._close_all()
        if self._server is not None:
            self._server.close()

    def drop_next_reply(self) -> None:
        self.drops_armed += 1

    def delay_replies(self, *seconds: float) -> None:
        self.delays.extend(seconds)

    def cut(self) -> None:
        self.refusing = True
        self._close_all()

    def restore(self) -> None:
        self.refusing = False
        #: Seconds a new connection waits before it is forwarded (a slow reconnect).
        self.connect_delay = 0.0

    def _close_all(self) -> None:
        for writer in list(self._writers):
            writer.close()
        self._writers.clear()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            writer.close()
            return
        if self.connect_delay:
            await asyncio.sleep(self.connect_delay)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            return
        self._writers.update({writer, up_writer})
        try:
            await asyncio.gather(
                self._pipe(reader, up_writer), self._replies(up_reader, writer, up_writer)
            )
        finally:
            for w in (writer, up_writer):
                w.close()
                self._writers.discard(w)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def _replies(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        upstream: asyncio.StreamWriter,
    ) -> None:
        """Server to client, frame by frame, so a response can be dropped whole."""
        replied: set[int] = set()  # streams whose response has begun
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while True:
                header = await reader.readexactly(9)
                length = int.from_bytes(header[:3], "big")
                payload = await reader.readexactly(length)
                stream = int.from_bytes(header[5:9], "big") & 0x7FFFFFFF
                if header[3] == HEADERS and stream != 0 and self.drops_armed > 0:
                    self.drops_armed -= 1
                    self.dropped += 1
                    writer.close()
                    upstream.close()
                    return
                if header[3] == HEADERS and stream != 0 and stream not in replied:
                    replied.add(stream)
                    if self.delays:
                        self.delayed += 1
                        await asyncio.sleep(self.delays.pop(0))
                writer.write(header + payload)
                await writer.drain()
        writer.close()
