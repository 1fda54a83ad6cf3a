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
``timeout_s``, ``connect_timeout_s``, ``pool_timeout_s``, ``max_attempts``, ``breaker_failures``, ``breaker_cooldown_s``,
``starvation_lag_s``, ``shutdown_linger_s``,
``batch_window_ms``, ``max_batch``, ``max_body_bytes``,
``max_prompt_chars``, ``max_prompt_tokens``, ``seed``, ``precision``, ``runtime``, ``affinity``
(:class:`AffinityConfig`), ``routing_prompt`` (:class:`RoutingPromptConfig`); per model, ``apis`` (the
APIs its upstream serves, default ``[chat]``), ``max_connections`` (the router's connections to that
upstream, default 128) and token prices.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import numpy as np
import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from evalprism.errors import EvalprismError
from evalprism.io.text import read_text
from evalprism.p2l.routing import check_budget, opponent_vector
from evalprism.serve.conversation import API_NAMES, ApiName
from evalprism.serve.extraction import DEFAULT_DROP_BLOCKS, DEFAULT_DROP_PARTS
from evalprism.vocabularies import NUMBERS, Precision, Runtime


class _Strict(BaseModel):
    """Strict types: a YAML ``true`` is not the number 1, nor ``"5"`` the number 5."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


# --- one validator per meaning -------------------------------------------------------------------


def _finite(value: float | None) -> float | None:
    """A number of the config (a cost, a price, a duration) is finite: ``.inf`` means nothing there."""
    if value is not None and not math.isfinite(value):
        raise ValueError("expected a finite number")
    return value


def _seed(value: int | None) -> int | None:
    """The routing seed: one numpy's generator takes (the toolkit's one seed rule, ``NUMBERS["seed"]``);
    a negative seed would only fail at the first mixed routing decision."""
    if value is not None and not NUMBERS["seed"].admits(float(value)):
        raise ValueError(f"expected {NUMBERS['seed'].expected()}")
    return value


def _upstream_url(value: str) -> str:
    """An upstream's base URL: http(s), a host, a port in range if one is given, no whitespace
    (a space would reach httpx only on the first request, as a connection error)."""
    if any(c.isspace() for c in value):
        raise ValueError("expected a URL without spaces or line breaks")
    if not value.startswith(("http://", "https://")):
        raise ValueError("expected an http:// or https:// URL")
    parts = urlsplit(value)
    if not parts.hostname:
        raise ValueError("expected a URL with a host, e.g. http://127.0.0.1:8001/v1")
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0 or (port is None and parts.netloc.endswith(":")):
        raise ValueError("expected a port number between 1 and 65535 after the host")
    return value.rstrip("/")


def _name(value: str) -> str:
    """A name clients send (the router's): not empty, no leading or trailing spaces."""
    if not value.strip() or value != value.strip():
        raise ValueError("expected a non-empty name without leading or trailing spaces")
    return value


def _apis(value: list[ApiName]) -> list[ApiName]:
    """The APIs an upstream serves: at least one, each once."""
    if not value:
        raise ValueError(f"expected at least one of {', '.join(API_NAMES)}")
    if len(set(value)) != len(value):
        raise ValueError("expected each API once")
    return value


def _chat_only() -> list[ApiName]:
    return ["chat"]


def _patterns(value: list[str]) -> list[str]:
    """Regular expressions Python's ``re`` compiles (the first that does not is named)."""
    for i, pattern in enumerate(value):
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"pattern {i} ({pattern!r}) is not a regular expression: {exc}") from None
    return value


Finite = Annotated[float, AfterValidator(_finite)]
Seconds = Annotated[float, Field(gt=0), AfterValidator(_finite)]
Patterns = Annotated[list[str], AfterValidator(_patterns)]


class UpstreamConfig(_Strict):
    """One candidate model: where to send its requests and what a request costs."""

    base_url: Annotated[str, AfterValidator(_upstream_url)] = Field(
        description="OpenAI-compatible base URL, e.g. http://host:port/v1"
    )
    upstream_model: str | None = Field(
        None, description="the model name the upstream expects (default: the candidate name)"
    )
    api_key_env: str | None = Field(None, description="environment variable holding the upstream's API key")
    cost: Finite = Field(ge=0, description="cost of one request (any unit, the same for every model)")
    prompt_token_price: Finite | None = Field(None, ge=0, description="price of one prompt token (realised cost)")
    completion_token_price: Finite | None = Field(None, ge=0, description="price of one completion token")
    apis: Annotated[list[ApiName], AfterValidator(_apis)] = Field(
        default_factory=_chat_only,
        description="the APIs its upstream serves at base_url: chat (/chat/completions), responses "
        "(/responses), messages (/messages, Anthropic); a request goes only to candidates serving its API",
    )
    max_connections: int = Field(
        128,
        ge=1,
        le=10_000,
        description="most connections the router opens to this "
        "upstream at once; a request that finds none free within pool_timeout_s is "
        "not the upstream's failure (it tries the next candidate, else 503)",
    )


def realised_cost(upstream: UpstreamConfig, usage: Any) -> float | None:
    """``usage`` (an OpenAI ``usage`` object) priced at the upstream's per-token prices; None when the
    config gives no prices or the upstream reported no token counts."""
    if (upstream.prompt_token_price is None and upstream.completion_token_price is None) or not isinstance(usage, dict):
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    return prompt * (upstream.prompt_token_price or 0.0) + completion * (upstream.completion_token_price or 0.0)


class AffinityConfig(_Strict):
    """Conversations keep their model (:mod:`evalprism.serve.affinity`)."""

    enabled: bool = Field(True, description="false: every request is routed on its own")
    max_entries: int = Field(100_000, ge=1, description="most conversation keys kept (least recently used out)")
    ttl_s: Seconds = Field(3600.0, description="a conversation unseen this long is forgotten")
    session_headers: list[str] = Field(
        default_factory=lambda: ["x-session-id", "session_id", "x-claude-code-session-id"],
        description="request headers whose value names the client's session (the first present is used)",
    )
    user_field: bool = Field(
        False,
        description="also key conversations by the body's user (chat, responses) or metadata.user_id "
        "(messages): right only where that value names one conversation (Claude Code's holds its session)",
    )
    switch_margin: Finite | None = Field(
        None,
        ge=0,
        description="move a conversation between tool loops when the model P2L draws for the human's new "
        "turn has a predicted value (win rate) above the kept model's by more than this; none: never",
    )

    @field_validator("session_headers")
    @classmethod
    def _lower(cls, value: list[str]) -> list[str]:
        return [name.lower() for name in value]


class RoutingPromptConfig(_Strict):
    """What the routing prompt reads of the human's turns (:mod:`evalprism.serve.extraction`)."""

    drop_blocks: Patterns = Field(
        default_factory=lambda: list(DEFAULT_DROP_BLOCKS),
        description="regular expressions removed wherever they match in the human's text",
    )
    drop_parts: Patterns = Field(
        default_factory=lambda: list(DEFAULT_DROP_PARTS),
        description="regular expressions: a text part starting with a match is the harness's, dropped whole",
    )


class ServeConfig(_Strict):
    """The whole file (see the module docstring)."""

    models: dict[str, UpstreamConfig] = Field(min_length=1)
    budget: float | None = Field(None, ge=0, description="default cost bound per prompt; none: no bound")
    opponent: Literal["uniform"] | dict[str, float] = "uniform"  # checked by p2l.routing.opponent_vector
    api_keys_env: list[str] = Field(default_factory=list)
    router_name: Annotated[str, AfterValidator(_name)] = "evalprism-router"
    decision_log: str = "decisions.jsonl"
    timeout_s: Seconds = Field(60.0, description="upstream read timeout per request")
    connect_timeout_s: Seconds = 5.0
    pool_timeout_s: Seconds = Field(
        5.0,
        description="how long a request waits for a free connection to an "
        "upstream (its max_connections) before trying the next",
    )
    # at most a second: the warm-up batch waits one window before the service reports healthy, and every
    # request waits up to one window for company
    batch_window_ms: float = Field(4.0, ge=0, le=1000, description="how long a P2L batch waits for more prompts")
    # 16: the encoder is compute-bound, so a bigger batch gains little per prompt, while a smaller one lets the
    # event loop answer one batch and read the next while the model runs, and one slow batch delays fewer
    # requests. 32 clients, four runs each (benchmarks/bench_serve.py): p99 83-90 ms at 16, 82-110 ms at 64.
    max_batch: int = Field(16, ge=1, description="most prompts in one P2L forward pass")
    max_attempts: int = Field(
        3, ge=1, description="most upstreams one chat request tries, in the decision's value order"
    )
    breaker_failures: int = Field(3, ge=1, description="consecutive failures that open an upstream's circuit")
    breaker_cooldown_s: Seconds = Field(30.0, description="how long an open circuit is skipped")
    starvation_lag_s: Seconds = Field(
        1.0,
        description="an upstream timeout during which the router's own event loop lagged this long is the "
        "router's starvation, not counted against the upstream (evalprism.serve.loop_lag)",
    )
    shutdown_linger_s: Seconds = Field(
        1.0,
        description="after a shutdown begins, how long an open connection may stand idle before it is closed "
        "(evalprism.serve.drain); a client that sends its next request on a kept-alive connection later than "
        "this races the close and sees a connection error, which the SDKs retry",
    )
    max_body_bytes: int = Field(1_000_000, ge=1024)
    max_prompt_chars: int = Field(32_000, ge=1)
    max_prompt_tokens: int | None = Field(
        None,
        ge=1,
        description="routing reads at most this many tokens of a prompt (None: as many as the backbone "
        "reads, 256 for minilm); a cap bounds one long prompt's encoder cost",
    )
    seed: Annotated[int | None, AfterValidator(_seed)] = Field(
        None, description="seed for drawing a model from a mixed routing distribution"
    )
    precision: Precision = Field(
        "auto", description="P2L backbone inference dtype; auto: bfloat16 where the CPU has native bf16, else float32"
    )
    runtime: Runtime = Field(
        "auto",
        description="what runs the P2L backbone; auto: OpenVINO for sentence encoders where installed, else torch",
    )
    # frozen: one default instance serves every config
    affinity: AffinityConfig = AffinityConfig.model_validate({})
    routing_prompt: RoutingPromptConfig = RoutingPromptConfig.model_validate({})

    def serving(self, api: ApiName) -> list[str]:
        """The candidates whose upstream serves ``api``, in the config's order."""
        return [name for name, up in self.models.items() if api in up.apis]

    @field_validator("router_name")
    @classmethod
    def _not_a_candidate(cls, value: str, info: ValidationInfo) -> str:
        """The router's name and a candidate's would make ``model: <name>`` mean two things."""
        if value in (info.data.get("models") or {}):
            raise ValueError(
                "expected a name that is not also a candidate's: a request naming it could not say "
                "whether to route or to call that candidate"
            )
        return value


@dataclass(frozen=True)
class Secrets:
    """What the environment variables held at startup: bearer tokens the service accepts and each
    candidate's upstream key (None: the upstream needs none). Kept out of every log and response."""

    api_keys: tuple[str, ...]
    upstream_keys: Mapping[str, str | None]

    def __repr__(self) -> str:  # never print a key, even in a traceback
        return f"Secrets(api_keys=<{len(self.api_keys)} hidden>, upstream_keys=<hidden>)"


def _location(error: Mapping[str, Any]) -> str:
    """The key path of an error, without pydantic's union branch labels (``literal['uniform']``)."""
    parts = [str(part) for part in error.get("loc", ()) if not _branch(part)]
    return ".".join(parts) or "(top level)"


def _branch(part: object) -> bool:
    return isinstance(part, str) and ("[" in part or part in ("str", "int", "float", "bool"))


def _first_error(exc: ValidationError) -> tuple[dict[str, Any], int]:
    """The error to report and how many other problems there are: the first key with a problem, and of
    a key whose value fits none of a union's branches, the branch that got furthest (``opponent: {a:
    true}`` is about ``a``'s weight, not about the value not being ``uniform``)."""
    errors = exc.errors()
    key = errors[0]["loc"][:1]
    first = max((e for e in errors if e["loc"][:1] == key), key=lambda e: len(e["loc"]))

    def branch(error: Any) -> tuple[str, ...]:
        return tuple(str(part) for part in error["loc"] if _branch(part))

    others = [e for e in errors if e is not first and (e["loc"][:1] != key or branch(e) == branch(first))]
    return dict(first), len(others)


def _message(error: Mapping[str, Any]) -> str:
    """A pydantic error as "what was expected (got what the file says)", the value in YAML's spelling."""
    message = str(error["msg"]).removeprefix("Value error, ")
    value = error.get("input")
    if isinstance(value, bool) and error.get("type") in ("float_type", "int_type"):
        return f"expected a number, not the boolean {_yaml(value)}"
    if isinstance(value, bool | int | float | str) and error.get("type") != "missing":
        return f"{message} (got {_yaml(value)})"
    return message


def _yaml(value: bool | float | str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if math.isnan(value) else (".inf" if value > 0 else "-.inf")
    return repr(value) if isinstance(value, str) else str(value)


def _read_yaml(path: Path) -> Any:
    """The YAML document in ``path``; a key given twice in one mapping is refused (YAML loaders keep the
    later silently), naming the key's path and both lines."""
    try:
        text = read_text(path)
    except OSError as exc:
        raise EvalprismError(f"{path}: cannot read the router config ({exc.strerror})") from None
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _refuse_duplicate_keys(path, node, ())
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise EvalprismError(f"{path}: not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    finally:
        loader.dispose()


def _refuse_duplicate_keys(path: Path, node: yaml.Node, where: tuple[str, ...]) -> None:
    if isinstance(node, yaml.MappingNode):
        first_line: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else None
            if key is not None and key != "<<":
                line = key_node.start_mark.line + 1
                if key in first_line:
                    dotted = ".".join((*where, key))
                    raise EvalprismError(
                        f"{path}: {dotted}: the key {key!r} is given twice (lines {first_line[key]} "
                        f"and {line}); expected each key once"
                    )
                first_line[key] = line
            _refuse_duplicate_keys(path, value_node, (*where, key if key is not None else "?"))
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _refuse_duplicate_keys(path, item, (*where, str(i)))


def load_config(path: str | Path, model_names: Sequence[str] | None = None) -> ServeConfig:
    """Read and validate ``path``; with ``model_names`` (the P2L model's list), every candidate and
    opponent must be one of them. Raises :class:`EvalprismError` naming the file and the key. The
    opponent and the budget are checked by the library's routing checks (:mod:`evalprism.p2l.routing`),
    so the file gets the messages a library or CLI user gets, after the file's name."""
    path = Path(path)
    raw = _read_yaml(path)
    if not isinstance(raw, dict):
        raise EvalprismError(f"{path}: expected a mapping with a 'models' key at the top level")
    try:
        config = ServeConfig.model_validate(raw)
    except ValidationError as exc:
        first, others = _first_error(exc)
        more = f" (and {others} more problem(s))" if others else ""
        raise EvalprismError(f"{path}: {_location(first)}: {_message(first)}{more}") from None
    if model_names is not None:
        check_candidates(config, model_names, str(path))
    candidates = list(config.models)
    try:
        opponent_vector(config.opponent, candidates)
        check_budget(config.budget, [config.models[m].cost for m in candidates], candidates)
        for api in API_NAMES:  # each API routes among the candidates serving it
            served = config.serving(api)
            pool_opponent(config, served, api)
            if served:
                check_budget(config.budget, [config.models[m].cost for m in served], served)
    except EvalprismError as exc:
        raise EvalprismError(f"{path}: {exc}") from None
    return config


def pool_opponent(config: ServeConfig, names: Sequence[str], api: str) -> np.ndarray:
    """The opponent distribution over the candidates ``names`` serving ``api``: the config's opponent
    restricted to them and renormalised (``uniform`` stays uniform)."""
    if not names:
        return np.zeros(0)
    full = opponent_vector(config.opponent, list(config.models))
    q = full[[list(config.models).index(name) for name in names]]
    if q.sum() <= 0:
        raise EvalprismError(
            f"opponent: no weight on the candidates serving the {api} API ({', '.join(names)}); "
            "give at least one of them a positive weight"
        )
    return q / q.sum()


def check_candidates(config: ServeConfig, model_names: Sequence[str], source: str = "config") -> None:
    """Every candidate must be a model the P2L model has a coefficient for."""
    known = set(model_names)
    unknown = [m for m in config.models if m not in known]
    if unknown:
        raise EvalprismError(
            f"{source}: models: {', '.join(unknown)} not in the P2L model's list "
            f"({', '.join(list(model_names)[:8])}{', ...' if len(model_names) > 8 else ''})"
        )


def read_secrets(config: ServeConfig, environ: Mapping[str, str] | None = None, source: str = "config") -> Secrets:
    """The bearer tokens and upstream keys from the environment; an unset variable is an error."""
    env = os.environ if environ is None else environ
    missing = [v for v in config.api_keys_env if not env.get(v)]
    missing += [m.api_key_env for m in config.models.values() if m.api_key_env and not env.get(m.api_key_env)]
    if missing:
        raise EvalprismError(
            f"{source}: environment variable(s) {', '.join(sorted(set(missing)))} named in the "
            "config are not set (keys are read from the environment, never from the file)"
        )
    return Secrets(
        tuple(env[v] for v in config.api_keys_env),
        {name: env[m.api_key_env] if m.api_key_env else None for name, m in config.models.items()},
    )
