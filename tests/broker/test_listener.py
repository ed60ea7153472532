"""The broker's own accept loop: a slice of the waiting connections per turn of
the event loop (a thousand clients connecting at once must not hold up the
requests of those already connected), every one of them accepted in the end,
and nothing left listening once closed."""

from __future__ import annotations

import asyncio
import socket

from kcoord.broker.listener import ACCEPTS_PER_TURN, Listener


class Echo(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.transport.write(data)


async def test_waiting_connections_are_accepted_a_slice_per_turn():
    loop = asyncio.get_running_loop()
    listener = Listener(loop, Echo, "127.0.0.1", 0, backlog=512)
    await listener.bind()
    port = listener.sockets[0].getsockname()[1]
    count = 3 * ACCEPTS_PER_TURN + 5
    clients = [socket.socket() for _ in range(count)]
    try:
        for client in clients:
            client.setblocking(False)
            try:
                client.connect(("127.0.0.1", port))
            except BlockingIOError:
                pass
        await asyncio.sleep(0.05)  # the kernel completes the handshakes in the backlog
        listener._accept(listener.sockets[0])
        assert len(listener._connecting) == ACCEPTS_PER_TURN
        listener.start_serving()
        for _ in range(200):
            await asyncio.sleep(0.01)
            if listener.accepted >= count:
                break
        assert listener.accepted == count
        clients[-1].setblocking(True)
        clients[-1].settimeout(5)
        clients[-1].sendall(b"ping")
        assert await loop.run_in_executor(None, clients[-1].recv, 4) == b"ping"
    finally:
        for client in clients:
            client.close()
        listener.close()
        await listener.wait_closed()
    refused = socket.socket()
    try:
        assert refused.connect_ex(("127.0.0.1", port)) != 0
    finally:
        refused.close()
