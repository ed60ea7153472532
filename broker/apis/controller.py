"""The deadline of the requests a Kafka broker forwards to its KRaft controller
(CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders,
AlterPartitionReassignments).

Kafka's ``ControllerApis`` turns such a request's ``timeout_ms`` into the
deadline of the controller event that does its work, and the controller's
event queue fails an event whose deadline has passed before it runs with a
``TimeoutException``.  The whole request is then answered as its
``getErrorResponse`` builds it: REQUEST_TIMED_OUT for each topic (or
partition) it names, without a message, and nothing is done.  A timeout of 0
or less has passed as the request arrives (kafka-go's ElectLeaders sends 0
unless told otherwise).  A request that leaves the controller nothing to do
(no topic, or only names refused before the controller is asked: a name given
twice, a topic the client may not touch) makes no event, and is answered as
usual."""

from __future__ import annotations

from kcoord.protocol.errors import ErrorCode

TIMED_OUT = ErrorCode.REQUEST_TIMED_OUT


def timed_out(timeout_ms: int) -> bool:
    """Whether a controller event with this request's timeout would time out."""
    return timeout_ms <= 0
