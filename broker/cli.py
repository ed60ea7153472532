"""``kcoord serve``: run the broker.

Settings are layered: Kafka's defaults (or kcoord's development defaults), then
``--config server.properties``, then each ``--override key=value``, then the
explicit flags (``--host``, ``--port``, ``--advertised-host``,
``--advertised-port``, ``--data-dir``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys

import structlog

from kcoord.broker import logs
from kcoord.broker.config import BrokerConfig, parse_listener, properties_from_env, read_properties

log = structlog.get_logger("kcoord.cli")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kcoord", description="A Kafka-compatible broker.",
        epilog="Start a broker: kcoord serve (then point a client at 127.0.0.1:9092).\n"
               "More: kcoord serve --help, kcoord pipeline --help.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"kcoord {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser(
        "serve", help="run the broker", description=_SERVE_DESCRIPTION,
        epilog=_serve_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to listen on (default 9092; 0 = any free port)")
    serve.add_argument("--advertised-host", help="host clients are told to connect to")
    serve.add_argument("--advertised-port", type=int, help="port clients are told to connect to")
    serve.add_argument("--data-dir", help="where topics and offsets are stored (default ./data)")
    serve.add_argument("--config", metavar="FILE", help="a server.properties file")
    serve.add_argument("--override", metavar="KEY=VALUE", action="append", default=[],
                       help="set a broker property (repeatable)")
    serve.add_argument("--kafka-defaults", action="store_true",
                       help="use Kafka's own defaults instead of kcoord's development defaults")
    serve.add_argument("--kafka-env", action="store_true",
                       help="also take properties from KAFKA_* environment variables, as "
                            "Apache Kafka's container image does (KAFKA_NUM_PARTITIONS=3: "
                            "num.partitions=3); after --config, before --override")
    serve.add_argument("--log-format", choices=("console", "json"), default="console",
                       help="console lines (default) or one JSON object per line, on stderr")
    serve.add_argument("--log-level", type=str.lower, default="info",
                       choices=("debug", "info", "warning", "error"),
                       help="info (default); debug also traces every connection and request")
    from kcoord.pipeline.cli import add_parser as add_pipeline_parser  # argparse only: no Spark import
    from kcoord.broker.tools import groups, topics

    groups.add_parser(sub)
    topics.add_parser(sub)
    add_pipeline_parser(sub)
    return parser


_SERVE_DESCRIPTION = """\
Run a broker that Kafka clients connect to as to Apache Kafka: it listens on
127.0.0.1:9092 and keeps its topics and group offsets under ./data unless told
otherwise.  Settings are layered: the defaults, then --config, then each
--override, then the flags below."""


def _serve_epilog() -> str:
    from kcoord.broker.config import DEV_DEFAULTS

    width = max(len(name) for name in DEV_DEFAULTS)
    rows = "\n".join(f"  {name:<{width}}  {dev!s:>10}  (Kafka: {kafka})"
                     for name, (dev, kafka) in DEV_DEFAULTS.items())
    return (
        "examples:\n"
        "  kcoord serve\n"
        "      127.0.0.1:9092, data in ./data\n"
        "  kcoord serve --port 0 --data-dir /tmp/kcoord\n"
        "      any free port: the broker.started line says which\n"
        "  kcoord serve --config server.properties --override num.partitions=3\n"
        "      a Kafka properties file, one property changed\n"
        "  kcoord serve --host 0.0.0.0 --advertised-host myhost\n"
        "      reachable from other machines, which connect to myhost\n"
        "\n"
        "development defaults (kcoord's; --kafka-defaults restores Kafka's):\n"
        f"{rows}\n")


def build_config(args) -> BrokerConfig:
    props: dict[str, str] = {}
    if args.config:
        try:
            props.update(read_properties(args.config))
        except OSError as exc:
            raise ValueError(f"cannot read --config {args.config}: {exc.strerror}") from None
    if args.kafka_env:
        props.update(properties_from_env(os.environ))
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--override expects KEY=VALUE, got {item!r}")
        props[key.strip()] = value.strip()
    base = BrokerConfig.build(props, kafka_defaults=args.kafka_defaults)
    # The flags set the first listener (and what it advertises); others stay.
    first = base.listeners[0].name
    if args.host is not None or args.port is not None:
        listeners = list(base["listeners"])
        name, host, port = parse_listener(listeners[0])
        host = args.host if args.host is not None else host
        port = args.port if args.port is not None else port
        listeners[0] = f"{name}://{_bracket(host)}:{port}"
        props["listeners"] = ",".join(listeners)
    if args.advertised_host is not None or args.advertised_port is not None:
        advertised = list(base.get("advertised.listeners") or [])
        at = next((i for i, spec in enumerate(advertised)
                   if parse_listener(spec)[0] == first), None)
        if at is not None:
            _name, host, port = parse_listener(advertised[at])
        else:
            host, port = None, 0
        host = args.advertised_host if args.advertised_host is not None else host
        if host is None:
            host = BrokerConfig.build(props, kafka_defaults=args.kafka_defaults,
                                      warn=False).advertised[0]
        port = args.advertised_port if args.advertised_port is not None else port
        entry = f"{first}://{_bracket(host)}:{port}"
        if at is None:
            advertised.insert(0, entry)
        else:
            advertised[at] = entry
        props["advertised.listeners"] = ",".join(advertised)
    if args.data_dir is not None:
        props["log.dirs"] = args.data_dir
        props.pop("log.dir", None)
    return BrokerConfig.build(props, kafka_defaults=args.kafka_defaults, warn=False)


def _version() -> str:
    try:
        from importlib.metadata import version
        return version("kcoord")
    except Exception:
        return "unknown"


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host


async def serve(config: BrokerConfig) -> int:
    from kcoord.broker.app import Broker
    from kcoord.broker.meta import DataDirError

    broker = Broker(config, own_process=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await broker.start()
    except (DataDirError, OSError) as exc:
        log.error("broker.start_failed", error=str(exc))
        return 1
    stopped = asyncio.ensure_future(stop.wait())
    failed = asyncio.ensure_future(broker.failed.wait())
    await asyncio.wait([stopped, failed], return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    failed.cancel()
    log.info("broker.stopping")
    await broker.stop()
    return 1 if broker.failure is not None else 0


def _run(coro) -> int:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        # The subcommand's own usage, not the top level's: what was mistyped is there.
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        sub.choices[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command == "pipeline":
        from kcoord.pipeline.cli import run as run_pipeline

        return run_pipeline(args)
    if args.command in ("groups", "topics"):
        from kcoord.broker.tools import groups, topics

        return (groups if args.command == "groups" else topics).run(args)
    logs.configure(args.log_format, args.log_level)
    if args.command == "serve":
        try:
            config = build_config(args)
        except ValueError as exc:
            print(f"kcoord: {exc}", file=sys.stderr)
            return 2
        return _run(serve(config))
    return 2


if __name__ == "__main__":
    sys.exit(main())
