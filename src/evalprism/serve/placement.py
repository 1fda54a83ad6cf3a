"""Which candidates a forwarded request goes to, in order, and why: named, pinned, kept, or routed.

One decision for every API (:func:`place`):

1. a request naming a candidate goes to it alone (it must serve the request's API);
2. a ``previous_response_id`` (or a Messages thread's ``previous_message_id``) the router has seen pins
   the upstream that issued it, alone (no other upstream holds that answer);
3. a conversation the router has seen (:mod:`~evalprism.serve.affinity`) stays on its model
   (``affinity: sticky``, the failover order it was routed with behind it) unless that model's circuit
   admits no request now (``move_reason: unavailable``), the request's budget is below the model's cost
   and below the budget the conversation ran under (``over_budget``), or, with ``switch_margin``
   configured, the model P2L draws for the human's new turn is predicted better by more than the margin
   (``gain``; never while a tool call/result exchange is open);
4. anything else is routed by P2L on the routing prompt, among the candidates serving the API
   (``affinity: routed``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalprism.serve.affinity import PINNED_BY_ID, ConversationKeys, Kept, MoveReason, keys_of
from evalprism.serve.apis import Api
from evalprism.serve.conversation import Conversation
from evalprism.serve.decisions import prompt_hash
from evalprism.serve.extraction import Reading
from evalprism.serve.router import Decision, Job
from evalprism.serve.schemas import ApiRequest
from evalprism.serve.service import RequestError, Service


@dataclass
class Placement:
    """Where a request goes: ``order``, the candidates to try in turn; ``decided``, the decision as the
    response's ``evalprism`` field and the decision log give it; ``keys``, the conversation's keys;
    ``budget``, the request's."""

    order: list[str]
    decided: dict[str, Any]
    keys: ConversationKeys
    budget: float | None = None

    def kept(self, model: str) -> Kept:
        """What the affinity store keeps once ``model`` answered: it, and the others of the order behind it."""
        return Kept(model, tuple(m for m in self.order if m != model), self.budget)


async def place(s: Service, api: Api, req: ApiRequest, conversation: Conversation, reading: Reading) -> Placement:
    """Where ``req`` (read as ``conversation``, ``reading``) goes, by the rules of the module docstring."""
    prompt = s.prompt_of(reading, api.param)
    keys = keys_of(conversation) if s.config.affinity.enabled else ConversationKeys((), ())
    digest = {"prompt_sha256": prompt_hash(prompt)}
    if req.model not in (None, s.config.router_name):
        return Placement([_named(s, api, req.model)], {"routed": False, "decided": req.model, **digest}, keys)
    if api.name not in s.core.pools:
        raise RequestError(
            404,
            f"no candidate serves the {api.name} API ({api.path}): list it in a model's 'apis' in the config",
            "model",
            "model_not_found",
        )
    budget = s.budget_of(req.budget, api.name)
    found = s.affinity.find(keys.lookup)
    moved: dict[str, Any] = {}
    if found is not None and found[1].model in s.core.pools[api.name].candidates:
        how, kept = found
        sticky = {"routed": True, "affinity": "sticky", "continued_by": how, "decided": kept.model}
        if how in PINNED_BY_ID:
            return Placement([kept.model], {**sticky, "budget": budget, **digest}, keys, budget)
        reason, decision = await _keep_or_move(
            s, api, kept, budget, conversation.in_tool_exchange(reading.last_human), prompt
        )
        fields = {} if decision is None else s.decision_fields(decision, budget)
        if reason is None:
            order = [kept.model, *(m for m in kept.fallbacks if m in s.core.pools[api.name].candidates)]
            return Placement(order, {**sticky, "budget": budget, **fields, **digest}, keys, budget)
        moved = {"continued_by": how, "moved_from": kept.model, "move_reason": reason}
        if decision is not None:
            return _routed(s, decision, budget, keys, {**moved, **digest})
    decision = await _decide(s, api, prompt, budget)
    return _routed(s, decision, budget, keys, {**moved, **digest})


def _named(s: Service, api: Api, model: str) -> str:
    """The candidate a request names: one of the config's, serving the request's API (404 otherwise)."""
    if model in s.config.models and api.name in s.config.models[model].apis:
        return model
    served = s.config.serving(api.name)
    why = "does not serve" if model in s.config.models else "is not served here"
    raise RequestError(
        404,
        f"model {model!r} {why} the {api.name} API: use {s.config.router_name!r} (routed) "
        f"or one of {', '.join(served) or '(none: no candidate lists it in apis)'}",
        "model",
        "model_not_found",
    )


async def _decide(s: Service, api: Api, prompt: str, budget: float | None) -> Decision:
    """P2L's routing decision on ``prompt`` among the candidates serving ``api`` (counted in /metrics)."""
    decision = await s.batcher.submit(Job(s.check_length(prompt, api.param), budget, pool=api.name))
    assert decision.chosen is not None  # a routed job's decision names its model
    s.metrics.decisions.labels(decision.chosen).inc()
    return decision


def _routed(
    s: Service, decision: Decision, budget: float | None, keys: ConversationKeys, extra: dict[str, Any]
) -> Placement:
    """A request P2L routed: the model drawn, then the fallbacks."""
    assert decision.chosen is not None
    decided = {"routed": True, "affinity": "routed", "decided": decision.chosen, **s.decision_fields(decision, budget)}
    return Placement([decision.chosen, *decision.fallbacks], {**decided, **extra}, keys, budget)


async def _keep_or_move(
    s: Service, api: Api, kept: Kept, budget: float | None, in_exchange: bool, prompt: str
) -> tuple[MoveReason | None, Decision | None]:
    """Whether a known conversation leaves its model (the reason, None: it stays), and the P2L decision
    on its prompt when one was made to decide (the gain check)."""
    if not s.upstreams.health.admits(kept.model):
        return "unavailable", None
    cost = s.config.models[kept.model].cost
    if budget is not None and cost > budget and (kept.budget is None or budget < kept.budget):
        return "over_budget", None
    margin = s.config.affinity.switch_margin
    if margin is None or in_exchange or len(prompt) > s.config.max_prompt_chars:
        return None, None
    decision = await _decide(s, api, prompt, budget)
    assert decision.values is not None and decision.chosen is not None
    gain = decision.values[decision.chosen] - decision.values[kept.model]
    return ("gain" if gain > margin else None), decision
