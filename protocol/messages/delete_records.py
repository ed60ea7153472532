"""DeleteRecords (key 21): versions 0-2, flexible from 2.

Moves each partition's log start offset up to the offset given (-1: the high
watermark); the records below it are no longer read.

Version notes:
- v1 only changes behaviour; v2 is the first flexible version.
"""

from kcoord.protocol.schema import F, S, Api

DELETE_RECORDS = Api(
    key=21,
    name="DeleteRecords",
    versions="0-2",
    flexible="2+",
    request=S(
        F("topics", [S(
            F("name", "string"),
            F("partitions", [S(
                F("partition_index", "int32"),
                F("offset", "int64"),
            )]),
        )]),
        F("timeout_ms", "int32"),
    ),
    response=S(
        F("throttle_time_ms", "int32"),
        F("topics", [S(
            F("name", "string"),
            F("partitions", [S(
                F("partition_index", "int32"),
                F("low_watermark", "int64"),
                F("error_code", "int16"),
            )]),
        )]),
    ),
)
