import os, time, torch, torch.distributed as dist
from torch.profiler import profile, ProfilerActivity
dist.init_process_group("gloo")
r = dist.get_rank()
STAGE1_S = float(os.environ.get("STAGE1_S", "0.02"))  # rank 1's extra work a step, seconds
x = torch.randn(1 << 16)
with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
    for step in range(4):
        with torch.profiler.record_function(f"ProfilerStep#{step}"):
            if r == 0:
                y = x * 2
                time.sleep(0.01)   # stage 0 computes, then sends
                dist.send(y, 1)
                dist.recv(y, 1)
            else:
                z = torch.empty_like(x)
                dist.recv(z, 0)
                z = z + 1
                time.sleep(STAGE1_S)  # 0.02: the slow stage (gloo_p2p); 0.01: gloo_p2p_fix/fixed
                dist.send(z, 0)
            ops = [dist.P2POp(dist.isend, x, 1 - r), dist.P2POp(dist.irecv, torch.empty_like(x), 1 - r)]
            for q in dist.batch_isend_irecv(ops): q.wait()
            dist.all_reduce(x)
prof.export_chrome_trace(f"/tmp/p2p/rank{r}.json")
dist.destroy_process_group()
