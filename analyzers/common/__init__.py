"""Frame helpers every analysis shares; no analysis owns them.

``intervals`` (interval unions: union, intersect, subtract, clip, per-interval overlap),
``names`` (name matching and category codes over event columns), ``spans`` (events' spans,
step windows as unions, device-idle time, per-step sums, top names, data waits), ``steps``
(step windows, fine-capture windows, warm-up), ``nesting`` (node order and innermost active
event on a lane), ``hostcalls`` (classes of host calls: GC, compile, sync, alloc, init, ...),
``opinfo`` (operator args: shapes, dtypes, FLOPs, peaks), ``precision`` (what the trace
shows of the device, the matmul dtypes and the parallelism, for rule preconditions),
``pytime`` (Python frames' self time outside operators), ``spikes`` (what is known of a slow
step beyond its own events: detail captured after it, the monitor's counters) and
``hta_compat`` (what is specific to reproducing HTA's figures). Each function takes event columns or frames and returns numpy
arrays, frames or plain values; none registers an analyzer.
"""
