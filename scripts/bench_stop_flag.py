"""Per-step cost of three ways for several processes to agree on a stop (no training step).

python scripts/bench_stop_flag.py [--calls=1000]

Starts 2 CPU processes on 127.0.0.1 (jax.distributed, one device each) and times, per call:
JAX's preemption sync point (`multihost_utils.reached_preemption_sync_point`), a blocking
all-gather of a flag (`multihost_utils.process_allgather`), and a jitted max over a
per-process flag array read one step later (as the loop reads its metrics). The loop uses
the first (resnorm_jax/train/preemption.py); numbers in docs/benchmarks.md.
"""

import argparse
import os
import socket
import subprocess
import sys
import time


def _worker(pid: int, port: int, calls: int) -> None:
  import jax
  import numpy as np
  from jax.experimental import multihost_utils as mh
  from jax.sharding import NamedSharding
  from jax.sharding import PartitionSpec as P

  jax.distributed.initialize(f"127.0.0.1:{port}", 2, pid, cluster_detection_method="deactivate")
  mesh = jax.make_mesh((2,), ("p",), axis_types=(jax.sharding.AxisType.Auto,))
  per_process, replicated = NamedSharding(mesh, P("p")), NamedSharding(mesh, P())
  flag_max = jax.jit(lambda f: f.max(), out_shardings=replicated)

  def allreduced_flag_read_next_step() -> None:
    pending = None
    for _ in range(calls):
      local = np.zeros(1, np.int32)
      flag = flag_max(jax.make_array_from_process_local_data(per_process, local, (2,)))
      if pending is not None:
        int(pending)
      pending = flag
    int(pending)

  def sync_point() -> None:
    for step in range(calls):
      mh.reached_preemption_sync_point(step)

  def allgather() -> None:
    for _ in range(calls):
      mh.process_allgather(np.int32(0)).max()

  ways = {
    "preemption_sync_point": sync_point,
    "process_allgather_blocking": allgather,
    "allreduced_flag_read_next_step": allreduced_flag_read_next_step,
  }
  allreduced_flag_read_next_step()  # compile once
  for name, fn in ways.items():
    mh.sync_global_devices(name)
    start = time.perf_counter()
    fn()
    print(f"process {pid}: {name}: {(time.perf_counter() - start) / calls * 1e6:,.1f} us/step")


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--calls", type=int, default=1000)
  parser.add_argument("--worker", type=int, default=-1, help=argparse.SUPPRESS)
  parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.worker >= 0:
    return _worker(args.worker, args.port, args.calls)
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
  env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=1")
  cmd = [sys.executable, __file__, f"--calls={args.calls}", f"--port={port}"]
  procs = [subprocess.Popen([*cmd, f"--worker={i}"], env=env) for i in range(2)]
  sys.exit(max(p.wait() for p in procs))


if __name__ == "__main__":
  main()
