"""``--coordinator``, ``--num-processes``, ``--process-id``: how ``jwmma gemm`` and ``jwmma study``
join a multi-process JAX job (README "Several machines").

The start-up JAX expects: every value comes from its option, else from the environment
(``JAX_COORDINATOR_ADDRESS``, ``JAX_NUM_PROCESSES``, ``JAX_PROCESS_ID``: JAX 0.10 reads only the
first itself, the other two are the common convention), else from a cluster JAX detects
(a SLURM or Open MPI allocation of more than one task); with none of them the run is one
process and JAX is not initialised. This is the only module of the package that reads the
environment: once, at start-up, before anything is traced (`tests/test_layering.py`).
"""
from __future__ import annotations

import os

from ..tiled import processes
from ..tiled.processes import ADDRESS_RE
from .common import CliError

__all__ = ["detected_cluster", "resolve", "add_process_args", "init_from_args", "leave"]


def detected_cluster(env=None) -> str | None:
    """The cluster JAX 0.10's `jax.distributed.initialize()` would detect with more than one
    task, by the variables it reads: 'slurm' (SLURM_JOB_ID, SLURM_STEP_NODELIST, SLURM_NTASKS,
    SLURM_PROCID, SLURM_LOCALID) or 'ompi' (OMPI_MCA_orte_hnp_uri, OMPI_COMM_WORLD_SIZE); None
    otherwise (also for a one-task allocation)."""
    env = os.environ if env is None else env
    if all(k in env for k in ("SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_NTASKS", "SLURM_PROCID",
                              "SLURM_LOCALID")) and int(env["SLURM_NTASKS"]) > 1:
        return "slurm"
    if "OMPI_MCA_orte_hnp_uri" in env and int(env.get("OMPI_COMM_WORLD_SIZE", "1")) > 1:
        return "ompi"
    return None


def _int_or_none(value, what: str):
    if value is None or value == "":
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be an integer, got {value!r}") from None


def resolve(coordinator=None, num_processes=None, process_id=None, env=None) -> dict | None:
    """The `jwmma.tiled.processes.initialize` keywords for these values and the environment
    (``env``, default `os.environ`), ``{}`` to let JAX detect a cluster, or None when nothing
    says there is more than one process. ValueError on an incomplete or inconsistent
    description, naming what is missing."""
    env = os.environ if env is None else env
    coord = coordinator or env.get("JAX_COORDINATOR_ADDRESS") or None
    n = _int_or_none(num_processes, "--num-processes")
    if n is None:
        n = _int_or_none(env.get("JAX_NUM_PROCESSES"), "JAX_NUM_PROCESSES")
    pid = _int_or_none(process_id, "--process-id")
    if pid is None:
        pid = _int_or_none(env.get("JAX_PROCESS_ID"), "JAX_PROCESS_ID")
    cluster = detected_cluster(env)
    if coord is None and n is None and pid is None:
        return {} if cluster else None
    if n is not None and n < 1:
        raise ValueError(f"the number of processes must be >= 1, got {n}")
    if n == 1 and pid in (None, 0) and cluster is None:
        return None  # one process: no coordination service needed
    if coord is not None and not ADDRESS_RE.match(coord):
        raise ValueError(f"the coordinator address must be HOST:PORT (e.g. 10.0.0.1:4321), got {coord!r}")
    if cluster is None:
        missing = [what for what, v in (("the coordinator address (--coordinator or JAX_COORDINATOR_ADDRESS)", coord),
                                       ("the number of processes (--num-processes or JAX_NUM_PROCESSES)", n),
                                       ("this process's id (--process-id or JAX_PROCESS_ID)", pid)) if v is None]
        if missing:
            raise ValueError("a multi-process run needs " + ", ".join(missing) + " (or a SLURM / Open MPI "
                             "allocation that JAX detects)")
    if n is not None and pid is not None and not 0 <= pid < n:
        raise ValueError(f"the process id must be in [0, {n - 1}] for {n} processes, got {pid}")
    return dict(coordinator=coord, num_processes=n, process_id=pid)


def add_process_args(parser):
    """``--coordinator HOST:PORT``, ``--num-processes N``, ``--process-id I``, ``--init-timeout S``,
    ``--heartbeat-timeout S`` (each defaulting to the environment, module doc)."""
    g = parser.add_argument_group(
        "several processes (hosts)",
        "join a multi-process JAX job; each defaults to JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES, "
        "JAX_PROCESS_ID, and all to what JAX detects in a SLURM or Open MPI allocation")
    g.add_argument("--coordinator", metavar="HOST:PORT", default=None,
                   help="address of process 0's coordinator (the same on every process)")
    g.add_argument("--num-processes", type=int, default=None, metavar="N", help="processes in the job")
    g.add_argument("--process-id", type=int, default=None, metavar="I", help="this process, 0..N-1")
    g.add_argument("--init-timeout", type=int, default=300, metavar="S",
                   help="seconds to wait for every process to join (300)")
    g.add_argument("--heartbeat-timeout", type=int, default=None, metavar="S",
                   help="seconds without heartbeats after which a process counts as dead (JAX: 100)")
    return parser


def init_from_args(args, recoverable: bool = False) -> bool:
    """Join the job the parsed `add_process_args` options (and the environment) describe.
    Returns True when a multi-process job was joined; CliError on a bad description."""
    try:
        kw = resolve(getattr(args, "coordinator", None), getattr(args, "num_processes", None),
                     getattr(args, "process_id", None))
    except ValueError as e:
        raise CliError(str(e)) from None
    if kw is None:
        return False
    processes.initialize(**kw, timeout=getattr(args, "init_timeout", 300),
                         heartbeat_timeout=getattr(args, "heartbeat_timeout", None), recoverable=recoverable)
    return True


def leave() -> None:
    """Leave the job at the end of a command (process 0, the coordinator, last)."""
    processes.leave()
