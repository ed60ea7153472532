"""ListTransactions (key 66), versions 0-2 (``kafka-transactions list``).

Every transactional id the coordinator holds, with its producer id and the
state's name, filtered as Kafka filters them: by state names (names that are
no state come back in ``unknown_state_filters`` and match nothing), by
producer ids, by how long the transaction has been open (v1:
``duration_filter`` ms, -1 for any) and by a regular expression the whole id
must match (v2, Java's ``Pattern.matches``; null or empty for any; a bad
expression: INVALID_REGULAR_EXPRESSION).  While a partition of
``__transaction_state`` is loading: COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

import re

from kcoord.broker.apis import api
from kcoord.broker.apis.authz import DESCRIBE, TRANSACTIONAL_ID, allowed_names
from kcoord.broker.transactions.metadata import TxnState
from kcoord.protocol.errors import ErrorCode


@api(key=66, versions=(0, 2))
def list_transactions(ctx, request):
    version = ctx.api_version
    answer = {"throttle_time_ms": 0, "error_code": ErrorCode.NONE,
              "unknown_state_filters": [], "transaction_states": []}
    states = set()
    for name in request.state_filters:
        state = TxnState.by_display(name)
        if state is None:
            answer["unknown_state_filters"].append(name)
        else:
            states.add(state)
    if request.state_filters and not states:
        return answer
    pattern = request.transactional_id_pattern if version >= 2 else None
    matcher = None
    if pattern:
        try:
            matcher = re.compile(pattern)
        except re.error:
            answer["error_code"] = ErrorCode.INVALID_REGULAR_EXPRESSION
            return answer
    duration = request.duration_filter if version >= 1 else -1
    code, listed = ctx.broker.transactions.listing()
    if code != ErrorCode.NONE:
        answer["error_code"] = code
        return answer
    pids = set(request.producer_id_filters)
    now = ctx.broker.transactions.now()
    if ctx.broker.authorizer is not None:  # the ids the client may DESCRIBE
        shown = allowed_names(ctx, DESCRIBE, TRANSACTIONAL_ID,
                              [m.transactional_id for m in listed])
        listed = [m for m in listed if m.transactional_id in shown]
    for meta in listed:
        if states and meta.state not in states:
            continue
        if pids and meta.producer_id not in pids:
            continue
        if duration >= 0 and not now - meta.start_ms > duration:
            continue
        if matcher is not None and matcher.fullmatch(meta.transactional_id) is None:
            continue
        answer["transaction_states"].append({
            "transactional_id": meta.transactional_id, "producer_id": meta.producer_id,
            "transaction_state": meta.state.display})
    return answer
