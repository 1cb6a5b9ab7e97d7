"""Corpus cases beyond the file formats: data loss, resources, special files, size, and the
commands that take options rather than files (emulate, profile, check budgets)."""

from __future__ import annotations

import gzip
import os
from collections.abc import Callable
from pathlib import Path

from tests.bad_inputs.make_corpus import Case, good_trace, kineto_text, kineto_with, write

Build = Callable[[Path], list[str]]


def _fifo(d: Path, name: str) -> Path:
    p = d / name
    os.mkfifo(p)
    return p


def dataloss_cases() -> list[Case]:
    """Items 1-4 of issue 17: outputs that would replace inputs, mixed runs, duplicates."""
    def same(cmd: str) -> Build:
        def build(d: Path) -> list[str]:
            t = good_trace(d, "t.parquet")
            if cmd == "analyze":
                return ["analyze", str(t), "--out", str(t)]
            if cmd == "export":
                return ["export", str(t), "--out", str(t)]
            if cmd == "diff":
                base = good_trace(d, "b.parquet")
                return ["diff", str(base), str(t), "--out", str(t)]
            if cmd == "check":
                base = good_trace(d, "b.parquet")
                return ["check", str(t), "--baseline", str(base), "--junit", str(base)]
            src = write(d, "t.pt.trace.json", kineto_text())
            return ["import", str(src), "--out", str(src)]
        return build

    def symlinked(d: Path) -> list[str]:
        t = good_trace(d, "t.parquet")
        (d / "link.json").symlink_to(t)
        return ["export", str(t), "--out", str(d / "link.json")]

    def hardlinked(d: Path) -> list[str]:
        t = good_trace(d, "t.parquet")
        os.link(t, d / "hard.md")
        return ["analyze", str(t), "--out", str(d / "hard.md")]

    def out_holds_input(d: Path) -> list[str]:
        (d / "prof").mkdir()
        src = write(d / "prof", "r0.pt.trace.json", kineto_text())
        return ["import", str(src), "--out", str(d / "prof")]

    def trace_dir_input(d: Path) -> list[str]:
        write(d, "r.pt.trace.json", kineto_text())
        assert _main(["import", str(d / "r.pt.trace.json"), "--out", str(d / "tr")]) == 0
        return ["analyze", str(d / "tr"), "--out", str(d / "tr" / "rank-00009.parquet")]

    def foreign_dir(cmd: str) -> Build:
        def build(d: Path) -> list[str]:
            (d / "out").mkdir()
            (d / "out" / "notes.txt").write_text("precious\n")
            if cmd == "emulate":
                return ["emulate", "resnet50", "--steps", "1", "--out", str(d / "out")]
            src = write(d, "r.pt.trace.json", kineto_text())
            return ["import", str(src), "--out", str(d / "out")]
        return build

    def dir_for_file(cmd: str) -> Build:
        def build(d: Path) -> list[str]:
            (d / "o.parquet").mkdir()
            if cmd == "emulate":
                return ["emulate", "resnet50", "--steps", "1", "--out", str(d / "o.parquet")]
            src = write(d, "r.pt.trace.json", kineto_text())
            return ["import", str(src), "--out", str(d / "o.parquet")]
        return build

    def mixed_runs(d: Path) -> list[str]:
        from tests.bad_inputs.make_corpus import retag

        (d / "tr").mkdir()
        retag(d / "tr", "rank-00000.parquet")
        retag(d / "tr", "rank-00001.parquet", hermes_source="emulator", hermes_ranks="[1]")
        return ["validate", str(d / "tr")]

    def duplicate(d: Path) -> list[str]:
        src = write(d, "r.pt.trace.json", kineto_text())
        return ["import", str(src), str(d / "." / "r.pt.trace.json"), "--out",
                str(d / "o.parquet")]

    out = [Case(f"dataloss-out-is-input-{c}", "dataloss", c, same(c), needle="input")
           for c in ("analyze", "export", "diff", "check", "import")]
    out += [Case("dataloss-out-symlink-to-input", "dataloss", "export", symlinked,
                 needle="input", keep="t.parquet"),
            Case("dataloss-out-hardlink-of-input", "dataloss", "analyze", hardlinked,
                 needle="input", keep="t.parquet"),
            Case("dataloss-out-holds-input", "dataloss", "import", out_holds_input,
                 needle="input", keep="prof/r0.pt.trace.json"),
            Case("dataloss-out-inside-trace-dir", "dataloss", "analyze", trace_dir_input,
                 needle="input"),
            Case("dataloss-mixed-runs", "dataloss", "validate", mixed_runs, codes=(1,)),
            Case("dataloss-duplicate-source", "dataloss", "import", duplicate, codes=(0,))]
    out += [Case(f"dataloss-foreign-dir-{c}", "dataloss", c, foreign_dir(c),
                 needle="not a Hermes trace", keep="out/notes.txt")
            for c in ("import", "emulate")]
    out += [Case(f"dataloss-dir-for-file-{c}", "dataloss", c, dir_for_file(c),
                 needle="directory") for c in ("import", "emulate")]
    return out


def _main(argv: list[str]) -> int:
    from hermes.cli import main

    return main(argv)


def special_file_cases() -> list[Case]:
    """FIFOs, devices, directories and missing files where a regular file is read."""
    def fifo(cmd: str, name: str) -> Build:
        def build(d: Path) -> list[str]:
            f = _fifo(d, name)
            if cmd == "import":
                return ["import", str(f), "--out", str(d / "o.parquet")]
            if cmd in ("validate", "analyze"):
                return [cmd, str(f)]
            if cmd == "export":
                return ["export", str(f), "--out", str(d / "o.json")]
            good = good_trace(d, "g.parquet")
            if cmd == "diff":
                return ["diff", str(good), str(f)]
            return ["check", str(f), "--baseline", str(good)]
        return build

    def devnull(cmd: str) -> Build:
        def build(d: Path) -> list[str]:
            if cmd == "import":
                return ["import", "/dev/null", "--out", str(d / "o.parquet")]
            return [cmd, "/dev/null"]
        return build

    out = [Case(f"special-fifo-{c}", "structure", c, fifo(c, n), needle=n)
           for c, n in (("import", "p.pt.trace.json"), ("validate", "p.parquet"),
                        ("analyze", "p.parquet"), ("export", "p.parquet"),
                        ("diff", "p.parquet"), ("check", "p.parquet"))]
    out += [Case(f"special-devnull-{c}", "structure", c, devnull(c), needle="/dev/null")
            for c in ("import", "validate", "analyze")]
    out.append(Case("special-missing-source", "structure", "import",
                    lambda d: ["import", str(d / "nope.json"), "--out", str(d / "o.parquet")],
                    needle="nope.json"))
    return out


def resource_cases() -> list[Case]:
    """Outputs that cannot be written: missing/unwritable directories, odd names."""
    def missing_parent(cmd: str) -> Build:
        def build(d: Path) -> list[str]:
            t = good_trace(d, "t.parquet")
            out = str(d / "no" / "such" / "o.txt")
            if cmd == "import":
                src = write(d, "r.pt.trace.json", kineto_text())
                return ["import", str(src), "--out", str(d / "no" / "o.parquet")]
            if cmd == "emulate":
                return ["emulate", "resnet50", "--steps", "1", "--out", out + ".parquet"]
            if cmd == "diff":
                return ["diff", str(t), str(t), "--out", out]
            if cmd == "check":
                return ["check", str(t), "--baseline", str(t), "--md", out]
            return [cmd, str(t), "--out", out]
        return build

    def parent_is_file(d: Path) -> list[str]:
        t = good_trace(d, "t.parquet")
        (d / "afile").write_text("x")
        return ["export", str(t), "--out", str(d / "afile" / "o.json")]

    def non_utf8_out(d: Path) -> list[str]:
        t = good_trace(d, "t.parquet")
        return ["export", str(t), "--out", os.fsdecode(bytes(d / "o") + b"\xff.json")]

    def non_utf8_src(d: Path) -> list[str]:
        name = os.fsdecode(b"r\xfe.pt.trace.json")
        write(d, name, kineto_text())
        return ["import", str(d / name), "--out", str(d / "o.parquet")]

    def non_utf8_missing(d: Path) -> list[str]:
        return ["validate", os.fsdecode(bytes(d) + b"/missing\xff.parquet")]

    out = [Case(f"resources-missing-parent-{c}", "resources", c, missing_parent(c),
                needle="does not exist")
           for c in ("import", "analyze", "export", "diff", "check", "emulate")]
    def fifo_out(d: Path) -> list[str]:
        t = good_trace(d, "t.parquet")
        return ["export", str(t), "--out", str(_fifo(d, "o.json"))]

    out += [Case("resources-parent-is-file", "resources", "export", parent_is_file),
            Case("resources-out-is-fifo", "resources", "export", fifo_out, needle="FIFO"),
            Case("resources-out-is-device", "resources", "analyze", lambda d: [
                "analyze", str(good_trace(d, "t.parquet")), "--out", "/dev/full"],
                needle="device"),
            Case("text-non-utf8-output-name", "text", "export", non_utf8_out, codes=(0,)),
            Case("text-non-utf8-source-name", "text", "import", non_utf8_src, codes=(0,)),
            Case("text-non-utf8-missing-file", "text", "validate", non_utf8_missing)]
    if os.geteuid() != 0:  # root writes anywhere: the permission cases mean nothing there
        def read_only(d: Path) -> list[str]:
            t = good_trace(d, "t.parquet")
            (d / "ro").mkdir()
            (d / "ro").chmod(0o500)
            return ["export", str(t), "--out", str(d / "ro" / "o.json")]
        out.append(Case("resources-read-only-dir", "resources", "export", read_only,
                        needle="writable"))
    return out


def option_cases() -> list[Case]:
    """emulate, profile and check options: numbers and text where a user types them."""
    def emulate(*args: str) -> Build:
        return lambda d: ["emulate", "resnet50", "--out", str(d / "e.parquet"), *args]

    def budget(text: str | bytes) -> Build:
        def build(d: Path) -> list[str]:
            t = good_trace(d, "t.parquet")
            b = write(d, "budget.toml", text)
            return ["check", str(t), "--budget", str(b)]
        return build

    def profile(*args: str, script: str = "print('hi')\n") -> Build:
        def build(d: Path) -> list[str]:
            s = write(d, "train.py", script)
            return ["profile", *[a.replace("{d}", str(d)) for a in args], "--", "python", str(s)]
        return build

    out = [Case(f"emulate-{k}", "numbers", "emulate", emulate(*a))
           for k, a in {"steps-zero": ("--steps", "0"), "steps-negative": ("--steps", "-5"),
                        "steps-huge": ("--steps", str(2**70)), "ranks-zero": ("--ranks", "0"),
                        "ranks-huge": ("--ranks", str(2**40)),
                        "steps-unicode-digit": ("--steps", "\u00b2"),
                        "inject-nan": ("--inject", "io.slow_data_processing=nan"),
                        "inject-inf": ("--inject", "io.slow_data_processing=inf"),
                        "opt-unicode": ("--opt", "bogus=\u00b2"),
                        "device-control-chars": ("--device", "h\x1b[31m100"),
                        "workload-unknown": ()}.items()]
    out[-1] = Case("emulate-workload-unknown", "text", "emulate",
                   lambda d: ["emulate", "nosuch\u00e9", "--out", str(d / "e.parquet")])
    out += [Case(f"check-budget-{k}", c, "check", budget(t))
            for k, c, t in (("invalid-utf8", "text", b"[step]\nmax_ms = \xff\n"),
                            ("not-toml", "structure", "[[[\n"),
                            ("unicode-digit", "numbers", '[step]\nmax_ms = "\u00b2"\n'),
                            ("nan", "numbers", "[step]\nmax_ms = nan\n"),
                            ("huge", "numbers", "[step]\nmax_ms = 1e400\n"),
                            ("wrong-type", "structure", "step = [1, 2]\n"))]
    out += [Case("check-max-regression-text", "numbers", "check", lambda d: [
        "check", str(good_trace(d, "t.parquet")), "--baseline", str(d / "t.parquet"),
        "--max-regression", "\u00b2%"])]
    out += [Case("profile-out-dir-for-file", "dataloss", "profile",
                 lambda d: (d / "o.parquet").mkdir() or profile("--out", "{d}/o.parquet")(d),
                 needle="directory"),
            Case("profile-missing-script", "structure", "profile",
                 lambda d: ["profile", "--out", str(d / "o"), "--", "python",
                            str(d / "nope.py")], needle="nope.py"),
            Case("profile-out-under-file", "resources", "profile",
                 lambda d: write(d, "f", "x") and profile("--out", "{d}/f/o")(d)),
            Case("profile-bad-mode", "text", "profile", profile("--mode", "f\u00e9")),
            Case("profile-window-zero", "numbers", "profile", profile("--window", "0")),
            Case("profile-window-huge", "numbers", "profile",
                 profile("--window", str(2**70)))]
    return out


def size_cases() -> list[Case]:
    """A gzip member inflating far beyond its size: refused under a small --max-bytes."""
    def bomb(fill: bytes) -> Build:
        def build(d: Path) -> list[str]:
            head = b'{"traceEvents": [{"ph": "X", "name": "'
            p = d / "bomb.pt.trace.json.gz"
            with gzip.open(p, "wb", compresslevel=1) as fh:
                fh.write(head)
                block = fill * (1 << 20)
                for _ in range(24):  # 24 MiB inflated: past --max-bytes 8 MiB
                    fh.write(block)
                fh.write(b'", "ts": 1, "dur": 1}]}')
            return ["import", str(p), "--out", str(d / "o.parquet"), "--max-bytes",
                    str(8 << 20)]
        return build

    def ws_bomb(d: Path) -> list[str]:
        p = d / "ws.pt.trace.json.gz"
        with gzip.open(p, "wb", compresslevel=1) as fh:
            fh.write(b'{"traceEvents": [' + b" " * (1 << 20))
            for _ in range(24):
                fh.write(b" " * (1 << 20))
            fh.write(b"]}")
        return ["import", str(p), "--out", str(d / "o.parquet"), "--max-bytes", str(8 << 20)]

    return [Case("size-gzip-huge-name", "size", "import", bomb(b"a"), needle="MiB"),
            Case("size-gzip-whitespace", "size", "import", ws_bomb, needle="MiB"),
            Case("size-gzip-huge-name-nul", "size", "import", bomb(b"\\u0000"),
                 needle="MiB")]


def _int4_schema(d: Path) -> Path:
    """fuzz pdir: a footer whose Arrow schema (``ARROW:schema``) names a 4-bit integer (one
    bit flipped): Arrow raises NotImplemented, not Invalid, when opening the file."""
    import base64
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    good = good_trace(d, "_t.parquet")
    data = good.read_bytes()
    schema = pq.ParquetFile(good).metadata.metadata[b"ARROW:schema"]
    raw = base64.b64decode(schema)
    good.unlink()
    for i in (i for i, b in enumerate(raw) if b in (8, 16, 32, 64)):  # a bit width
        cand = data.replace(schema, base64.b64encode(raw[:i] + b"\x04" + raw[i + 1:]), 1)
        try:
            pq.ParquetFile(io.BytesIO(cand))
        except pa.ArrowNotImplementedError:
            (d / "bad.parquet").write_bytes(cand)
            return d / "bad.parquet"
        except (pa.ArrowInvalid, OSError):
            continue
    raise AssertionError("no bit width in the Arrow schema to corrupt")


def _args_struct(d: Path) -> list[str]:
    """fuzz pdir: args of a type that casts to no text, read lazily by an analyzer (was
    'no rank could be analyzed: rank 0: ArrowNotImplementedError: ...')."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    good = good_trace(d, "_t.parquet")
    table = pq.read_table(good)
    table = table.set_column(table.column_names.index("args"), "args",
                             pa.array([{"a": 1}] * len(table)))
    pq.write_table(table, d / "bad.parquet")
    good.unlink()
    return ["analyze", str(d / "bad.parquet")]


def fuzz_cases() -> list[Case]:
    """Defects the mutation fuzzer (tests/bad_inputs/fuzz.py) found, minimized."""
    from tests.bad_inputs.make_corpus import KD_HEADER, KD_ROW, asc, per_command

    step_trace = ("Step,Type,Index,Computing,Communication(Not Overlapped),Overlapped,"
                  "Communication,Free,Free,Stage,Bubble\n,rank,0,80.3,683.7,5.5,689.2,990.6,"
                  "990.6,1754.6,0.0\n")
    kd_dup = KD_HEADER.replace("Name,", "Name,Name,", 1)
    kd_row = KD_ROW.replace("MatMul_1,", "MatMul_1,MatMul_1,", 1)
    view = ('[{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": '
            '"Ascend Hardware"}}, {"ph": "X", "name": %s, "pid": 1, "tid": 2, "ts": "100", '
            '"dur": 1, "args": {"Task Type": %s}}]')
    def kineto(raw_event: str, cmd: str = "import") -> Build:
        def build(d: Path) -> list[str]:
            src = write(d, "r.pt.trace.json", kineto_with(raw_event))
            if cmd == "analyze":
                return ["analyze", str(src), "-f", "json"]
            return ["import", str(src), "--out", str(d / "o.parquet")]
        return build

    memcpy = ('{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": %s, '
              '"ts": 140, "dur": 4, "args": {"correlation": 7, "stream": 7, "device": 0}}')
    out = [Case(f"fuzz-kineto-device-tid-{k}-{c}", "numbers", c, kineto(memcpy % v, c),
                codes=(0,))
           for k, v in (("2p63", 2**63), ("below-int64", -(2**63) - 1)) for c in ("import",
                                                                                  "analyze")]
    def trace_with(how: str) -> Callable[[Path], Path]:
        def make(d: Path) -> Path:
            import pyarrow as pa
            import pyarrow.parquet as pq

            good = good_trace(d, "_t.parquet")
            table = pq.read_table(good)
            if how == "empty":
                table = table.slice(0, 0).replace_schema_metadata(
                    {**table.schema.metadata, b"hermes.ranks": b"[]"})
            else:
                dur = table.column("dur_ns").to_pylist()
                dur[1] = -5 if how == "negative-dur" else 2**63 - 1
                table = table.set_column(table.column_names.index("dur_ns"), "dur_ns",
                                         pa.array(dur, pa.int64()))
            pq.write_table(table, d / "bad.parquet")
            good.unlink()
            return d / "bad.parquet"
        return make

    memset = ('{"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 7, '
              '"ts": 150, "dur": 1, "args": {"correlation": 8, "device": 0, "stream": %s}}')
    sync = ('{"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": 1, '
            '"tid": 1, "ts": 160, "dur": 6, "args": {"correlation": 9, "stream": %s}}')
    out += [Case(f"fuzz-kineto-args-stream-{k}-{c}", "numbers", c, kineto(raw % v, c),
                 codes=(0,))
            for k, raw, v in (("memset-1e30", memset, 10**30), ("sync-2p64", sync, 2**64))
            for c in ("import", "analyze")]
    head_bad = kineto_text().encode().replace(b'"deviceProperties"', b'"device\xff\xfeProps"')
    out.append(Case("fuzz-kineto-header-key-invalid-utf8", "text", "import",
                    lambda d: ["import", str(write(d, "r.pt.trace.json", head_bad)), "--out",
                               str(d / "o.parquet")], needle="around the traceEvents"))
    comm = ('{"(0, 1)": {"step": {"hcom_broadcast__501_0@1": {"0": {"Communication Time Info": '
            '{"Start Timestamp(us)": 1695054582608213.0, "Elapse Time(ms)": Infinity}}}}}}')
    out += [Case(f"fuzz-ascend-comm-{k}", "numbers", "import",
                 asc("cluster_communication.json", comm.replace(*r)), needle=n)
            for k, r, n in (("elapse-infinity", ("", ""), "not a finite number"),
                            ("start-1e30", ("1695054582608213.0", str(10**30)), "out of range"))]
    out += per_command("fuzz-parquet-schema-int4", "structure", _int4_schema,
                        "Integers with less than 8 bits not implemented",
                        commands=("analyze", "report", "diff", "check"))
    out.append(Case("fuzz-parquet-args-struct", "structure", "analyze", _args_struct,
                    needle="column 'args' has type struct<a: int64>, expected string"))
    for how, needle in (("negative-dur", "negative dur_ns"), ("end-past-int64", "int64 ns range"),
                        ("empty", "no events")):
        out += per_command(f"fuzz-parquet-{how}", "numbers", trace_with(how), needle,
                            commands=("analyze", "report", "diff", "check"))
    return [*out, *[Case(f"fuzz-ascend-json-lone-surrogate-{k}", "text", "import",
                   asc("trace_view.json", view % v), needle="half a UTF-16")
              for k, v in (("name", ('"Mat\\udc80"', '"AI_CORE"')),
                           ("high-in-args", ('"Mat"', '"\\ud83dx"')),
                           ("with-nan", ('"\\udc80"', "NaN")))],
            Case("fuzz-ascend-cluster-step-rank-without-index", "structure", "import",
                 asc("cluster_step_trace_time.csv", step_trace.replace(",Free,Free,", ",Free,")
                      .replace("990.6,990.6,", "990.6,").replace(",rank,0,", ",rank,,")),
                 needle="line 2"),
            Case("fuzz-ascend-csv-repeated-column", "structure", "import",
                 asc("cluster_step_trace_time.csv", step_trace), needle="repeats column"),
            Case("fuzz-ascend-kernel-details-repeated-name", "structure", "import",
                 asc("kernel_details.csv", kd_dup + kd_row), needle="repeats column 'Name'")]


def cases() -> list[Case]:
    from tests.bad_inputs.corpus_readback import readback_cases

    return [*dataloss_cases(), *special_file_cases(), *resource_cases(), *option_cases(),
            *size_cases(), *fuzz_cases(), *readback_cases()]
