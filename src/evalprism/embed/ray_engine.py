"""Encoding through Ray Data (``--engine ray``): the texts an :class:`~evalprism.embed.Embedder` is missing,
encoded by an actor pool on a local Ray instance or a cluster, streamed back to the driver's cache.

The embedder decides everything but where the batches run: which texts are missing, their order and how
they are cut into batches (a batch's company changes its vectors in the last bits, so the batches are the
in-process path's, to the text). Each batch is one row of a Ray Dataset; ``map_batches`` hands it to an
actor (:class:`EncodeBatch`) that resolved the same backend once, from the spec, the instruction and the
device (the model loads on the worker, never travels), and encodes it with the same call as the
in-process path, so the vectors are the same to the bit. Results come back with ``iter_batches`` as they
finish, in whatever order, each row carrying its position; the embedder checks and caches them chunk by
chunk and reports progress with its own bar (Ray's bars and worker logs are off).

Ray (``pip install 'evalprism[ray]'``) is imported only when something is to be encoded. ``ray.init``
joins the cluster at ``ray_address`` (or ``RAY_ADDRESS``), else starts a local instance with this
machine's CPUs; an instance that was already running (a notebook's) is used and left running, one this
module started is shut down when the encoding ends. The anchor is Ray Data's batch-inference recipe: a
callable class holding the model, ``map_batches`` with ``concurrency`` actors.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import socket
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evalprism.embed.backends import EncoderBackend, resolve_backend
from evalprism.embed.spec import EncoderSpec
from evalprism.errors import EvalprismError
from evalprism.progress import status

__all__ = ["RAY_INSTALL", "BackendRecipe", "EncodeBatch", "encode_on_ray", "require_ray"]

#: what a user without Ray runs
RAY_INSTALL = "pip install 'evalprism[ray]'"


def require_ray() -> None:
    """Refuse ``engine='ray'`` without Ray Data installed, with the command that installs it (checked
    without importing Ray, so a fully cached run never pays for it)."""
    if importlib.util.find_spec("ray") is None:
        raise EvalprismError(f"engine 'ray' needs Ray Data, which is not installed: {RAY_INSTALL}", parameter="engine")


@dataclass(frozen=True)
class BackendRecipe:
    """How a worker resolves the driver's backend: what travels to every actor instead of the model."""

    spec: str
    device: str
    instruction: str | None
    cache_dir: str | None  # where a static model is built (None: the worker's default cache directory)
    #: the runtime the driver resolved (never ``auto``: every actor computes as the driver's cache identity says)
    runtime: str = "torch"

    @classmethod
    def of(
        cls, spec: EncoderSpec, device: str, instruction: str | None, cache_dir: str | Path | None, runtime: str
    ) -> BackendRecipe:
        """The recipe of the driver's backend; a local path in the spec made absolute (a worker's current
        directory is not the driver's)."""
        text = spec.text
        if spec.location and Path(spec.location).expanduser().exists():
            text = f"{spec.kind}:{Path(spec.location).expanduser().resolve()}"
        return cls(text, device, instruction, None if cache_dir is None else str(cache_dir), runtime)

    def resolve(self) -> EncoderBackend:
        return resolve_backend(
            self.spec, self.device, self.instruction, cache_dir=self.cache_dir, progress=False, runtime=self.runtime
        )


class EncodeBatch:
    """The actor of the pool: the backend resolved once (its model loads on the first batch), then each
    row's batch of model texts encoded in one call, as :class:`~evalprism.embed.Embedder` does in process."""

    def __init__(self, recipe: BackendRecipe, batch_size: int) -> None:
        self.backend = recipe.resolve()
        self.batch_size = batch_size

    def __call__(self, rows: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        positions, vectors, clipped = [], [], []
        for first, texts in zip(rows["first"], rows["texts"], strict=True):
            before = self.backend.clipped
            encoded = self.backend.encode([str(t) for t in texts], self.batch_size)
            positions.append(np.arange(int(first), int(first) + len(encoded), dtype=np.int64))
            vectors.append(encoded)
            clipped.append(np.zeros(len(encoded), dtype=np.int64))
            clipped[-1][0] = self.backend.clipped - before
        return {
            "position": np.concatenate(positions),
            "vector": np.concatenate(vectors),
            "clipped": np.concatenate(clipped),
        }


def encode_on_ray(
    batches: Sequence[Sequence[str]],
    recipe: BackendRecipe,
    batch_size: int,
    address: str | None,
    progress: bool,
) -> Iterator[tuple[list[int], np.ndarray, int]]:
    """Encode ``batches`` (model texts, each encoded in one call) on a Ray actor pool; yield, as they
    arrive, (positions in the concatenated batches, their vectors, texts cut before tokenizing)."""
    with _ray_session(address, progress) as ray:
        starts = np.cumsum([0, *(len(b) for b in batches[:-1])])
        rows = [{"first": int(s), "texts": list(b)} for s, b in zip(starts, batches, strict=True)]
        dataset = ray.data.from_items(rows, override_num_blocks=len(rows))
        actors, resources = _pool(ray, recipe.device)
        encoded = dataset.map_batches(
            EncodeBatch,
            fn_constructor_kwargs={"recipe": recipe, "batch_size": batch_size},
            batch_size=1,  # one row is one of the embedder's batches: its company decides the last bits
            batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=min(actors, len(rows))),
            **resources,
        )
        blocks = iter(encoded.iter_batches(batch_size=None, batch_format="numpy"))
        while True:
            try:
                block = next(blocks)
            except StopIteration:
                return
            except Exception as exc:  # a worker's failure arrives wrapped in Ray's exceptions
                raise _worker_error(exc) from None
            yield block["position"].tolist(), np.asarray(block["vector"], dtype=np.float32), int(block["clipped"].sum())


def _worker_error(exc: BaseException) -> EvalprismError:
    """A worker's failure as one message: evalprism's own (a model that does not load) as it was raised
    there (Ray hands it back as text inside its own exception, the worker's traceback), anything else
    named with its first line."""
    if isinstance(exc, EvalprismError):
        return exc
    for line in str(exc).splitlines():
        _, marker, message = line.partition(f"{EvalprismError.__module__}.{EvalprismError.__name__}: ")
        if marker:
            return EvalprismError(message.strip())
    text = str(exc).strip().splitlines()
    return EvalprismError(
        f"engine 'ray': encoding failed on a worker ({type(exc).__name__}: {text[0] if text else ''})"
    )


def _pool(ray: Any, device: str) -> tuple[int, dict[str, float]]:
    """How many actors and what each holds: one per GPU of the cluster when encoding on ``cuda``, else
    one per CPU (each actor's torch then runs one thread)."""
    available = ray.cluster_resources()
    if device.startswith("cuda"):
        gpus = int(available.get("GPU", 0))
        if gpus < 1:
            raise EvalprismError(f"engine 'ray': device '{device}' asked for, but the Ray cluster has no GPU")
        return gpus, {"num_gpus": 1}
    return max(1, int(available.get("CPU", 1))), {"num_cpus": 1}


@contextlib.contextmanager
def _ray_session(address: str | None, progress: bool) -> Iterator[Any]:
    """Ray, initialised: a running instance as it is, else the cluster at ``address`` (or
    ``RAY_ADDRESS``), else a new local instance; said in one status line; only what was started here is
    shut down at the end."""
    require_ray()
    import ray

    with _quiet(ray):
        started = not ray.is_initialized()
        if started:
            _init(ray, address or os.environ.get("RAY_ADDRESS") or None)
        status(_where(ray, address if started else None, started), progress)
        try:
            yield ray
        finally:
            if started:
                ray.shutdown()


def _init(ray: Any, target: str | None) -> None:
    """``ray.init``: join the cluster at ``target``, or start a local instance (None); a failure is one
    message. An address that takes no connection is refused at once (Ray itself retries for minutes)."""
    if target and not _reachable(target):
        raise EvalprismError(
            f"engine 'ray': nothing answers at {target} (no Ray cluster there?); start one with `ray start --head` "
            "on its head node, or drop ray_address (and RAY_ADDRESS) for a local instance",
            parameter="ray_address",
        )
    try:
        ray.init(address=target, log_to_driver=False, include_dashboard=False, logging_level=logging.ERROR)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        lines = str(exc).strip().splitlines()
        what = f"join the Ray cluster at {target}" if target else "start a local Ray instance"
        raise EvalprismError(
            f"engine 'ray': cannot {what} ({type(exc).__name__}: {lines[0] if lines else ''})"
            + (
                "; is it running (`ray start --head` on its head node), and does this machine hold its token "
                "(Ray >= 2.59 authenticates: RAY_AUTH_MODE=token, with ~/.ray/auth_token or RAY_AUTH_TOKEN)?"
                if target
                else ""
            )
        ) from None


def _reachable(address: str, timeout: float = 5.0) -> bool:
    """Whether ``address`` (``host:port`` or ``ray://host:port``) takes a TCP connection; any other form
    (``auto``, ``local``) is left to Ray."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return True
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return True
    except OSError:
        return False


def _where(ray: Any, address: str | None, started: bool) -> str:
    """The one line saying where the encoding runs."""
    available = ray.cluster_resources()
    size = f"{int(available.get('CPU', 0))} CPUs" + (f", {int(available['GPU'])} GPUs" if available.get("GPU") else "")
    if not started:
        return f"ray: using the running Ray instance ({size})"
    target = address or os.environ.get("RAY_ADDRESS")
    if target:
        return f"ray: joined the cluster at {target} ({size})"
    return f"ray: started a local Ray instance ({size}; --ray-address or RAY_ADDRESS joins a cluster)"


@contextlib.contextmanager
def _quiet(ray: Any) -> Iterator[None]:
    """Ray Data's own progress bars, start-of-execution lines and log records off while evalprism encodes
    (the embedder's bar reports, and a worker's failure becomes one message); as they were afterwards, for
    a notebook's Ray instance."""
    with warnings.catch_warnings():  # Ray Data's first context warns about its own deprecated settings
        warnings.simplefilter("ignore", DeprecationWarning)
        context = ray.data.DataContext.get_current()
    settings = {"enable_progress_bars": False, "print_on_execution_start": False}
    before = {name: getattr(context, name) for name in settings}
    loggers = [logging.getLogger(name) for name in ("ray", "ray.data")]
    levels = [logger.level for logger in loggers]
    for name, value in settings.items():
        setattr(context, name, value)
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for name, value in before.items():
            setattr(context, name, value)
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
