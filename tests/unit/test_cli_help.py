"""`dnscamp --help` texts: each docstring paragraph on one line (`dnscamp.cli.reflow`), so rich
wraps it to the terminal instead of keeping the docstring's own breaks between its wrapped lines."""

from __future__ import annotations

import inspect
import re

from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from dnscamp.cli import app, reflow

_text = st.text(st.sampled_from(list("ab -*1.)\n    ")), max_size=120)


@settings(max_examples=300, deadline=None)
@given(_text)
def test_reflow_keeps_every_word_in_order(text):
    out = reflow(text)
    assert out.split() == inspect.cleandoc(text).split()
    assert reflow(out) == out  # a second pass changes nothing


def test_reflow_joins_a_paragraph_keeps_list_items_and_code():
    doc = """First line
    goes on.

    Modes:
    - one item
      that wraps
    - two
    1. numbered

        code stays
        as it is
    """
    assert reflow(doc) == ("First line goes on.\n\nModes:\n- one item that wraps\n- two\n1. numbered\n\n"
                           "    code stays\n    as it is")


def test_help_lists_each_command_on_whole_lines():
    """In the command list of `dnscamp --help` a description goes on to the next line only where
    the next word does not fit (as rich wraps a paragraph); a docstring's own line break would
    leave a short line before it."""
    out = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "100", "TERM": "dumb"}, prog_name="dnscamp").output
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if "Commands" in ln)
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("╰"))
    rows = [ln[1:-1] for ln in lines[start + 1 : end]]
    offset = re.match(r" \S+\s+", rows[0]).end()  # where the descriptions start
    width = len(rows[0]) - offset - 1
    assert len(rows) > 20 and width > 40
    for a, b in zip(rows, rows[1:]):
        if b[:offset].strip():  # the next command
            continue
        text, word = a[offset:].rstrip(), b[offset:].split()[0]
        assert len(text) + 1 + len(word) > width, (text, word)
