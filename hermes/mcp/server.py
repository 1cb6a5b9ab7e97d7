"""The MCP server: Hermes's tools and resources on the official ``mcp`` SDK's ``MCPServer``.

Tools are registered from :data:`TOOLS` (name -> function, description); each wrapper turns
the call into one of :mod:`hermes.mcp.tools` and any failure into an error result carrying
Hermes's one-line message (``isError``), so a bad path, a malformed trace or a failing analysis
answers that call and the server goes on serving. Every tool is read-only but ``report``, which
writes one HTML file into the server's output folder.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import Field

from hermes.errors import HermesError
from hermes.mcp import tools as t
from hermes.mcp.analysis import KERNEL_SORTS, Workspace

TraceArg = Annotated[str, Field(description=(
    "Path of a trace: a Hermes trace (.parquet file or directory of per-rank files), a PyTorch "
    "profiler (Kineto) .json/.json.gz, or an Ascend profiler output directory. Relative paths "
    "are relative to the server's first root; paths outside the roots are refused."))]
KeepWarmup = Annotated[bool, Field(description="Analyze a warm-up first step too (one over 10x "
                                               "the median of the others is left out).")]
SqlArg = Annotated[str, Field(description="One read-only SELECT statement (DuckDB SQL).")]
Offset = Annotated[int, Field(ge=0, description="First row to return (for paging; the result's "
                                                "'rest' says which offset comes next).")]


def message(exc: BaseException) -> str:
    """The one line a failed call answers with (the CLI's wording, ``hermes.cli``)."""
    if isinstance(exc, HermesError):
        return exc.one_line()
    if isinstance(exc, OSError):
        where = f"{os.fsdecode(exc.filename)}: " if exc.filename is not None else ""
        return f"{where}{exc.strerror or exc}"
    if isinstance(exc, MemoryError):
        return "out of memory: the input is too large for this machine"
    if isinstance(exc, RecursionError):
        return "input nested too deeply to process"
    return f"internal error: {type(exc).__name__}: {exc} (please report)"


def _guarded(fn: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    from mcp.server.mcpserver.exceptions import ToolError

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - every failure is this call's error result
            raise ToolError(message(exc)) from None
    return call


def _tools(ws: Workspace) -> dict[str, tuple[Callable[..., dict[str, Any]], str]]:
    """name -> (function, description) of every tool, bound to ``ws``."""
    def analyze(trace: TraceArg, keep_warmup: KeepWarmup = False) -> dict[str, Any]:
        return t.analyze(ws, trace, keep_warmup)

    def findings(trace: TraceArg,
                 category: Annotated[str | None, Field(description=(
                     "Only findings of this category (parallel, io, cpu, computation, "
                     "communication) or this finding id (e.g. cpu.operator_dispatch)."))] = None,
                 offset: Offset = 0,
                 limit: Annotated[int | None, Field(ge=1, description="Rows to return (at "
                                                    "most the server's row cap).")] = None
                 ) -> dict[str, Any]:
        return t.findings(ws, trace, category, offset, limit)

    def kernels(trace: TraceArg,
                top: Annotated[int, Field(ge=1, description="Rows to return (at most the "
                                          "server's row cap).")] = 20,
                sort: Annotated[str, Field(description="Sort by: " + ", ".join(KERNEL_SORTS)
                                           + " (descending, name ascending).")] = "total_ns",
                offset: Offset = 0) -> dict[str, Any]:
        return t.kernels(ws, trace, top, sort, offset)

    def critical_path(trace: TraceArg,
                      rank: Annotated[int | None, Field(description=(
                          "This rank's path (default: the slowest rank's, as `hermes analyze` "
                          "reports it)."))] = None) -> dict[str, Any]:
        return t.critical_path(ws, trace, rank)

    def memory(trace: TraceArg) -> dict[str, Any]:
        return t.memory(ws, trace)

    def diff(base: Annotated[str, Field(description="The earlier run (a trace path).")],
             new: Annotated[str, Field(description="The run to compare with it.")]
             ) -> dict[str, Any]:
        return t.diff(ws, base, new)

    def check(new: Annotated[str, Field(description="The run to gate (a trace path).")],
              baselines: Annotated[list[str] | None, Field(description=(
                  "Earlier runs (trace paths); several are pooled as a history."))] = None,
              budget: Annotated[str | None, Field(description=(
                  "A budget file (TOML): step time, host-bound %, exposed communication %, "
                  "MFU, findings."))] = None,
              max_regression: Annotated[str, Field(description=(
                  "Allowed median step-time increase, e.g. '5%' or '0.05'."))] = "5%",
              alpha: Annotated[float, Field(description="Significance level of the one-sided "
                                            "Mann-Whitney test over steps.")] = 0.01,
              allow_missing: Annotated[bool, Field(description=(
                  "Gate on the ranks that could be analyzed when some could not."))] = False
              ) -> dict[str, Any]:
        return t.check(ws, new, baselines, budget, max_regression, alpha, allow_missing)

    def whatif(trace: TraceArg,
               apply: Annotated[list[str] | None, Field(description=(
                   "Optimizations to apply together: rule ids (a recommendation's 'rule', e.g. "
                   "cpu.gc_freeze) or emulator options NAME[=VALUE] (e.g. remove_syncs); see "
                   "the resource hermes://whatif/transforms. Empty: replay the trace as is."))]
               = None) -> dict[str, Any]:
        return t.whatif(ws, trace, apply)

    def report(trace: TraceArg,
               top: Annotated[int, Field(ge=1, le=100, description="Findings shown with their "
                                                                    "evidence.")] = 10
               ) -> dict[str, Any]:
        return t.report(ws, trace, top)

    out: dict[str, tuple[Callable[..., dict[str, Any]], str]] = {
        "analyze": (analyze, DESCRIPTIONS["analyze"]),
        "findings": (findings, DESCRIPTIONS["findings"]),
        "kernels": (kernels, DESCRIPTIONS["kernels"]),
        "critical_path": (critical_path, DESCRIPTIONS["critical_path"]),
        "memory": (memory, DESCRIPTIONS["memory"]),
        "diff": (diff, DESCRIPTIONS["diff"]),
        "check": (check, DESCRIPTIONS["check"]),
        "whatif": (whatif, DESCRIPTIONS["whatif"]),
        "report": (report, DESCRIPTIONS["report"]),
    }
    query = t.query_tool()
    if query is not None:
        def query_fn(trace: TraceArg, sql: SqlArg) -> dict[str, Any]:
            return query[0](ws, trace, sql)

        out["query"] = (query_fn, f"{DESCRIPTIONS['query']} {query[1]}")
    return out


DESCRIPTIONS = {
    "analyze": (
        "Find out why a training run is slow. Returns Hermes's analysis document "
        "(hermes.analysis/1, the same as `hermes analyze TRACE --format json`): the verdict "
        "`bound` (host, device, io or communication) with `verdict.reason` and the share of "
        "step time each cause explains, step times (median, p90), the per-rank breakdown of "
        "wall time in percent, the critical path, and `findings` sorted by `time_share` (the "
        "fraction of step time the cause costs), each with evidence (event names, ranks, steps) "
        "and recommendations whose `estimated_speedup` (step time before / after) says how it "
        "was estimated (`estimate`: replay of the step graph, or the rule's formula). Cite "
        "these numbers as measured. The first call on a trace analyzes it (seconds); later "
        "calls on the same content are answered from the cache (`cached`: true)."),
    "findings": (
        "The findings of a trace's analysis (the `findings` of `hermes analyze --format "
        "json`), optionally of one category or finding id, paged with offset/limit. Each has "
        "id (category.cause), severity, time_share, summary, evidence, ranks, steps and "
        "recommendations with their estimated speed-up. The resource hermes://causes lists the "
        "vocabulary."),
    "kernels": (
        "The device kernel table of a trace over all ranks: per kernel name the count, total, "
        "mean and max time (ns), share of kernel time (%), family and roofline bound. Sorted "
        "by total time (the first 20 rows are `computation.top_kernels` of `hermes analyze`) "
        "or another column; paged with top/offset, `truncated` says more rows exist. Also "
        "returns MFU and achieved TFLOP/s per rank where FLOPs are known."),
    "critical_path": (
        "The critical path of a step: the share of the path per component (computation, "
        "communication, host, io, other), its length and the operators on it with their time "
        "and slack. Default: the slowest rank (as `hermes analyze` reports it); give rank for "
        "another."),
    "memory": (
        "Peak device memory per rank (allocated and reserved bytes, sample count) from the "
        "trace's memory samples; empty with a note when the trace recorded none."),
    "diff": (
        "Compare two runs (the document of `hermes diff BASE NEW --format json`): step time "
        "median/p90 of each, the change with its confidence interval and Mann-Whitney p, the "
        "breakdown side by side, the operators and kernels that got slower, faster, appeared "
        "or went away (per step), and the findings that appeared, disappeared or grew."),
    "check": (
        "The CI gate of `hermes check NEW --baseline BASE...`: status pass/fail and exit_code "
        "(1: regression or broken budget), each gate with its figures (median step time "
        "before/after, ratio and its CI, p-value, threshold), the kernels and operators "
        "responsible for a regression, and `text`, the verdict as the CLI prints it."),
    "whatif": (
        "Predict the step time after optimizations by replaying the trace's dependency graph "
        "(`hermes whatif TRACE --apply OPT... --format json`): measured and as-is replay step "
        "time, predicted_ms and speedup with all of `apply` together, per rank, the own-time "
        "breakdown before and after, and with several optimizations each one alone "
        "(`per_optimization`). Use a recommendation's `rule` from analyze as the name."),
    "report": (
        "Write the self-contained HTML report of a trace (what `hermes report` / `hermes "
        "analyze --format html` writes: verdict, findings, timeline with the critical path, "
        "roofline, kernel tables) into the server's output folder and return its path, for a "
        "person to open. Inputs are never overwritten."),
    "query": (
        "Run one read-only SQL query over the trace's events (`hermes query TRACE SQL`); "
        "rows are capped, `truncated` says more exist."),
}


def build(ws: Workspace) -> Any:
    """The :class:`mcp.server.mcpserver.MCPServer` with Hermes's tools and resources."""
    from mcp.server.mcpserver import MCPServer
    from mcp.types import ToolAnnotations

    from hermes import __version__
    from hermes.mcp import resources as res

    server = MCPServer("hermes", version=__version__, instructions=INSTRUCTIONS,
                       log_level="WARNING")
    for name, (fn, desc) in _tools(ws).items():
        read_only = name != "report"
        server.add_tool(_guarded(fn), name=name, description=desc,
                        annotations=ToolAnnotations(read_only_hint=read_only,
                                                    idempotent_hint=True,
                                                    open_world_hint=False),
                        structured_output=True)
    server.resource("hermes://causes", name="causes", mime_type="application/json",
                    description="The cause vocabulary: categories, causes, finding ids, "
                                "verdicts, severities.")(res.causes)
    server.resource("hermes://rules", name="rules", mime_type="application/toml",
                    description="The rule table (rules.toml): cause -> optimization, its "
                                "precondition and speed-up estimate.")(res.rule_table)
    server.resource("hermes://whatif/transforms", name="whatif-transforms",
                    mime_type="application/json",
                    description="The names whatif(apply=[...]) accepts, with what each "
                                "changes in the replay.")(res.transforms)
    for page, (what, read) in res.doc_pages().items():
        server.resource(f"hermes://docs/{page}", name=f"docs-{page}", mime_type="text/markdown",
                        description=what)(read)
    return server


INSTRUCTIONS = (
    "Hermes analyzes ML training traces (PyTorch/Kineto, Ascend, Hermes Parquet) and explains "
    "why a run is slow with measured numbers. Start with analyze(trace); page findings and "
    "kernels; predict an optimization's gain with whatif(trace, apply=[rule]); compare runs "
    "with diff or gate them with check. Results are capped: when `truncated` is true, `rest` "
    "says how to get more. Paths must lie under the server's roots.")
