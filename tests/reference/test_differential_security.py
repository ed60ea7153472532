"""SASL on the wire and the SCRAM credential APIs, asked of kcoord and of Apache
Kafka 4.x configured the same way (``tests.support.Secured``: a SASL_PLAINTEXT
listener with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, the users of
``SASL_USERS`` with both SCRAM credentials, no delay after a failed login),
request by request on a fresh connection per scenario, answers compared field
by field.  What each side does after an answer, closing the connection or
serving the next request, is compared too.

Each scenario returns what a client observes, with what legitimately differs
(nonces, salts, the server's SCRAM signature, ports) replaced by what it must
satisfy; the two observations must be equal."""

from __future__ import annotations

import base64
import hashlib
import socket
import struct
import time
import uuid
from typing import Callable

import pytest
from kafka.net.sasl.scram import ScramClient

from kcoord.protocol.client import WireClient
from kcoord.protocol.messages import ALL_APIS
from tests.reference import kafka
from tests.reference.fixtures import start_reference
from tests.support import SASL_USERS, Secured, closed_by_broker

MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
SCRAM_HASHES = {1: "sha256", 2: "sha512"}
ITERATIONS = 4096  # of the credentials Secured gives SASL_USERS
METADATA_ALL = {"topics": None, "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False}
API_VERSIONS = {"client_software_name": "kcoord-tests", "client_software_version": "1"}


def _jaas(module: str, options: str = "") -> str:
    return f"org.apache.kafka.common.security.{module} required{options};"


def _salted(mechanism: int, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(SCRAM_HASHES[mechanism], password.encode(), salt, iterations)


def _upsertion(name: str, mechanism: int, password: str = "secret",
               iterations: int = ITERATIONS, salt: bytes = b"kcoord-salt-0123") -> dict:
    return {"name": name, "mechanism": mechanism, "iterations": iterations, "salt": salt,
            "salted_password": _salted(mechanism if mechanism in SCRAM_HASHES else 1,
                                       password, salt, max(iterations, 1))}


class Pair:
    """kcoord's Secured and a Kafka with the same SASL_PLAINTEXT listener."""

    def __init__(self, ours: Secured, theirs: kafka.KafkaBroker):
        self.ours, self.theirs = ours, theirs

    def port(self, side: str, listener: str) -> int:
        return self.ours.port(listener) if side == "kcoord" else \
            self.theirs.listener_port(listener)

    def both(self, listener: str, scenario: Callable[[WireClient, int], object]):
        """``scenario(client, port)`` run on a new connection to each side: (kcoord's
        observation, Kafka's)."""
        seen = []
        for side in ("kcoord", "Kafka"):
            port = self.port(side, listener)
            with WireClient("127.0.0.1", port, timeout=10) as client:
                seen.append(_unordered(scenario(client, port)))
        return tuple(seen)


def _unordered(seen):
    """The mechanisms of a SaslHandshake answer as a set: Kafka lists them in hash
    order, not in the order of ``sasl.enabled.mechanisms``."""
    if isinstance(seen, dict):
        return {k: sorted(v) if k == "mechanisms" else _unordered(v) for k, v in seen.items()}
    if isinstance(seen, (list, tuple)):
        return type(seen)(_unordered(v) for v in seen)
    return seen


def _wait_for_credentials(bootstrap: str, users: list[str], timeout: float = 30) -> None:
    """Until the broker describes every SCRAM credential of ``users`` (Kafka applies
    AlterUserScramCredentials through its metadata log)."""
    deadline = time.monotonic() + timeout
    with WireClient.to(bootstrap) as client:
        while time.monotonic() < deadline:
            answer = client.call(50, 0, {"users": [{"name": u} for u in users]})
            if all(r["error_code"] == 0 and len(r["credential_infos"]) == 2
                   for r in answer["results"]):
                return
            time.sleep(0.05)
    raise RuntimeError(f"Kafka did not describe the credentials of {users} in time")


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    users = "".join(f' user_{u}="{p}"' for u, p in SASL_USERS.items())
    reference = start_reference(listeners={
        "SASL_PLAINTEXT": "SASL_PLAINTEXT"}, extra={
        "sasl.enabled.mechanisms": ",".join(MECHANISMS),
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            _jaas("plain.PlainLoginModule", users),
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
            _jaas("scram.ScramLoginModule"),
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config":
            _jaas("scram.ScramLoginModule"),
        "connection.failed.authentication.delay.ms": 0,
    })
    ours = None
    try:
        with WireClient.to(reference.bootstrap) as client:
            for mechanism in (1, 2):  # one credential of a user per request
                answer = client.call(51, 0, {"deletions": [], "upsertions": [
                    _upsertion(user, mechanism, password, salt=uuid.uuid4().bytes)
                    for user, password in SASL_USERS.items()]})
                assert {r["error_code"] for r in answer["results"]} == {0}, answer
        _wait_for_credentials(reference.bootstrap, list(SASL_USERS))
        ours = Secured(tmp_path_factory.mktemp("differential-security-data"),
                       tmp_path_factory.mktemp("differential-security-certs"),
                       extra={"connection.failed.authentication.delay.ms": "0"}).start()
        yield Pair(ours, reference)
    finally:
        if ours is not None:
            ours.stop()
        reference.stop()


def _call(client: WireClient, api: int, version: int, body: dict) -> dict | str:
    """The answer to one request, or "closed" when the broker closes the connection
    without one."""
    client.send(api, version, body)
    try:
        frame = client.recv_frame()
    except socket.timeout:
        raise
    except OSError:  # ConnectionError: reset, or closed before a full answer
        return "closed"
    return client.decode_response(ALL_APIS[api], version, frame)


def _serves(client: WireClient, port: int) -> dict:
    """A Metadata request on an authenticated connection: who answers it."""
    brokers = client.call(3, 12, METADATA_ALL)["brokers"]
    return {"brokers": [(b["node_id"], b["host"], b["port"] == port) for b in brokers]}


def _sasl_versions(client: WireClient) -> dict:
    answer = client.call(18, 3, API_VERSIONS)
    offered = {k["api_key"]: (k["min_version"], k["max_version"]) for k in answer["api_keys"]}
    return {"error_code": answer["error_code"], "17": offered.get(17), "36": offered.get(36)}


# -- ApiVersions and SaslHandshake ---------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER",
                                       "plain", ""])
def test_api_versions_then_a_handshake(pair, version, mechanism):
    def scenario(client, port):
        seen = {"api_versions": _sasl_versions(client),
                "handshake": client.call(17, version, {"mechanism": mechanism})}
        if seen["handshake"]["error_code"]:
            seen["closed"] = closed_by_broker(client)
        return seen

    ours, theirs = pair.both("SASL_PLAINTEXT", scenario)
    assert theirs["api_versions"] == {"error_code": 0, "17": (0, 1), "36": (0, 2)}
    assert ours == theirs


def test_a_handshake_without_api_versions(pair):
    def scenario(client, port):
        handshake = client.call(17, 1, {"mechanism": "SCRAM-SHA-256"})
        scram = ScramClient("alice", "alice-secret", "SCRAM-SHA-256")
        first = client.call(36, 2, {"auth_bytes": scram.first_message()})
        scram.process_server_first_message(first["auth_bytes"])
        final = client.call(36, 2, {"auth_bytes": scram.final_message()})
        return {"handshake": handshake, "final": final["error_code"], **_serves(client, port)}

    ours, theirs = pair.both("SASL_PLAINTEXT", scenario)
    assert theirs["handshake"] == {"error_code": 0, "mechanisms": sorted(MECHANISMS)}
    assert ours == theirs


# -- PLAIN ---------------------------------------------------------------------------------------

PLAIN_TOKENS = {
    "good": b"\0alice\0alice-secret",
    "the same authorization id": b"alice\0alice\0alice-secret",
    "a wrong password": b"\0alice\0not-her-password",
    "an unknown user": b"\0nobody\0alice-secret",
    "another user's password": b"\0alice\0admin-secret",
    "two tokens": b"\0alice",
    "four tokens": b"\0alice\0alice-secret\0more",
    "one token": b"alice",
    "an empty token": b"",
    "no username": b"\0\0pw",
    "no password": b"\0alice\0",
    "another authorization id": b"admin\0alice\0alice-secret",
    "not UTF-8": b"\0al\xffice\0alice-secret",
}


@pytest.mark.parametrize("version", [0, 1, 2])
@pytest.mark.parametrize("case", list(PLAIN_TOKENS))
def test_plain_authenticate(pair, case, version):
    def scenario(client, port):
        handshake = client.call(17, 1, {"mechanism": "PLAIN"})
        answer = _call(client, 36, version, {"auth_bytes": PLAIN_TOKENS[case]})
        seen = {"handshake": handshake, "answer": answer}
        if answer == "closed":
            pass
        elif answer["error_code"]:
            seen["closed"] = closed_by_broker(client)
        else:
            seen.update(_serves(client, port))
        return seen

    ours, theirs = pair.both("SASL_PLAINTEXT", scenario)
    assert ours == theirs


@pytest.mark.parametrize("case", ["good", "a wrong password", "two tokens"])
def test_plain_raw_token_after_a_v0_handshake(pair, case):
    """Handshake v0: the token goes unframed by a request header, the answer is a
    bare size-prefixed frame; a failure has no answer."""
    def scenario(client, port):
        handshake = client.call(17, 0, {"mechanism": "PLAIN"})
        token = PLAIN_TOKENS[case]
        client.send_raw(struct.pack(">i", len(token)) + token)
        seen = {"handshake": handshake}
        try:
            seen["frame"] = client.recv_frame()
        except socket.timeout:
            raise
        except OSError:
            seen["frame"] = "closed"
            return seen
        seen.update(_serves(client, port))
        return seen

    ours, theirs = pair.both("SASL_PLAINTEXT", scenario)
    assert ours == theirs


# -- SCRAM ---------------------------------------------------------------------------------------

def _server_first(message: bytes, client_nonce: bytes) -> dict:
    fields = dict(part.split("=", 1) for part in message.decode().split(","))
    return {"keys": sorted(fields), "nonce_extends_ours": fields["r"].encode().startswith(
        client_nonce) and len(fields["r"]) > len(client_nonce),
        "salt_bytes": len(base64.b64decode(fields["s"])) > 0, "iterations": fields["i"]}


SCRAM_CASES = {
    "good": ("alice", "alice-secret"),
    "a wrong password": ("alice", "not-her-password"),
    "another user's password": ("alice", "admin-secret"),
    "an unknown user": ("nobody", "whatever"),
}


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("case", list(SCRAM_CASES))
def test_scram_authenticate(pair, case, mechanism):
    user, password = SCRAM_CASES[case]

    def scenario(client, port):
        assert client.call(17, 1, {"mechanism": mechanism})["error_code"] == 0
        scram = ScramClient(user, password, mechanism)
        first = _call(client, 36, 2, {"auth_bytes": scram.first_message()})
        if first == "closed":
            return {"first": first}
        seen = {"first_error": (first["error_code"], first["error_message"]),
                "first_lifetime": first["session_lifetime_ms"]}
        if first["error_code"]:
            seen["first_bytes"] = first["auth_bytes"]
            seen["closed"] = closed_by_broker(client)
            return seen
        seen["server_first"] = _server_first(first["auth_bytes"], scram.nonce)
        scram.process_server_first_message(first["auth_bytes"])
        final = _call(client, 36, 2, {"auth_bytes": scram.final_message()})
        if final == "closed":
            return {**seen, "final": final}
        seen["final"] = {k: v for k, v in final.items() if k != "auth_bytes"}
        if final["error_code"]:
            seen["final_bytes"] = final["auth_bytes"]
            seen["closed"] = closed_by_broker(client)
            return seen
        scram.process_server_final_message(final["auth_bytes"])  # the server's proof holds
        seen["server_final_keys"] = sorted(
            part.split("=", 1)[0] for part in final["auth_bytes"].decode().split(","))
        seen.update(_serves(client, port))
        return seen

    ours, theirs = pair.both("SASL_PLAINTEXT", scenario)
    assert ours == theirs


def _scram_first_bare(user: str = "alice") -> bytes:
    return f"n={user},r=clientnonce0123456789".encode()


SCRAM_FIRST_MESSAGES = {
    "not SCRAM": b"hello",
    "an empty message": b"",
    "channel binding asked for": b"p=tls-unique,," + _scram_first_bare(),
    "an authorization id of another user": b"n,a=admin," + _scram_first_bare(),
    "the user's own authorization id": b"n,a=alice," + _scram_first_bare(),
    "an extension": b"n,," + _scram_first_bare() + b",tokenauth=true",
    "a reserved mext attribute": b"n,,m=x," + _scram_first_bare(),
    "an escaped user name": b"n,," + _scram_first_bare("al=2Cice"),
    "a bad escape": b"n,," + _scram_first_bare("al=41ice"),
}


@pytest.mark.parametrize("case", list(SCRAM_FIRST_MESSAGES))
def test_scram_malformed_client_first_messages(pair, case):
    def scenario(client, port):
        assert client.call(17, 1, {"mechanism": "SCRAM-SHA-256"})["error_code"] == 0
        first = _call(client, 36, 2, {"auth_bytes": SCRAM_FIRST_MESSAGES[case]})
        if first == "closed":
            return {"answer": first}
        seen = {"error": (first["error_code"], first["error_message"]),
                "lifetime": first["session_lifetime_ms"]}
        if first["error_code"]:
            seen["auth_bytes"] = first["auth_bytes"]
            seen["closed"] = closed_by_broker(client)
        else:
            seen["server_first"] = _server_first(first["auth_bytes"], b"clientnonce0123456789")
        return seen

    ours, theirs = pair.both("SASL_PLAINTEXT", scenario)
    assert ours == theirs


SCRAM_FINAL_MESSAGES = {
    "not SCRAM": lambda scram: b"hello",
    "another nonce": lambda scram: scram.final_message().replace(b"r=", b"r=x", 1),
    "a proof of the wrong length": lambda scram: scram.final_message().rsplit(b",p=", 1)[0]
    + b",p=" + base64.b64encode(b"short"),
    "channel binding data": lambda scram: scram.final_message().replace(b"c=biws", b"c=eSws"),
}


@pytest.mark.parametrize("case", list(SCRAM_FINAL_MESSAGES))
def test_scram_malformed_client_final_messages(pair, case):
    def scenario(client, port):
        assert client.call(17, 1, {"mechanism": "SCRAM-SHA-256"})["error_code"] == 0
        scram = ScramClient("alice", "alice-secret", "SCRAM-SHA-256")
        first = client.call(36, 2, {"auth_bytes": scram.first_message()})
        scram.process_server_first_message(first["auth_bytes"])
        return _answer_then(client, (36, 2, {"auth_bytes": SCRAM_FINAL_MESSAGES[case](scram)}))

    ours, theirs = pair.both("SASL_PLAINTEXT", scenario)
    assert ours == theirs


# -- requests out of turn ------------------------------------------------------------------------

def _answer_then(client: WireClient, request: tuple[int, int, dict]) -> dict:
    """``request`` sent: the broker's answer, if any, and whether it then closes."""
    answer = _call(client, *request)
    if answer == "closed":
        return {"answer": None, "closed": True}
    return {"answer": answer, "closed": closed_by_broker(client)}


def _handshake_then(request: tuple[int, int, dict]):
    def scenario(client, port):
        assert client.call(17, 1, {"mechanism": "PLAIN"})["error_code"] == 0
        return _answer_then(client, request)
    return scenario


def _api_versions_then(request: tuple[int, int, dict]):
    def scenario(client, port):
        assert client.call(18, 3, API_VERSIONS)["error_code"] == 0
        return _answer_then(client, request)
    return scenario


def _first(request: tuple[int, int, dict]):
    def scenario(client, port):
        return _answer_then(client, request)
    return scenario


OUT_OF_TURN = {
    "Metadata first": _first((3, 12, METADATA_ALL)),
    "Metadata after ApiVersions": _api_versions_then((3, 12, METADATA_ALL)),
    "a second ApiVersions": _api_versions_then((18, 3, API_VERSIONS)),
    "SaslAuthenticate before a handshake": _first((36, 2, {"auth_bytes": b"\0alice\0x"})),
    "Metadata in place of a token": _handshake_then((3, 12, METADATA_ALL)),
    "a second handshake in place of a token": _handshake_then((17, 1, {"mechanism": "PLAIN"})),
    "ApiVersions in place of a token": _handshake_then((18, 3, API_VERSIONS)),
}


@pytest.mark.parametrize("case", list(OUT_OF_TURN))
def test_requests_out_of_turn_close_the_connection(pair, case):
    """Before the handshake, the connection is closed unanswered; after it, in place
    of a SaslAuthenticate, the request is answered with its error response
    (ILLEGAL_SASL_STATE where it has an error code) and then closed."""
    ours, theirs = pair.both("SASL_PLAINTEXT", OUT_OF_TURN[case])
    assert theirs["closed"] is True
    assert ours == theirs


# -- the SASL APIs where no exchange is under way ------------------------------------------------

@pytest.mark.parametrize("request_", [(17, 0, {"mechanism": "PLAIN"}),
                                      (17, 1, {"mechanism": "PLAIN"}),
                                      (17, 1, {"mechanism": "GSSAPI"}),
                                      (36, 0, {"auth_bytes": b"\0alice\0alice-secret"}),
                                      (36, 1, {"auth_bytes": b"x"}),
                                      (36, 2, {"auth_bytes": b""})],
                         ids=lambda r: f"{r[0]}v{r[1]}-{next(iter(r[2].values()))!r}")
@pytest.mark.parametrize("where", ["PLAINTEXT", "after a PLAIN login"])
def test_sasl_apis_outside_an_exchange(pair, request_, where):
    def scenario(client, port):
        if where != "PLAINTEXT":
            assert client.call(17, 1, {"mechanism": "PLAIN"})["error_code"] == 0
            login = client.call(36, 2, {"auth_bytes": PLAIN_TOKENS["good"]})
            assert login["error_code"] == 0
        answer = client.call(*request_)
        return {"answer": answer, **_serves(client, port)}

    listener = "PLAINTEXT" if where == "PLAINTEXT" else "SASL_PLAINTEXT"
    ours, theirs = pair.both(listener, scenario)
    assert theirs["answer"]["error_code"] == 34  # ILLEGAL_SASL_STATE
    assert ours == theirs


# -- DescribeUserScramCredentials and AlterUserScramCredentials ----------------------------------

def _results(answer: dict) -> list:
    """The per-user results of an Alter or Describe answer, in a defined order."""
    rows = []
    for r in answer["results"]:
        infos = sorted((i["mechanism"], i["iterations"]) for i in r.get("credential_infos", []))
        rows.append((r["user"], r["error_code"], r["error_message"], infos))
    return sorted(rows, key=repr)


def _top(answer: dict) -> dict:
    return {k: v for k, v in answer.items() if k not in ("results", "throttle_time_ms")}


def _settle(client: WireClient, alter: dict, answer: dict, timeout: float = 30) -> None:
    """Until DescribeUserScramCredentials shows what an AlterUserScramCredentials
    answer says was done: Kafka answers once its controller has committed the
    change, and its broker applies it from the metadata log a moment later."""
    done = {r["user"] for r in answer["results"] if r["error_code"] == 0}
    want = {(u["name"], u["mechanism"]): True for u in alter["upsertions"] if u["name"] in done}
    want.update({(d["name"], d["mechanism"]): False for d in alter["deletions"]
                 if d["name"] in done})
    if not want:
        return
    users = sorted({user for user, _ in want})
    deadline = time.monotonic() + timeout
    while True:
        described = client.call(50, 0, {"users": [{"name": u} for u in users]})
        have = {(r["user"], i["mechanism"]) for r in described["results"]
                for i in r["credential_infos"]}
        if all((key in have) == present for key, present in want.items()):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the credentials never became {want}: {described}")
        time.sleep(0.05)


def _scram_calls(calls: list[tuple[int, int, dict]]):
    def scenario(client, port):
        seen = []
        for request in calls:
            answer = client.call(*request)
            seen.append((_top(answer), _results(answer)))
            if request[0] == 51:
                _settle(client, request[2], answer)
        return seen
    return scenario


def _user() -> str:
    return f"user-{uuid.uuid4().hex[:8]}"


def _alter(upsertions=(), deletions=(), version: int = 0) -> tuple[int, int, dict]:
    return 51, version, {"upsertions": list(upsertions), "deletions": list(deletions)}


def _describe(*users: str, version: int = 0) -> tuple[int, int, dict]:
    return 50, version, {"users": [{"name": u} for u in users]}


def test_alter_scram_credentials_refused_upsertions(pair):
    a, b, c, d, e = (_user() for _ in range(5))
    calls = [
        _alter([_upsertion(a, 1, iterations=100), _upsertion(b, 2, iterations=4095),
                _upsertion(c, 2, iterations=16385), _upsertion("", 1),
                _upsertion(d, 9), _upsertion(e, 0)]),
        _describe(a, b, c, d, e),
    ]
    ours, theirs = pair.both("PLAINTEXT", _scram_calls(calls))
    assert theirs[0][1] == sorted([
        (a, 93, "Too few iterations", []), (b, 93, "Too few iterations", []),
        (c, 93, "Too many iterations", []), ("", 93, "Username must not be empty", []),
        (d, 33, "Unknown SCRAM mechanism", []), (e, 33, "Unknown SCRAM mechanism", [])],
        key=repr)
    assert ours == theirs


def test_alter_scram_credentials_odd_salts_and_salted_passwords(pair):
    """An empty salt is taken; an empty salted password fails on Kafka with
    UNKNOWN_SERVER_ERROR (its HMAC refuses an empty key) and nothing is stored."""
    a, b, c = _user(), _user(), _user()
    calls = [
        _alter([_upsertion(a, 1, salt=b"")]),
        _alter([{**_upsertion(b, 2), "salted_password": b""}]),
        _alter([{**_upsertion(c, 1), "salted_password": b"short"}]),
        _describe(a, b, c),
    ]
    ours, theirs = pair.both("PLAINTEXT", _scram_calls(calls))
    assert ours == theirs


def test_alter_scram_credentials_at_the_iteration_bounds(pair):
    a, b = _user(), _user()
    calls = [_alter([_upsertion(a, 1, iterations=4096), _upsertion(b, 2, iterations=16384)]),
             _describe(a, b), _alter(deletions=[{"name": a, "mechanism": 1},
                                                {"name": b, "mechanism": 2}]),
             _describe(a, b)]
    ours, theirs = pair.both("PLAINTEXT", _scram_calls(calls))
    assert theirs[0][1] == sorted([(a, 0, None, []), (b, 0, None, [])], key=repr)
    assert ours == theirs


def test_alter_scram_credentials_refused_deletions(pair):
    a, b = _user(), _user()
    calls = [
        _alter([_upsertion(b, 1)]),
        _alter(deletions=[{"name": a, "mechanism": 1}, {"name": "", "mechanism": 1},
                          {"name": b, "mechanism": 2}, {"name": b, "mechanism": 9}]),
        _describe(b),
    ]
    ours, theirs = pair.both("PLAINTEXT", _scram_calls(calls))
    assert ours == theirs


def test_alter_scram_credentials_the_same_user_twice(pair):
    a, b, c, d = (_user() for _ in range(4))
    calls = [
        _alter([_upsertion(a, 1), _upsertion(a, 2), _upsertion(d, 1)]),
        _alter([_upsertion(b, 1), _upsertion(b, 1)]),
        _alter([_upsertion(c, 1)], [{"name": c, "mechanism": 2}]),
        _alter([_upsertion(d, 2)], [{"name": d, "mechanism": 1}]),
        _describe(a, b, c, d),
    ]
    ours, theirs = pair.both("PLAINTEXT", _scram_calls(calls))
    assert ours == theirs


def test_alter_scram_credentials_nothing_to_do(pair):
    ours, theirs = pair.both("PLAINTEXT", _scram_calls([_alter()]))
    assert ours == theirs


def test_describe_scram_credentials_unknown_and_duplicate_users(pair):
    a = _user()
    calls = [
        _describe(a),
        _describe("alice", "alice"),
        _describe("alice", a, "admin", "admin"),
        _describe(""),
        _describe("alice", "admin"),
    ]
    ours, theirs = pair.both("PLAINTEXT", _scram_calls(calls))
    # Kafka's DescribeUserScramCredentials says "" where there is no error
    assert theirs[-1][1] == [("admin", 0, "", [(1, ITERATIONS), (2, ITERATIONS)]),
                             ("alice", 0, "", [(1, ITERATIONS), (2, ITERATIONS)])]
    assert ours == theirs


@pytest.mark.parametrize("users", [None, []], ids=["null", "empty"])
def test_describe_every_scram_credential(pair, users):
    """``users`` null or empty: every user with a credential, in no defined order
    (the users other tests of this module created are left out)."""
    mine = _user()
    known = set(SASL_USERS) | {mine}

    def scenario(client, port):
        alter = {"upsertions": [_upsertion(mine, 2, iterations=5000)], "deletions": []}
        answer = client.call(51, 0, alter)
        assert answer["results"][0]["error_code"] == 0
        _settle(client, alter, answer)
        answer = client.call(50, 0, {"users": users})
        names = [r["user"] for r in answer["results"]]
        return {"top": _top(answer), "distinct": len(names) == len(set(names)),
                "rows": [row for row in _results(answer) if row[0] in known]}

    ours, theirs = pair.both("PLAINTEXT", scenario)
    assert [row[0] for row in theirs["rows"]] == sorted(known, key=repr)
    assert ours == theirs


def test_a_new_scram_credential_logs_in_and_a_deleted_one_no_longer(pair):
    user = _user()

    def login(client, port):
        assert client.call(17, 1, {"mechanism": "SCRAM-SHA-512"})["error_code"] == 0
        scram = ScramClient(user, "fresh-secret", "SCRAM-SHA-512")
        first = client.call(36, 2, {"auth_bytes": scram.first_message()})
        if first["error_code"]:
            return first["error_code"], first["error_message"]
        scram.process_server_first_message(first["auth_bytes"])
        final = client.call(36, 2, {"auth_bytes": scram.final_message()})
        return final["error_code"], final["error_message"]

    ours, theirs = pair.both("PLAINTEXT", _scram_calls(
        [_alter([_upsertion(user, 2, "fresh-secret", iterations=8192)]), _describe(user)]))
    assert ours == theirs
    ours, theirs = pair.both("SASL_PLAINTEXT", login)
    assert theirs[0] == 0
    assert ours == theirs
    ours, theirs = pair.both("PLAINTEXT", _scram_calls(
        [_alter(deletions=[{"name": user, "mechanism": 2}]), _describe(user)]))
    assert ours == theirs
    ours, theirs = pair.both("SASL_PLAINTEXT", login)
    assert theirs == (58, "Authentication failed during authentication due to invalid "
                          "credentials with SASL mechanism SCRAM-SHA-512")
    assert ours == theirs
