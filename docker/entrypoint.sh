#!/bin/sh
# Start the broker in the container: `kcoord serve` with its settings taken from
# the environment.  Any arguments given to the container are appended, so
# `docker run IMAGE --override num.partitions=3` works.
#
#   KCOORD_HOST             address to listen on        (default 0.0.0.0)
#   KCOORD_PORT             port to listen on           (default 9092)
#   KCOORD_DATA_DIR         data directory (a volume)   (default /var/lib/kcoord)
#   KCOORD_ADVERTISED_HOST  host clients are told to connect to (--advertised-host)
#   KCOORD_ADVERTISED_PORT  port clients are told to connect to (--advertised-port)
#   KCOORD_CONFIG           a server.properties file    (--config)
#   KCOORD_LOG_FORMAT       console or json             (default console)
#   KCOORD_LOG_LEVEL        debug, info, warning, ...   (default info)
set -eu

host="${KCOORD_HOST:-0.0.0.0}"
port="${KCOORD_PORT:-9092}"
data_dir="${KCOORD_DATA_DIR:-/var/lib/kcoord}"

# Prepend the environment-derived flags to the container's own arguments,
# building from the end so the final order is: env flags, then "$@".
if [ -n "${KCOORD_CONFIG:-}" ]; then
    set -- --config "$KCOORD_CONFIG" "$@"
fi
if [ -n "${KCOORD_ADVERTISED_PORT:-}" ]; then
    set -- --advertised-port "$KCOORD_ADVERTISED_PORT" "$@"
fi
if [ -n "${KCOORD_ADVERTISED_HOST:-}" ]; then
    set -- --advertised-host "$KCOORD_ADVERTISED_HOST" "$@"
fi
set -- --host "$host" --port "$port" --data-dir "$data_dir" \
    --log-format "${KCOORD_LOG_FORMAT:-console}" --log-level "${KCOORD_LOG_LEVEL:-info}" "$@"

# exec: the broker becomes PID 1 and receives SIGTERM from `docker stop` itself.
exec kcoord serve "$@"
