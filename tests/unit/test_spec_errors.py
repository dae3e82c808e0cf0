"""Spec errors: all of them in one pass, one printable line each, and hostile input is a
SpecError naming the file (never a traceback); the plan's bound on the CLI."""

import json

import pytest
from typer.testing import CliRunner

from dnscamp.cli import app
from dnscamp.spec import MAX_SPEC_BYTES, SpecError, load, loads

pytestmark = pytest.mark.unit

GOOD = """
[campaign]
name = "t"
repetitions = 2
[[vantages]]
id = "tb"
provider = "testbed"
network_profiles = ["fiber"]
[kinds.ping]
targets = ["10.53.1.1"]
count = 2
"""


def errors(text, source="s.toml") -> list[str]:
    with pytest.raises(SpecError) as exc:
        loads(text, source)
    lines = exc.value.lines
    assert lines and all(line.startswith(f"{source}: ") for line in lines), lines
    assert all(line.isprintable() for line in lines), lines  # one line each: no newline, no escape reaches a terminal
    return lines


def test_good_spec_loads():
    assert loads(GOOD).campaign.repetitions == 2


def test_top_level_kind_level_and_profile_errors_in_one_pass():
    text = (
        GOOD.replace("repetitions = 2", "repetitions = 0")  # top level
        .replace("count = 2", "count = 0")  # kind level
        .replace('["fiber"]', '["fiber", "carrier-pigeon"]')  # vantage/profile cross-check
    )
    lines = errors(text)
    assert len(lines) == 3, lines
    assert lines[0].startswith("s.toml: campaign.repetitions: Input should be greater than or equal to 1")
    assert lines[1].startswith("s.toml: vantages.0.network_profiles.1: unknown profile 'carrier-pigeon'")
    assert lines[2].startswith("s.toml: kinds.ping.count: Input should be greater than or equal to 1")


def test_unknown_kind_and_bad_custom_profile_beside_top_level_errors():
    text = GOOD.replace('id = "tb"', 'id = "tb"\ncolour = 1').replace("[kinds.ping]", "[kinds.teleport]")
    text += '\n[profiles.sat]\nsource = "test"\nrtt_ms = -1\ndown_mbps = 1\nup_mbps = 1\n'
    lines = errors(text.replace('["fiber"]', '["sat"]'))
    assert [line.split(": ")[1] for line in lines] == ["vantages.0.colour", "kinds.teleport", "profiles.sat"], lines


def test_duplicate_vantage_ids():
    text = GOOD + '[[vantages]]\nid = "tb"\n'
    assert errors(text) == ["s.toml: vantages.1.id: duplicate vantage id 'tb' (also vantages.0)"]


@pytest.mark.parametrize(
    "text,needle",
    [
        # non-tables where tables are expected
        ("campaign = 1\n" + GOOD.split("[[vantages]]", 1)[1].join(["[[vantages]]", ""]), "campaign: Input should be"),
        ("kinds = 1\n" + GOOD.replace("[kinds.ping]", "[x]"), "kinds: Input should be a valid dictionary"),
        (GOOD.replace("[kinds.ping]\n", "[kinds]\nping = 1\n").replace("targets =", "x ="), "kinds.ping: Input should be a valid dictionary"),
        (GOOD.replace("[[vantages]]", "[vantages]"), "vantages: Input should be a valid list"),
        ('vantages = [1]\n' + GOOD.replace("[[vantages]]\n", "[v]\n"), "vantages.0: Input should be a valid dictionary"),
        ("profiles = 1\n" + GOOD, "profiles: Input should be a valid dictionary"),
        ("profiles = {sat = 1}\n" + GOOD, "profiles.sat: Input should be a valid dictionary"),
        # numbers TOML allows but no field should take
        (GOOD.replace("repetitions = 2", "repetitions = " + "9" * 5000), "TOML syntax: an integer out of range"),
        (GOOD.replace("repetitions = 2", "seed = 18446744073709551616"), "campaign.seed: integer out of range"),
        (GOOD.replace("count = 2", "count = 2\ninterval_ms = nan"), "kinds.ping.interval_ms: nan is not a finite number"),
        (GOOD.replace("count = 2", "count = 2\ntimeout_ms = -inf"), "kinds.ping.timeout_ms: -inf is not a finite number"),
        (GOOD.replace("repetitions = 2", "repetitions = inf"), "campaign.repetitions: inf is not a finite number"),
        # control characters, in values and keys
        (GOOD.replace('name = "t"', 'name = "t"\ndescription = "\\u001b[2J\\u0000"'), "campaign.description: control character '\\x1b'"),
        (GOOD.replace('id = "tb"', 'id = "tb"\nregion = "a\\u2028b"'), "vantages.0.region: control character '\\u2028'"),
        (GOOD.replace("count = 2", '"a\\nb" = 1'), "kinds.ping.a\\nb: control character '\\n' in a key"),
        # nesting
        (GOOD + "[x" + ".x" * 100_000 + "]\ny = 1\n", "x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x: nested deeper than 32 levels"),
        (GOOD + "x = " + "[" * 5000 + "]" * 5000 + "\n", "TOML syntax: arrays or inline tables nested too deeply"),
        (GOOD + "x = " + "{a=" * 3000 + "1" + "}" * 3000 + "\n", "TOML syntax: arrays or inline tables nested too deeply"),
        # encodings
        ("\ufeff" + GOOD, "encoding: starts with a byte order mark"),
        (GOOD.replace('"t"', '"t\ud800"'), "encoding: line 3: not valid UTF-8 (lone surrogate '\\ud800')"),
        (GOOD.encode().replace(b'"t"', b'"t\xff"'), "encoding: line 3: not valid UTF-8 (byte 0xff)"),
        (b"\xef\xbb\xbf" + GOOD.encode(), "encoding: starts with a byte order mark"),
        (GOOD + "[kinds.ping.oops", "TOML syntax: "),
    ],
)
def test_hostile_input_is_a_spec_error_naming_the_file(text, needle):
    lines = errors(text)
    assert any(needle in line for line in lines), lines


def test_error_text_from_the_input_is_escaped_and_bounded():
    long_key = "k" * 100_000
    text = GOOD.replace("count = 2", f'"\\u001b]0;pwned\\u0007{long_key}" = 1')
    lines = errors(text)
    assert all(len(line) <= 700 for line in lines), [len(line) for line in lines]
    assert any("\\x1b]0;pwned\\x07kkk" in line for line in lines), lines


def test_huge_file_is_refused_reading_a_bounded_prefix(tmp_path):
    big = tmp_path / "big.toml"
    with open(big, "wb") as f:
        f.write(GOOD.encode())
        f.truncate(100 * 2**20)  # 100 MB (sparse: NUL bytes after the spec)
    with pytest.raises(SpecError) as exc:
        load(big)
    assert exc.value.lines == [f"{big}: size: more than {MAX_SPEC_BYTES:,} bytes (10 MiB), the limit of a spec file"]
    with pytest.raises(SpecError) as exc:
        loads("#" * (MAX_SPEC_BYTES + 1), "s.toml")
    assert exc.value.lines[0].startswith("s.toml: size: ")


def test_unreadable_path_is_a_spec_error(tmp_path):
    with pytest.raises(SpecError) as exc:
        load(tmp_path)  # a directory
    assert exc.value.lines[0].startswith(f"{tmp_path}: cannot read: ")


def test_nul_byte_in_a_file(tmp_path):
    f = tmp_path / "nul.toml"
    f.write_bytes(GOOD.encode().replace(b'"t"', b'"t\x00"'))
    with pytest.raises(SpecError) as exc:
        load(f)
    assert exc.value.lines[0].startswith(f"{f}: TOML syntax: ")


BIG = """
[campaign]
name = "x"
repetitions = 100000
[[vantages]]
id = "a"
[[vantages]]
id = "b"
[kinds.ping]
targets = [%s]
""" % ", ".join(f'"10.0.0.{i}"' for i in range(50))


@pytest.fixture
def big_spec(tmp_path):
    campaigns = tmp_path / "campaigns"
    campaigns.mkdir()
    (campaigns / "x.toml").write_text(BIG)
    return campaigns / "x.toml"


@pytest.mark.parametrize("command", [["validate"], ["plan"], ["plan", "--count"], ["run", "--no-ingest"]])
def test_cli_refuses_a_plan_above_the_maximum(big_spec, command):
    r = CliRunner().invoke(app, ["campaign", command[0], str(big_spec), *command[1:]])
    assert r.exit_code == 2, r.output
    assert r.stderr.splitlines() == [
        f"dnscamp: {big_spec}: the plan has 10,000,000 units (2 vantages x 1 profile x 1 kind x 50 targets x "
        "100,000 repetitions), above the maximum 1,000,000: raise it with --max-units"
    ]


def test_cli_max_units_raises_the_bound_and_count_builds_nothing(big_spec):
    r = CliRunner().invoke(app, ["campaign", "validate", str(big_spec), "--max-units", "10000000"])
    assert r.exit_code == 0, r.output
    assert r.stdout == f"{big_spec}: ok (10000000 units: 2 vantages; kinds ping 10000000)\n"
    r = CliRunner().invoke(app, ["campaign", "plan", str(big_spec), "--count", "--json", "--max-units", "10000000"])
    assert r.exit_code == 0 and json.loads(r.stdout) == {"units": 10_000_000, "kinds": {"ping": 10_000_000}}


def test_cli_prints_every_error_and_exits_2(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text(GOOD.replace("repetitions = 2", "repetitions = 0").replace("count = 2", "count = 0"))
    r = CliRunner().invoke(app, ["campaign", "validate", str(f)])
    assert r.exit_code == 2
    assert [line.split(": ")[2] for line in r.stderr.splitlines()] == ["campaign.repetitions", "kinds.ping.count"]
