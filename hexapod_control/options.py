"""The options several commands share, declared once: ``--params``, ``--topic`` and ``-o``.

Each command says in its help what the option means for it (a report folder, an overlay, a bag);
the flags, their metavar and their type are the same everywhere. Importing this module loads
nothing beyond argparse, so a command's ``--help`` stays fast.
"""

from __future__ import annotations

import argparse


def add_params(parser: argparse.ArgumentParser, help: str, **settings) -> argparse.Action:
    """``--params FILE``: the parameters file the command reads (settings: e.g. ``type``, ``default``)."""
    return parser.add_argument("--params", metavar="FILE", help=help, **settings)


def add_topic(parser: argparse.ArgumentParser, help: str) -> argparse.Action:
    """``--topic KEY=NAME``, repeatable: the topic name for a key of the topic conventions."""
    return parser.add_argument("--topic", action="append", default=[], metavar="KEY=NAME", help=help)


def add_output(parser: argparse.ArgumentParser, help: str, **settings) -> argparse.Action:
    """``-o/--output``: where the command writes (settings: e.g. ``type``, ``required``, ``metavar``)."""
    return parser.add_argument("-o", "--output", help=help, **settings)
