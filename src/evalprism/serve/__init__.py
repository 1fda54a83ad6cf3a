"""The P2L routing service (`evalprism serve`): an OpenAI-compatible router with a leaderboard API.

- :func:`load_config` / :class:`ServeConfig`: the validated YAML config;
- :func:`create_app`: the FastAPI app (for uvicorn, or tests);
- :func:`serve`: load, check and run, as the CLI does.
"""

from evalprism.serve.app import create_app
from evalprism.serve.config import ServeConfig, load_config, read_secrets
from evalprism.serve.run import serve

__all__ = ["ServeConfig", "create_app", "load_config", "read_secrets", "serve"]
