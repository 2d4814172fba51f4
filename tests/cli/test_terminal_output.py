"""Stored values reach a person's terminal escaped: no raw control, escape or bidi character, no markup.

Every command's human output is written through ``cli/output.py``; these run the real CLI on values
that carry an ANSI cursor/erase sequence, an OSC 8 hyperlink, a C1 CSI, a carriage return, bidi
overrides and rich markup, and check each command's stdout and stderr byte for byte.
"""

from __future__ import annotations

import re
import subprocess

from tests.cli.conftest import Cli

NASTY = (
    "ok \x1b[2J\x1b[1A\x1b]8;;http://evil.example\x07click\x1b]8;;\x07 \u202eevil\u202c \u2066iso\u2069"
    " [bold red]x[/] [link=http://e.example]y[/link] cr\rover\x08\x08 c1\x9b31m end"
)
# Anything a terminal would act on: C0 but tab/newline, DEL, C1, line/paragraph separators, bidi.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
G = "global"


def clean(proc: subprocess.CompletedProcess[str]) -> str:
    """The command's stdout, after checking neither stream carries a raw control character."""
    for stream in (proc.stdout, proc.stderr):
        assert not RAW.search(stream), f"raw control character in output: {stream!r}"
    return proc.stdout


def test_every_reading_command_shows_stored_controls_escaped(cli: Cli) -> None:
    cli.ok("write", G, "nasty", NASTY, "--source-agent", "agent\x1b[31m", "--trigger", "t\u202e")
    cli.ok("write", G, "nasty", NASTY + " v2")
    cli.ok("write", G, "other", "a plain lesson about nasty values")
    cli.ok("link", G, "nasty", G, "other")
    cli.ok("write", "repo::acme/api", "candidate", "cand " + NASTY)

    shown = {
        "read": clean(cli("read", G, "nasty")),
        "list": clean(cli("list")),
        "search": clean(cli("search", "nasty click evil")),
        "history": clean(cli("history", G, "nasty")),
        "diff": clean(cli("diff", G, "nasty", "1", "2")),
        "neighborhood": clean(cli("neighborhood", G, "other")),
        "review": clean(cli("review")),
    }
    for verb, text in shown.items():
        assert "\\x1b" in text or verb in ("neighborhood", "review"), (verb, text)
    # The value itself, in full, with every offending character escaped and the markup literal.
    read = shown["read"]
    assert "\\x1b[2J\\x1b[1A\\x1b]8;;http://evil.example\\x07click" in read
    assert "\\u202eevil\\u202c" in read and "\\u2066iso\\u2069" in read
    assert "cr\\x0dover\\x08\\x08" in read and "c1\\x9b31m" in read
    assert "[bold red]x[/] [link=http://e.example]y[/link]" in read
    assert "\\x1b" in shown["review"] or "\\u202e" in shown["review"]

    cli.ok("forget", G, "nasty", "--reason", "because \x1b[8mhidden\x1b[0m \u202eesrever")
    tombs = clean(cli("tombstones"))
    assert "because \\x1b[8mhidden\\x1b[0m \\u202eesrever" in tombs
    clean(cli("audit"))
    clean(cli("audit", "verify"))


def test_json_output_stays_exact(cli: Cli) -> None:
    """``--json`` is data: the value comes back exactly as stored, escapes undone by the JSON parser."""
    cli.ok("write", G, "nasty", NASTY)
    assert cli.ok("read", G, "nasty")["lesson"]["value"] == NASTY.rstrip()


def test_an_error_that_echoes_input_is_escaped_too(cli: Cli) -> None:
    """A refused argument quoted back in the error message must not reach the terminal raw."""
    proc = cli("x\x1b[2J\u202ey")  # the command parser quotes an unknown command back as typed
    assert proc.returncode == 1
    assert not RAW.search(proc.stderr), proc.stderr
    assert "x\\x1b[2J\\u202ey" in proc.stderr, proc.stderr


def test_account_listings_are_escaped(cli: Cli) -> None:
    """Names people choose (a token's label) are stored values as well."""
    cli.ok("token", "create", "--name", "ci\x1b]0;pwned\x07")
    listing = clean(cli("token", "list"))
    assert "ci\\x1b]0;pwned\\x07" in listing
