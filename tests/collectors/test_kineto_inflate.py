"""A gzip Kineto trace is inflated by ISA-L where its wheel is installed (``isal``, ~3x faster
than zlib): the same text, and the same one-line errors, as the standard library gives."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from collectors.importers.kineto import reader
from tests.conftest import DATA

ROOT = Path(__file__).resolve().parents[2]
SRC = DATA / "kineto" / "gpt_dataloader_starved.pt.trace.json.gz"

ANALYZE = """
import gzip, sys, zlib
import hermes.collectors.importers.kineto.reader as R
if sys.argv[1] == "stdlib":
    R._gzip, R._InflateError = gzip, zlib.error
from hermes.cli import main
sys.exit(main(["analyze", sys.argv[2], "--format", "json"]))
"""


def _both(path: Path) -> list[subprocess.CompletedProcess[str]]:
    env = {**os.environ, "HERMES_FORKED_IMPORT": "0"}
    return [subprocess.run([sys.executable, "-c", ANALYZE, how, str(path)], capture_output=True,
                           text=True, cwd=ROOT, env=env, timeout=300)
            for how in ("stdlib", "isal")]


def test_isal_reads_what_the_standard_library_reads() -> None:
    pytest.importorskip("isal")
    assert reader._gzip is not gzip  # installed: it is the one used
    runs = _both(SRC)
    assert runs[0].returncode == runs[1].returncode == 0, runs[0].stderr + runs[1].stderr
    assert runs[0].stdout == runs[1].stdout


def _corrupt(src: bytes, want: type[Exception], start: int) -> bytes:
    """``src`` corrupted so that the standard library's gzip raises ``want``: the stored CRC
    changed (BadGzipFile), or 4 bytes of the deflate stream flipped at the first offset from
    ``start`` on where inflating fails (zlib.error)."""
    if want is gzip.BadGzipFile:
        b = bytearray(src)
        b[-8] ^= 0xFF  # the trailer's CRC-32
        with pytest.raises(gzip.BadGzipFile, match="CRC"):
            gzip.decompress(bytes(b))
        return bytes(b)
    for off in range(start, len(src) - 16, 331):
        b = bytearray(src)
        b[off:off + 4] = bytes(x ^ 0xFF for x in b[off:off + 4])
        try:
            gzip.decompress(bytes(b))
        except want:
            return bytes(b)
        except Exception:  # noqa: BLE001 - another error: try the next offset
            continue
    raise AssertionError("no such corruption found")


@pytest.mark.parametrize(("want", "words"), [
    (zlib.error, "cannot decompress: the compressed data is corrupt"),
    (gzip.BadGzipFile, "cannot decompress: the data fails its CRC check: corrupt"),
])
def test_a_corrupt_stream_gives_the_same_error_with_either_inflater(
        tmp_path: Path, want: type[Exception], words: str) -> None:
    pytest.importorskip("isal")
    src = SRC.read_bytes()
    bad = tmp_path / "bad.pt.trace.json.gz"
    bad.write_bytes(_corrupt(src, want, len(src) // 2))  # past what detection reads
    runs = _both(bad)
    assert runs[0].returncode == runs[1].returncode == 2
    assert runs[0].stderr == runs[1].stderr and runs[0].stderr.count("\n") == 1
    assert words in runs[0].stderr and "Traceback" not in runs[0].stderr
