"""The P2L routing service (`evalprism serve`): an OpenAI- and Anthropic-compatible router
(Chat Completions, Responses, Messages) with a leaderboard API.

- :func:`load_config` / :class:`ServeConfig`: the validated YAML config;
- :func:`create_app`: the FastAPI app (for uvicorn, or tests);
- :func:`serve`: load, check and run, as the CLI does.

The names load from their submodules on first use (:mod:`evalprism._lazy`): reading a config does
not import FastAPI, uvicorn or the P2L model (torch).
"""

from typing import TYPE_CHECKING

from evalprism._lazy import lazy_package

if TYPE_CHECKING:  # static tools and IDEs see the names; at run time they load on first access
    from evalprism.serve.app import create_app
    from evalprism.serve.config import ServeConfig, load_config, read_secrets
    from evalprism.serve.run import serve

__all__ = ["ServeConfig", "create_app", "load_config", "read_secrets", "serve"]

lazy_package(
    __name__,
    {
        "app": ["create_app"],
        "config": ["ServeConfig", "load_config", "read_secrets"],
        "run": ["serve"],
    },
)
