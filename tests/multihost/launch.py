"""Launch N cooperating JAX processes on the loopback address (tests and benchmarks, issue #15).

Every worker is started in its own session (process group), with forced CPU devices and the
coordinator on a free loopback port; `launch` waits for all of them with one deadline and
always kills every process group it started (also on a timeout, a failure of one worker, or
KeyboardInterrupt). Nothing here imports JAX: the workers set it up (`gemm_cases.py` joins
through `jwmma.tiled.processes.initialize`, ``jwmma study`` through its CLI options).
"""
from __future__ import annotations

import dataclasses
import os
import re
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))  # the repository: workers import this jwmma


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago (bind to port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_env(process_id: int, num_processes: int, port: int, devices: int, extra=None, via_env=True) -> dict:
    env = dict(os.environ)
    flags = re.sub(r"--xla_force_host_platform_device_count=\d+", "", env.get("XLA_FLAGS", ""))
    env["XLA_FLAGS"] = (flags + f" --xla_force_host_platform_device_count={devices}").strip()
    env["JAX_PLATFORMS"] = "cpu"
    for k in [k for k in env if k.startswith(("SLURM_", "OMPI_", "JAX_COORDINATOR", "JAX_NUM_PROCESSES",
                                              "JAX_PROCESS_ID")) or k.lower().endswith("_proxy")]:
        del env[k]  # a CI runner inside SLURM must not make JAX detect the wrong cluster
    if via_env:  # what the worker hands to jax.distributed.initialize (JAX reads only the address)
        env["JAX_COORDINATOR_ADDRESS"] = f"127.0.0.1:{port}"
        env["JAX_NUM_PROCESSES"] = str(num_processes)
        env["JAX_PROCESS_ID"] = str(process_id)
    env["PYTHONPATH"] = os.pathsep.join([ROOT, HERE] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.update(extra or {})
    return env


@dataclasses.dataclass
class Result:
    returncode: list
    output: list
    seconds: float
    timed_out: bool

    def tail(self, n=3000) -> str:
        return "\n".join(f"--- process {i} (exit {rc}) ---\n{out[-n:]}"
                         for i, (rc, out) in enumerate(zip(self.returncode, self.output)))


def _kill_group(p: subprocess.Popen, sig=signal.SIGKILL):
    try:
        os.killpg(p.pid, sig)  # the worker's own session: its group id is its pid
    except (ProcessLookupError, PermissionError):
        pass


def launch(args: list, num_processes: int = 2, devices: int = 2, timeout: float = 120.0,
           extra_env=None, per_process_args=None, kill_after=None, python=sys.executable,
           cwd=None, via_env=True) -> Result:
    """Run ``python *args`` as ``num_processes`` workers of one JAX job; wait at most
    ``timeout`` seconds in all. ``per_process_args(i, coordinator)`` adds arguments to
    worker i (``via_env=False``: the job is described by them, e.g. the CLI's
    --coordinator/--num-processes/--process-id, not by JAX_* variables).
    ``kill_after=(i, predicate)``: SIGKILL worker i's process group as soon as
    ``predicate()`` is true (polled), to simulate a host dying mid-run."""
    port = free_port()
    procs, logs = [], []
    t0 = time.monotonic()
    try:
        for i in range(num_processes):
            log = open(_log_path(i, port), "w+")
            logs.append(log)
            extra = per_process_args(i, f"127.0.0.1:{port}") if per_process_args else []
            procs.append(subprocess.Popen(
                [python, *args, *extra], env=worker_env(i, num_processes, port, devices, extra_env, via_env),
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=cwd or HERE))
        deadline = t0 + timeout
        timed_out, killed = False, False
        while any(p.poll() is None for p in procs):
            if kill_after is not None and not killed:
                who, pred = kill_after
                if procs[who].poll() is None and pred():
                    _kill_group(procs[who])
                    killed = True
            if time.monotonic() > deadline:
                timed_out = True
                break
            time.sleep(0.05)
        return_codes = [p.poll() for p in procs]
    finally:
        for p in procs:  # always: the workers and anything they started
            if p.poll() is None:
                _kill_group(p, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                _kill_group(p)
                p.wait(timeout=5)
            _kill_group(p)  # children that outlived their parent
    outs = []
    for log in logs:
        log.seek(0)
        outs.append(log.read())
        log.close()
        os.unlink(log.name)
    return Result(return_codes, outs, time.monotonic() - t0, timed_out)


def _log_path(i, port):
    import tempfile

    fd, path = tempfile.mkstemp(prefix=f"mh-{port}-{i}-", suffix=".log")
    os.close(fd)
    return path
