"""``evalprism serve``: load the P2L model and the config, check them, and run the service."""

from __future__ import annotations

import errno
import socket
from collections.abc import Sequence
from pathlib import Path

from evalprism.errors import EvalprismError
from evalprism.io.outputs import check_output_file
from evalprism.p2l.backbones import native_bf16
from evalprism.p2l.model import P2LModel
from evalprism.progress import status
from evalprism.serve.config import (
    Secrets,
    ServeConfig,
    check_candidates,
    load_config,
    read_secrets,
)
from evalprism.serve.decisions import not_a_decision_log
from evalprism.serve.options import ServeOptions
from evalprism.serve.security import check_exposure


def check_decision_log(path: Path, inputs: Sequence[Path]) -> None:
    """The decision log follows the output rules (:func:`evalprism.io.outputs.check_output_file`): a new
    file, an empty one or an earlier decision log of this service; never an input or a path inside one."""
    check_output_file(path, "decision log", inputs=inputs, not_ours=not_a_decision_log)


def bind_listener(host: str, port: int) -> list[socket.socket]:
    """Bind ``host:port`` now, before the model loads, so that an address that is not this machine's or
    a port in use is one message (uvicorn would report it only after loading, with its own exit code).
    One socket per address the host resolves to, as asyncio's own ``create_server`` binds them; the
    service then listens on these very sockets (no gap in which another process could take the port)."""
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, socket.gaierror) else str(exc)
        raise EvalprismError(
            f"host {host!r}: not an address this machine can listen on ({reason})", parameter="host"
        ) from None
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys((i[0], i[1], i[2], "", i[4]) for i in infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
    except OSError as exc:
        for sock in sockets:
            sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise EvalprismError(
                f"cannot listen on {host}:{port}: port {port} is in use by another process; choose another port",
                parameter="port",
            ) from None
        if exc.errno == errno.EADDRNOTAVAIL:
            raise EvalprismError(
                f"cannot listen on {host}:{port}: host {host!r} is not an address of this machine", parameter="host"
            ) from None
        raise EvalprismError(f"cannot listen on {host}:{port} ({exc.strerror})") from None
    return sockets


def serve(
    model_dir: str | Path,
    config_path: str | Path,
    options: ServeOptions | None = None,
    *,
    decision_log: str | Path | None = None,
    quiet: bool = False,
) -> None:
    """Serve ``model_dir`` with the candidates of ``config_path`` until SIGINT/SIGTERM.

    Everything that can be wrong with the inputs is checked before the model loads: the config, the
    decision log (by the output rules: never an input or a file that is not a decision log), the
    environment variables the config names, that a service reachable from other machines has API
    keys, and that the address can be bound; the config against the model's list once it is loaded.
    The decision log defaults to the config's ``decision_log``, relative to the config file's directory.
    ``quiet``: no status lines, and uvicorn logs warnings only.
    """
    options = options or ServeOptions()
    host, port, progress = options.host, options.port, not quiet
    log_level = "warning" if quiet else options.log_level
    config_path = Path(config_path)
    config = load_config(config_path)
    log_path = Path(decision_log) if decision_log is not None else config_path.parent / config.decision_log
    check_decision_log(log_path, [Path(model_dir), config_path])
    secrets = read_secrets(config, source=str(config_path))
    sockets = bind_listener(host, port)  # first: a host that is no address here is that, not an exposure
    try:
        check_exposure(host, secrets.api_keys)
        _load_and_run(model_dir, config_path, config, secrets, log_path, host, port, sockets, log_level, progress)
    finally:
        for sock in sockets:
            sock.close()


def torch_threads_for(model: P2LModel) -> None:
    """One torch thread when torch runs only the coefficient head (the encoder runs in OpenVINO or is
    a static model): a head of a few thousand multiply-adds gains nothing from a second thread, and
    torch's idle OpenMP thread spins after each call on the core the event loop needs. Measured with
    the static backbone at 32 clients (benchmarks/bench_serve.py's load): 1.39 -> 0.69 ms of service
    CPU per request and 328 -> 626 requests/s (load average 10-11)."""
    if model.backbone.runtime != "torch":
        import torch

        torch.set_num_threads(1)


def _load_and_run(
    model_dir: str | Path,
    config_path: Path,
    config: ServeConfig,
    secrets: Secrets,
    log_path: Path,
    host: str,
    port: int,
    sockets: list[socket.socket],
    log_level: str,
    progress: bool,
) -> None:
    import uvicorn

    from evalprism.serve.app import create_app
    from evalprism.serve.drain import DrainingServer

    precision = config.precision if config.precision != "auto" else ("bfloat16" if native_bf16() else "float32")
    status(f"loading the P2L model from {model_dir} ({precision} inference, runtime {config.runtime})", progress)
    model = P2LModel.load(model_dir, cache_dir=False, precision=precision, runtime=config.runtime)
    check_candidates(config, model.models, str(config_path))
    if config.max_prompt_tokens is not None:
        model.backbone.limit_prompt_tokens(config.max_prompt_tokens)
    torch_threads_for(model)
    app = create_app(model, config, secrets, decision_log=log_path, precision=precision)
    status(
        f"routing among {len(config.models)} candidates ({model.backbone.runtime} runs the encoder); "
        f"decisions go to {log_path}",
        progress,
    )
    server = DrainingServer(
        uvicorn.Config(app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=30),
        app.state.drain,
        config.shutdown_linger_s,
    )
    status(f"serving on http://{host}:{port}", progress)
    server.run(sockets=sockets)
    if not server.started:  # the app's startup failed; uvicorn has logged why
        raise EvalprismError(f"the service on {host}:{port} did not start (see the log above)")
