"""The command line without a process or a node: where CMD begins, the status verdict, the
line naming the nodes."""

from __future__ import annotations

import argparse
import contextlib
import io
from typing import Any

import pytest

from redlock_async._cli import main
from redlock_async._cli._args import VALUE_OPTIONS, parser, split_command
from redlock_async._cli._exit import UsageError
from redlock_async._cli._nodes import announce
from redlock_async._cli._status import _by, judge


@pytest.mark.parametrize(
    ("argv", "ours", "cmd"),
    [
        (["run", "job", "ls", "-la"], ["run", "job"], ["ls", "-la"]),
        (["run", "job", "--", "ls", "-la"], ["run", "job"], ["ls", "-la"]),
        (["run", "job", "--ttl", "5", "--", "cmd"], ["run", "job", "--ttl", "5"], ["cmd"]),
        (["run", "--ttl", "5", "job", "cmd", "-x"], ["run", "--ttl", "5", "job"], ["cmd", "-x"]),
        (["run", "--ttl=5", "-v", "job", "cmd"], ["run", "--ttl=5", "-v", "job"], ["cmd"]),
        # A "--" of CMD's own stays CMD's; so do its options that look like ours.
        (["run", "job", "sh", "--", "--ttl", "1"], ["run", "job"], ["sh", "--", "--ttl", "1"]),
        (["run", "job", "--", "--", "x"], ["run", "job"], ["--", "x"]),
        # Values of ours that look like a word, or like "run".
        (
            ["--url", "run", "run", "--url", "u", "job", "c"],
            ["--url", "run", "run", "--url", "u", "job"],
            ["c"],
        ),
        (["run", "--fencing", "--", "job", "c"], ["run", "--fencing", "job"], ["c"]),
        # An option we do not know before CMD stays ours: argparse refuses it.
        (["run", "job", "-x", "c"], ["run", "job", "-x"], ["c"]),
        (["run", "job"], ["run", "job"], []),
        (["status", "job", "--json"], ["status", "job", "--json"], None),
        (["--version"], ["--version"], None),
    ],
)
def test_cmd_starts_at_the_first_word_after_name(
    argv: list[str], ours: list[str], cmd: list[str] | None
) -> None:
    assert split_command(argv) == (ours, cmd)


def _options(p: argparse.ArgumentParser) -> dict[str, bool]:
    """Every option of ``p`` and of its ``run`` -> whether it takes a value."""
    found: dict[str, bool] = {}
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.update(_options(action.choices["run"]))
        for option in action.option_strings:
            found[option] = action.nargs != 0
    return found


def test_split_command_knows_every_option_that_takes_a_value() -> None:
    options = _options(parser("0"))
    assert {name for name, takes in options.items() if takes} == VALUE_OPTIONS


def test_an_unknown_option_before_cmd_is_a_usage_error() -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exit_:
        main(["run", "--url", "redis://127.0.0.1:1/0", "job", "-x", "true"])
    assert exit_.value.code == 2
    assert "unrecognized arguments: -x" in err.getvalue()


def row(node: int, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "node": f"redis://127.0.0.1:{node}/0", "error": None, "exclusive": None,
        "exclusive_ttl_ms": None, "writer": None, "writer_ttl_ms": None, "readers": 0,
        "readers_ttl_ms": None, "writer_waiting": False, "fencing_counter": None,
        "rw_fencing_counter": None, "queued": 0,
    }  # fmt: skip
    base.update(fields)
    return base


def down(node: int) -> dict[str, Any]:
    return row(node, error="timed out", readers=None, writer_waiting=None, queued=None)


T = "a" * 40


def test_held_on_a_quorum() -> None:
    rows = [row(1, exclusive=T, exclusive_ttl_ms=900, fencing_counter=7),
            row(2, exclusive=T, exclusive_ttl_ms=800, fencing_counter=9), down(3)]  # fmt: skip
    verdict = judge(rows, 2)
    assert verdict["state"] == "held"
    assert verdict["kind"] == "exclusive"
    assert verdict["token"] == T  # whole
    assert verdict["ttl_ms"] == 800  # valid while a quorum keeps it
    assert verdict["fencing_counter"] == 9
    # A token without holder info (holder_info=False): held, by nobody named.
    assert verdict["holder"] == {"host": None, "pid": None, "since": None, "ttl": 0.8,
                                 "kind": "exclusive", "readers": 0}  # fmt: skip
    assert (verdict["answered"], verdict["nodes_total"]) == (2, 3)


def test_readers_and_writers_are_held_too() -> None:
    assert judge([row(1, writer=T, writer_ttl_ms=5)] * 2 + [row(3)], 2)["kind"] == "write"
    verdict = judge([row(1, readers=2, readers_ttl_ms=5), row(2, readers=1, readers_ttl_ms=9),
                     row(3)], 2)  # fmt: skip
    assert (verdict["state"], verdict["kind"], verdict["readers"]) == ("held", "read", 1)


def test_the_holder_is_read_from_the_tokens() -> None:
    named = T + "@web-1:42:1700000000500"
    rows = [row(1, exclusive=named, exclusive_ttl_ms=900),
            row(2, exclusive=named, exclusive_ttl_ms=800), down(3)]  # fmt: skip
    verdict = judge(rows, 2)
    assert verdict["holder"] == {"host": "web-1", "pid": 42, "since": 1700000000.5,
                                 "ttl": 0.8, "kind": "exclusive", "readers": 0}  # fmt: skip
    readers = {named: 700, "b" * 40 + "@web-2:7:1700000000900": 9_000}
    rows = [row(n, readers=2, readers_ttl_ms=9_000, live_readers=readers) for n in (1, 2, 3)]
    verdict = judge(rows, 2)
    assert verdict["kind"] == "read"
    assert verdict["holder"] == {"host": "web-1", "pid": 42, "since": 1700000000.5,
                                 "ttl": 0.7, "kind": "read", "readers": 2}  # fmt: skip
    assert judge([row(1), row(2), row(3)], 2)["holder"] is None


def test_the_verdict_line_names_the_holder() -> None:
    holder = {"host": "web-1", "pid": 42, "since": 1700000000.5, "ttl": 0.8,
              "kind": "exclusive", "readers": 0}  # fmt: skip
    named = T + "@web-1:42:1700000000500"
    assert _by(named, holder).startswith(" by web-1, pid 42, since 2023-11-14 22:13:20 UTC (")
    assert _by(named, {**holder, "kind": "multilock"}).endswith("ago) (a multilock's name)")
    readers = _by(None, {**holder, "kind": "read", "readers": 3})
    assert readers.startswith(" by 3 readers, the longest-held web-1, pid 42, since ")
    bare = {**holder, "host": None, "pid": None, "since": None}
    assert _by(T, bare) == f" by {T[:8]}… (no holder info)"
    assert _by(None, None) == ""


def test_free_when_no_holder_can_have_a_quorum() -> None:
    assert judge([row(1), row(2), row(3)], 2)["state"] == "free"
    assert judge([row(1), row(2), down(3)], 2)["state"] == "free"
    # A leftover on one node of five, one silent: at most two of the three needed.
    rows = [row(1, exclusive=T, exclusive_ttl_ms=5), row(2), row(3), row(4), down(5)]
    verdict = judge(rows, 3)
    assert verdict["state"] == "free"
    assert "leftovers" in verdict["summary"]


def test_unknown_when_the_silent_nodes_could_make_a_quorum() -> None:
    assert judge([row(1), down(2), down(3)], 2)["state"] == "unknown"
    # One node shows a holder, one is silent: the silent one may hold it as well.
    rows = [row(1, exclusive=T, exclusive_ttl_ms=5), row(2), down(3)]
    assert judge(rows, 2)["state"] == "unknown"


@pytest.mark.parametrize(
    ("args", "env", "said"),
    [
        (
            [],
            {"REDLOCK_URLS": "redis://h1:1/0, redis://:pw@h2:2/0"},
            "2 nodes (from REDLOCK_URLS): redis://h1:1/0, redis://***@h2:2/0",
        ),
        (
            ["redis://:pw@h:1/0"],
            {"REDLOCK_URLS": "redis://x:1/0"},
            "1 node (from --url): redis://***@h:1/0",
        ),
    ],
)
def test_every_command_names_its_nodes(
    monkeypatch: pytest.MonkeyPatch, args: list[str], env: dict[str, str], said: str
) -> None:
    monkeypatch.delenv("REDLOCK_URLS", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        announce(argparse.Namespace(top_url=None, url=args or None))  # nothing connects
    assert err.getvalue() == f"redlock-async: {said}\n"


@pytest.mark.parametrize("env", [None, "", " , "])
def test_no_nodes_is_an_error_naming_both_sources(
    monkeypatch: pytest.MonkeyPatch, env: str | None
) -> None:
    monkeypatch.delenv("REDLOCK_URLS", raising=False)
    if env is not None:
        monkeypatch.setenv("REDLOCK_URLS", env)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(UsageError) as raised:
        announce(argparse.Namespace(top_url=None, url=None))
    assert "--url" in str(raised.value)
    assert "REDLOCK_URLS" in str(raised.value)
    assert ("lists no URL" in str(raised.value)) == (env is not None)
    assert err.getvalue() == ""  # no node line before the error


def test_quiet_names_no_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDLOCK_URLS", "redis://h1:1/0")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        given = announce(argparse.Namespace(top_url=None, url=None, quiet=True))
    assert (given, err.getvalue()) == (["redis://h1:1/0"], "")
