"""ApiVersions (key 18), versions 0-5.

- The answer lists every API registered in ``broker.apis``: nothing is
  advertised that is not served.
- The response header is always v0 (see ``protocol.headers``); a version above 5
  is answered by the server's v0-format UNSUPPORTED_VERSION fallback before it
  reaches this handler.
- v3+ requests whose client software name or version do not match Kafka's
  pattern get INVALID_REQUEST with an empty list, as Kafka's
  ``ApiVersionsRequest.isValid`` decides.
- v5 (KIP-1242): a client that names the cluster and node it means to reach
  must name both (else INVALID_REQUEST); a cluster id or node id other than
  this broker's gets REBOOTSTRAP_REQUIRED, an empty list, as Kafka 4.4
  answers.
- v3+ lists two features as Kafka 4.4 lists them (supported: v4+ only,
  KIP-1022): ``group.version``, supported 0-1, finalized at 1 (the consumer
  group protocol, KIP-848) when ``group.coordinator.rebalance.protocols`` lists
  ``consumer``; ``transaction.version``, supported 0-2, finalized at
  ``kcoord.transaction.version`` (2 by default, as Kafka 4.4: a Java producer
  then speaks the second transaction protocol, KIP-890) unless 0.  kcoord has
  no KRaft metadata log, so no other feature level (docs/deviations.md).
"""

from __future__ import annotations

import re

from kcoord.broker.apis import advertised_versions, api
from kcoord.broker.apis.k068_consumer_group_heartbeat import consumer_protocol_enabled
from kcoord.protocol.errors import ErrorCode

_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


@api(key=18, versions=(0, 5))
def api_versions(ctx, request):
    if ctx.api_version >= 3 and not (
        _SOFTWARE.fullmatch(request.client_software_name)
        and _SOFTWARE.fullmatch(request.client_software_version)
    ):
        return {"error_code": ErrorCode.INVALID_REQUEST, "api_keys": []}
    if ctx.api_version >= 5 and (request.cluster_id is not None or request.node_id >= 0):
        if request.cluster_id is None or request.node_id < 0:
            return {"error_code": ErrorCode.INVALID_REQUEST, "api_keys": []}
        if (request.cluster_id, request.node_id) != (ctx.broker.cluster_id, ctx.broker.node_id):
            return {"error_code": ErrorCode.REBOOTSTRAP_REQUIRED, "api_keys": []}
    answer = {"error_code": ErrorCode.NONE, "api_keys": _api_keys(ctx.broker),
              "throttle_time_ms": 0}
    if ctx.api_version >= 3:
        # below v4 a supported feature whose minimum version is 0 is left out,
        # for the clients that cannot read one (KIP-1022)
        answer["supported_features"] = _SUPPORTED if ctx.api_version >= 4 else []
        finalized = []
        if consumer_protocol_enabled(ctx.broker):
            finalized.append(_GROUP_VERSION)
        level = ctx.broker.config["kcoord.transaction.version"]
        if level > 0:
            finalized.append({"name": "transaction.version", "max_version_level": level,
                              "min_version_level": level})
        if finalized:
            answer["finalized_features"] = finalized
            answer["finalized_features_epoch"] = 0
    return answer


_SUPPORTED = [{"name": "group.version", "min_version": 0, "max_version": 1},
              {"name": "transaction.version", "min_version": 0, "max_version": 2}]
_GROUP_VERSION = {"name": "group.version", "max_version_level": 1, "min_version_level": 1}


_API_KEYS: dict[tuple, list[dict]] = {}


def _api_keys(broker) -> list[dict]:
    advertised = advertised_versions(broker)
    cache_key = tuple(advertised)
    keys = _API_KEYS.get(cache_key)
    if keys is None:
        keys = _API_KEYS[cache_key] = [
            {"api_key": key, "min_version": low, "max_version": high}
            for key, low, high in advertised]
    return keys
