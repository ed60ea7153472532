"""The broker: configuration, data dir, topics and the listener, started and stopped as one."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import structlog

from broker.apis import load_handlers
from broker.config import BrokerConfig
from broker.meta import DirLock, load_or_create_identity
from broker.server import KafkaConnection
from broker.topics.manager import TopicManager

log = structlog.get_logger("kcoord.broker")


class Broker:
    def __init__(self, config: BrokerConfig):
        self.config = config
        self.node_id: int = config.node_id
        self.data_dir: Path = config.data_dir
        self.cluster_id: str = ""
        self.topics = TopicManager(config, self.data_dir)
        self.connections: set[KafkaConnection] = set()
        self._server: asyncio.base_events.Server | None = None
        self._lock = DirLock(self.data_dir)
        self.host, self.port = config.listener
        self.advertised_host, self.advertised_port = config.advertised
        self.started = asyncio.Event()

    async def start(self) -> None:
        began = time.monotonic()
        load_handlers()
        self._lock.acquire()
        try:
            self.cluster_id = load_or_create_identity(self.data_dir, self.node_id)
            self.topics.remove_leftover_deleted_dirs()
            self.topics.load()
            loop = asyncio.get_running_loop()
            self._server = await loop.create_server(
                lambda: KafkaConnection(self), self.host, self.port, reuse_address=True,
                backlog=1024,
            )
        except BaseException:
            self._lock.release()
            raise
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        if not self.config.get("advertised.listeners") or self.advertised_port == 0:
            # Port 0 (an ephemeral port) is advertised as the port actually bound.
            self.advertised_port = self.port
        self.started.set()
        log.info("broker.started", host=self.host, port=self.port,
                 advertised=f"{self.advertised_host}:{self.advertised_port}",
                 node_id=self.node_id, cluster_id=self.cluster_id, data_dir=str(self.data_dir),
                 startup_ms=round((time.monotonic() - began) * 1000, 1))

    async def stop(self, grace: float = 5.0) -> None:
        """Stop accepting, let in-flight requests finish, close connections and files."""
        if self._server is not None:
            self._server.close()
        deadline = time.monotonic() + grace
        while any(not c.idle for c in self.connections) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for conn in list(self.connections):
            conn.close()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        self._lock.release()
        log.info("broker.stopped", node_id=self.node_id)
