"""``kcoord serve``: run the broker.

Settings are layered: Kafka's defaults (or kcoord's development defaults), then
``--config server.properties``, then each ``--override key=value``, then the
explicit flags (``--host``, ``--port``, ``--advertised-host``,
``--advertised-port``, ``--data-dir``).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import signal
import sys

import structlog

from kcoord.broker import logs
from kcoord.broker.config import BrokerConfig, parse_listener, properties_from_env, read_properties

log = structlog.get_logger("kcoord.cli")


def _parser(serve_only: bool = False) -> argparse.ArgumentParser:
    """The command line; ``serve_only`` leaves the other commands out (their parsers
    import the tools, which a broker's start does not need: it is only used when
    the arguments begin with ``serve``, so no message can name them)."""
    parser = argparse.ArgumentParser(
        prog="kcoord", description="A Kafka-compatible broker.",
        epilog="Start a broker: kcoord serve (then point a client at 127.0.0.1:9092).\n"
               "More: kcoord serve --help, kcoord pipeline --help.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=_VersionAction)
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
    serve.add_argument("--dev-tls", action="store_true",
                       help="also listen with TLS: SSL on port+1 and SASL_SSL on port+2 (PLAIN "
                            "and SCRAM user kcoord, password kcoord-secret), with a development "
                            "CA and certificates made in DATA_DIR/dev-tls (ca.pem for clients)")
    serve.add_argument("--add-scram", metavar="MECHANISM=[name=USER,password=PASSWORD]",
                       action="append", default=[],
                       help="give a user a SCRAM credential at start, as kafka-storage format "
                            "--add-scram does (for example 'SCRAM-SHA-512=[name=alice,"
                            "password=alice-secret]', optionally iterations=N)")
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
    if serve_only:
        return parser
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
    if getattr(args, "dev_tls", False):
        built = BrokerConfig.build(props, kafka_defaults=args.kafka_defaults, warn=False)
        props.update(dev_tls_properties(built))
    return BrokerConfig.build(props, kafka_defaults=args.kafka_defaults, warn=False)


DEV_USER, DEV_PASSWORD = "kcoord", "kcoord-secret"


def dev_tls_properties(config: BrokerConfig) -> dict[str, str]:
    """--dev-tls: an SSL and a SASL_SSL listener beside the first one (the next two
    ports, or any free ones with port 0), with the development certificates of
    ``<data dir>/dev-tls``; the SASL_SSL listener logs in the development user
    with PLAIN and SCRAM."""
    first = config.listeners[0]
    host = _bracket(first.host)
    ports = (0, 0) if first.port == 0 else (first.port + 1, first.port + 2)
    folder = (config.data_dir / "dev-tls").resolve()
    listeners = [s for s in config["listeners"]
                 if parse_listener(s)[0] not in ("SSL", "SASL_SSL")]
    listeners += [f"SSL://{host}:{ports[0]}", f"SASL_SSL://{host}:{ports[1]}"]
    advertised = list(config.get("advertised.listeners") or [])
    props = {
        "listeners": ",".join(listeners),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(folder / "broker.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(folder / "ca.pem"),
        "listener.name.ssl.ssl.client.auth": "requested",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config":
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'user_{DEV_USER}="{DEV_PASSWORD}";',
    }
    if advertised:
        props["advertised.listeners"] = ",".join(advertised)
    return props


def check_listener_security(config: BrokerConfig) -> None:
    """Load every TLS listener's keys and check every SASL listener's settings
    now, so that a mistake is a clear line before anything starts
    (SecurityConfigError, a ValueError)."""
    from kcoord.broker.security.listeners import build

    for spec in config.listeners:
        if config.protocol_of(spec.name) != "PLAINTEXT":
            build(config, spec.name, lambda user, mechanism: None)


def parse_add_scram(text: str) -> tuple[str, str, str, int]:
    """``SCRAM-SHA-256=[name=alice,password=secret,iterations=8192]`` ->
    (user, mechanism, password, iterations), as kafka-storage format reads it."""
    from kcoord.broker.security.scram import MECHANISMS

    mechanism, sep, rest = text.partition("=")
    mechanism = mechanism.strip().upper()
    if mechanism not in MECHANISMS:
        raise ValueError(f"--add-scram: the mechanism must be SCRAM-SHA-256 or SCRAM-SHA-512, "
                         f"not {mechanism!r}")
    rest = rest.strip()
    if not sep or not (rest.startswith("[") and rest.endswith("]")):
        raise ValueError(f"--add-scram expects {mechanism}=[name=USER,password=PASSWORD], "
                         f"got {text!r}")
    fields = {}
    for part in rest[1:-1].split(","):
        key, eq, value = part.partition("=")
        if not eq:
            raise ValueError(f"--add-scram: {part!r} is not key=value")
        fields[key.strip()] = value.strip().strip('"')
    if not fields.get("name") or "password" not in fields:
        raise ValueError("--add-scram needs name=... and password=...")
    try:
        iterations = int(fields.get("iterations", 4096))
    except ValueError:
        raise ValueError(f"--add-scram: iterations {fields['iterations']!r} is not a "
                         "number") from None
    low, high = MECHANISMS[mechanism].min_iterations, MECHANISMS[mechanism].max_iterations
    if not low <= iterations <= high:
        raise ValueError(f"--add-scram: iterations must be between {low} and {high}")
    return fields["name"], mechanism, fields["password"], iterations


class _VersionAction(argparse.Action):
    """``--version``: the installed version, looked up only when asked."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help="show program's version number and exit"):
        super().__init__(option_strings, dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"kcoord {_version()}")
        parser.exit()


def _version() -> str:
    try:
        from importlib.metadata import version
        return version("kcoord")
    except Exception:
        return "unknown"


class _ReaderMayLeave(io.TextIOBase):
    """A tool's stdout: once its reader has gone (``kcoord topics --list | head``)
    the rest is dropped and the command goes on to its end, as Java's
    ``System.out`` drops it under Kafka's tools; no BrokenPipeError escapes."""

    def __init__(self, stream):
        self._stream = stream
        self.gone = False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                self._stream.write(text)
            except BrokenPipeError:
                self._leave()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._leave()

    def _leave(self) -> None:
        self.gone = True
        devnull = os.open(os.devnull, os.O_WRONLY)  # what is still buffered goes there
        os.dup2(devnull, self._stream.fileno())
        os.close(devnull)


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host


async def serve(config: BrokerConfig, scram_users=(), dev_tls: bool = False) -> int:
    from kcoord.broker.app import Broker
    from kcoord.broker.meta import DataDirError
    from kcoord.broker.security.listeners import SecurityConfigError

    if dev_tls:
        folder = config.data_dir.resolve() / "dev-tls"
        scram_users = [*scram_users, *((DEV_USER, m, DEV_PASSWORD, 4096)
                                       for m in ("SCRAM-SHA-256", "SCRAM-SHA-512"))]
        log.info("broker.dev_tls", certificates=str(folder), ca=str(folder / "ca.pem"),
                 user=DEV_USER, java_client_config=str(folder / "client-sasl-ssl.properties"))
    broker = Broker(config, own_process=True)
    broker.initial_scram_users = list(scram_users)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await broker.start()
    except (DataDirError, OSError, SecurityConfigError) as exc:
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
    if argv is None:
        argv = sys.argv[1:]
    parser = _parser(serve_only=argv[:1] == ["serve"])
    if argv[:1] and argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version"):
        parser.error(f"unrecognized arguments: {argv[0]}")  # before "command is required"
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

        sys.stdout = out = _ReaderMayLeave(sys.stdout)
        return (groups if args.command == "groups" else topics).run(args, out=out)
    logs.configure(args.log_format, args.log_level)
    if args.command == "serve":
        try:
            config = build_config(args)
            scram_users = [parse_add_scram(text) for text in args.add_scram]
            if args.dev_tls:
                from kcoord.broker.security import devcerts

                devcerts.ensure(config.data_dir / "dev-tls")
            check_listener_security(config)
        except ValueError as exc:
            print(f"kcoord: {exc}", file=sys.stderr)
            return 2
        return _run(serve(config, scram_users, dev_tls=args.dev_tls))
    return 2


if __name__ == "__main__":
    sys.exit(main())
