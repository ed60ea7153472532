"""What a decoded message (or nested struct) is in memory.

Each struct layout gets a class with one slot per field, so a decoded entry
costs what Kafka's generated message objects cost: a million Metadata topic
entries take about 56 bytes each, where a dict per entry took about 200.  The
class reads as a mapping (``m["name"]``, ``m.get``, ``in``, ``keys``, ``==``
with a dict) and by attribute (``m.name``); it holds exactly its fields, so
writing any other key is an error, as encoding one is.
"""

from __future__ import annotations

import keyword
from collections.abc import Mapping


class Message(Mapping):
    """Base of the per-layout classes made by ``message_class``."""

    __slots__ = ()
    _keys: tuple[str, ...] = ()
    _keyset: frozenset[str] = frozenset()

    def __getitem__(self, key):
        if key in self._keyset:
            return getattr(self, key)
        raise KeyError(key)

    def __setitem__(self, key, value) -> None:
        if key not in self._keyset:
            raise KeyError(f"{key!r} is no field of this message; fields: {list(self._keys)}")
        setattr(self, key, value)

    def get(self, key, default=None):
        if key in self._keyset:
            return getattr(self, key)
        return default

    def __contains__(self, key) -> bool:
        return key in self._keyset

    def __iter__(self):
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __eq__(self, other):
        if not isinstance(other, Mapping):
            return NotImplemented
        return len(other) == len(self._keys) and all(
            key in other and other[key] == getattr(self, key) for key in self._keys
        )

    __hash__ = None  # mutable, like a dict

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{k!r}: {getattr(self, k)!r}" for k in self._keys) + "}"

    def copy(self):
        clone = object.__new__(type(self))
        for key in self._keys:
            setattr(clone, key, getattr(self, key))
        return clone

    def __reduce__(self):
        return _rebuild, (self._keys, tuple(getattr(self, k) for k in self._keys))


_CLASSES: dict[tuple[str, ...], type] = {}


def message_class(keys) -> type:
    """The class for a struct whose fields are ``keys`` (one class per layout)."""
    keys = tuple(keys)
    cls = _CLASSES.get(keys)
    if cls is None:
        if len(set(keys)) != len(keys):
            raise ValueError(f"duplicate field names in {keys}")
        clashes = [key for key in keys if hasattr(Message, key) or not key.isidentifier()
                   or keyword.iskeyword(key)]
        if clashes:
            raise ValueError(f"field names {clashes} cannot be attributes of a message")
        cls = type("Message", (Message,), {"__module__": __name__,
            "__slots__": keys, "_keys": keys, "_keyset": frozenset(keys),
        })
        _CLASSES[keys] = cls
    return cls


def _rebuild(keys, values):
    msg = object.__new__(message_class(keys))
    for key, value in zip(keys, values):
        setattr(msg, key, value)
    return msg
