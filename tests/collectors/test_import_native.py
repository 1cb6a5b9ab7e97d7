"""The Kineto import with the compiled column passes (``hermes.trace._columns``) is the import
without them: every repository trace and every shared Kineto trace of up to 4 MB gives the same
Arrow table (columns, dictionaries and their order, metadata) and the same summary, or the same
error."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes.collectors import importers
from hermes.errors import HermesError
from hermes.trace import columns
from tests.conftest import REPO, SHARED_TRACES

pytestmark = pytest.mark.skipif(not columns.NATIVE, reason="hermes.trace._columns not compiled")

KINETO = REPO / "tests" / "data" / "kineto"


def _sources() -> list[Path]:
    found = sorted(KINETO.glob("*.json*"))
    if SHARED_TRACES.is_dir():
        found += sorted(p for p in SHARED_TRACES.rglob("*.json*")
                        if p.name.endswith((".json", ".json.gz")) and p.stat().st_size < 4e6)
    return [p for p in found if (i := importers.detect(p)) is not None and i.name == "kineto"]


def _import(src: Path) -> tuple[object, ...]:
    imp = importers.get("kineto")
    try:
        r = imp.run([src], src.with_name(src.name + ".parquet"),
                    {"in_memory": "arrow", "helpers": 0})
    except HermesError as exc:
        return ("error", str(exc))
    return (r.trace, r.trace.schema.metadata, r.by_kind, r.by_source_category, r.unknown_kept,
            r.warnings, r.events)


@pytest.mark.parametrize("src", _sources(), ids=lambda p: p.name)
def test_compiled_passes_import_what_python_imports(src: Path, monkeypatch) -> None:
    native = _import(src)
    monkeypatch.setattr(columns, "_c", None)
    python = _import(src)
    if native[0] == "error":
        assert python == native
        return
    assert native[0].equals(python[0]), src  # type: ignore[attr-defined]
    assert native[1:] == python[1:], src
