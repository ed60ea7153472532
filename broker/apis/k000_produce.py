"""Produce (key 0), versions 0-13.

- v0-2 carry legacy message sets (magic 0/1): each partition's set becomes one
  v2 batch before the append, as Kafka 3.x's LogValidator converts it.
- v3+: exactly one v2 batch per partition, else INVALID_RECORD; zstd needs v7
  (UNSUPPORTED_COMPRESSION_TYPE below) (ProduceRequest.validateRecords). An
  empty set in v0-2 appends nothing and succeeds with base offset -1, as in
  Kafka. Null records get INVALID_RECORD (Kafka 3.9 never answers them).
- acks must be -1, 0 or 1 (INVALID_REQUIRED_ACKS for every partition). With
  acks=0 nothing is answered, and a failed partition closes the connection, as
  Kafka does. acks=1 and -1 are the same on one node: the answer goes once the
  append is durable under ``kcoord.fsync.policy``.
- v13 names topics by id: an id no topic has gets UNKNOWN_TOPIC_ID for each of
  its partitions (v12 is v11 on the wire: its implicit AddPartitionsToTxn
  belongs to transaction.version 2).
- Produce never creates topics: UNKNOWN_TOPIC_OR_PARTITION. Internal topics
  take writes only from ``__admin_client`` (INVALID_TOPIC_EXCEPTION).
- Each batch passes ``storage.validator`` (CRC, sizes, offsets, timestamps,
  keys of compacted topics) and the idempotent producer checks of
  ``storage.producer_state``; a retried batch is answered with the offsets of
  its first append.
- A transactional batch needs the request's transactional id
  (TRANSACTIONAL_ID_AUTHORIZATION_FAILED without one, Kafka's answer) and a
  partition in that producer's transaction: open on the partition already, or
  added at the coordinator (KIP-890's verification), else INVALID_TXN_STATE.
- v8+ answer per-record errors with their error message (no message for
  other errors, as Kafka); on error Kafka answers
  base offset -1, log append time -1 and log start offset -1.
"""

from __future__ import annotations

import asyncio
import struct

import structlog

from kcoord.broker.apis import NO_RESPONSE, CloseConnection, api
from kcoord.broker.apis.authz import TOPIC, TRANSACTIONAL_ID, WRITE, allowed, allowed_names
from kcoord.broker.security.quotas import PRODUCE as PRODUCE_QUOTA
from kcoord.broker.topics.data import LEADER_EPOCH, find_partition
from kcoord.protocol import compression
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.records import CorruptRecordError, batch_header, iter_entries, legacy_as_batch
from kcoord.storage.errors import StorageError

log = structlog.get_logger("kcoord.produce")

ADMIN_CLIENT_ID = "__admin_client"
LEGACY_MINIMUM = 14  # LegacyRecord.RECORD_OVERHEAD_V0, the smallest entry
_INT32 = struct.Struct(">i")
# The failures Kafka answers without the log start offset (ReplicaManager's
# UNKNOWN_LOG_APPEND_INFO cases).
_UNKNOWN_APPEND_INFO = {ErrorCode.CORRUPT_MESSAGE, ErrorCode.MESSAGE_TOO_LARGE,
                        ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.KAFKA_STORAGE_ERROR}
_TRANSACTIONAL = 0x10


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None):
        self.code = code
        self.message = message


def _answer(index: int, code: ErrorCode, message: str | None = None, record_errors=(),
            request_error: bool = False, custom: bool = False):
    # Kafka sends an error message only with per-record errors (its
    # RecordValidationException), with the errors ReplicaManager gives a custom
    # message (``custom``: a transaction's partition not verified), and when
    # the whole request failed (ProduceRequest.getErrorResponse).
    if not (record_errors or request_error or custom):
        message = None
    return {"index": index, "error_code": code, "base_offset": -1, "log_append_time_ms": -1,
            "log_start_offset": -1,
            "record_errors": [{"batch_index": i, "batch_index_error_message": m}
                              for i, m in record_errors],
            "error_message": message}


def _unreadable_first_entry(records) -> str | None:
    """Why Kafka cannot even look at the first entry of a partition's records.

    KafkaApis reads the first batch of every partition (RequestUtils.flags:
    idempotent or transactional?) before anything else; a size or magic that
    ByteBufferLogInputStream refuses there fails the whole request.
    """
    if records is None or len(records) < 12:
        return None
    (size,) = _INT32.unpack_from(records, 8)
    if size < LEGACY_MINIMUM:
        return f"Record size {size} is less than the minimum record overhead ({LEGACY_MINIMUM})"
    if len(records) >= 17 and records[16] > 2:
        return f"Invalid magic found in record: {int.from_bytes(records[16:17], 'big', signed=True)}"
    return None


def _first_batch_transactional(records) -> bool:
    if not records:
        return False
    try:
        for pos, _size, magic in iter_entries(records, partial_ok=True):
            return magic == 2 and bool(batch_header(records, pos).attributes & _TRANSACTIONAL)
    except CorruptRecordError:
        return False
    return False


def _batch_for_append(records, version: int) -> bytes | None:
    """The bytes to append, after the version rules of ProduceRequest.validateRecords;
    None for a v0-2 set without a whole entry, which appends nothing.

    Like Kafka's record iterators, a partial entry at the end is not an entry:
    it is left out of the append (UnifiedLog trims it).
    """
    if records is None:
        # Kafka 3.9 never answers this; a client gets the error it would for no batch.
        raise _Refused(ErrorCode.INVALID_RECORD)
    try:
        entries = list(iter_entries(records, partial_ok=True))
    except CorruptRecordError as exc:
        raise _Refused(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
    if not entries:
        if version < 3:
            return None
        raise _Refused(ErrorCode.INVALID_RECORD,
                       f"Produce requests with version {version} must have at least one record "
                       f"batch per partition")
    whole = records[:entries[-1][0] + entries[-1][1]]
    if version >= 3:
        if entries[0][2] != 2:
            raise _Refused(ErrorCode.INVALID_RECORD,
                           f"Produce requests with version {version} are only allowed to contain "
                           f"record batches with magic version 2")
        if version < 7 and batch_header(records, 0).compression == compression.ZSTD:
            raise _Refused(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                           f"Produce requests with version {version} are not allowed to use "
                           f"ZStandard compression")
        if len(entries) > 1:
            raise _Refused(ErrorCode.INVALID_RECORD,
                           f"Produce requests with version {version} are only allowed to contain "
                           f"exactly one record batch per partition")
        return whole
    if all(magic == 2 for _pos, _size, magic in entries):
        return whole
    try:
        return legacy_as_batch(whole)
    except compression.DecompressionError:
        # the codec's KafkaException, as for a v2 batch (UndecompressableBatchError)
        raise _Refused(ErrorCode.UNKNOWN_SERVER_ERROR, None) from None
    except CorruptRecordError as exc:
        raise _Refused(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None


async def _append(ctx, name: str, index: int, records, version: int,
                  transactional_id: str | None = None) -> dict:
    broker = ctx.broker
    partition = find_partition(broker, name, index)
    if partition is None:
        return _answer(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                       "This server does not host this topic-partition.")
    topic = broker.topics.get(name)
    if topic.internal and ctx.client_id != ADMIN_CLIENT_ID:
        return _answer(index, ErrorCode.INVALID_TOPIC_EXCEPTION,
                       f"Cannot append to internal topic {name}")
    try:
        data = _batch_for_append(records, version)
    except _Refused as exc:
        return _answer(index, exc.code, exc.message)
    if data is None:
        return _answer(index, ErrorCode.NONE)  # nothing appended, no offset to tell
    plog = partition.log
    if plog is None:
        plog = broker.logs.get_or_create(name, index, broker.log_config(name))
    header = batch_header(data, 0)
    if header.producer_id >= 0 and not plog.producers_loaded:
        await plog.load_producer_state()
    if header.is_transactional:
        refused = await _unverified(ctx, plog, header, transactional_id, name, index, version)
        if refused is not None:
            return _answer(index, *refused, custom=True)
    try:
        # The records are a view of this request's frame, which nothing else
        # reads: validated and written in place.
        info = await plog.append_async(data, leader_epoch=LEADER_EPOCH, owned=True)
    except StorageError as exc:
        answer = _answer(index, exc.code, str(exc), getattr(exc, "record_errors", ()))
        if exc.code not in _UNKNOWN_APPEND_INFO:
            # ReplicaManager.appendToLocalLog: every other failure is answered with
            # the log's start offset.
            answer["log_start_offset"] = plog.log_start_offset
        return answer
    broker.fetch_waiters.notify((name, index))
    return {"index": index, "error_code": ErrorCode.NONE, "base_offset": info.first_offset,
            "log_append_time_ms": info.log_append_time,
            "log_start_offset": info.log_start_offset, "record_errors": [],
            "error_message": None}


async def _unverified(ctx, plog, header, transactional_id, name: str, index: int,
                      version: int) -> tuple[ErrorCode, str | None] | None:
    """A transactional batch goes to a partition of its producer's transaction:
    one the partition already has open for it, or one its coordinator has
    (KIP-890's verification of the first write, as ReplicaManager maps the
    coordinator's answer), or from v12 (transaction.version 2) one the
    coordinator adds now; the refusal otherwise."""
    pid, epoch = header.producer_id, header.producer_epoch
    entry = plog.producers.entry(pid)
    if entry is not None and entry.epoch > epoch:
        return ErrorCode.INVALID_PRODUCER_EPOCH, None
    if entry is not None and entry.epoch == epoch and pid in plog.producers.ongoing:
        return None
    if not transactional_id:
        return ErrorCode.INVALID_TXN_STATE, "Record was not part of an ongoing transaction"
    txns = ctx.broker.transactions
    if version >= 12:
        code = await txns.add_partitions(transactional_id, pid, epoch, [(name, index)],
                                         client_tv=2)
        for _ in range(5):  # the coordinator still ending the last one: briefly again
            if code != ErrorCode.CONCURRENT_TRANSACTIONS:
                break
            await asyncio.sleep(0.02)
            code = await txns.add_partitions(transactional_id, pid, epoch, [(name, index)],
                                             client_tv=2)
        if code == ErrorCode.CONCURRENT_TRANSACTIONS:
            return code, None
    else:
        code = txns.verify(transactional_id, pid, epoch, [(name, index)])[(name, index)]
    if code == ErrorCode.NONE:
        return None
    if code == ErrorCode.TRANSACTION_ABORTABLE:
        if version <= 10:
            return ErrorCode.INVALID_TXN_STATE, "Partition was not added to the transaction"
        return ErrorCode.TRANSACTION_ABORTABLE, None
    if code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH, None
    if code in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                ErrorCode.NOT_COORDINATOR, ErrorCode.CONCURRENT_TRANSACTIONS):
        return ErrorCode.NOT_ENOUGH_REPLICAS, None
    return code, None


# Up to twice the clients' default max.request.size (1 MB).
@api(key=0, versions=(0, 13), decode_on_loop=2 << 20)
async def produce(ctx, request):
    version = ctx.api_version
    acks = request.acks
    refusal = None
    unreadable = next((why for t in request.topic_data for p in t.partition_data
                       if (why := _unreadable_first_entry(p.records))), None)
    if unreadable is not None:
        refusal = (ErrorCode.CORRUPT_MESSAGE, unreadable, (), True)
    elif acks not in (-1, 0, 1):
        refusal = (ErrorCode.INVALID_REQUIRED_ACKS, None)
    elif any(_first_batch_transactional(p.records)
             for t in request.topic_data for p in t.partition_data):
        if request.transactional_id is None or not allowed(
                ctx, WRITE, TRANSACTIONAL_ID, request.transactional_id):
            refusal = (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None)
    denied = ()
    if ctx.broker.authorizer is not None and refusal is None:
        names = {ctx.broker.topics.name_of(t.topic_id) if version >= 13 else t.name
                 for t in request.topic_data} - {None}
        denied = names - allowed_names(ctx, WRITE, TOPIC, names)
    responses = []
    failed = False
    by_id = version >= 13
    for topic in request.topic_data:
        name = ctx.broker.topics.name_of(topic.topic_id) if by_id else topic.name
        answers = []
        for part in topic.partition_data:
            if refusal is not None:
                answer = _answer(part.index, *refusal)
            elif name is None:
                answer = _answer(part.index, ErrorCode.UNKNOWN_TOPIC_ID)
            elif name in denied:
                answer = _answer(part.index, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            else:
                answer = await _append(ctx, name, part.index, part.records, version,
                                       request.transactional_id if version >= 3 else None)
            failed = failed or answer["error_code"] != ErrorCode.NONE
            answers.append(answer)
        responses.append({"name": topic.name, "topic_id": topic.topic_id,
                          "partition_responses": answers})
    throttle_ms = 0
    if PRODUCE_QUOTA in ctx.broker.quotas.enforcing:
        throttle_ms = ctx.throttle(PRODUCE_QUOTA, sum(
            len(p.records) for t in request.topic_data for p in t.partition_data if p.records))
    if acks == 0:
        if failed:
            # Kafka closes the connection: the producer learns of the failure
            # through its next metadata refresh.
            raise CloseConnection
        return NO_RESPONSE
    return {"responses": responses, "throttle_time_ms": throttle_ms}
