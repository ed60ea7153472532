"""The broker: configuration, data dir, topics and the listener, started and stopped as one."""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import sys
import time
from pathlib import Path

import structlog

from kcoord.broker.apis import codecs_to_warm, load_handlers
from kcoord.broker.config import BROKER_CONFIGS, BrokerConfig, assignor_names, parse_config_value
from kcoord.broker.groups.common import CONSUMER_GROUP_SETTINGS, CoordinatorConfig
from kcoord.broker.groups.group_configs import ConfigFile, effective

BROKER_CONFIG_FILE = "kcoord-broker-configs.json"
from kcoord.broker.groups.service import GroupService
from kcoord.broker.transactions.coordinator import TxnConfig
from kcoord.broker.transactions.service import TransactionService
from kcoord.broker.runtime.timers import WallClock
from kcoord.broker.listener import Listener
from kcoord.broker.security.acls import Authorizer, make_authorizer
from kcoord.broker.security.credentials import ScramCredentials
from kcoord.broker.security.quotas import ClientQuotas
from kcoord.broker.security.listeners import ListenerSecurity
from kcoord.broker.security.listeners import build as build_listener_security
from kcoord.broker.memory import CHECK_S, FullCollections, keep_freed_memory
from kcoord.broker.meta import DirLock, load_or_create_identity
from kcoord.broker.server import KafkaConnection, WarningLimiter
from kcoord.broker.topics.data import FetchWaiters, ProducerIds
from kcoord.broker.topics.fetch_sessions import FetchSessionCache
from kcoord.broker.topics.manager import TopicManager
from kcoord.storage.layout import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from kcoord.storage.config import LogConfig
from kcoord.storage.manager import LogManager

log = structlog.get_logger("kcoord.broker")

DATA_DIR_CHECK_MS = 1_000  # how often the broker checks that its data dir is still there
WARM_IDLE_S = 0.005  # no byte received for this long: a moment to compile a codec
SWITCH_INTERVAL_S = 0.001  # kcoord serve's sys.setswitchinterval (CPython's default: 5 ms)


class Broker:
    def __init__(self, config: BrokerConfig, own_process: bool = False):
        """``own_process``: the broker is what this process runs (``kcoord serve``),
        so it may take over when Python runs full garbage collections
        (``broker.memory.FullCollections``); a broker embedded in another
        program (a test suite) leaves the process's collector as it is."""
        self.config = config
        self.own_process = own_process
        self.node_id: int = config.node_id
        self.data_dir: Path = config.data_dir
        self.cluster_id: str = ""
        self.topics = TopicManager(config, self.data_dir)
        self.logs: LogManager | None = None
        self.fetch_waiters = FetchWaiters()
        self.fetch_sessions = FetchSessionCache(
            config["max.incremental.fetch.session.cache.slots"])
        self.producer_ids = ProducerIds(self.data_dir)
        # Each group's own configs (resource type GROUP), saved in the data dir.
        self.group_configs: dict[str, dict[str, str]] = {}
        self._group_config_store = ConfigFile(self.data_dir)
        self._config_changes_lock = asyncio.Lock()
        # Dynamic broker configs as given: this broker's ("1") and the cluster's ("").
        self.broker_configs: dict[str, dict[str, str]] = {}
        self._broker_config_store = ConfigFile(self.data_dir, BROKER_CONFIG_FILE)
        self.scram_credentials = ScramCredentials(self.data_dir)
        # The ACLs and their decisions, with authorizer.class.name set; None: every
        # request is allowed, as on a Kafka without an authorizer.
        self.authorizer: Authorizer | None = make_authorizer(config, self.data_dir)
        self.quotas = ClientQuotas(self.data_dir, config["quota.window.size.seconds"] * 1000,
                                   config["quota.window.num"])
        # (user, mechanism, password, iterations) given at start (--add-scram)
        self.initial_scram_users: list[tuple[str, str, str, int]] = []
        self.groups: GroupService | None = None
        self.transactions: TransactionService | None = None
        self._maintenance: list[asyncio.Task] = []
        self._passes: set[asyncio.Future] = set()
        self.connections: set[KafkaConnection] = set()
        self.bad_input = WarningLimiter()  # rate-limited warnings about bad requests
        # Work that follows answers already given (a transaction's end markers
        # after its EndTxn answer): run at the loop's next turn, once those
        # answers are sent, and before any request is served (``run_deferred``).
        self.deferred: list = []
        self.large_requests = asyncio.Semaphore(1)  # large requests decoded one at a time
        # One per listener (``listeners``), in order; the first one's address is
        # ``host``/``port`` and what it advertises ``advertised_host/port``.
        self._servers: list[Listener] = []
        self._advertised: dict[str, tuple[str, int]] = {}
        self._lock = DirLock(self.data_dir)
        self.host, self.port = config.listener
        self.advertised_host, self.advertised_port = config.advertised
        self.started = asyncio.Event()
        self.codecs_warm = asyncio.Event()  # set once ``codecs_to_warm`` are compiled
        self.failed: asyncio.Event | None = None  # set when the log dir goes offline
        self.failure: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # When a connection last received bytes: full garbage collections wait
        # for a moment without any (``broker.memory.FullCollections``).
        self.last_activity = time.monotonic()
        self.collections: FullCollections | None = None
        self._switch_interval: float | None = None  # the interpreter's, while ours is set

    def defer(self, work) -> None:
        """Run ``work()`` after the answers given in this turn of the loop are
        sent, or before the next request is served if that comes first, so no
        request sees the broker without it.  A connection sends an answer
        given now in the loop's next turn (``_Encoding.answer_or_wait``):
        the work runs in the turn after that one."""
        if not self.deferred:
            (self._loop or asyncio.get_running_loop()).call_soon(self._run_deferred_next)
        self.deferred.append(work)

    def _run_deferred_next(self) -> None:
        if self.deferred:
            (self._loop or asyncio.get_running_loop()).call_soon(self.run_deferred)

    def run_deferred(self) -> None:
        """Run the work deferred so far; work it defers in turn (a write retried
        after a failure) waits for the loop's next turns, so a failure that
        repeats never holds the loop."""
        work, self.deferred = self.deferred, []
        for item in work:
            try:
                item()
            except Exception:  # a bug: the rest still runs, requests are still served
                log.exception("broker.deferred_work_failed")

    async def start(self) -> None:
        began = time.monotonic()
        _raise_open_file_limit()
        keep_freed_memory()
        load_handlers()
        loop = self._loop = asyncio.get_running_loop()
        self.failed = asyncio.Event()
        # Bind first: a port already in use must fail before the data dir is touched.
        try:
            for spec in self.config.listeners:
                security = self.listener_security(spec.name)
                server = Listener(loop, functools.partial(KafkaConnection, self, spec.name,
                                                          security),
                                  spec.host, spec.port, backlog=1024, warn=self.bad_input.warn,
                                  ssl_context=security.ssl_context if security else None)
                self._servers.append(server)
                await server.bind()
            self._lock.acquire()
        except BaseException:
            self._close_servers()
            raise
        if self.own_process:
            self.collections = FullCollections(
                lambda: self.last_activity, busy=lambda: any(not c.idle for c in self.connections))
            self.collections.install()
            # Work in worker threads (replaying __consumer_offsets, compaction,
            # decoding a large request) holds the interpreter lock for up to the
            # switch interval each time the event loop wants it back: CPython's
            # 5 ms made every request wait 5-11 ms during a replay.
            self._switch_interval = sys.getswitchinterval()
            sys.setswitchinterval(SWITCH_INTERVAL_S)
        try:
            self.cluster_id = load_or_create_identity(self.data_dir, self.node_id)
            self.topics.load()
            self.producer_ids.load()
            self.scram_credentials.load()
            if self.authorizer is not None:
                self.authorizer.load()
            self.quotas.load()
            for user, mechanism, password, iterations in self.initial_scram_users:
                self.scram_credentials.set_password(user, mechanism, password, iterations)
            self.group_configs = self._group_config_store.load()
            self.broker_configs = self._broker_config_store.load()
            # As a Kafka 4.4 cluster formatted with eligible leader replicas (its
            # default) holds it: the cluster-wide min.insync.replicas, kept.
            self.broker_configs.setdefault("", {}).setdefault(
                "min.insync.replicas", str(self.config["min.insync.replicas"]))
            self._apply_broker_configs()
            self.logs = LogManager(str(self.data_dir), config_for=self.log_config,
                                   on_offline=self._log_dir_failed)
            self.topics.attach(self.logs)
            offsets_partitions = self.topics.get(OFFSETS_TOPIC).partitions
            self.groups = GroupService(
                self, coordinator_config(self.config, offsets_partitions, self.group_configs),
                WallClock(),
                linger_ms=self.config["group.coordinator.append.linger.ms"])
            self.groups.start()
            self.transactions = TransactionService(
                self, transaction_config(self.config, self.topics), WallClock(),
                linger_ms=self.config["group.coordinator.append.linger.ms"])
            self.transactions.start()
            for server in self._servers:
                server.start_serving()
        except BaseException:
            self._close_servers()
            self._lock.release()
            self._give_back_the_process()
            raise
        self._advertise()
        exposed = [f"{a[0]}:{a[1]}" for spec, server in zip(
                   self.config.listeners, self._servers if self.authorizer is None else ())
                   if self.config.protocol_of(spec.name) == "PLAINTEXT"
                   for a in (s.getsockname() for s in server.sockets)
                   if not ipaddress.ip_address(a[0].split("%", 1)[0]).is_loopback]
        if exposed:
            log.warning("broker.listening_beyond_loopback", listening=exposed,
                        reason="every client that can reach these PLAINTEXT addresses may "
                               "produce, read, create and delete topics, and commit and "
                               "delete any group's offsets: a PLAINTEXT listener has no "
                               "authentication, and no authorizer is configured",
                        hint="listen on 127.0.0.1 (the default) unless the network is "
                             "trusted, or set authorizer.class.name and ACLs")
        self._start_maintenance()
        self.started.set()
        # One event with the effective configuration, and what in it is not
        # Kafka's default (a development default, a setting, kcoord's own).
        log.info("broker.config", not_default=self.config.differences(),
                 effective=self.config.effective())
        more = {} if len(self._servers) == 1 else {"listeners": {
            spec.name: f"{_shown(spec.host)}:{server.sockets[0].getsockname()[1]} advertised as "
                       f"{self._advertised[spec.name][0]}:{self._advertised[spec.name][1]}"
            for spec, server in zip(self.config.listeners, self._servers)}}
        log.info("broker.started", host=_shown(self.host), port=self.port,
                 advertised=f"{self.advertised_host}:{self.advertised_port}",
                 node_id=self.node_id, cluster_id=self.cluster_id, data_dir=str(self.data_dir),
                 startup_ms=round((time.monotonic() - began) * 1000, 1), **more)

    def listener_security(self, name: str) -> ListenerSecurity | None:
        """The TLS and SASL settings of listener ``name`` (None for PLAINTEXT);
        SecurityConfigError says what is wrong with them."""
        if self.config.protocol_of(name) == "PLAINTEXT":
            return None
        return build_listener_security(self.config, name, self.scram_credentials.lookup)

    def advertised_for(self, listener: str) -> tuple[str, int]:
        """The host and port given to clients of ``listener`` (Metadata,
        FindCoordinator, DescribeCluster answer with the address of the listener
        the request came in on, as Kafka does)."""
        return self._advertised.get(listener, (self.advertised_host, self.advertised_port))

    def _advertise(self) -> None:
        """What each listener advertises, now that every port is bound."""
        named = {spec.name for spec in self.config.advertised_specs()}
        for spec, server in zip(self.config.listeners, self._servers):
            bound = server.sockets[0].getsockname()[1]
            host, port = self.config.advertised_for(spec.name)
            if spec.name not in named or port == 0:
                port = bound  # port 0 (an ephemeral port): the port actually bound
            self._advertised[spec.name] = (host, port)
            if port != bound:
                # Right behind a port mapping (Docker's -p 9092:19092); otherwise every
                # client that bootstraps here is sent to a port nothing listens on.
                log.warning("broker.advertised_port_differs", listener=spec.name, port=bound,
                            advertised=f"{host}:{port}",
                            reason="clients connect to the advertised port after their first "
                                   "request",
                            hint="leave advertised.listeners unset, or give it the port "
                                 "clients reach this broker on")
            if spec.host in ("", "0.0.0.0", "::") and spec.name not in named:
                log.warning("broker.advertising_loopback", listener=spec.name,
                            listening=_shown(spec.host), advertised=host,
                            hint="set --advertised-host (advertised.listeners) to the name "
                                 "clients use")
        first = self.config.listeners[0].name
        self.port = self._servers[0].sockets[0].getsockname()[1]
        self.advertised_host, self.advertised_port = self._advertised[first]

    def _close_servers(self) -> None:
        for server in self._servers:
            server.close()
        self._servers = []

    async def stop(self, grace: float = 5.0) -> None:
        """Stop accepting, let in-flight requests finish, close connections and files."""
        try:
            await self._shut_down(grace)
        finally:
            # Even a stop that failed or was cancelled gives CPython its full
            # collections back: nothing runs them for this broker any more.
            self._give_back_the_process()

    def _give_back_the_process(self) -> None:
        """Undo what ``own_process`` changed in the interpreter."""
        if self.collections is not None:
            self.collections.uninstall()
            self.collections = None
        if self._switch_interval is not None:
            sys.setswitchinterval(self._switch_interval)
            self._switch_interval = None

    def _stop_taking_requests(self) -> None:
        for conn in list(self.connections):
            conn.stop_taking_requests()

    async def _shut_down(self, grace: float) -> None:
        for server in self._servers:
            server.close()
        # No connection starts a new request from now on: a client is not
        # served produce and fetch while its group's commits are refused (it
        # would process records it cannot commit, and get them again after the
        # restart).
        self._stop_taking_requests()
        for server in self._servers:
            # Connections accepted just before are set up before the others
            # are closed, so that none is left open.
            await server.wait_closed()
        self._stop_taking_requests()
        # The coordinators resign their partitions, as Kafka's do when a broker
        # stops: from now on their requests are answered NOT_COORDINATOR and
        # their timers stop.  Transactions first: the transactions already
        # answered get their markers (__consumer_offsets's while its
        # coordinator still serves) and their Complete states.
        if self.transactions is not None:
            await self.transactions.settle(grace)
            self.transactions.unload()
        parked = self.groups.unload() if self.groups is not None else 0
        if parked:
            # as Kafka's unload does: their clients find the coordinator again
            log.info("broker.stop_answered_parked", requests=parked,
                     error="NOT_COORDINATOR",
                     reason="joins and syncs waiting for their group are answered at "
                            "once instead of holding the stop up to the rebalance timeout")
        deadline = time.monotonic() + grace
        busy = sum(not c.idle for c in self.connections)
        if busy:
            log.info("broker.stop_waiting", connections=busy, grace_s=grace,
                     reason="requests in progress are answered before their connections "
                            "close; no new request is served")
        while any(not c.idle for c in self.connections) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for conn in list(self.connections):
            conn.close()
        self._servers = []
        # No new maintenance pass starts; one in progress (it runs in a worker
        # thread) and the flushes in flight finish before the files close.
        for task in self._maintenance:
            task.cancel()
        pending = [*self._maintenance, *self._passes]
        if self.logs is not None:
            pending.append(asyncio.ensure_future(self.logs.drain()))
        done, late = await asyncio.wait(pending, timeout=max(grace, 1.0) * 6) if pending else ((), ())
        if late:
            log.warning("broker.stop_waited_too_long", unfinished=len(late))
        self._maintenance.clear()
        if self.transactions is not None:
            await self.transactions.stop()
        if self.groups is not None:
            await self.groups.stop()
        self.topics.close()
        if self.logs is not None:
            self.logs.close()
        self._lock.release()
        log.info("broker.stopped", node_id=self.node_id)

    # -- log dir failure ------------------------------------------------------------

    def _log_dir_failed(self, reason: str) -> None:
        """The log dir went offline (any thread): the broker stops, as Kafka halts
        when its last log dir fails, rather than serve without its storage."""
        if self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._fail, reason)

    def _fail(self, reason: str) -> None:
        if self.failure is not None:
            return
        self.failure = reason
        log.critical("broker.log_dir_failed", data_dir=str(self.data_dir), reason=reason,
                     action="stopping: every log is recovered at the next start")
        self.failed.set()

    # -- partition logs ------------------------------------------------------------

    async def alter_group_configs(self, group_id: str, configs: dict[str, str]) -> None:
        """Replace a group's own configs (checked by the caller): saved when this
        returns, and applied at once to the consumer group of that id."""
        async with self._config_changes_lock:
            self.group_configs, before = await self._saved(
                self._group_config_store, self.group_configs, group_id, configs)
            if self.groups is not None:
                self.groups.config.per_group = consumer_settings(self.config,
                                                                 self.group_configs)
            _log_change("group.configs_altered", before, configs, group_id=group_id)

    async def alter_broker_configs(self, resource_name: str, configs: dict[str, str]) -> None:
        """Replace this broker's dynamic configs (``resource_name`` its id) or the
        cluster's (""), checked by the caller: saved when this returns, and
        applied at once (topic defaults to every log, the cleaner's backoff, the
        consumer groups' assignment interval)."""
        async with self._config_changes_lock:
            self.broker_configs, before = await self._saved(
                self._broker_config_store, self.broker_configs,
                "" if resource_name == "" else "broker", configs)
            self._apply_broker_configs()
            await self.topics.reapply_log_configs()
            _log_change("broker.configs_altered", before, configs,
                        resource=resource_name or "<cluster default>")

    @staticmethod
    async def _saved(store: ConfigFile, current: dict, key: str, configs: dict[str, str]):
        """``current`` with ``key``'s set replaced by ``configs`` (gone when empty),
        saved by ``store`` in a worker: (the new sets, ``key``'s previous set)."""
        changed = dict(current)
        if configs:
            changed[key] = dict(configs)
        else:
            changed.pop(key, None)
        await asyncio.get_running_loop().run_in_executor(None, store.save, changed)
        return changed, current.get(key, {})

    def _apply_broker_configs(self) -> None:
        def parsed(layer):
            values = {}
            for name, raw in self.broker_configs.get(layer, {}).items():
                if name not in BROKER_CONFIGS:
                    continue  # a custom config: kept, no effect
                try:
                    values[name] = parse_config_value(BROKER_CONFIGS[name], raw)
                except ValueError as exc:
                    # kept by a kcoord that took it: the static value stands
                    log.warning("broker.dynamic_config_ignored", config=name, value=raw,
                                level=layer or "cluster default", reason=str(exc))
            return values
        self.config.set_dynamic(parsed("broker"), parsed(""))
        if self.groups is not None:
            self.groups.config.consumer_assignment_interval_ms = \
                self.config["group.consumer.assignment.interval.ms"]

    def log_config(self, topic_name: str) -> LogConfig | None:
        topic = self.topics.get(topic_name)
        return None if topic is None else self.topics.log_config(topic)

    # -- background maintenance: retention and compaction --------------------------

    def _start_maintenance(self) -> None:
        loop = asyncio.get_running_loop()
        self._maintenance.append(loop.create_task(
            self._every(self.config["log.retention.check.interval.ms"], self._retention_pass),
            name="kcoord-retention"))
        self._maintenance.append(loop.create_task(
            # 0 would be a busy loop: at most ten checkpoint writes a second.
            self._every(max(self.config["log.flush.offset.checkpoint.interval.ms"], 100),
                        self._checkpoint_pass),
            name="kcoord-checkpoints"))
        self._maintenance.append(loop.create_task(
            self._every(CHECK_S * 1000, self._collection_pass), name="kcoord-gc"))
        self._maintenance.append(loop.create_task(
            self._every(DATA_DIR_CHECK_MS, self._data_dir_pass), name="kcoord-data-dir"))
        if self.own_process:
            # A broker embedded in a program leaves its interpreter's CPU and
            # memory to the program: its codecs compile as they are first used.
            self._maintenance.append(loop.create_task(self._warm_codecs(),
                                                      name="kcoord-codecs"))
        if self.config["log.cleaner.enable"]:
            self._maintenance.append(loop.create_task(
                self._every(lambda: self.config["log.cleaner.backoff.ms"], self._cleaner_pass),
                name="kcoord-cleaner"))

    async def _warm_codecs(self) -> None:
        """Compile the codecs of a client's first requests (``codecs_to_warm``) while
        no request arrives, one per turn of the loop: compiled at a request's
        first use instead, each held every other client for 2-9 ms.  Already
        compiled ones (a broker started before in this process) cost nothing."""
        began = time.monotonic()
        # The replay of the coordinators' logs comes first: it runs in a worker
        # thread, and a codec compiled on the loop meanwhile takes the
        # interpreter from it (1M offset records took a third longer).
        for coordinator in (self.groups, self.transactions):
            await coordinator.loaded.wait()
        warm = codecs_to_warm()
        compiled = 0
        for schema, version, direction in warm:
            if schema.compiled(version, direction):
                continue
            # Not while requests arrive (a long-poll Fetch or a parked JoinGroup
            # waiting meanwhile holds nothing up).
            while time.monotonic() - self.last_activity < WARM_IDLE_S:
                await asyncio.sleep(WARM_IDLE_S)
            schema.codec(version, direction)
            compiled += 1
            await asyncio.sleep(0)
        self.codecs_warm.set()
        log.info("broker.codecs_warm", codecs=len(warm), compiled=compiled,
                 seconds=round(time.monotonic() - began, 3))

    async def _every(self, interval_ms, action) -> None:
        """``action`` every ``interval_ms`` (a number, or a function giving the
        current one: a dynamic config)."""
        while True:
            await asyncio.sleep((interval_ms() if callable(interval_ms) else interval_ms) / 1000)
            # A pass runs in a worker thread that cancellation cannot stop, so it is
            # shielded and ``stop`` waits for it before closing the logs.
            current = asyncio.ensure_future(self._guarded(action))
            self._passes.add(current)
            current.add_done_callback(self._passes.discard)
            await asyncio.shield(current)

    @staticmethod
    async def _guarded(action) -> None:
        try:
            await action()
        except Exception:
            log.exception("maintenance.failed", action=action.__name__)

    async def _collection_pass(self) -> None:
        # On the loop: a full collection holds the interpreter lock wherever it runs.
        if self.collections is not None and self.collections.check():
            log.debug("gc.full_collection", survivors=self.collections.survivors)

    async def _data_dir_pass(self) -> None:
        # A stat on the loop: microseconds.  A deleted data dir takes the log dir
        # offline, and the broker stops (``_log_dir_failed``).
        self.logs.check_dir()

    async def _checkpoint_pass(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self.logs.write_checkpoints)
        if self.logs.pending_removals:
            await loop.run_in_executor(None, self.logs.remove_leftover_dirs)

    async def _retention_pass(self) -> None:
        loop = asyncio.get_running_loop()
        deleted = await loop.run_in_executor(None, self.logs.run_retention)
        if deleted:
            log.info("retention.segments_deleted", segments=deleted)
        # Producers silent for producer.id.expiration.ms are forgotten (on the
        # loop: appends change the same tables).
        now = int(time.time() * 1000)
        expiration = self.config["producer.id.expiration.ms"]
        for plog in list(self.logs.logs.values()):
            if len(plog.producers):
                plog.producers.remove_expired(now, expiration)

    async def _cleaner_pass(self) -> None:
        await self.logs.run_cleaner_async()


def _log_change(event: str, before: dict[str, str], after: dict[str, str], **what) -> None:
    log.info(event, **what, set={k: v for k, v in after.items() if before.get(k) != v},
             removed=sorted(set(before) - set(after)))


def consumer_settings(config: BrokerConfig, group_configs: dict[str, dict[str, str]]):
    """group id -> the consumer group settings it sets itself, as it runs with them
    (a value that no longer parses is left out: the broker's applies)."""
    settings: dict[str, dict[str, int]] = {}
    for group_id, own in group_configs.items():
        for name in CONSUMER_GROUP_SETTINGS:
            if name not in own:
                continue
            try:
                settings.setdefault(group_id, {})[name] = effective(config, own, name)
            except ValueError as exc:
                log.warning("group.config_ignored", group_id=group_id, config=name,
                            value=own[name], reason=str(exc))
    return settings


def transaction_config(config: BrokerConfig, topics) -> TxnConfig:
    # As for groups, the partition count is the topic's own once it exists.
    existing = topics.get(TRANSACTION_STATE_TOPIC)
    return TxnConfig(
        partitions=existing.partitions if existing is not None
        else config["transaction.state.log.num.partitions"],
        max_timeout_ms=config["transaction.max.timeout.ms"],
        id_expiration_ms=config["transactional.id.expiration.ms"],
        abort_interval_ms=config["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
        expire_interval_ms=config["transaction.remove.expired.transaction.cleanup.interval.ms"],
    )


def coordinator_config(config: BrokerConfig, partitions: int,
                       group_configs: dict[str, dict[str, str]] | None = None
                       ) -> CoordinatorConfig:
    # The partition count is the topic's own: changing the setting later moves no group.
    return CoordinatorConfig(
        per_group=consumer_settings(config, group_configs or {}),
        partitions=partitions,
        min_session_timeout_ms=config["group.min.session.timeout.ms"],
        max_session_timeout_ms=config["group.max.session.timeout.ms"],
        initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
        max_group_size=config["group.max.size"],
        offset_metadata_max_bytes=config["offset.metadata.max.bytes"],
        offsets_retention_ms=config["offsets.retention.minutes"] * 60_000,
        offsets_retention_check_interval_ms=config["offsets.retention.check.interval.ms"],
        consumer_session_timeout_ms=config["group.consumer.session.timeout.ms"],
        consumer_heartbeat_interval_ms=config["group.consumer.heartbeat.interval.ms"],
        consumer_max_size=config["group.consumer.max.size"],
        consumer_assignors=assignor_names(config["group.consumer.assignors"]),
        consumer_assignment_interval_ms=config["group.consumer.assignment.interval.ms"],
        consumer_migration_policy=config["group.consumer.migration.policy"].lower(),
    )


def _raise_open_file_limit() -> None:
    """Every open segment holds file descriptors: lift the soft limit to the hard one,
    as Kafka's documentation asks operators to do."""
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY:
            hard = 1 << 20
        if soft < hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ImportError, ValueError, OSError):
        pass


def _shown(host: str) -> str:
    """A listener's host as the log shows it: an empty host (``PLAINTEXT://:9092``)
    listens on every interface, as 0.0.0.0 does."""
    return host or "0.0.0.0"
