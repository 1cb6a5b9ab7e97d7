"""``hermes mcp``: serve Hermes to coding agents over the Model Context Protocol (stdio)
(thin layer over :func:`hermes.mcp.serve`)."""

from __future__ import annotations

import json
from pathlib import Path

import typer


def client_config(roots: list[str] | None = None) -> dict[str, object]:
    """The ``mcpServers`` entry most MCP clients read (Claude Desktop, Cursor, Claude Code's
    ``.mcp.json``)."""
    args = ["mcp"]
    for r in roots or ["/path/to/traces"]:
        args += ["--root", r]
    return {"mcpServers": {"hermes": {"command": "hermes", "args": args}}}


def help_text() -> str:
    """The client configurations ``hermes mcp --help`` shows."""
    desktop = json.dumps(client_config(), indent=2)
    vscode = json.dumps({"servers": {"hermes": {"type": "stdio", "command": "hermes",
                                                "args": ["mcp", "--root", "${workspaceFolder}"]}}},
                        indent=2)
    return "\n".join([
        "Client configuration (the hermes executable must be on the client's PATH, or give "
        "its full path as \"command\"):",
        "",
        "Claude Desktop (claude_desktop_config.json), Cursor (.cursor/mcp.json) and Claude Code "
        "(.mcp.json in the project):",
        desktop,
        "",
        "Claude Code from the shell: claude mcp add hermes -- hermes mcp --root .",
        "",
        "VS Code (.vscode/mcp.json):",
        vscode,
    ])


def register(app: typer.Typer) -> None:
    @app.command("mcp", epilog=help_text())
    def mcp_cmd(
        root: list[Path] | None = typer.Option(
            None, "--root", help="A directory whose traces the server may read (repeatable; "
                                 "default: the current directory). Paths outside every root, "
                                 "symlinks out of them and device files are refused."),
        out_dir: Path | None = typer.Option(
            None, "--out-dir", help="Where report writes its HTML files (default: "
                                    ".hermes-mcp/ in the first root)."),
        max_rows: int = typer.Option(100, "--max-rows", min=1,
                                     help="Most rows of any list in one result."),
        max_bytes: int = typer.Option(256 * 1024, "--max-bytes", min=1024,
                                      help="Most bytes of JSON in one result."),
    ) -> int:
        """Serve Hermes to coding agents: a Model Context Protocol server on stdin/stdout with
        the tools analyze, findings, kernels, critical_path, memory, diff, check, whatif and
        report and query, returning the numbers the CLI commands print,
        bounded in rows and bytes, with the cause vocabulary, rule table and docs as
        resources. See docs/agents.md.

        Example: hermes mcp --root ~/runs --root /data/traces
        """
        from hermes.commands._util import release_gc
        from hermes.mcp import serve

        release_gc()  # a long-running process: the collector back on
        serve(list(root) if root else None, out_dir, max_rows, max_bytes)
        return 0
