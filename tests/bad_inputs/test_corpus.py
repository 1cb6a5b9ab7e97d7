"""Every hostile input of the corpus through the CLI, in-process: the documented exit code,
exactly one ``hermes: error:`` line naming the problem, no traceback, no leftover output or
temp file, and a good file already at the output byte-identical afterwards."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.bad_inputs.make_corpus import Case, cases

CASES = cases()


class _Exec(BaseException):  # noqa: N818 - not an error: the point where profile would exec
    """Raised instead of exec'ing the user's script (the CLI does not catch it)."""


def _snapshot(d: Path) -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {}
    for root, dirs, files in os.walk(d):
        for name in files + dirs:
            p = Path(root) / name
            rel = str(p.relative_to(d))
            out[rel] = p.read_bytes() if p.is_file() and not p.is_symlink() else None
    return out


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str],
              monkeypatch: pytest.MonkeyPatch) -> None:
    from hermes.cli import main

    def no_exec(*args: object) -> None:
        raise _Exec(args)

    monkeypatch.setattr(os, "execvpe", no_exec)
    monkeypatch.setenv("HERMES_NO_PROGRESS", "1")
    monkeypatch.delenv("HERMES_DEBUG", raising=False)
    argv = case.build(tmp_path)
    capsys.readouterr()
    before = _snapshot(tmp_path)
    if case.command == "profile" and case.codes == (0,):
        with pytest.raises(_Exec):
            main(argv)
        return
    code = main(argv)
    out, err = capsys.readouterr()
    after = _snapshot(tmp_path)
    assert "Traceback" not in err + out
    assert code in case.codes, f"exit {code}, expected {case.codes}: {err}"
    errors = [line for line in err.splitlines() if line.startswith("hermes: error:")]
    if code == 2:
        assert len(errors) == 1, err
        assert "internal error" not in errors[0], errors[0]
        if case.needle:
            assert case.needle in errors[0], errors[0]
        # nothing new, nothing changed: no partial output, no temp file
        assert after == before, sorted(set(after) ^ set(before)) or "a file changed"
    else:
        assert not errors or code == 1, err
        leftovers = [k for k in after if ".tmp" in k or ".old-" in k]
        assert not leftovers, leftovers
    if case.check is not None:
        case.check(tmp_path)
    if case.keep:
        assert after.get(case.keep) == before.get(case.keep)


def test_corpus_covers_every_class_and_command() -> None:
    classes = {c.cls for c in CASES}
    commands = {c.command for c in CASES}
    assert len(CASES) >= 100
    assert {"numbers", "text", "structure", "size", "resources", "dataloss"} <= classes
    assert {"import", "validate", "analyze", "export", "diff", "check", "profile",
            "emulate"} <= commands
