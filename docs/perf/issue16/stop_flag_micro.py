"""Per-call cost of three ways for 2 processes to agree on a stop flag (no training step)."""
import sys, time
import numpy as np
pid_, port = int(sys.argv[1]), sys.argv[2]
import jax
from jax.experimental import multihost_utils as mh
jax.distributed.initialize(f"127.0.0.1:{port}", 2, pid_, cluster_detection_method="deactivate")
from jax.sharding import NamedSharding, PartitionSpec as P
mesh = jax.make_mesh((2,), ("p",), axis_types=(jax.sharding.AxisType.Auto,))
sh, rep = NamedSharding(mesh, P("p")), NamedSharding(mesh, P())
flag_any = jax.jit(lambda f: f.max(), out_shardings=rep)
def async_flag(v):
  return flag_any(jax.make_array_from_process_local_data(sh, np.array([v], np.int32), (2,)))
N = 1000
res = {}
for name, fn in [
  ("preemption_sync_point", lambda n: mh.reached_preemption_sync_point(n)),
  ("allreduced_flag_read_next_step", None),
  ("process_allgather_blocking", lambda n: mh.process_allgather(np.int32(0)).max()),
]:
  for rep_ in range(2):
    mh.sync_global_devices(f"{name}{rep_}")
    t0 = time.perf_counter()
    if fn is None:
      pending = None
      for n in range(N):
        f = async_flag(0)
        if pending is not None: int(pending)
        pending = f
      int(pending)
    else:
      for n in range(N * rep_, N * (rep_ + 1)) if name == "preemption_sync_point" else range(N):
        fn(n)
    res[name] = (time.perf_counter() - t0) / N * 1e6
  print(f"p{pid_} {name}: {res[name]:.1f} us/step", flush=True)
