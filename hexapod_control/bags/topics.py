"""Topic names of a bag: the defaults of ``conventions.TOPICS`` with the user's overrides."""

from __future__ import annotations

from typing import Iterable, Mapping, Optional

from hexapod_control.conventions import TOPICS
from hexapod_control.errors import InvalidInputError


def resolve_topic_names(overrides: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """key -> topic name: TOPICS with ``overrides``; unknown keys or bad names raise InvalidInputError."""
    names = dict(TOPICS)
    for key, name in (overrides or {}).items():
        if key not in TOPICS:
            raise InvalidInputError(f"unknown topic key {key!r}; expected one of {sorted(TOPICS)}")
        if not isinstance(name, str) or not name.strip():
            raise InvalidInputError(f"topic name for {key!r} must be a non-empty string, got {name!r}")
        names[key] = name if name.startswith("/") else "/" + name
    return names


def parse_topic_overrides(items: Iterable[str]) -> dict[str, str]:
    """CLI ``KEY=NAME`` items -> {key: name}; a malformed item raises InvalidInputError."""
    overrides = {}
    for item in items or ():
        key, sep, name = item.partition("=")
        if not sep or not key or not name:
            raise InvalidInputError(f"topic override {item!r}: expected KEY=NAME, e.g. joint_states=/robot/joint_states")
        overrides[key.strip()] = name.strip()
    resolve_topic_names(overrides)  # validate now, with the user's spelling in the message
    return overrides
