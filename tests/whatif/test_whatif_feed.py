"""What-if replay: data-pipeline work (a pin-memory thread preparing the next batch) does not
end a step; the training loop and the device work do."""

from __future__ import annotations

import pytest

from hermes.trace.meta import TraceMeta
from hermes.whatif import graphs, predict
from tests.tracegen import ev, frame

# time    0        50        60           80        100
# main    fwd [0, 50)  gc [50, 80)          opt [80, 100)
# pin               pin batch [60 ........................ 100)   (the next step's batch)
PIN = (ev("step", "ProfilerStep#1", 0, 100),
       ev("host_op", "fwd", 0, 50),
       ev("gc", "gc.collect", 50, 30),
       ev("host_op", "opt", 80, 20),
       ev("data_fetch", "pin batch", 60, 40, lane="thread pin"))


def test_a_pin_thread_ending_with_the_step_does_not_hold_it():
    # GC removed: the loop runs fwd [0, 50), opt [50, 70): the step ends at 70. The pin
    # thread's batch (woken 10 ns after fwd ended, as measured) still ends at 100, but it
    # prepares the next step's input: the step does not wait for it
    p = predict(graphs(frame(*PIN)), ["gc"])
    assert p.replay_ms * 1e6 == pytest.approx(100)
    assert p.predicted_ms * 1e6 == pytest.approx(70)



# the loop: gc [0, 60), fwd [60, 100); one loader worker turns out a batch in 80 ns a step
LOADER = (ev("step", "ProfilerStep#1", 0, 100),
          ev("gc", "gc.collect", 0, 60),
          ev("host_op", "fwd", 60, 40),
          ev("data_process", "decode", 0, 80, lane="worker 0", lane_kind="loader"))


@pytest.mark.parametrize(("workers", "step"), [(None, 80), (1, 80), (2, 40), (4, 40)])
def test_steps_no_faster_than_the_loader_feeds_them(workers, step):
    # GC removed: the loop alone would take 40 ns, but one batch a step costs the loader 80 ns
    # of work: W workers (the recorded num_workers, else the one loader lane) sustain 80 / W
    meta = TraceMeta(extra={"settings": {"num_workers": workers}} if workers else {})
    p = predict(graphs(frame(*LOADER)), ["gc"], meta)
    assert p.replay_ms * 1e6 == pytest.approx(100)
    assert p.predicted_ms * 1e6 == pytest.approx(step)


def test_whatif_says_why_a_transform_was_not_applied(tmp_path):
    # the loop trace above records no storage read: local storage cannot be replayed, and the
    # command says that (not "no transform"), on the text output and as the error when nothing
    # else was applied
    from hermes.trace.meta import TraceMeta as Meta
    from hermes.trace.writer import write_trace
    from tests.conftest import run_cli

    path = tmp_path / "t.parquet"
    write_trace(path, frame(*LOADER), Meta())
    code, out, _ = run_cli("whatif", str(path), "--apply", "gc", "--apply", "local_storage")
    assert code == 0 and "local_storage: not replayed on this trace (the trace records no " \
        "storage reads)" in out
    code, _, err = run_cli("whatif", str(path), "--apply", "local_storage")
    assert code == 2 and "the trace records no storage reads" in err
