"""Campaign specs under fuzzing: dnscamp.spec.loads / load on mutated specs (wrong types,
unknown keys, kinds and profiles, huge integers, nan/inf, control characters, deep nesting,
broken TOML) and on arbitrary text and bytes only ever raise SpecError, and every error line
starts with the spec's name and is one line."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path

import pytest
import tomli_w
from hypothesis import given, settings
from hypothesis import strategies as st

from dnscamp import spec
from tests.fuzz import strategies as S
from tests.fuzz.conftest import TALLY, examples

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = tomllib.loads((ROOT / "campaigns" / "default.toml").read_text())
SOURCE = "fuzz.toml"


def _paths(d, prefix=()) -> list[tuple]:
    out = []
    for k, v in (d.items() if isinstance(d, dict) else enumerate(d)):
        out.append((*prefix, k))
        if isinstance(v, (dict, list)):
            out.extend(_paths(v, (*prefix, k)))
    return out


PATHS = _paths(DEFAULT)
_SCALAR = st.one_of(
    st.integers(-(2**63), 2**63 - 1), st.sampled_from((0, -1, 2**63 - 1, -(2**63), 10**7, 10**6 + 1)),
    st.floats(), st.sampled_from((float("nan"), float("inf"), float("-inf"), -0.0)), st.booleans(), S.TEXT,
    st.sampled_from(("fiber", "4g", "no-such-profile", "do53:isp", "doq:nowhere", "")),
)  # fmt: skip
_VALUE = st.recursive(_SCALAR, lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(S.TEXT, c, max_size=3)), max_leaves=5)


def _deep(n: int):
    d: dict = {"leaf": 1}
    for _ in range(n):
        d = {"x": d}
    return d


@st.composite
def mutated_spec(draw) -> str:
    doc = copy.deepcopy(DEFAULT)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(("set", "set", "delete", "unknown_key", "unknown_kind", "deep", "profile")))
        path = draw(st.sampled_from(PATHS))
        parent = doc
        try:
            for k in path[:-1]:
                parent = parent[k]
            if op == "set":
                parent[path[-1]] = draw(_VALUE)
            elif op == "delete":
                del parent[path[-1]]
            elif op == "unknown_key" and isinstance(parent, dict):
                parent[draw(S.TEXT) or "extra"] = draw(_VALUE)
            elif op == "unknown_kind":
                doc.setdefault("kinds", {})[draw(S.TEXT) or "nope"] = draw(st.dictionaries(S.TEXT, _VALUE, max_size=2))
            elif op == "deep":
                parent[path[-1]] = _deep(draw(st.integers(10, 300)))
            elif op == "profile":
                doc.setdefault("profiles", {})[draw(S.TEXT) or "p"] = draw(st.dictionaries(S.TEXT, _VALUE, max_size=3))
        except (KeyError, IndexError, TypeError):
            pass  # an earlier mutation removed or retyped the parent: the spec is mutated anyway
    try:
        text = tomli_w.dumps(doc)
    except (TypeError, ValueError):  # e.g. a list of mixed tables and scalars
        text = tomli_w.dumps(DEFAULT)
    cut = draw(st.sampled_from((None, None, None, "truncate", "insert")))
    if cut == "truncate":
        text = text[: draw(st.integers(0, len(text)))]
    elif cut == "insert":
        i = draw(st.integers(0, len(text)))
        text = text[:i] + draw(st.text(max_size=5)) + text[i:]
    return text


def check_errors(exc: spec.SpecError, source: str, v: S.Violations, what: str) -> None:
    v.check(bool(exc.lines), "SpecError without a line", None)
    for line in exc.lines:
        v.check(line.startswith(f"{source}: "), f"error line does not start with the spec's name: {line[:120]!r} ({what})")
        v.check(len(line.splitlines()) == 1, f"error line is not one line: {line[:160]!r} ({what})")


def check_text(text: str, v: S.Violations) -> None:
    try:
        spec.loads(text, SOURCE)
    except spec.SpecError as exc:
        check_errors(exc, SOURCE, v, f"spec {text[:200]!r}")
    except Exception as exc:  # noqa: BLE001 - the property: nothing but SpecError
        v.check(False, f"loads raised {type(exc).__name__}: {str(exc)[:120]!r} (spec {text[:300]!r})")


def test_spec_errors_are_spec_errors():
    n = []

    @settings(max_examples=examples(400))
    @given(st.one_of(mutated_spec(), mutated_spec(), mutated_spec(), st.text(max_size=200)))
    def prop(text: str) -> None:
        v = S.Violations()
        check_text(text, v)
        n.append(1)
        v.raise_any()

    prop()
    TALLY["spec"] += len(n)


def test_spec_files_of_any_bytes(tmp_path):
    n = []

    @settings(max_examples=examples(150))
    @given(st.one_of(st.binary(max_size=300), mutated_spec().map(lambda t: t.encode()),
                     st.tuples(mutated_spec(), st.binary(min_size=1, max_size=4)).map(lambda p: p[0].encode() + p[1])))
    def prop(data: bytes) -> None:
        v = S.Violations()
        path = tmp_path / "fuzz.toml"
        path.write_bytes(data)
        try:
            spec.load(path)
        except spec.SpecError as exc:
            check_errors(exc, str(path), v, f"file bytes {data[:200]!r}")
        except Exception as exc:  # noqa: BLE001
            v.check(False, f"load raised {type(exc).__name__}: {str(exc)[:120]!r} (file bytes {data[:200]!r})")
        n.append(1)
        v.raise_any()

    prop()
    TALLY["spec"] += len(n)
