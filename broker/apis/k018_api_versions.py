"""ApiVersions (key 18), versions 0-4.

- The answer lists every API registered in ``broker.apis``: nothing is
  advertised that is not served.
- The response header is always v0 (see ``protocol.headers``); a version above 4
  is answered by the server's v0-format UNSUPPORTED_VERSION fallback before it
  reaches this handler.
- v3+ requests whose client software name or version do not match Kafka's
  pattern get INVALID_REQUEST with an empty list, as Kafka's
  ``ApiVersionsRequest.isValid`` decides.
"""

from __future__ import annotations

import re

from broker.apis import advertised_versions, api
from protocol.errors import ErrorCode

_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


@api(key=18, versions=(0, 4))
def api_versions(ctx, request):
    if ctx.api_version >= 3 and not (
        _SOFTWARE.fullmatch(request.client_software_name)
        and _SOFTWARE.fullmatch(request.client_software_version)
    ):
        return {"error_code": ErrorCode.INVALID_REQUEST, "api_keys": []}
    return {"error_code": ErrorCode.NONE, "api_keys": _api_keys(ctx.broker),
            "throttle_time_ms": 0}


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
