"""``created_by``'s version, read from dist-info METADATA without importlib.metadata: the same
answer importlib.metadata gives, in its search order, or no answer (and it is asked)."""

from __future__ import annotations

import importlib.metadata
import sys
import zipfile

import pytest

from hermes.trace import meta
from hermes.trace.meta import TraceMeta


def _importlib_answer(path: list[str]) -> str | None:
    dists = list(importlib.metadata.distributions(name="hermes-profiler", path=path))
    return dists[0].version if dists else None


def _dist(root, name: str, version: str, file: str = "METADATA") -> None:
    d = root / name
    d.mkdir(parents=True)
    (d / file).write_text(f"Metadata-Version: 2.1\nName: hermes-profiler\nVersion: {version}\n"
                          "\nVersion: 9.9.9 (the description, not a header)\n")


def test_this_install_matches_importlib_metadata():
    version = importlib.metadata.version("hermes-profiler")
    assert meta._dist_info_version() == version
    assert TraceMeta().created_by == f"hermes-profiler {version}"


@pytest.mark.parametrize("layout, expected", [
    # the first directory on the path holding one wins; '.' and '-' normalize like '_'
    ([("a", "Hermes.Profiler-2.0.dist-info", "2.0", "METADATA"),
      ("b", "hermes_profiler-1.0.dist-info", "1.0", "METADATA")], "2.0"),
    # an egg-info directory (a source tree's editable install) reads PKG-INFO
    ([("a", "hermes_profiler.egg-info", "3.1", "PKG-INFO")], "3.1"),
    # another project whose name starts the same is not this one
    ([("a", "hermes_profiler_extra-5.0.dist-info", "5.0", "METADATA"),
      ("b", "hermes_profiler-1.2.dist-info", "1.2", "METADATA")], "1.2"),
    ([("a", "other-1.0.dist-info", "1.0", "METADATA")], None),
])
def test_search_order_and_names_as_importlib_metadata(tmp_path, monkeypatch, layout, expected):
    for sub, name, version, file in layout:
        _dist(tmp_path / sub, name, version, file)
    path = [str(tmp_path / "missing"), str(tmp_path / "a"), str(tmp_path / "b")]
    monkeypatch.setattr(sys, "path", path)
    assert meta._dist_info_version() == expected == _importlib_answer(path)


def test_a_zip_on_the_path_is_left_to_importlib_metadata(tmp_path, monkeypatch):
    z = tmp_path / "deps.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("hermes_profiler-7.0.dist-info/METADATA", "Name: hermes-profiler\n"
                    "Version: 7.0\n")
    _dist(tmp_path / "b", "hermes_profiler-1.0.dist-info", "1.0")
    path = [str(z), str(tmp_path / "b")]
    monkeypatch.setattr(sys, "path", path)
    assert _importlib_answer(path) == "7.0"
    assert meta._dist_info_version() is None  # so _version asks hermes.__version__


def test_no_dist_info_falls_back_to_the_package_version(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    monkeypatch.setattr(meta, "_package_version", lambda: "0.0.0+source")
    meta._version.cache_clear()
    try:
        assert meta._version() == "0.0.0+source"
    finally:
        meta._version.cache_clear()
