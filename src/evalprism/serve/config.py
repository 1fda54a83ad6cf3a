"""The router service's configuration: a YAML file, validated before anything starts.

```yaml
models:                       # candidates; names as in the P2L model list
  gpt-4o-mini: {base_url: "http://host:port/v1", upstream_model: gpt-4o-mini, api_key_env: OPENAI_API_KEY, cost: 0.6}
  claude-3-5-haiku: {base_url: "...", upstream_model: claude-3-5-haiku, api_key_env: ANTHROPIC_KEY, cost: 4.0}
budget: 2.0                   # optional default cost bound (per prompt, Theorem 1)
opponent: uniform             # or {model: weight, ...} over the candidates
api_keys_env: [EVALPRISM_API_KEY]   # environment variables that hold accepted bearer tokens
```

Secrets never live in the file: upstream keys and accepted bearer tokens are read from the
environment variables it names, once, at startup (an unset variable is an error there, not a 401
later). Extensions beyond the keys above, all optional: ``router_name``, ``decision_log``,
``timeout_s``, ``connect_timeout_s``, ``max_attempts``, ``breaker_failures``, ``breaker_cooldown_s``,
``batch_window_ms``, ``max_batch``, ``max_body_bytes``,
``max_prompt_chars``, ``max_prompt_tokens``, ``seed``, ``precision``, ``runtime``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from evalprism.errors import EvalprismError
from evalprism.io.text import read_text
from evalprism.p2l.routing import check_budget, opponent_vector


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class UpstreamConfig(_Strict):
    """One candidate model: where to send its requests and what a request costs."""

    base_url: str = Field(description="OpenAI-compatible base URL, e.g. http://host:port/v1")
    upstream_model: str | None = Field(None, description="the model name the upstream expects (default: the candidate name)")
    api_key_env: str | None = Field(None, description="environment variable holding the upstream's API key")
    cost: float = Field(ge=0, description="cost of one request (any unit, the same for every model)")
    prompt_token_price: float | None = Field(None, ge=0, description="price of one prompt token (realised cost)")
    completion_token_price: float | None = Field(None, ge=0, description="price of one completion token")

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("expected an http:// or https:// URL")
        return value.rstrip("/")

    @field_validator("cost", "prompt_token_price", "completion_token_price")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("expected a finite number")
        return value


def realised_cost(upstream: UpstreamConfig, usage: Any) -> float | None:
    """``usage`` (an OpenAI ``usage`` object) priced at the upstream's per-token prices; None when the
    config gives no prices or the upstream reported no token counts."""
    if (upstream.prompt_token_price is None and upstream.completion_token_price is None) or not isinstance(usage, dict):
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    return prompt * (upstream.prompt_token_price or 0.0) + completion * (upstream.completion_token_price or 0.0)


class ServeConfig(_Strict):
    """The whole file (see the module docstring)."""

    models: dict[str, UpstreamConfig] = Field(min_length=1)
    budget: float | None = Field(None, ge=0, description="default cost bound per prompt; none: no bound")
    opponent: Literal["uniform"] | dict[str, float] = "uniform"  # checked by p2l.routing.opponent_vector
    api_keys_env: list[str] = Field(default_factory=list)
    router_name: str = "evalprism-router"
    decision_log: str = "decisions.jsonl"
    timeout_s: float = Field(60.0, gt=0, description="upstream read timeout per request")
    connect_timeout_s: float = Field(5.0, gt=0)
    batch_window_ms: float = Field(4.0, ge=0, description="how long a P2L batch waits for more prompts")
    # 16: the encoder is compute-bound, so a bigger batch gains little per prompt, while a smaller one lets the
    # event loop answer one batch and read the next while the model runs, and one slow batch delays fewer
    # requests. 32 clients, four runs each (benchmarks/bench_serve.py): p99 83-90 ms at 16, 82-110 ms at 64.
    max_batch: int = Field(16, ge=1, description="most prompts in one P2L forward pass")
    max_attempts: int = Field(3, ge=1, description="most upstreams one chat request tries, in the decision's value order")
    breaker_failures: int = Field(3, ge=1, description="consecutive failures that open an upstream's circuit")
    breaker_cooldown_s: float = Field(30.0, gt=0, description="how long an open circuit is skipped")
    max_body_bytes: int = Field(1_000_000, ge=1024)
    max_prompt_chars: int = Field(32_000, ge=1)
    max_prompt_tokens: int | None = Field(
        None, ge=1, description="routing reads at most this many tokens of a prompt (None: as many as the backbone "
                                "reads, 256 for minilm); a cap bounds one long prompt's encoder cost")
    seed: int | None = Field(None, description="seed for drawing a model from a mixed routing distribution")
    precision: Literal["auto", "float32", "bfloat16"] = Field(
        "auto", description="P2L backbone inference dtype; auto: bfloat16 where the CPU has native bf16, else float32")
    runtime: Literal["auto", "torch", "openvino"] = Field(
        "auto", description="what runs the P2L backbone; auto: OpenVINO for sentence encoders where installed, else torch")


@dataclass(frozen=True)
class Secrets:
    """What the environment variables held at startup: bearer tokens the service accepts and each
    candidate's upstream key (None: the upstream needs none). Kept out of every log and response."""

    api_keys: tuple[str, ...]
    upstream_keys: Mapping[str, str | None]

    def __repr__(self) -> str:  # never print a key, even in a traceback
        return f"Secrets(api_keys=<{len(self.api_keys)} hidden>, upstream_keys=<hidden>)"


def _location(error: Mapping[str, Any]) -> str:
    return ".".join(str(part) for part in error.get("loc", ())) or "(top level)"


def load_config(path: str | Path, model_names: Sequence[str] | None = None) -> ServeConfig:
    """Read and validate ``path``; with ``model_names`` (the P2L model's list), every candidate and
    opponent must be one of them. Raises :class:`EvalprismError` naming the file and the key. The
    opponent and the budget are checked by the library's routing checks (:mod:`evalprism.p2l.routing`),
    so the file gets the messages a library or CLI user gets, after the file's name."""
    path = Path(path)
    try:
        raw = yaml.safe_load(read_text(path))
    except OSError as exc:
        raise EvalprismError(f"{path}: cannot read the router config ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise EvalprismError(f"{path}: not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(raw, dict):
        raise EvalprismError(f"{path}: expected a mapping with a 'models' key at the top level")
    try:
        config = ServeConfig.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        more = f" (and {exc.error_count() - 1} more problem(s))" if exc.error_count() > 1 else ""
        raise EvalprismError(f"{path}: {_location(first)}: {first['msg']}{more}") from None
    if model_names is not None:
        check_candidates(config, model_names, str(path))
    candidates = list(config.models)
    try:
        opponent_vector(config.opponent, candidates)
        check_budget(config.budget, [config.models[m].cost for m in candidates], candidates)
    except EvalprismError as exc:
        raise EvalprismError(f"{path}: {exc}") from None
    return config


def check_candidates(config: ServeConfig, model_names: Sequence[str], source: str = "config") -> None:
    """Every candidate must be a model the P2L model has a coefficient for."""
    known = set(model_names)
    unknown = [m for m in config.models if m not in known]
    if unknown:
        raise EvalprismError(f"{source}: models: {', '.join(unknown)} not in the P2L model's list "
                             f"({', '.join(list(model_names)[:8])}{', ...' if len(model_names) > 8 else ''})")


def read_secrets(config: ServeConfig, environ: Mapping[str, str] | None = None, source: str = "config") -> Secrets:
    """The bearer tokens and upstream keys from the environment; an unset variable is an error."""
    env = os.environ if environ is None else environ
    missing = [v for v in config.api_keys_env if not env.get(v)]
    missing += [m.api_key_env for m in config.models.values() if m.api_key_env and not env.get(m.api_key_env)]
    if missing:
        raise EvalprismError(f"{source}: environment variable(s) {', '.join(sorted(set(missing)))} named in the "
                             "config are not set (keys are read from the environment, never from the file)")
    return Secrets(tuple(env[v] for v in config.api_keys_env),
                   {name: env[m.api_key_env] if m.api_key_env else None for name, m in config.models.items()})
