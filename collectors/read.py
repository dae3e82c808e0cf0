"""Reading result files: which files a path holds, their bytes (gzip or plain, recognised by
the magic bytes), and blocks of whole lines (`Chunk`) of about BATCH_BYTES for the parsers.

What cannot be read is kept as quarantine rows of the chunk (`Chunk.bad`): a file named
``*.gz`` that is not gzip, the point where a gzip file breaks off (the lines before it are
read), a line over MAX_LINE_BYTES (read in pieces, never held whole).
"""

from __future__ import annotations

import gzip
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from collectors.errors import IngestError
from collectors.quarantine import quarantine_text

# ~16,000-80,000 records per transaction: every batch rewrites the rollup rows of its days and hours
# (a day of a campaign's dns_conn_daily rows is updated by each of its batches); 32 MiB rather than
# 8 cut Postgres's CPU per dns_query record from ~20 to ~10 us on a campaign of 330,000 a day
BATCH_BYTES = 32 << 20
READ_BYTES = 256 << 10
MAX_LINE_BYTES = 16 << 20  # a longer line is quarantined without being held in memory
RAW_PREFIX = 4096  # what the quarantine keeps of an over-long line
ARTIFACTS = "artifacts"  # spool subdirectory for raw files kept beside the records
GZIP_MAGIC = b"\x1f\x8b"


def result_files(paths: Iterable[Path]) -> list[Path]:
    """Expand files and directories into result files, sorted, each once."""
    out: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            # artifacts/ holds what is kept beside records (HAR files, raw Atlas JSON): not records.
            out.extend(
                sorted(
                    x for x in p.rglob("*")
                    if x.is_file() and _is_result_file(x) and ARTIFACTS not in x.relative_to(p).parts[:-1]
                )
            )  # fmt: skip
        elif p.is_file():
            out.append(p)
        else:
            raise IngestError(f"{p}: no such file or directory")
    seen: set[Path] = set()
    uniq = []
    for p in out:
        rp = p.resolve()
        if rp not in seen:
            seen.add(rp)
            uniq.append(p)
    return uniq


def _is_result_file(p: Path) -> bool:
    return (p.name.endswith(".jsonl") or p.name.endswith(".jsonl.gz")) and not p.name.startswith(".")


class NotGzip(OSError):
    pass


@contextmanager
def _open(path: Path):
    """The file's bytes, decompressed when it starts with the gzip magic (whatever its name)."""
    with open(path, "rb") as f:
        magic = f.read(2)
        f.seek(0)
        if magic == GZIP_MAGIC:
            with gzip.GzipFile(fileobj=f) as g:
                yield g
        elif path.name.endswith(".gz"):
            raise NotGzip(f"named *.gz but not gzip (starts with {magic!r}, not 1f 8b): rename or recompress it")
        else:
            yield f


@dataclass
class Chunk:
    """A block of whole lines of one file, and problems found while reading it."""

    source: str
    first: int  # number of the block's first line
    block: bytes
    bad: list[tuple[int, str, str]] = field(default_factory=list)  # (line, reason, raw)


def chunks(files: list[Path]) -> Iterator[Chunk]:
    for path in files:
        yield from file_chunks(path, str(path.resolve()))


def file_chunks(path: Path, source: str) -> Iterator[Chunk]:
    """Blocks of about BATCH_BYTES, cut at a newline: the main process only reads and counts
    newlines (in C); workers split and parse. A line longer than MAX_LINE_BYTES is skipped
    piece by piece (its first RAW_PREFIX bytes kept for the quarantine)."""
    first = 1
    pieces: list[bytes] = []
    size = 0
    oversize: bytes | None = None  # prefix of the over-long line being skipped
    try:
        with _open(path) as f:
            # Small reads: a truncated gzip raises on the read that hits the break, and
            # everything decompressed before it must still be ingested.
            while piece := f.read(READ_BYTES):
                if oversize is not None:
                    nl = piece.find(b"\n")
                    if nl < 0:
                        continue
                    yield Chunk(source, first, b"", [(first, _too_long(), quarantine_text(oversize))])
                    first, oversize, piece = first + 1, None, piece[nl + 1 :]
                pieces.append(piece)
                size += len(piece)
                if size < BATCH_BYTES:
                    continue
                buf = b"".join(pieces)
                cut = buf.rfind(b"\n") + 1
                if cut:
                    yield Chunk(source, first, buf[:cut])
                    first += buf.count(b"\n", 0, cut)
                if len(buf) - cut > MAX_LINE_BYTES:
                    oversize, pieces, size = buf[cut : cut + RAW_PREFIX], [], 0
                else:
                    pieces, size = [buf[cut:]], len(buf) - cut
            if oversize is not None:  # the file ends inside the over-long line
                yield Chunk(source, first, b"", [(first, _too_long(), quarantine_text(oversize))])
    except (OSError, EOFError, zlib.error) as exc:
        buf = b"".join(pieces)
        cut = buf.rfind(b"\n") + 1  # whole lines read before the break are kept
        if isinstance(exc, NotGzip):
            reason = str(exc)
        elif isinstance(exc, (EOFError, zlib.error, gzip.BadGzipFile)):
            reason = f"corrupt file: {type(exc).__name__}: {exc} (the lines before it are ingested)"
        else:
            reason = f"unreadable file: {type(exc).__name__}: {exc}"
        yield Chunk(source, first, buf[:cut], [(first + buf.count(b"\n", 0, cut), reason, "")])
        return
    if pieces and (buf := b"".join(pieces)):
        yield Chunk(source, first, buf)  # last line without a newline


def _too_long() -> str:
    return f"line longer than {MAX_LINE_BYTES >> 20} MiB (not read; raw is its first {RAW_PREFIX} bytes)"
