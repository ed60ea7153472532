"""SCRAM credentials of users, kept in ``kcoord-scram-credentials.json`` in the
data dir (Kafka keeps them in its KRaft metadata log): per user and mechanism
the salt, the stored and server keys and the iteration count, never a password.
The file is replaced atomically (fsynced, then renamed) before a change is
acknowledged.  Alter and describe follow Kafka's ``ScramControlManager`` and
``ScramImage``, with their error codes and messages."""

from __future__ import annotations

import asyncio
from pathlib import Path

import structlog

from kcoord.broker.groups.group_configs import ConfigFile
from kcoord.broker.security.scram import BY_TYPE, MECHANISMS, Credential, credential_from_salted
from kcoord.protocol.errors import ErrorCode

log = structlog.get_logger("kcoord.security")

CREDENTIALS_FILE = "kcoord-scram-credentials.json"
MAX_ITERATIONS = 16384  # ScramControlManager.MAX_ITERATIONS
_TWICE = "A user credential cannot be altered twice in the same request"


class ScramCredentials:
    def __init__(self, data_dir: Path):
        self._file = ConfigFile(data_dir, CREDENTIALS_FILE)
        self._texts: dict[str, dict[str, str]] = {}  # user -> mechanism -> credential text
        self._parsed: dict[tuple[str, str], Credential] = {}
        self._lock = asyncio.Lock()

    def load(self) -> None:
        self._texts = self._file.load()
        self.load_parsed()

    def lookup(self, user: str, mechanism: str) -> Credential | None:
        return self._parsed.get((user, mechanism))

    def describe(self, users: list[str] | None) -> list[dict]:
        """DescribeUserScramCredentials' results (ScramImage.describe)."""
        if not users:
            wanted = {user: False for user in self._texts}
        else:
            wanted = {}
            for user in users:
                wanted[user] = user in wanted
        results = []
        for user, duplicate in wanted.items():
            result = {"user": user, "error_code": 0, "error_message": "",
                      "credential_infos": []}
            if duplicate:
                result.update(error_code=ErrorCode.DUPLICATE_RESOURCE, error_message=(
                    "Cannot describe SCRAM credentials for the same user twice in a single "
                    f"request: {user}"))
            elif user not in self._texts:
                result.update(error_code=ErrorCode.RESOURCE_NOT_FOUND, error_message=(
                    f"Attempt to describe a user credential that does not exist: {user}"))
            else:
                result["credential_infos"] = [
                    {"mechanism": MECHANISMS[m].type_code,
                     "iterations": self._parsed[(user, m)].iterations}
                    for m in sorted(self._texts[user], key=lambda m: MECHANISMS[m].type_code)]
            results.append(result)
        return results

    async def alter(self, deletions, upsertions) -> list[dict]:
        """AlterUserScramCredentials (ScramControlManager.alterCredentials): one
        result per user named; the accepted changes are saved before it returns."""
        errors: dict[str, tuple[int, str]] = {}
        deletes: dict[str, object] = {}
        upserts: dict[str, object] = {}
        for deletion in deletions:
            name = deletion.name
            if name in errors:
                continue
            if deletes.pop(name, None) is not None:
                errors[name] = (ErrorCode.DUPLICATE_RESOURCE, _TWICE)
                continue
            problem = _check_name(name, deletion.mechanism)
            if problem is None and self.lookup(name, BY_TYPE[deletion.mechanism].name) is None:
                problem = (ErrorCode.RESOURCE_NOT_FOUND,
                           "Attempt to delete a user credential that does not exist")
            if problem:
                errors[name] = problem
            else:
                deletes[name] = deletion
        for upsertion in upsertions:
            name = upsertion.name
            if name in errors:
                continue
            if deletes.pop(name, None) is not None or upserts.pop(name, None) is not None:
                errors[name] = (ErrorCode.DUPLICATE_RESOURCE, _TWICE)
                continue
            problem = _check_name(name, upsertion.mechanism)
            if problem is None:
                mechanism = BY_TYPE[upsertion.mechanism]
                if upsertion.iterations < mechanism.min_iterations:
                    problem = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
                elif upsertion.iterations > MAX_ITERATIONS:
                    problem = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
                elif not upsertion.salted_password:
                    # Kafka's keys cannot be derived from an empty one (its HMAC refuses
                    # an empty key): an unknown server error, nothing kept
                    problem = (ErrorCode.UNKNOWN_SERVER_ERROR, None)
            if problem:
                errors[name] = problem
            else:
                upserts[name] = upsertion
        async with self._lock:
            texts = {user: dict(by) for user, by in self._texts.items()}
            for name, deletion in deletes.items():
                by = texts.get(name, {})
                by.pop(BY_TYPE[deletion.mechanism].name, None)
                if not by:
                    texts.pop(name, None)
            for name, upsertion in upserts.items():
                mechanism = BY_TYPE[upsertion.mechanism]
                credential = credential_from_salted(mechanism, bytes(upsertion.salted_password),
                                                    bytes(upsertion.salt), upsertion.iterations)
                texts.setdefault(name, {})[mechanism.name] = credential.to_text()
            if deletes or upserts:
                await asyncio.get_running_loop().run_in_executor(None, self._file.save, texts)
                self._texts = texts
                self.load_parsed()
                log.info("security.scram_credentials_altered",
                         upserted=sorted(f"{n}:{BY_TYPE[u.mechanism].name}"
                                         for n, u in upserts.items()),
                         deleted=sorted(f"{n}:{BY_TYPE[d.mechanism].name}"
                                        for n, d in deletes.items()))
        results = [{"user": name, "error_code": 0, "error_message": None}
                   for name in [*deletes, *upserts]]
        results += [{"user": name, "error_code": code, "error_message": message}
                    for name, (code, message) in errors.items()]
        return results

    def set_password(self, user: str, mechanism: str, password: str,
                     iterations: int = 4096) -> None:
        """Give ``user`` a credential before the broker serves (``kcoord serve
        --add-scram``, as ``kafka-storage format --add-scram``): saved at once."""
        from kcoord.broker.security.scram import make_credential

        texts = {u: dict(by) for u, by in self._texts.items()}
        texts.setdefault(user, {})[mechanism] = make_credential(
            MECHANISMS[mechanism], password, iterations).to_text()
        self._file.save(texts)
        self._texts = texts
        self.load_parsed()

    def load_parsed(self) -> None:
        self._parsed = {(user, mechanism): Credential.from_text(text)
                        for user, by_mechanism in self._texts.items()
                        for mechanism, text in by_mechanism.items()}


def _check_name(name: str, mechanism: int) -> tuple[int, str] | None:
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in BY_TYPE:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None
