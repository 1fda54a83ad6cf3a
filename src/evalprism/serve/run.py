"""``evalprism serve``: load the P2L model and the config, check them, and run the service."""

from __future__ import annotations

import os
from pathlib import Path

from evalprism.errors import EvalprismError
from evalprism.p2l.backbones import native_bf16
from evalprism.p2l.model import P2LModel
from evalprism.progress import status
from evalprism.serve.config import check_candidates, load_config, read_secrets
from evalprism.serve.security import check_exposure


#: uvicorn's log levels
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")


def check_writable(path: Path, what: str) -> None:
    """Refuse a file the service could not append to, before anything loads (uvicorn would report only
    "Application startup failed"): an existing file must be writable, else the nearest existing
    directory above it must be a writable directory (the missing ones are created on startup)."""
    if path.exists():
        if not path.is_file() or not os.access(path, os.W_OK):
            kind = "a directory" if path.is_dir() else "not a writable file"
            raise EvalprismError(f"{path}: cannot be the {what}: it is {kind}")
        return
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise EvalprismError(f"{path}: cannot be the {what}: {parent} is a file, not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise EvalprismError(f"{path}: cannot be the {what}: the directory {parent} is not writable")


def serve(model_dir: str | Path, config_path: str | Path, *, host: str = "127.0.0.1", port: int = 8000,
          decision_log: str | Path | None = None, log_level: str = "info", progress: bool = True) -> None:
    """Serve ``model_dir`` with the candidates of ``config_path`` until SIGINT/SIGTERM.

    Everything that can be wrong with the inputs is checked before the port opens: the config
    against the model's list, the environment variables it names, and that a service reachable
    from other machines has API keys. The decision log defaults to the config's ``decision_log``,
    relative to the config file's directory.
    """
    import uvicorn

    from evalprism.serve.app import create_app

    config_path = Path(config_path)
    if not 0 < port < 65536:
        raise EvalprismError(f"port {port}: expected a port number between 1 and 65535", parameter="port")
    if log_level not in LOG_LEVELS:
        raise EvalprismError(f"log_level {log_level!r}: expected one of {', '.join(LOG_LEVELS)}",
                             parameter="log_level")
    config = load_config(config_path)
    log_path = Path(decision_log) if decision_log is not None else config_path.parent / config.decision_log
    check_writable(log_path, "decision log")
    secrets = read_secrets(config, source=str(config_path))
    check_exposure(host, secrets.api_keys)
    precision = config.precision if config.precision != "auto" else ("bfloat16" if native_bf16() else "float32")
    status(f"loading the P2L model from {model_dir} ({precision} inference, runtime {config.runtime})", progress)
    model = P2LModel.load(model_dir, cache_dir=False, precision=precision, runtime=config.runtime)
    check_candidates(config, model.models, str(config_path))
    if config.max_prompt_tokens is not None:
        model.backbone.limit_prompt_tokens(config.max_prompt_tokens)
    app = create_app(model, config, secrets, decision_log=log_path, precision=precision)
    status(f"routing among {len(config.models)} candidates ({model.backbone.runtime} runs the encoder); "
           f"decisions go to {log_path}", progress)
    uvicorn.run(app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=30)
