"""The mutation fuzzer in the test suite: a fixed, short budget of seeded cases per family
(issue 38 item 5). Same seed, same cases: a failure here is a defect the fuzzer can replay
(``python tests/bad_inputs/fuzz.py --seed 2026 --iterations 5 --family F --out DIR`` saves its
input). Longer campaigns are a benchmark: ``python benchmarks/fuzz_campaign.py``.

The budget: 5 cases per family, about 9 s of CPU in all (under a minute on two busy CPUs).
Every outcome is one of ok / clean / DEFECT (see fuzz.py), and a successful run's output must
read back (``fuzz.unreadable_output``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bad_inputs import fuzz

SEED = 2026
CASES_PER_FAMILY = 5


@pytest.mark.parametrize("family", sorted(fuzz.FAMILIES))
def test_fuzz_family_finds_no_defect(family: str, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    fuzz.ensure_stdlib_streams()
    counts = fuzz.campaign(family, SEED, CASES_PER_FAMILY, tmp_path, limit=30, minimize=False)
    out = capsys.readouterr().out
    assert sum(counts.values()) == CASES_PER_FAMILY
    assert counts["DEFECT"] == 0, out
    assert not list(tmp_path.iterdir()), out  # no defect saved


def test_the_readback_check_sees_an_unreadable_output(tmp_path: Path) -> None:
    """The check the campaign applies to every successful run, on outputs known bad."""
    (tmp_path / "a.html").write_bytes(b"<html>\xff</html>")
    assert "UnicodeDecodeError" in fuzz.unreadable_output(
        ["report", "x", "--out", str(tmp_path / "a.html")], "")
    assert "non-finite" in fuzz.unreadable_output(["analyze", "x", "-f", "json"],
                                                  '{"a": NaN}')
    assert fuzz.unreadable_output(["analyze", "x", "-f", "json"], '{"a": null}') == ""
