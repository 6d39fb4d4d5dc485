"""Data-parallel training on ``torch.distributed``: what every trainer shares (torch).

A trainer runs unchanged as one plain process (world size 1: no process group, every
collective below is a no-op) and, launched by ``torchrun --nproc_per_node N``, as N
processes that each train on their shard of the graphs::

    torchrun --nproc_per_node 2 -m onnx_sched.cli train peak-mem --out-dir runs/peakmem

:func:`setup` reads torchrun's ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK`` and joins the
process group (NCCL when every local process has a GPU of its own, else gloo: :func:`default_backend`;
the models stay on the CPU, so with NCCL each collective goes through ``cuda:LOCAL_RANK`` and back).  Then a trainer:

* starts every rank from rank 0's weights (:func:`broadcast_modules`; the seeds already
  agree, this makes it certain, e.g. after a resume);
* takes its share of the graphs (:func:`shard`) and draws its samples from
  :func:`rank_rng` (the plain seed at world size 1, so single-process runs are unchanged);
* back-propagates each graph's loss divided by the number of graphs of the *whole* update
  and sums the gradients over the ranks (:func:`sum_gradients`, one all-reduce of one flat
  buffer) before clipping and the optimizer step: the update is the mean over all the
  update's graphs, as one process would compute it, and every rank takes the same step
  (:func:`average_gradients` when each rank has one problem per update);
* agrees on when to stop (:func:`any_rank`: a time budget read on one clock per rank);
* validates, logs and checkpoints on rank 0 only (:func:`is_main`, :func:`main_echo`),
  with :func:`barrier` before other ranks read what rank 0 wrote; on resume every rank
  loads the same checkpoint (a shared folder across machines).

Gradients are reduced explicitly rather than by ``DistributedDataParallel``: the trainers
accumulate per-graph REINFORCE losses in Python loops (several forward and backward passes
per update, and shards of unequal size), which DDP would reduce once per backward pass and
hang on when one rank has one graph fewer; one reduction of the accumulated gradient per
update is the same average with one collective.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeVar

import numpy as np
import torch
import torch.distributed as dist

__all__ = [
    "World", "any_rank", "average_gradients", "barrier", "broadcast_modules", "default_backend", "is_main", "main_echo",
    "rank_rng", "setup", "shard", "shard_count", "sum_gradients", "sum_values", "world",
]

T = TypeVar("T")
#: Collectives wait this long (a rank building demonstrations or problems alone may take minutes).
TIMEOUT = timedelta(hours=2)


@dataclass(frozen=True)
class World:
    """This process's place among the training processes."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0
    backend: str = ""  # "" without a process group

    @property
    def device(self) -> torch.device:
        """Where collectives run: the local GPU with NCCL, else the CPU."""
        return torch.device("cuda", self.local_rank) if self.backend == "nccl" else torch.device("cpu")


def world() -> World:
    """The current world (size 1 until :func:`setup` joins a process group)."""
    if not (dist.is_available() and dist.is_initialized()):
        return World()
    backend = dist.get_backend()
    return World(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")), backend)


def default_backend() -> str:
    """NCCL when every process on this machine has a GPU of its own, else gloo.

    NCCL puts one rank on one GPU (``cuda:LOCAL_RANK``); with more local processes than GPUs
    (``torchrun --nproc_per_node 2`` on a one-GPU workstation) a rank would name a GPU that does
    not exist, and two ranks on one GPU are refused by NCCL, so those runs reduce on the CPU."""
    local = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))
    return "nccl" if torch.cuda.is_available() and torch.cuda.device_count() >= local else "gloo"


def setup(backend: str | None = None) -> World:
    """Join torchrun's process group when launched by it with ``WORLD_SIZE > 1`` (idempotent)."""
    size = int(os.environ.get("WORLD_SIZE", "1"))
    if size > 1 and not dist.is_initialized():
        backend = backend or default_backend()
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend, timeout=TIMEOUT)
        atexit.register(_teardown)
    return world()


def _teardown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def is_main() -> bool:
    """True on rank 0 (and in a single process): the rank that validates, logs and checkpoints."""
    return world().rank == 0


def main_echo(echo: Callable[[str], None]) -> Callable[[str], None]:
    """``echo`` on rank 0, silence elsewhere."""
    return echo if is_main() else (lambda *_a, **_k: None)


def shard(items: Iterable[T], rank: int | None = None, size: int | None = None) -> list[T]:
    """Rank ``rank``'s share of ``items`` (every ``size``-th one, from its rank): all of them at world size 1."""
    w = world()
    rank, size = (w.rank if rank is None else rank), (w.size if size is None else size)
    return list(items)[rank::size]


def shard_count(n: int, rank: int, size: int) -> int:
    """How many of ``n`` items :func:`shard` gives ``rank``."""
    return len(range(rank, n, size))


def rank_rng(seed: int) -> np.random.Generator:
    """This rank's sampling generator: ``seed`` itself at world size 1, ``[seed, rank]`` otherwise."""
    w = world()
    return np.random.default_rng(seed if w.size == 1 else [seed, w.rank])


def broadcast_modules(*modules: torch.nn.Module) -> None:
    """Copy rank 0's parameters and buffers into every rank's ``modules``."""
    w = world()
    if w.size == 1:
        return
    for module in modules:
        for t in [*module.parameters(), *module.buffers()]:
            buf = t.detach().to(w.device)
            dist.broadcast(buf, src=0)
            with torch.no_grad():
                t.copy_(buf.to(t.device))


def sum_gradients(params: Iterable[torch.nn.Parameter], scale: float = 1.0) -> None:
    """Sum every parameter's gradient over the ranks (a missing gradient counts as zeros), times ``scale``."""
    w = world()
    if w.size == 1:
        return
    params = [p for p in params if p.requires_grad]
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    flat = torch.cat([p.grad.reshape(-1) for p in params]).to(w.device)
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    flat = flat.cpu() if scale == 1.0 else flat.cpu() * scale
    offset = 0
    for p in params:
        n = p.grad.numel()
        p.grad.copy_(flat[offset:offset + n].view_as(p.grad))
        offset += n


def average_gradients(params: Iterable[torch.nn.Parameter]) -> None:
    """Average every parameter's gradient over the ranks (trainers with one problem per rank per update)."""
    sum_gradients(params, 1.0 / world().size)


def sum_values(values: Sequence[float]) -> list[float]:
    """``values`` summed over the ranks (float64; statistics for rank 0's log)."""
    w = world()
    if w.size == 1:
        return [float(v) for v in values]
    t = torch.tensor(list(values), dtype=torch.float64, device=w.device)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t.cpu().tolist()


def any_rank(flag: bool) -> bool:
    """True on every rank when ``flag`` is true on one (stop decisions taken on per-rank clocks)."""
    return sum_values([1.0 if flag else 0.0])[0] > 0 if world().size > 1 else bool(flag)


def barrier() -> None:
    """Wait for every rank (no-op in a single process)."""
    if world().size > 1:
        dist.barrier()
