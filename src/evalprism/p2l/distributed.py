"""Training on several processes: PyTorch DistributedDataParallel under ``torchrun``.

torchrun is the launcher (``torchrun --nproc-per-node 8 -m evalprism p2l train ...``; several nodes
add ``--nnodes``, ``--node-rank`` and ``--rdzv-endpoint``). Every process runs the same command;
:func:`join_world` joins the world torchrun describes in its environment (``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``): NCCL with one GPU per process
(``cuda:LOCAL_RANK``) where CUDA is available, gloo on CPUs. Without those variables, or in a world
of one, a run is a single process and nothing here communicates.

What training relies on, each in one place here:

- Every rank derives the prompt split, the epoch order and early stopping from the seed and the
  content, and :meth:`World.require_same` all-gathers a digest of them: ranks that read different
  data stop together with one message.
- Rank 0 alone touches the outputs (:meth:`World.on_main`: it claims the output directory, reads and
  writes checkpoints); its result is broadcast, and its :class:`EvalprismError` is raised on every
  rank, so no rank is left waiting in a collective.
- Each rank takes a disjoint shard of every global batch, in the same number of micro-batches on
  every rank (:meth:`World.micro_batches`), so the global batch does not depend on the world size.
- Sums over battles are all-gathered and added in rank order (:meth:`World.sum`): every rank sees
  the same bits, and so takes the same early-stopping decision.
"""

from __future__ import annotations

import atexit
import contextlib
import inspect
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from evalprism.errors import EvalprismError
from evalprism.vocabularies import Precision

T = TypeVar("T")


@dataclass(frozen=True)
class World:
    """This process's place in a torchrun world (a single process: rank 0 of 1)."""

    rank: int = 0
    size: int = 1
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @property
    def is_main(self) -> bool:
        """Rank 0: the one process that writes."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.size > 1

    def shard(self, idx: np.ndarray) -> np.ndarray:
        """This rank's contiguous share of ``idx`` (shares differ in size by one at most)."""
        return np.array_split(idx, self.size)[self.rank] if self.distributed else idx

    def micro_batches(self, batch: np.ndarray, micro_batch_size: int | None) -> list[np.ndarray]:
        """This rank's shard of one global ``batch`` in micro-batches of at most ``micro_batch_size``
        battles (None: one). Every rank gets the same number of them, some possibly empty, so that
        the gradient all-reduce of every rank happens at the same step."""
        per_rank = -(-batch.size // self.size)
        n = 1 if micro_batch_size is None else max(1, -(-per_rank // micro_batch_size))
        return np.array_split(self.shard(batch), n)

    def sum(self, value: float) -> float:
        """The sum of ``value`` over the ranks, added in rank order (the same bits on every rank)."""
        if not self.distributed:
            return value
        mine = torch.tensor([value], dtype=torch.float64, device=self.device)
        parts = [torch.zeros_like(mine) for _ in range(self.size)]
        dist.all_gather(parts, mine)
        return float(sum(float(p) for p in parts))

    def gather(self, obj: T) -> list[T]:
        """Every rank's ``obj``, in rank order (picklable objects)."""
        if not self.distributed:
            return [obj]
        out: list[Any] = [None] * self.size
        dist.all_gather_object(out, obj)
        return out

    def broadcast(self, obj: T) -> T:
        """Rank 0's ``obj`` on every rank."""
        if not self.distributed:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def on_main(self, fn: Callable[[], T]) -> T:
        """``fn()`` run on rank 0 alone (it writes, or reads what only it may touch); every rank gets
        its result, or the same :class:`EvalprismError` (any other failure stops the other ranks too)."""
        if not self.distributed:
            return fn()
        outcome: tuple[str, Any] = ("ok", None)
        if self.is_main:
            try:
                outcome = ("ok", fn())
            except EvalprismError as exc:
                outcome = ("error", exc)
            except BaseException as exc:
                self.broadcast(("failed", f"{type(exc).__name__}: {exc}"))
                raise
        outcome = self.broadcast(outcome)
        if outcome[0] == "error":
            raise outcome[1]
        if outcome[0] == "failed":
            raise RuntimeError(f"rank 0 failed: {outcome[1]}")
        return outcome[1]

    def everywhere(self, fn: Callable[[], T]) -> T:
        """``fn()`` run on every rank; when it raises :class:`EvalprismError` on any rank, every rank
        raises the lowest such rank's error (a rank alone with bad input must not leave the others
        waiting)."""
        try:
            result, error = fn(), None
        except EvalprismError as exc:
            if not self.distributed:
                raise
            result, error = None, exc
        errors = self.gather(error)
        failed = next((e for e in errors if e is not None), None)
        if failed is not None:
            raise failed
        return result  # type: ignore[return-value]

    def require_same(self, value: Any, message: Callable[[int, Any, Any], str]) -> None:
        """Stop every rank with one :class:`EvalprismError` unless all ranks hold the same ``value``;
        ``message(rank, its value, rank 0's value)`` names the first rank that differs."""
        values = self.gather(value)
        for rank, other in enumerate(values):
            if other != values[0]:
                raise EvalprismError(message(rank, other, values[0]))

    def wrap(self, module: nn.Module, probe: Callable[[nn.Module], torch.Tensor]) -> nn.Module:
        """``module`` under DistributedDataParallel (itself in a single process). Parameters that get
        no gradient from ``probe(module)`` (a loss on a fixed sample: the same on every rank; e.g. a
        BERT pooler a sentence encoder does not use) are frozen first, so DDP expects a gradient for
        exactly the parameters that get one."""
        if not self.distributed:
            return module
        from torch.nn.parallel import DistributedDataParallel

        _freeze_unused(module, probe)
        ids = [self.device.index] if self.device.type == "cuda" else None
        # buffers (e.g. rotary frequencies) are the same on every rank: no sync before each forward
        quiet: dict[str, Any] = (
            {"forward_sync_buffers": False}
            if "forward_sync_buffers" in inspect.signature(DistributedDataParallel).parameters
            else {"broadcast_buffers": False}
        )
        return DistributedDataParallel(module, device_ids=ids, **quiet)

    def accumulating(self, model: nn.Module, last: bool) -> contextlib.AbstractContextManager[Any]:
        """The context of one micro-batch's backward pass: gradients are all-reduced on the ``last``
        micro-batch of a global batch only (DDP's ``no_sync`` before it)."""
        if last or not hasattr(model, "no_sync"):
            return contextlib.nullcontext()
        return cast(Any, model).no_sync()


def _freeze_unused(module: nn.Module, probe: Callable[[nn.Module], torch.Tensor]) -> None:
    """Set ``requires_grad=False`` on the parameters that ``probe(module)`` does not reach (in eval
    mode: no dropout draws from the random generator)."""
    training = module.training
    module.eval()
    probe(module).backward()
    for param in module.parameters():
        if param.requires_grad and param.grad is None:
            param.requires_grad_(False)
        param.grad = None
    module.train(training)


def autocast_dtype(precision: Precision, device: torch.device) -> torch.dtype | None:
    """The autocast dtype of a fine-tuned backbone's forward pass for a :data:`~evalprism.vocabularies.Precision`,
    None for float32. ``auto``: bfloat16 on a GPU that computes it (the weights and the optimiser stay
    float32)."""
    if precision == "auto":
        bf16 = device.type == "cuda" and torch.cuda.is_bf16_supported()
        return torch.bfloat16 if bf16 else None
    return torch.bfloat16 if precision == "bfloat16" else None


@contextlib.contextmanager
def autocast(dtype: torch.dtype | None, device: torch.device) -> Iterator[None]:
    """Mixed precision for the block where ``dtype`` is set; nothing otherwise."""
    if dtype is None:
        yield
        return
    with torch.autocast(device_type=device.type, dtype=dtype):
        yield


_WORLD: World | None = None


def join_world() -> World:
    """The world torchrun started this process in, joined on the first call (later calls return the
    same); a single process when torchrun's variables are absent or the world has one process."""
    global _WORLD
    if _WORLD is None:
        _WORLD = _join()
    return _WORLD


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    if value.strip() == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise EvalprismError(f"environment variable {name}={value!r}: expected an integer (torchrun sets it)") from None


def _join() -> World:
    size, rank, local_rank = _env_int("WORLD_SIZE", 1), _env_int("RANK", 0), _env_int("LOCAL_RANK", 0)
    device = torch.device("cpu")
    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    if dist.is_available() and dist.is_initialized():  # the caller's own process group
        return World(dist.get_rank(), dist.get_world_size(), device)
    if size <= 1:
        return World(0, 1, device)
    try:
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    except Exception as exc:
        raise EvalprismError(
            f"cannot join the torchrun world as rank {rank} of {size} ({type(exc).__name__}: {exc})"
        ) from None
    atexit.register(_leave)
    return World(dist.get_rank(), dist.get_world_size(), device)


def _leave() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()
