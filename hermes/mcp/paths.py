"""The files an MCP client may name: only under the roots the server was started with.

:class:`Roots` turns a path an agent sent into a real path, or refuses it with one line: a path
outside every root, a symlink (the path itself, a folder on the way, or an entry inside a trace
directory) that resolves out of them, and anything that is not a regular file or a directory
(a device, FIFO or socket). :meth:`Roots.digest` is the content hash the analysis cache keys on;
a file's hash is remembered by its identity and modification stamp, so an unchanged file is
hashed once per server.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from pathlib import Path

from hermes.errors import HermesError, UsageError

#: Bytes read at a time while hashing a file.
CHUNK = 1 << 20
#: Entries a trace directory may hold (its files are hashed one by one).
MAX_DIR_ENTRIES = 100_000


class PathRefused(HermesError):
    """A path the server will not read: outside its roots, a symlink out of them, a device."""


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


class Roots:
    """The directories a server reads from (resolved once, at start)."""

    def __init__(self, dirs: list[Path] | None = None) -> None:
        roots: list[str] = []
        for d in dirs or [Path.cwd()]:
            real = os.path.realpath(os.path.expanduser(str(d)))
            if not os.path.isdir(real):
                raise UsageError("not a directory", path=d, where="--root")
            if real not in roots:
                roots.append(real)
        self.dirs = [Path(r) for r in roots]
        self._memo: dict[tuple[int, ...], str] = {}
        self._lock = threading.Lock()

    def __str__(self) -> str:
        return ", ".join(str(d) for d in self.dirs)

    def within(self, real: str) -> bool:
        return any(_inside(real, str(r)) for r in self.dirs)

    def resolve(self, arg: object, what: str = "trace") -> Path:
        """The real path of ``arg`` (relative: to the first root), checked: it exists, lies under
        a root after every symlink is followed, and is a regular file or a directory."""
        if not isinstance(arg, str) or not arg.strip():
            raise UsageError(f"{what}: expected a path (a non-empty string), got {arg!r}")
        if "\x00" in arg:
            raise PathRefused("a path with a NUL byte is refused", where=what)
        p = Path(os.path.expanduser(arg))
        if not p.is_absolute():
            p = self.dirs[0] / p
        lexical = os.path.abspath(p)
        real = os.path.realpath(p)
        if not self.within(lexical):
            raise PathRefused(f"outside the directories this server may read ({self})",
                              path=arg, where=what,
                              hint="start `hermes mcp` with --root DIR to allow another one")
        if not self.within(real):
            raise PathRefused(f"a symlink out of the directories this server may read: it "
                              f"resolves to {real} ({self})", path=arg, where=what)
        if not os.path.lexists(real):
            raise HermesError("no such file or directory", path=arg, where=what)
        self._regular(real, arg, what)
        return Path(real)

    @staticmethod
    def _regular(real: str, arg: object, what: str) -> os.stat_result:
        try:
            st = os.stat(real)
        except OSError as exc:
            raise HermesError(f"cannot read: {exc.strerror or exc}", path=arg, where=what) \
                from None
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
            raise PathRefused("not a regular file or directory (a device, FIFO or socket): "
                              "refused", path=arg, where=what)
        return st

    def digest(self, real: Path) -> str:
        """A hex SHA-256 of the content: of the file, or of a directory's relative names and
        file hashes (every entry checked as :meth:`resolve` checks a path)."""
        if real.is_dir():
            return self._dir_digest(real)
        return self._file_digest(str(real), real)

    def _file_digest(self, real: str, shown: object) -> str:
        st = self._regular(real, shown, "trace")
        if stat.S_ISDIR(st.st_mode):
            return self._dir_digest(Path(real))
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        with self._lock:
            known = self._memo.get(key)
        if known is not None:
            return known
        h = hashlib.sha256()
        try:
            with open(real, "rb") as fh:
                while block := fh.read(CHUNK):
                    h.update(block)
        except OSError as exc:
            raise HermesError(f"cannot read: {exc.strerror or exc}", path=shown) from None
        out = h.hexdigest()
        with self._lock:
            self._memo[key] = out
        return out

    def _dir_digest(self, top: Path) -> str:
        h = hashlib.sha256(b"dir\0")
        count = 0
        for here, dirs, files in os.walk(top, followlinks=False):
            dirs.sort()
            for name in sorted(dirs + files):
                count += 1
                if count > MAX_DIR_ENTRIES:
                    raise PathRefused(f"more than {MAX_DIR_ENTRIES} entries: refused",
                                      path=top)
                entry = os.path.join(here, name)
                real = os.path.realpath(entry)
                if not self.within(real):
                    raise PathRefused(f"holds a symlink out of the directories this server "
                                      f"may read: {entry} resolves to {real}", path=top)
                if name in dirs and not os.path.islink(entry):
                    continue  # walked into next
                rel = os.path.relpath(entry, top).encode("utf-8", "surrogateescape")
                h.update(rel + b"\0" + self._file_digest(real, entry).encode() + b"\0")
        return h.hexdigest()
