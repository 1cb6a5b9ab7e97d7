"""``hermes mcp``: Hermes as a Model Context Protocol server over stdio, for coding agents.

The tools (:mod:`hermes.mcp.server`) return the documents the CLI commands print — the same
library calls, the same numbers — bounded in rows and bytes (:mod:`hermes.mcp.bounds`), on
paths under the roots the server was started with (:mod:`hermes.mcp.paths`), each analysis
remembered by the content hash of its trace (:mod:`hermes.mcp.cache`). Needs the ``mcp``
package (``pip install 'hermes-profiler[mcp]'``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hermes.errors import UsageError

if TYPE_CHECKING:
    from hermes.mcp.analysis import Workspace


def workspace(roots: list[Path] | None = None, out_dir: Path | None = None,
              max_rows: int | None = None, max_bytes: int | None = None,
              cache_size: int = 8) -> Workspace:
    """The :class:`~hermes.mcp.analysis.Workspace` of a server (roots checked now)."""
    from hermes.mcp.analysis import Workspace
    from hermes.mcp.bounds import MAX_BYTES, MAX_ROWS
    from hermes.mcp.cache import Cache
    from hermes.mcp.paths import Roots

    r = Roots(roots)
    return Workspace(roots=r, out_dir=Path(out_dir) if out_dir else r.dirs[0] / ".hermes-mcp",
                     max_rows=max_rows or MAX_ROWS, max_bytes=max_bytes or MAX_BYTES,
                     cache=Cache(cache_size))


def serve(roots: list[Path] | None = None, out_dir: Path | None = None,
          max_rows: int | None = None, max_bytes: int | None = None) -> None:
    """Serve MCP over this process's stdin and stdout until the client closes them."""
    try:
        import mcp.server.mcpserver  # noqa: F401
    except ImportError:
        raise UsageError("the mcp package is not installed",
                         hint="pip install 'hermes-profiler[mcp]'") from None
    from hermes.mcp.server import build

    build(workspace(roots, out_dir, max_rows, max_bytes)).run("stdio")
