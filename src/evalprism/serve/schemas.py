"""Request and response bodies of the router service (they are also its published OpenAPI schema).

Every request body passes one check of its JSON values before anything else (:func:`check_values`):
a string that is not valid Unicode (a lone UTF-16 surrogate, as ``JSON.stringify`` writes for a string
cut inside an emoji) is a 400, and a number that is not finite (``Infinity``, ``NaN``, ``1e999``) a 422,
wherever they stand, so neither reaches the model, the upstream or the decision log.

The evalprism endpoints (``/v1/route``, ``/v1/leaderboard``) are strict: an unknown field is a 422
with its name. The chat request follows the OpenAI SDKs instead: parameters it does not declare are
passed to the upstream unchanged (an SDK release that adds one must not break its callers), except
near misses of evalprism's own extension fields (``budegt``), which are refused so that a typo cannot
route without a budget. Messages follow the same rule on every endpoint: a message may carry keys
beyond the ones declared here (``annotations`` of every assistant message the OpenAI SDK returns,
vLLM's and DeepSeek's ``reasoning_content``, Anthropic's ``cache_control`` through LiteLLM), passed to
the upstream as sent, so that a client's multi-turn and tool loop can append the SDK's own message
objects (evalprism reads no field of its own inside a message, so there is no near miss to refuse
there). Content
parts are validated by type (text, image_url, input_audio, file, refusal) and their required keys; a
part may carry keys beyond those (passed on).
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Iterable
from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from evalprism.vocabularies import OutcomeModelName

#: evalprism's extension fields of the chat request; an unknown field this close to one is a typo
EXTENSION_FIELDS = ("budget",)
NEAR_MISS_CUTOFF = 0.75  # difflib ratio: budegt, bugdet, buget, Budget are refused; verbosity, audio pass
#: the status of each error this module raises (the app's validation handler answers with it)
ERROR_STATUS = {"invalid_text": 400, "non_finite_number": 422, "near_miss": 422}
_SURROGATE = re.compile("[\ud800-\udfff]")  # in a decoded str, only a lone surrogate can be in this range


def check_values(value: Any, path: str = "") -> None:
    """Refuse a JSON value holding a string that is not valid Unicode or a number that is not finite
    (raised as a pydantic error of a type in :data:`ERROR_STATUS`, with the value's path as ``param``)."""
    if isinstance(value, str):
        bad = _SURROGATE.search(value)
        if bad is not None:
            raise PydanticCustomError(
                "invalid_text",
                "{param}: not valid Unicode: a lone UTF-16 surrogate {code} at character {at} "
                "(a string cut inside a character?); send UTF-8 text",
                {"param": path or "body", "code": f"U+{ord(bad.group()):04X}", "at": bad.start()},
            )
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise PydanticCustomError(
                "non_finite_number",
                "{param}: {value} is not a finite number",
                {"param": path or "body", "value": str(value)},
            )
    elif isinstance(value, dict):
        for key, item in value.items():
            check_values(key, path)
            check_values(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            check_values(item, f"{path}.{i}" if path else str(i))


class _Strict(BaseModel):
    # strict: values of the JSON types the schema says (0 is not a boolean, "1" not a number); ints are still floats
    model_config = ConfigDict(extra="forbid", strict=True)


class ErrorDetail(BaseModel):
    message: str
    type: str = Field(description="invalid_request_error, authentication_error, rate_limit_error, upstream_error, ...")
    param: str | None = Field(description="the request field at fault, when there is one")
    code: str | None = Field(description="a machine-readable code (invalid_api_key, model_not_found, ...) or null")


class ErrorBody(BaseModel):
    """Every error the service sends on the OpenAI endpoints, in OpenAI's shape (``evalprism``: the
    attempts of a request no upstream answered)."""

    error: ErrorDetail
    evalprism: dict[str, Any] | None = None


class AnthropicErrorDetail(BaseModel):
    type: str = Field(description="invalid_request_error, authentication_error, not_found_error, api_error, ...")
    message: str


class AnthropicErrorBody(BaseModel):
    """Every error the service sends on ``/v1/messages``, in Anthropic's shape."""

    type: Literal["error"]
    error: AnthropicErrorDetail
    evalprism: dict[str, Any] | None = None


def error_content(
    message: str, kind: str = "invalid_request_error", param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """The JSON of an error as OpenAI sends it: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


class CheckedBody(BaseModel):
    """A request body: its raw JSON values pass :func:`check_values` before the fields are validated."""

    model_config = ConfigDict(strict=True)

    @model_validator(mode="before")
    @classmethod
    def _values(cls, data: Any) -> Any:
        check_values(data)
        return data


class _Part(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)  # keys a newer API adds to a part pass through


class TextPart(_Part):
    type: Literal["text"]
    text: str


class ImageURL(_Part):
    url: str
    detail: str | None = None


class ImagePart(_Part):
    type: Literal["image_url"]
    image_url: ImageURL


class InputAudio(_Part):
    data: str
    format: str


class AudioPart(_Part):
    type: Literal["input_audio"]
    input_audio: InputAudio


class FilePart(_Part):
    type: Literal["file"]
    file: dict[str, Any]


class RefusalPart(_Part):
    type: Literal["refusal"]
    refusal: str


#: the OpenAI content parts by their ``type``: what a part of each type must hold
PART_TYPES: dict[str, type[_Part]] = {
    "text": TextPart,
    "image_url": ImagePart,
    "input_audio": AudioPart,
    "file": FilePart,
    "refusal": RefusalPart,
}


def check_parts(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each content part must name a known ``type`` and hold that type's required keys (kept as sent,
    extra keys included, for the upstream)."""
    for i, part in enumerate(parts):
        kind = part.get("type")
        if not isinstance(kind, str) or kind not in PART_TYPES:
            got = "no 'type'" if kind is None else f"type {json.dumps(kind)}"
            raise PydanticCustomError(
                "invalid_part",
                "part {i} has {got}: expected one of {types}",
                {"i": i, "got": got, "types": ", ".join(PART_TYPES)},
            )
        try:
            PART_TYPES[kind].model_validate(part)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise PydanticCustomError(
                "invalid_part",
                "part {i} ({kind}): {where}: {msg}",
                {"i": i, "kind": kind, "where": where, "msg": first["msg"]},
            ) from None
    return parts


# --- the published JSON schema says what the validators check, as far as JSON Schema can -------------
# (so that a client generating requests from it, or a fuzzer such as schemathesis, produces requests the
# service accepts; the rules themselves stay in the validators above and in the app)

#: text with something besides whitespace in it
TEXT_SCHEMA: dict[str, Any] = {"type": "string", "pattern": "\\S"}


def _with_text(role: str) -> dict[str, Any]:
    """A message of ``role`` holding text."""
    text_part = {
        "type": "object",
        "required": ["type", "text"],
        "properties": {"type": {"const": "text"}, "text": TEXT_SCHEMA},
    }
    return {
        "type": "object",
        "required": ["role", "content"],
        "properties": {
            "role": {"const": role},
            "content": {"anyOf": [TEXT_SCHEMA, {"type": "array", "contains": text_part}]},
        },
    }


#: a message the router can route on (:meth:`evalprism.serve.extraction.Reading.routed_on` is not empty):
#: a user turn with text, or a tool result with text (a request that holds no human text is routed on it)
_ROUTABLE = {"anyOf": [_with_text("user"), _with_text("tool")]}
MAX_PROMPTS_PER_REQUEST = 1024


def _inline(schema: Any, defs: dict[str, Any]) -> Any:
    """``schema`` with its ``$ref``s to ``defs`` replaced by their targets (and no discriminator, whose
    mapping would point into ``defs``)."""
    if isinstance(schema, dict):
        if "$ref" in schema:
            return _inline(defs[schema["$ref"].rsplit("/", 1)[1]], defs)
        return {k: _inline(v, defs) for k, v in schema.items() if k not in ("$defs", "discriminator")}
    if isinstance(schema, list):
        return [_inline(v, defs) for v in schema]
    return schema


def _parts_schema() -> dict[str, Any]:
    """The JSON schema of a list of content parts, from the part models of :data:`PART_TYPES`."""
    # built at run time from the registry: not a static type (UP007's X | Y cannot take a tuple)
    union = Annotated[Union[tuple(PART_TYPES.values())], Field(discriminator="type")]  # type: ignore[valid-type]  # noqa: UP007
    schema = TypeAdapter(list[union]).json_schema()  # type: ignore[valid-type]
    return _inline(schema, schema.get("$defs", {}))


def _routable(schema: dict[str, Any]) -> None:
    """A conversation to route: at least one message, one of them a user turn or a tool result with text."""
    schema.update(minItems=1, contains=_ROUTABLE)


def _conversation(schema: dict[str, Any]) -> None:
    """A conversation: at least one message, one of them a user turn with text."""
    schema.update(minItems=1, contains=_with_text("user"))


def _leaderboard_prompts(schema: dict[str, Any]) -> None:
    """``prompt`` / ``messages`` of a leaderboard request: one, or a non-empty list of at most
    :data:`MAX_PROMPTS_PER_REQUEST`, each with text; the null branch stays as it is."""
    single, many, _ = schema["anyOf"]
    if single.get("type") == "string":
        single.update(TEXT_SCHEMA)
        many["items"].update(TEXT_SCHEMA)
    else:
        _conversation(single)
        _conversation(many["items"])
    many.update(minItems=1, maxItems=MAX_PROMPTS_PER_REQUEST)


def refuse_near_misses(keys: Iterable[str]) -> None:
    """Refuse an undeclared key that is a near miss of one of evalprism's extension fields (a typo
    would silently drop the field); every other undeclared key passes."""
    for key in keys:
        close = difflib.get_close_matches(key.lower(), EXTENSION_FIELDS, n=1, cutoff=NEAR_MISS_CUTOFF)
        if close:
            raise PydanticCustomError(
                "near_miss",
                "unknown field '{param}': did you mean '{field}'? (unknown OpenAI parameters are "
                "passed to the upstream, but not near misses of evalprism's own fields)",
                {"param": key, "field": close[0]},
            )


class ChatMessage(BaseModel):
    """One OpenAI chat message; keys beyond the declared ones are kept and passed to the upstream."""

    model_config = ConfigDict(extra="allow", strict=True)

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | Annotated[list[dict[str, Any]], WithJsonSchema(_parts_schema())] | None = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    function_call: dict[str, Any] | None = None
    refusal: str | None = None
    audio: dict[str, Any] | None = None

    @field_validator("content")
    @classmethod
    def _parts(cls, content: str | list[dict[str, Any]] | None) -> str | list[dict[str, Any]] | None:
        return check_parts(content) if isinstance(content, list) else content

    def upstream(self) -> dict[str, Any]:
        """The message as the upstream receives it: the declared fields the client set to a value,
        and every undeclared key exactly as sent (a ``null`` included)."""
        extra = self.model_extra or {}
        declared = self.model_dump(mode="json", exclude_none=True, exclude=set(extra))
        return {**declared, **extra}


Messages = list[ChatMessage]


class ApiRequest(CheckedBody):
    """A request body of one of the APIs the router forwards (chat, responses, messages): ``model`` is
    the router's name (or absent) to route, or a candidate's name to bypass routing; ``budget`` (an
    evalprism extension) bounds this prompt's expected cost (default: the config's budget). Parameters
    not declared are passed to the upstream, unless they are near misses of an extension field."""

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    stream: bool = False
    budget: float | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _no_near_misses(self) -> ApiRequest:
        refuse_near_misses(self.model_extra or {})
        return self

    def upstream_body(self) -> dict[str, Any]:
        """The request as an upstream receives it (its ``model`` is set per upstream): the fields the
        client set, without evalprism's ``budget``."""
        return self.model_dump(mode="json", exclude_unset=True, exclude={"budget", "model"})

    def user_id(self) -> str | None:
        """The body's end-user id (``user``, where the API has one)."""
        user = getattr(self, "user", None)
        return user if isinstance(user, str) else None


class ChatCompletionRequest(ApiRequest):
    """OpenAI Chat Completions request (see :class:`ApiRequest` for ``model`` and ``budget``)."""

    messages: Messages = Field(min_length=1, json_schema_extra=_routable)
    stream_options: dict[str, Any] | None = None
    temperature: float | None = None
    top_p: float | None = None
    n: int | None = None
    stop: str | list[str] | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    logit_bias: dict[str, float] | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    user: str | None = None
    seed: int | None = None
    response_format: dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    metadata: dict[str, str] | None = None
    store: bool | None = None
    service_tier: str | None = None
    reasoning_effort: str | None = None
    modalities: list[str] | None = None
    prediction: dict[str, Any] | None = None
    web_search_options: dict[str, Any] | None = None

    def upstream_body(self) -> dict[str, Any]:
        body = super().upstream_body()
        body["messages"] = [m.upstream() for m in self.messages]
        return body


class RouteRequest(CheckedBody, _Strict):
    """A conversation to route; ``budget`` overrides the config's default cost bound."""

    messages: Messages = Field(min_length=1, json_schema_extra=_routable)
    budget: float | None = Field(None, ge=0)


class RouteResponse(BaseModel):
    """The routing decision for one prompt (seed 002, Theorem 1 and Algorithm 1)."""

    model: str = Field(description="the candidate drawn from the routing distribution")
    distribution: dict[str, float] = Field(description="the optimal routing distribution (at most two models > 0)")
    expected_winrate: float = Field(description="the router's expected win rate against the opponent mix")
    router_coef: float = Field(description="the router's own BT coefficient on this prompt's leaderboard (Algorithm 1)")
    expected_cost: float
    budget: float | None
    coefs: dict[str, float] = Field(description="this prompt's P2L coefficients of the candidates")
    prompt_sha256: str


class LeaderboardRequest(CheckedBody, _Strict):
    """One prompt or conversation, or a list of them (``prompt`` or ``messages``, not both)."""

    model_config = ConfigDict(
        json_schema_extra={
            "oneOf": [
                {"required": [key], "properties": {key: {"not": {"type": "null"}}, other: {"type": "null"}}}
                for key, other in (("prompt", "messages"), ("messages", "prompt"))
            ]
        }
    )

    prompt: str | list[str] | None = Field(
        None, description="prompt text, or a list of prompts", json_schema_extra=_leaderboard_prompts
    )
    messages: Messages | list[Messages] | None = Field(
        None, description="a conversation, or a list of them", json_schema_extra=_leaderboard_prompts
    )
    aggregate: Literal["bt", "mean"] = Field("bt", description="eq. (3) BT fit to the soft labels, or the mean")


class PromptLeaderboard(BaseModel):
    prompt_sha256: str
    coefs: list[float] = Field(description="one coefficient per model, in the order of `models`")
    extra: float | None = Field(None, description="η (rk) or λ (grk) for this prompt")


class LeaderboardResponse(BaseModel):
    models: list[str]
    outcome_model: OutcomeModelName
    leaderboards: list[PromptLeaderboard]
    aggregate: list[float] | None = Field(None, description="the prompt set's leaderboard (lists only)")
    ranking: list[str] = Field(description="models best first: by the aggregate for a list, else by the prompt's coefs")


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = Field(description="Unix time the service started (OpenAI: when the model was created)")
    owned_by: str
    cost: float | None = None


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class UpstreamHealth(BaseModel):
    """One upstream's circuit (:mod:`evalprism.serve.health`)."""

    state: Literal["closed", "open", "half_open"]
    consecutive_failures: int
    retry_in_s: float | None = Field(description="while open: seconds until it is tried again")
    last_error: str | None
    starved_attempts: int = Field(
        description="its timeouts explained by the router's own event-loop lag, not counted against it"
    )


class DecisionLogHealth(BaseModel):
    """The decision log's state (:mod:`evalprism.serve.decisions`)."""

    path: str
    writable: bool = Field(description="false: the last write failed; routing and chat answer 503")
    error: str | None = Field(description="why writing fails (e.g. the disk is full)")
    unwritten: int = Field(description="decisions kept in memory until the log can be written again")
    dropped: int = Field(description="decisions beyond the kept ones, lost")


class EventLoopHealth(BaseModel):
    """The router's own event loop (:mod:`evalprism.serve.loop_lag`)."""

    lag_ms: float = Field(description="the worst lag of the last 10 s: how late the loop ran a timer")
    starved_attempts: int = Field(description="upstream timeouts the router's own lag explained (all upstreams)")


#: what /health says of the service as a whole
HealthStatus = Literal["ok", "degraded", "unavailable"]


class Health(BaseModel):
    status: HealthStatus = Field(
        description="ok; degraded: some upstream's circuit is open or the decision log cannot be written; "
        "unavailable: every upstream's circuit is open, or the service is shutting down"
    )
    reasons: list[str] = Field(description="why the status is not ok, one line per cause")
    models: int
    precision: str = Field(description="the P2L backbone's inference dtype")
    runtime: str = Field(description="what runs the P2L backbone (torch or openvino)")
    batches: int
    prompts: int
    decisions: int
    decision_log: DecisionLogHealth
    event_loop: EventLoopHealth
    upstreams: dict[str, UpstreamHealth]
