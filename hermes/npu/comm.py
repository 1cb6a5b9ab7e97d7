"""Collectives on an alpha-beta model over the topology.

A collective is synchronization plus transmission: every member waits for the last arriving
rank, then the message moves in ``steps * alpha + factor * bytes / bw_eff`` (ring algorithms;
a binomial tree for broadcast). Links: HCCS/NVLink inside a node, RDMA between nodes; a group
whose ranks span nodes runs at the inter-node figures. Effective bandwidth falls below the
saturation size (``bw * (size / saturation) ** 0.75``), for sizes not aligned to 512 B, under a
mis-set HCCL environment and, for collectives running concurrently with computation, under
contention. Times in nanoseconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hermes.devices import DeviceProfile
from hermes.npu.settings import Settings

#: Bandwidth fraction for messages not multiple of the link's alignment (HCCS: 512 B); the
#: default of ``Settings.misaligned_bw``.
MISALIGNED_BW = 0.55
#: Below the saturation size bandwidth falls as (size / saturation) ** this exponent
#: (4 MB on HCCS, saturating at 16 MB: 35 % of the link).
SMALL_PACKET_EXP = 0.75


@dataclass(frozen=True)
class Link:
    name: str          # "hccs" / "nvlink" / "rdma"
    bw_Bps: float
    alpha_s: float
    sat_B: float       # message size from which the link runs at full bandwidth
    align_B: int


def links(p: DeviceProfile) -> tuple[Link, Link]:
    """(intra-node link, inter-node link) of a device profile."""
    f = p.fields
    intra = Link(f.get("intra_node_link", "hccs"), f.get("intra_node_bw_Bps", 5e10),
                 f.get("intra_node_latency_s", 5e-6), f.get("sdma_small_packet_B", 16 << 20),
                 int(f.get("hccs_alignment_B", 512)))
    inter = Link(f.get("inter_node_link", "rdma"), f.get("inter_node_bw_Bps", 2.5e10),
                 f.get("inter_node_latency_s", 8e-6), f.get("rdma_small_packet_B", 1 << 20),
                 int(f.get("hccs_alignment_B", 512)))
    return intra, inter


#: (alpha steps, bandwidth factor) of each collective for a group of n ranks.
ALGOS = {
    "allreduce": lambda n: (2 * (n - 1), 2 * (n - 1) / n),
    "allgather": lambda n: (n - 1, (n - 1) / n),
    "reducescatter": lambda n: (n - 1, (n - 1) / n),
    "alltoall": lambda n: (n - 1, (n - 1) / n),
    "broadcast": lambda n: (math.ceil(math.log2(max(n, 2))), math.ceil(math.log2(max(n, 2)))),
    "send": lambda n: (1, 1.0),
    "recv": lambda n: (1, 1.0),
}


def transmit_ns(coll: str, nbytes: float, n: int, link: Link, s: Settings,
                concurrent: bool = False) -> float:
    """Transmission time (ns) of one collective of ``nbytes`` per rank over ``n`` ranks.

    ``concurrent``: the collective runs while computation and other collectives do (gradient
    allreduce overlapping backward), so it shares links and HBM under ``s.contention``; a
    collective issued in stream order has the link to itself."""
    if n <= 1 and coll not in ("send", "recv"):
        return 0.0
    steps, factor = ALGOS[coll](max(n, 2))
    bw = link.bw_Bps * min(1.0, nbytes / link.sat_B) ** SMALL_PACKET_EXP if nbytes > 0 \
        else link.bw_Bps
    if nbytes % link.align_B:
        bw *= s.misaligned_bw
    bw *= s.net_bw_factor * ((1.0 - s.contention) if concurrent else 1.0)
    return (steps * link.alpha_s + factor * nbytes / bw) * 1e9


def group_link(span_ranks: int, devices_per_node: int, intra: Link, inter: Link) -> Link:
    """The link a group uses: intra-node when its ranks fit in one node."""
    return intra if span_ranks <= devices_per_node else inter


def message_bytes(nbytes: float, s: Settings) -> int:
    """Message size after the alignment knobs: padded to 512 B, or knocked off alignment."""
    b = int(nbytes)
    if s.misaligned:
        return b - b % 512 + 100 if b >= 512 else b
    if s.align_sizes and b % 512:
        return b + 512 - b % 512
    return b


def retransmit_ns(rng: np.random.Generator, n: int, s: Settings, on_rdma: bool) -> np.ndarray:
    """Extra time per collective from RDMA retransmission timeouts (mostly zeros)."""
    if not on_rdma or s.rdma_retrans_prob <= 0:
        return np.zeros(n)
    hit = rng.random(n) < s.rdma_retrans_prob
    return np.where(hit, s.rdma_retrans_s * 1e9 * (1 + rng.random(n)), 0.0)
