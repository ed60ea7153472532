"""Fetch (key 1), versions 0-18 (v18 adds only a follower's high watermark).

- Data starts at the batch containing the fetch offset and is whole batches
  only; the first batch of the first partition with data is returned even when
  larger than the limits (v3+, KIP-74), later partitions stay within
  ``partition_max_bytes`` and what is left of ``max_bytes`` (capped by the
  broker's ``fetch.max.bytes``). v0-2 have hard limits: nothing larger is sent.
- Records are never null. Errors carry high watermark, last stable offset and
  log start offset -1 (ReplicaManager.createLogReadResult).
- An offset outside [log start, log end]: OFFSET_OUT_OF_RANGE. A current leader
  epoch above 0 (v9+): UNKNOWN_LEADER_EPOCH; any negative one means none given.
  Unknown topic: UNKNOWN_TOPIC_OR_PARTITION, or UNKNOWN_TOPIC_ID for a topic id
  (v13+, where topics are named by id).
- Long poll: with ``max_wait_ms`` > 0, fewer than ``min_bytes`` available, no
  error and no read starting in a segment older than the active one (a read
  stops at its segment's end: a consumer catching up is answered at once, as
  Kafka's DelayedFetch answers it), the request waits in the fetch purgatory
  (``broker.topics.data.FetchWaiters``) until an append to one of its
  partitions brings enough bytes, a partition goes away, or the wait ends;
  then it reads again (Kafka's DelayedFetch). A client that closes or
  half-closes its connection ends the wait.
- read_committed: there are no transactions, so the last stable offset is the
  high watermark and the aborted transaction list is empty (null for
  read_uncommitted, as Kafka sends).
- v0-3 get legacy messages (magic 0 for v0-1, magic 1 for v2-3), converted as
  Kafka 3.x does, which refuses a first zstd batch (UNSUPPORTED_COMPRESSION_TYPE:
  it cannot be down-converted); v4-9 get zstd batches as they are.  A topic whose
  compression.type is zstd is refused below v10 whatever it holds, as KafkaApis
  refuses it.
- Fetch sessions (v7+, KIP-227, ``broker.topics.fetch_sessions``): a full
  fetch with epoch 0 opens a session; incremental fetches name only what
  changed and are answered with only the partitions that have something new.
  A session by topic ids keeps each partition's topic name: once that topic is
  deleted its partitions get UNKNOWN_TOPIC_OR_PARTITION, and once a topic of
  that name is created again (a new id) INCONSISTENT_TOPIC_ID.
- Answer order (KafkaApis.handleFetchRequest): the partitions that were read,
  in request (or session) order, then those refused before reading: unknown
  topic ids, then unknown topics or partitions.
"""

from __future__ import annotations

import asyncio

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import READ, TOPIC, allowed_names
from kcoord.broker.security.quotas import FETCH as FETCH_QUOTA
from kcoord.broker.topics.data import find_partition, leader_epoch_error, load_producers
from kcoord.broker.topics.fetch_sessions import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    CachedPartition,
    FetchSession,
    next_epoch,
)
from kcoord.protocol import compression
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.records import batch_header, down_convert_for_fetch, iter_entries
from kcoord.protocol.wire import ZERO_UUID
from kcoord.storage.errors import OffsetOutOfRangeError, StorageError

READ_COMMITTED = 1
_CONVERT_IN_THREAD = 64 * 1024  # down-conversion of more than this runs off the loop


class _Wanted:
    __slots__ = ("name", "topic_id", "partition", "offset", "max_bytes", "epoch", "unknown_id")

    def __init__(self, name, topic_id, part, unknown_id=False):
        self.name = name
        self.topic_id = topic_id
        self.partition = part.partition
        self.offset = part.fetch_offset
        self.max_bytes = part.partition_max_bytes
        self.epoch = part.current_leader_epoch
        self.unknown_id = unknown_id


def _error(index: int, code: ErrorCode, unknown: bool = False) -> dict:
    # A partition Kafka refuses before reading (unknown topic or id) carries an
    # empty aborted-transaction list; one refused by the read carries null.
    return {"partition_index": index, "error_code": code, "high_watermark": -1,
            "last_stable_offset": -1, "log_start_offset": -1,
            "aborted_transactions": [] if unknown else None,
            "preferred_read_replica": -1, "records": b""}


def _no_zstd(index: int) -> dict:
    # FetchResponse.partitionResponse: an empty aborted list and no records
    answer = _error(index, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, unknown=True)
    answer["records"] = None
    return answer


def _starts_with_zstd(data) -> bool:
    """Down-conversion (v0-3) fails on a first zstd batch only; a later one ends
    the down-converted data."""
    for pos, _size, magic in iter_entries(data, partial_ok=True):
        return magic == 2 and batch_header(data, pos).compression == compression.ZSTD
    return False


class _Reader:
    """One pass over the request's partitions, in request order."""

    def __init__(self, ctx, request, wanted: list[_Wanted]):
        self.ctx = ctx
        self.version = ctx.api_version
        self.committed = request.isolation_level == READ_COMMITTED
        self.wanted = wanted
        limit = request.max_bytes if self.version >= 3 else 2**31 - 1
        self.max_bytes = max(min(limit, ctx.broker.config["fetch.max.bytes"]), 0)
        # whether the last read started in a segment older than the one the high
        # watermark is in (DelayedFetch's case F): a read never goes past a
        # segment's end, so waiting for more bytes there would wait for nothing
        self.older_segment = False
        # the topics the client may not READ (an authorizer's refusal)
        self.denied: set[str] = set()
        if ctx.broker.authorizer is not None:
            names = {w.name for w in wanted if w.name is not None}
            self.denied = names - allowed_names(ctx, READ, TOPIC, names)

    def read(self):
        """(answers per wanted partition, bytes read, whether any partition failed)."""
        self.older_segment = False
        remaining = self.max_bytes
        first_data_seen = False
        answers, total, failed = [], 0, False
        for want in self.wanted:
            answer = self._read_one(want, remaining, not first_data_seen)
            data = answer["records"]
            if data:
                first_data_seen = True
                remaining = max(remaining - len(data), 0)
                total += len(data)
            failed = failed or answer["error_code"] != ErrorCode.NONE
            answers.append(answer)
        return answers, total, failed

    def _read_one(self, want: _Wanted, remaining: int, may_exceed: bool) -> dict:
        if want.unknown_id:
            return _error(want.partition, ErrorCode.UNKNOWN_TOPIC_ID, unknown=True)
        if want.name in self.denied:
            return _error(want.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED, unknown=True)
        view = find_partition(self.ctx.broker, want.name, want.partition)
        if view is None:
            return _error(want.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, unknown=True)
        if self.version < 10 and \
                self.ctx.broker.log_config(want.name).compression_type == "zstd":
            # KafkaApis.maybeConvertFetchedData: a zstd topic is read from v10 on,
            # whatever the batches read (or the error reading them) would be.
            return _no_zstd(want.partition)
        if want.topic_id != ZERO_UUID and self.ctx.broker.topics.get(want.name).topic_id \
                != want.topic_id:
            # A session partition named by the id of a topic since deleted and
            # recreated under the same name (ReplicaManager.readFromLog).
            return _error(want.partition, ErrorCode.INCONSISTENT_TOPIC_ID)
        fenced = leader_epoch_error(want.epoch, negative_skips=True)
        if fenced:
            return _error(want.partition, fenced)
        upper = view.last_stable_offset if self.committed else view.high_watermark
        version = self.version
        limit = min(want.max_bytes, remaining) if version >= 3 else want.max_bytes
        try:
            if view.log is None:
                if want.offset != 0:
                    raise OffsetOutOfRangeError(f"offset {want.offset} outside [0, 0]")
                data = b""
            else:
                data = view.log.read(want.offset, max(limit, 0), max_offset=upper,
                                     min_one_batch=version >= 3 and may_exceed)
        except OffsetOutOfRangeError:
            return _error(want.partition, ErrorCode.OFFSET_OUT_OF_RANGE)
        except StorageError as exc:
            return _error(want.partition, exc.code)
        if data and version <= 3 and _starts_with_zstd(data):
            return _no_zstd(want.partition)  # (it cannot be down-converted)
        if view.log is not None and want.offset < view.log.active_segment.base_offset:
            self.older_segment = True
        aborted = None
        if self.committed:
            aborted = _aborted(view.log, want.offset, data) if data else []
        return {"partition_index": want.partition, "error_code": ErrorCode.NONE,
                "high_watermark": view.high_watermark,
                "last_stable_offset": view.last_stable_offset,
                "log_start_offset": view.log_start_offset,
                "aborted_transactions": aborted,
                "preferred_read_replica": -1, "records": data}


def _aborted(plog, start: int, data) -> list[dict]:
    """The aborted transactions overlapping the fetched range, for a
    read_committed consumer to drop their records (LocalLog.addAbortedTransactions)."""
    last = None
    for pos, _size, _magic in iter_entries(data, partial_ok=True):
        last = pos
    if last is None:
        return []
    end = batch_header(data, last).last_offset + 1
    return [{"producer_id": txn.producer_id, "first_offset": txn.first_offset}
            for txn in plog.aborted_transactions(start, end)]


def _wanted(ctx, request) -> list[_Wanted]:
    topics = ctx.broker.topics
    wanted = []
    for topic in request.topics:
        if ctx.api_version >= 13:
            found = topics.by_id(topic.topic_id)
            name = found.name if found is not None else None
            for part in topic.partitions:
                wanted.append(_Wanted(name, topic.topic_id, part, unknown_id=found is None))
        else:
            for part in topic.partitions:
                wanted.append(_Wanted(topic.topic, ZERO_UUID, part))
    return wanted


def _group(wanted: list[_Wanted], answers: list[dict], by_id: bool) -> list[dict]:
    """Consecutive partitions of one topic share a topic entry (FetchResponse.toMessage)."""
    out: list[dict] = []
    last = None
    for want, answer in zip(wanted, answers):
        key = want.topic_id if by_id else want.name
        if out and key == last:
            out[-1]["partitions"].append(answer)
        else:
            entry = {"topic_id": want.topic_id, "partitions": [answer]}
            if not by_id:
                entry["topic"] = want.name
            out.append(entry)
            last = key
    return out


async def _down_convert(wanted: list[_Wanted], answers: list[dict], magic: int) -> None:
    loop = asyncio.get_running_loop()
    for want, answer in zip(wanted, answers):
        data = answer["records"]
        if not data:
            continue
        try:
            if len(data) > _CONVERT_IN_THREAD:
                answer["records"] = await loop.run_in_executor(
                    None, down_convert_for_fetch, data, magic, want.offset)
            else:
                answer["records"] = down_convert_for_fetch(data, magic, want.offset)
        except compression.UnsupportedCodecError:  # zstd first, after control batches
            answer.update(_no_zstd(answer["partition_index"]))


def _session_error(code: ErrorCode) -> dict:
    """FetchSession.scala's SessionErrorContext: no partitions, no session."""
    return {"throttle_time_ms": 0, "error_code": code, "session_id": INVALID_SESSION_ID,
            "responses": []}


def _session_key(topic, by_id: bool):
    return topic.topic_id if by_id else topic.topic


def _update_session(ctx, session: FetchSession, request, by_id: bool) -> None:
    """FetchSession.update: add or update the named partitions, drop the forgotten."""
    topics = ctx.broker.topics
    for topic in request.topics:
        key = _session_key(topic, by_id)
        name = topic.topic
        if by_id:
            found = topics.by_id(topic.topic_id)
            name = found.name if found is not None else None
        for part in topic.partitions:
            cached = session.partitions.get((key, part.partition))
            if cached is None:
                session.partitions[(key, part.partition)] = CachedPartition(
                    name, topic.topic_id, part.partition, part.fetch_offset,
                    part.partition_max_bytes, part.current_leader_epoch)
            else:
                cached.update_request(part)
    for topic in request.forgotten_topics_data:
        key = _session_key(topic, by_id)
        for partition in topic.partitions:
            session.partitions.pop((key, partition), None)


def _session_wanted(ctx, session: FetchSession) -> list[_Wanted]:
    topics = ctx.broker.topics
    wanted = []
    for cached in session.partitions.values():
        if session.uses_topic_ids:
            # A partition keeps the topic name it was added with; one added under an
            # unknown id gets a name once its id is known (CachedPartition's
            # maybeResolveUnknownName). A deleted topic is then an unknown topic.
            if cached.name is None:
                found = topics.by_id(cached.topic_id)
                cached.name = found.name if found is not None else None
            wanted.append(_Wanted(cached.name, cached.topic_id, cached,
                                  unknown_id=cached.name is None))
        else:
            wanted.append(_Wanted(cached.name, ZERO_UUID, cached))
    return wanted


def _new_session(ctx, wanted: list[_Wanted], answers: list[dict], by_id: bool) -> int:
    """FullFetchContext: a session of the partitions just answered, if the cache allows."""
    session = ctx.broker.fetch_sessions.create(by_id)
    if session is None:
        return INVALID_SESSION_ID
    for want, answer in zip(wanted, answers):
        cached = CachedPartition(want.name, want.topic_id, want.partition, want.offset,
                                 want.max_bytes, want.epoch)
        cached.must_respond(answer)
        session.partitions[(want.topic_id if by_id else want.name, want.partition)] = cached
    return session.session_id


def _refused_first_rank(answer: dict) -> int:
    """Where KafkaApis.handleFetchRequest puts a partition in its answer: the ones it
    read first, then the ones refused before reading (``erroneous``): unknown topic
    ids, then the topics the client may not read and unknown topics or partitions,
    each group in request order."""
    code = answer["error_code"]
    if code == ErrorCode.UNKNOWN_TOPIC_ID:
        return 1
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.TOPIC_AUTHORIZATION_FAILED):
        return 2
    return 0


def _answer_order(answers: list[dict]) -> list[int]:
    return sorted(range(len(answers)), key=lambda i: _refused_first_rank(answers[i]))


def _changed(session: FetchSession, keys: list, answers: list[dict]) -> list[int]:
    """Indexes of the answers an incremental fetch returns (``keys`` names the session
    partition of each answer); partitions that had records move to the end of the
    session, in answer order (IncrementalFetchContext)."""
    keep, moved = [], []
    for i, key in enumerate(keys):
        answer = answers[i]
        cached = session.partitions[key]
        if cached.must_respond(answer):
            keep.append(i)
            if answer["records"]:
                moved.append(key)
    for key in moved:
        session.partitions.move_to_end(key)
    return keep


@api(key=1, versions=(0, 18))
async def fetch(ctx, request):
    version = ctx.api_version
    by_id = version >= 13
    sessions = ctx.broker.fetch_sessions
    session = None
    create = False
    if version >= 7:
        session_id, epoch = request.session_id, request.session_epoch
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                sessions.remove(session_id)  # a full fetch closes the session it names
            create = epoch == INITIAL_EPOCH
        else:
            session = sessions.get(session_id)
            if session is None:
                return _session_error(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
            if session.epoch != epoch:
                return _session_error(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
            if session.uses_topic_ids != by_id:
                return _session_error(ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
            _update_session(ctx, session, request, by_id)
            if not session.partitions:
                sessions.remove(session_id)
                session = None
            else:
                sessions.touch(session)
                session.epoch = next_epoch(session.epoch)
    wanted = _session_wanted(ctx, session) if session is not None else _wanted(ctx, request)
    await load_producers(ctx.broker, ((w.name, w.partition) for w in wanted))
    reader = _Reader(ctx, request, wanted)
    answers, available, failed = reader.read()
    wait_ms = request.max_wait_ms
    min_bytes = min(request.min_bytes, reader.max_bytes)
    if wait_ms > 0 and wanted and available < min_bytes and not failed and \
            not reader.older_segment:
        answers = await _park(ctx, reader, wait_ms, min_bytes) or answers
    if version < 4:
        await _down_convert(wanted, answers, 0 if version <= 1 else 1)
    order = _answer_order(answers)
    wanted = [wanted[i] for i in order]
    answers = [answers[i] for i in order]
    session_id = INVALID_SESSION_ID
    if session is not None:
        session_id = session.session_id
        keys = list(session.partitions)
        keep = _changed(session, [keys[i] for i in order], answers)
        wanted = [wanted[i] for i in keep]
        answers = [answers[i] for i in keep]
    elif create:
        session_id = _new_session(ctx, wanted, answers, by_id)
    throttle_ms = 0
    if FETCH_QUOTA in ctx.broker.quotas.enforcing:
        throttle_ms = ctx.throttle(FETCH_QUOTA, sum(len(a["records"] or b"") for a in answers))
    return {"throttle_time_ms": throttle_ms, "error_code": ErrorCode.NONE,
            "session_id": session_id, "responses": _group(wanted, answers, by_id=by_id)}


async def _park(ctx, reader: _Reader, wait_ms: int, min_bytes: int):
    """Wait for appends until ``min_bytes`` are there or the time is up; the answers
    of the last read, or None if nothing was appended meanwhile."""
    loop = asyncio.get_running_loop()
    waiters = ctx.broker.fetch_waiters
    partitions = {(w.name, w.partition) for w in reader.wanted if w.name is not None}
    deadline = loop.time() + wait_ms / 1000
    gone = ctx.connection.gone()
    answers = None
    while True:
        left = deadline - loop.time()
        if left <= 0 or gone.done():
            return answers
        wake = waiters.watch(partitions)
        try:
            await asyncio.wait((wake, gone), timeout=left, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiters.unwatch(partitions, wake)
        if not wake.done():
            return answers  # the time is up, or the client went away
        answers, available, failed = reader.read()
        if available >= min_bytes or failed or reader.older_segment:
            return answers
