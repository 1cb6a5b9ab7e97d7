"""``hermes devices [NAME]``: the device table (``hermes/devices/*.toml``), or one device."""

from __future__ import annotations

from typing import Any

import typer

from hermes.commands._util import dumps
from hermes.errors import UsageError

DTYPE_ORDER = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "fp6", "fp4", "int8")


def _tflops(v: float | None) -> str:
    return "-" if not v else f"{v / 1e12:,.1f}"


def _row(p: Any) -> dict[str, Any]:
    f = p.fields
    return {"name": p.name, "display_name": p.display_name, "vendor": p.vendor, "kind": p.kind,
            "arch": p.arch, "arch_id": p.arch_id,
            "compute_capability": f.get("compute_capability"),
            "matmul_flops": {d: p.dtype_flops[d] for d in DTYPE_ORDER if d in p.dtype_flops},
            "matmul_dtypes": list(p.dtypes), "unpublished": list(f.get("unpublished", [])),
            "vector_fp32_flops": p.peak_flops.get("vector"),
            "hbm_bw_Bps": p.hbm_bw_Bps, "hbm_capacity_B": p.hbm_capacity_B,
            "memory_type": f.get("memory_type"), "host_link": f.get("host_link"),
            "host_link_bw_Bps": f.get("host_link_bw_Bps"),
            "intra_node_link": f.get("intra_node_link"),
            "intra_node_link_version": f.get("intra_node_link_version"),
            "intra_node_bw_Bps": f.get("intra_node_bw_Bps"),
            "aliases": list(f.get("aliases", [])), "sources": list(p.sources)}


def listing(rows: list[dict[str, Any]]) -> str:
    head = f"{'name':<16} {'arch':<10} {'bf16':>8} {'fp16':>8} {'tf32':>8} {'fp8':>8} " \
           f"{'fp32':>7} {'HBM TB/s':>8} {'GiB':>5}  device"
    lines = [head, "-" * len(head)]
    for r in rows:
        m = r["matmul_flops"]
        lines.append(f"{r['name']:<16} {r['arch']:<10} {_tflops(m.get('bf16')):>8} "
                     f"{_tflops(m.get('fp16')):>8} {_tflops(m.get('tf32')):>8} "
                     f"{_tflops(m.get('fp8')):>8} {_tflops(m.get('fp32')):>7} "
                     f"{r['hbm_bw_Bps'] / 1e12:>8.2f} {r['hbm_capacity_B'] / 2**30:>5.0f}  "
                     f"{r['display_name']}")
    lines.append("dense matrix TFLOP/s per dtype ('-': not supported or not published); "
                 "`hermes devices NAME` for one device and its sources")
    return "\n".join(lines)


def details(r: dict[str, Any]) -> str:
    lines = [f"{r['display_name']} ({r['name']}): {r['vendor']} {r['kind']}, arch {r['arch']} "
             f"({r['arch_id']}" + (f", compute capability {r['compute_capability']})"
                                   if r["compute_capability"] else ")")]
    lines.append("  dense matrix peaks (TFLOP/s): " + ", ".join(
        f"{d} {_tflops(v)}" for d, v in r["matmul_flops"].items()))
    if r["unpublished"]:
        lines.append(f"  supported, no published figure: {', '.join(r['unpublished'])}")
    missing = [d for d in DTYPE_ORDER if d not in r["matmul_dtypes"]]
    lines.append(f"  not supported: {', '.join(missing) or '-'}")
    if r["vector_fp32_flops"]:
        lines.append(f"  vector fp32: {_tflops(r['vector_fp32_flops'])} TFLOP/s")
    lines.append(f"  memory: {r['hbm_capacity_B'] / 2**30:.0f} GiB {r['memory_type'] or ''} at "
                 f"{r['hbm_bw_Bps'] / 1e12:.2f} TB/s")
    for key, label in (("host_link", "host link"), ("intra_node_link", "peer link")):
        bw = r.get(f"{key}_bw_Bps") if key == "host_link" else r["intra_node_bw_Bps"]
        what = r.get("intra_node_link_version") or r.get(key) if key != "host_link" \
            else r.get(key)
        if what:
            lines.append(f"  {label}: {what}" + (f", {bw / 1e9:,.1f} GB/s per direction"
                                                  if bw else ""))
    lines.append(f"  names matched: {', '.join(r['aliases'])}")
    lines.append("  sources:")
    lines += [f"    {s}" for s in r["sources"]]
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    @app.command("devices")
    def devices_cmd(
        name: str = typer.Argument(None, help="One device (a name or alias) to show in full."),
        fmt: str = typer.Option("text", "--format", help="text or json."),
    ) -> None:
        """List the device table: dense matrix peak per dtype, memory, links, architecture, and
        the sources each figure comes from (docs/devices.md).

        Example: hermes devices; hermes devices a100-sxm4-80gb; hermes devices --format json
        """
        from hermes import devices

        if fmt not in ("text", "json"):
            raise UsageError(f"unknown format {fmt!r}", where="--format", hint="text or json")
        if name:
            prof = devices.get(name)
            row = _row(prof)
            typer.echo(dumps(row) if fmt == "json" else details(row), nl=fmt != "json")
            return
        rows = [_row(p) for p in devices.profiles().values()]
        typer.echo(dumps(rows) if fmt == "json" else listing(rows), nl=fmt != "json")
