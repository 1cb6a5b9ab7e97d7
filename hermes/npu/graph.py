"""Operator graphs: one training step of one rank as a table of operators (struct of arrays).

A workload builder appends operators with :class:`GraphBuilder` (``linear``, ``conv``,
``eltwise``, ``small``, ``comm``) and freezes them into a :class:`Graph` whose columns are numpy
arrays, so the runtime costs every operator of a step in a few vector operations.

Units: ``flops`` in FLOP, ``bytes`` in bytes of HBM traffic, ``param_bytes`` gradient bytes an
operator's backward produces (what data-parallel allreduce moves), ``comm_bytes`` message bytes
per rank of a communication operator.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Compute-unit codes of the ``unit`` array (names as in the trace schema's UNITS).
UNIT_NAMES = ("cube", "vector", "ai_cpu", "link")
CUBE, VECTOR, AI_CPU, LINK = range(4)
#: Phase codes: forward, backward, optimizer.
FWD, BWD, OPT = range(3)
DTYPE_BYTES = 2  # fp16/bf16 activations and weights


@dataclass(frozen=True)
class Graph:
    """One step's operators in issue order (columns of equal length)."""

    name: list[str]
    optype: list[str]
    unit: np.ndarray          # int8 codes into UNIT_NAMES
    flops: np.ndarray         # FLOP at the base shape
    bytes: np.ndarray         # HBM bytes at the base shape
    phase: np.ndarray         # FWD / BWD / OPT
    inner: np.ndarray         # matrix inner axis (cube alignment); 0 when not a matmul
    param_bytes: np.ndarray   # gradient bytes produced (backward ops)
    small: np.ndarray         # bool: small-shape operator (host execution candidate)
    fusible: np.ndarray       # bool: elementwise op fusion folds into its predecessor
    sync: np.ndarray          # bool: host waits for the device after this op (.item(), SyncBN)
    private_fmt: np.ndarray   # bool: needs a TransData private-format conversion
    aicpu: np.ndarray         # bool: dtype/op unsupported on AI Core -> AI CPU fallback
    sig: np.ndarray           # int: shape signature (same shapes -> same tiling/compile key)
    coll: list[str]           # collective type for LINK ops ("" otherwise)
    comm_group: list[str]     # "tp", "pp_next", "pp_prev", "ep" for LINK ops
    comm_bytes: np.ndarray    # message bytes per rank for LINK ops
    objects: np.ndarray       # Python objects allocated per call (drives GC)
    #: tensors a Vector operator reads and writes, each of ``bytes / tensors`` (its recorded
    #: input / output shapes); 0 for other operators
    tensors: np.ndarray

    def __len__(self) -> int:
        return len(self.name)

    def offset_inner(self, extra: int) -> Graph:
        """The same graph with every matmul's inner axis ``extra`` elements longer (FLOPs and
        bytes grow in proportion): a model whose hidden sizes miss the unit's alignment."""
        mm = self.inner > 0
        grow = np.where(mm, (self.inner + extra) / np.where(mm, self.inner, 1), 1.0)
        return Graph(**{**self.__dict__, "inner": np.where(mm, self.inner + extra, 0),
                        "flops": self.flops * grow, "bytes": self.bytes * grow})

    def select(self, mask: np.ndarray) -> Graph:
        """The operators where ``mask`` is true, in order."""
        idx = np.flatnonzero(mask)
        kw: dict[str, Any] = {}
        for k, v in self.__dict__.items():
            kw[k] = [v[i] for i in idx] if isinstance(v, list) else v[idx]
        return Graph(**kw)


@dataclass
class GraphBuilder:
    """Append operators; ``build()`` freezes them. Signatures come from (optype, shape)."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    _sigs: dict[tuple[Any, ...], int] = field(default_factory=dict)

    def _add(self, name: str, optype: str, unit: int, flops: float, nbytes: float,
             shape: tuple[Any, ...], phase: int = FWD, **kw: Any) -> None:
        sig = self._sigs.setdefault((optype, shape, phase), len(self._sigs))
        row = dict(name=name, optype=optype, unit=unit, flops=float(flops), bytes=float(nbytes),
                   phase=phase, inner=0, param_bytes=0.0, small=False, fusible=False,
                   sync=False, private_fmt=False, aicpu=False, sig=sig, coll="",
                   comm_group="", comm_bytes=0.0, objects=8, tensors=0)
        row.update(kw)
        self.rows.append(row)

    def linear(self, name: str, m: int, k: int, n: int, phase: int = FWD, **kw: Any) -> None:
        """y[m,n] = x[m,k] @ w[k,n]; backward = two matmuls of the same size (dgrad, wgrad)."""
        mult = 2 if phase == BWD else 1
        nbytes = (m * k + k * n + m * n) * DTYPE_BYTES * mult
        pb = k * n * DTYPE_BYTES if phase == BWD else 0.0
        self._add(name, "MatMul", CUBE, 2.0 * m * k * n * mult, nbytes, (m, k, n), phase,
                  inner=k, param_bytes=pb, **kw)

    def conv(self, name: str, n: int, hw: int, cin: int, cout: int, k: int, stride: int = 1,
             phase: int = FWD, **kw: Any) -> int:
        """A k x k convolution on an hw x hw input; returns the output size.
        Inner (reduction) axis = cin*k*k."""
        ho = max(hw // stride, 1)
        mult = 2 if phase == BWD else 1
        flops = 2.0 * n * ho * ho * cout * cin * k * k * mult
        nbytes = (n * hw * hw * cin + k * k * cin * cout + n * ho * ho * cout) * DTYPE_BYTES * mult
        pb = k * k * cin * cout * DTYPE_BYTES if phase == BWD else 0.0
        self._add(name, "Conv2D", CUBE, flops, nbytes, (n, hw, cin, cout, k, stride), phase,
                  inner=cin * k * k, param_bytes=pb, **kw)
        return ho

    def eltwise(self, name: str, optype: str, elems: float, phase: int = FWD,
                flops_per: float = 1.0, tensors: int = 2, params: float = 0.0, **kw: Any) -> None:
        """A vector operator over ``elems`` elements reading/writing ``tensors`` tensors."""
        kw.setdefault("fusible", optype in ("Add", "Relu", "Gelu", "Mul", "Silu", "Cast"))
        self._add(name, optype, VECTOR, elems * flops_per, elems * tensors * DTYPE_BYTES,
                  (optype, int(elems)), phase,
                  param_bytes=params * DTYPE_BYTES if phase == BWD else 0.0, tensors=tensors,
                  **kw)

    def small(self, name: str, optype: str, phase: int = FWD, unit: int = VECTOR,
              **kw: Any) -> None:
        """A small-shape operator (shape arithmetic, scalars, index math): microseconds of work.
        int64 shape/index ops are unsupported on the AI Core and run on the AI CPU."""
        self._add(name, optype, unit, 64.0, 512.0, (optype, "small"), phase, small=True, **kw)

    def comm(self, name: str, coll: str, group: str, nbytes: float, phase: int = FWD) -> None:
        """A collective issued in stream order (tensor/pipeline/expert parallel)."""
        self._add(name, coll, LINK, 0.0, 0.0, (coll, group, int(nbytes)), phase, coll=coll,
                  comm_group=group, comm_bytes=float(nbytes))

    def build(self) -> Graph:
        cols = {k: [r[k] for r in self.rows] for k in self.rows[0]} if self.rows else {}
        arrays = dict(unit=np.int8, flops=np.float64, bytes=np.float64, phase=np.int8,
                      inner=np.int64, param_bytes=np.float64, small=bool, fusible=bool,
                      sync=bool, private_fmt=bool, aicpu=bool, sig=np.int64,
                      comm_bytes=np.float64, objects=np.int64, tensors=np.int64)
        kw: dict[str, Any] = {}
        for k in ("name", "optype", "coll", "comm_group"):
            kw[k] = list(cols.get(k, []))
        for k, dt in arrays.items():
            kw[k] = np.asarray(cols.get(k, []), dtype=dt)
        return Graph(**kw)
