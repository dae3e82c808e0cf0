"""db.embedded.tuning sizes shared_buffers to the machine's memory or to the cgroup limit the
store runs under (v1 and v2), within 256 MB..8 GB."""

from __future__ import annotations

import os

import pytest

from db import embedded

pytestmark = pytest.mark.unit
RAM = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
GIB = 1 << 30


def _tree(tmp_path, proc_lines: list[str], files: dict[str, str]):
    proc = tmp_path / "cgroup"
    proc.write_text("".join(f"{line}\n" for line in proc_lines))
    root = tmp_path / "sys"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text + "\n")
    return proc, root


@pytest.mark.parametrize(
    ("proc_lines", "files", "expected"),
    [
        (["0::/user.slice/job"], {"user.slice/job/memory.max": str(2 * GIB)}, min(RAM, 2 * GIB)),  # v2 limit
        (["0::/"], {"memory.max": "max"}, RAM),  # v2, no limit
        (["4:memory:/process_api/x", "1:cpu:/"], {"memory/process_api/x/memory.limit_in_bytes": str(3 * GIB)},
         min(RAM, 3 * GIB)),  # v1 limit
        (["4:memory:/", "0::/"], {"memory/memory.limit_in_bytes": "9223372036854771712"}, RAM),  # v1, no limit
        (["0::/gone"], {}, RAM),  # no file to read
        (["garbage", "", "4:memory:/x"], {"memory/x/memory.limit_in_bytes": str(GIB)}, min(RAM, GIB)),  # odd lines skipped
    ],
)  # fmt: skip
def test_memory_is_the_lowest_of_ram_and_the_cgroup_limit(tmp_path, proc_lines, files, expected):
    proc, root = _tree(tmp_path, proc_lines, files)
    assert embedded._memory_bytes(proc, root) == expected


def test_shared_buffers_is_a_quarter_within_bounds(monkeypatch):
    for memory, expected in ((512 << 20, "256MB"), (8 * GIB, "2048MB"), (24 * GIB, "6144MB"), (256 * GIB, "8192MB")):
        monkeypatch.setattr(embedded, "_memory_bytes", lambda m=memory: m)
        assert embedded.tuning()["shared_buffers"] == expected
