#!/bin/sh
# Start the broker in the container: `kcoord serve` with its settings taken from
# the environment.  Any arguments given to the container are appended, so
# `docker run IMAGE --override num.partitions=3` works.
#
# Apache Kafka's own image settings work as they do there: every KAFKA_*
# variable is a broker property (KAFKA_NUM_PARTITIONS=3 is num.partitions=3;
# KAFKA_LISTENERS, KAFKA_ADVERTISED_LISTENERS and
# KAFKA_LISTENER_SECURITY_PROTOCOL_MAP give several listeners, say one for the
# host and one for other containers), and a server.properties mounted at
# /mnt/shared/config/server.properties is read first.  Besides:
#
#   KCOORD_HOST             address to listen on        (default 0.0.0.0)
#   KCOORD_PORT             port to listen on           (default 9092)
#   KCOORD_DATA_DIR         data directory (a volume)   (default /var/lib/kcoord)
#   KCOORD_ADVERTISED_HOST  host clients are told to connect to (--advertised-host)
#   KCOORD_ADVERTISED_PORT  port clients are told to connect to (--advertised-port)
#   KCOORD_CONFIG           a server.properties file    (--config)
#   KCOORD_LOG_FORMAT       console or json             (default console)
#   KCOORD_LOG_LEVEL        debug, info, warning, ...   (default info)
#
# KAFKA_LISTENERS or KAFKA_ADVERTISED_LISTENERS replace KCOORD_HOST and
# KCOORD_PORT, and KAFKA_LOG_DIRS replaces KCOORD_DATA_DIR.
set -eu

host="${KCOORD_HOST:-0.0.0.0}"
port="${KCOORD_PORT:-9092}"
data_dir="${KCOORD_DATA_DIR:-/var/lib/kcoord}"
mounted="${KCOORD_MOUNTED_CONFIG:-/mnt/shared/config/server.properties}"

# Prepend the environment-derived flags to the container's own arguments,
# building from the end so the final order is: env flags, then "$@".
if [ -n "${KCOORD_CONFIG:-}" ]; then
    set -- --config "$KCOORD_CONFIG" "$@"
elif [ -f "$mounted" ]; then
    set -- --config "$mounted" "$@"
fi
if [ -n "${KCOORD_ADVERTISED_PORT:-}" ]; then
    set -- --advertised-port "$KCOORD_ADVERTISED_PORT" "$@"
fi
if [ -n "${KCOORD_ADVERTISED_HOST:-}" ]; then
    set -- --advertised-host "$KCOORD_ADVERTISED_HOST" "$@"
fi
if [ -z "${KAFKA_LOG_DIRS:-}" ]; then
    set -- --data-dir "$data_dir" "$@"
fi
if [ -z "${KAFKA_LISTENERS:-}${KAFKA_ADVERTISED_LISTENERS:-}" ]; then
    set -- --host "$host" --port "$port" "$@"
fi
set -- --kafka-env --log-format "${KCOORD_LOG_FORMAT:-console}" \
    --log-level "${KCOORD_LOG_LEVEL:-info}" "$@"

# exec: the broker becomes PID 1 and receives SIGTERM from `docker stop` itself.
exec kcoord serve "$@"
