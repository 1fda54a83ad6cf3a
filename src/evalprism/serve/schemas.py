"""Request and response bodies of the router service (they are also its published OpenAPI schema).

Requests are strict: an unknown field is a 422 with its name, not silently ignored, so a typo in
``budegt`` cannot route without a budget. The chat request accepts the OpenAI Chat Completions
parameters (forwarded to the upstream unchanged) plus one extension, ``budget``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from evalprism.io.battles import content_text, user_turns


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ChatMessage(_Strict):
    """One OpenAI chat message."""

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    function_call: dict[str, Any] | None = None
    refusal: str | None = None
    audio: dict[str, Any] | None = None


Messages = list[ChatMessage]


def routing_prompt(messages: Messages) -> str:
    """The text P2L scores: the conversation's user turns, as in training (FastChat's convention)."""
    return user_turns([{"role": m.role, "content": content_text(m.content)} for m in messages]).strip()


class ChatCompletionRequest(_Strict):
    """OpenAI Chat Completions request; ``model`` is the router's name (or absent) to route, or a
    candidate's name to bypass routing. ``budget`` (an evalprism extension) bounds this prompt's
    expected cost; default: the config's budget."""

    messages: Messages = Field(min_length=1)
    model: str | None = None
    stream: bool = False
    budget: float | None = Field(None, ge=0)
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
        """The request as an upstream receives it (its ``model`` is set per upstream): the fields
        the client set, without evalprism's ``budget``."""
        body = self.model_dump(mode="json", exclude_unset=True, exclude={"budget", "model"})
        body["messages"] = [m.model_dump(mode="json", exclude_none=True) for m in self.messages]
        return body


class RouteRequest(_Strict):
    """A conversation to route; ``budget`` overrides the config's default cost bound."""

    messages: Messages = Field(min_length=1)
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


class LeaderboardRequest(_Strict):
    """One prompt or conversation, or a list of them (``prompt`` or ``messages``, not both)."""

    prompt: str | list[str] | None = Field(None, description="prompt text, or a list of prompts")
    messages: Messages | list[Messages] | None = Field(None, description="a conversation, or a list of them")
    aggregate: Literal["bt", "mean"] = Field("bt", description="eq. (3) BT fit to the soft labels, or the mean")


class PromptLeaderboard(BaseModel):
    prompt_sha256: str
    coefs: list[float] = Field(description="one coefficient per model, in the order of `models`")
    extra: float | None = Field(None, description="η (rk) or λ (grk) for this prompt")


class LeaderboardResponse(BaseModel):
    models: list[str]
    loss: str
    leaderboards: list[PromptLeaderboard]
    aggregate: list[float] | None = Field(None, description="the prompt set's leaderboard (lists only)")
    ranking: list[str] = Field(description="models best first: by the aggregate for a list, else by the prompt's coefs")


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    owned_by: str
    cost: float | None = None


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class Health(BaseModel):
    status: Literal["ok"] = "ok"
    models: int
    precision: str = Field(description="the P2L backbone's inference dtype")
    runtime: str = Field(description="what runs the P2L backbone (torch or openvino)")
    batches: int
    prompts: int
    decisions: int
