"""Prometheus metrics of the router service (``GET /metrics``, behind the same bearer auth as the API).

One :class:`Metrics` per app, on its own registry (two apps in one process, as in tests, do not
share counters). Labels are bounded: endpoints are the service's routes (anything else is
``other``), models and upstreams are the configured candidates.

- ``evalprism_requests_total{endpoint,status}``, ``evalprism_request_duration_seconds{endpoint}``
  (until the last byte, streams included);
- ``evalprism_batch_size``: prompts per P2L forward pass;
- ``evalprism_routing_decisions_total{model}``: the candidate each routing decision chose;
- ``evalprism_placements_total{placement}``: forwarded requests by how their candidate was placed:
  ``routed`` (P2L decided), ``sticky`` (the conversation kept its model), ``named`` (the client named it);
- ``evalprism_upstream_attempts_total{upstream,result}`` (the attempt's outcome:
  :data:`~evalprism.serve.upstream.AttemptOutcome`) and ``evalprism_upstream_errors_total{upstream}``
  (the ``failed`` ones);
- ``evalprism_realised_cost_total{model}``: usage x per-token prices, where the config gives prices;
- ``evalprism_client_retries_total{endpoint}``: requests that were an SDK's retry of an earlier call
  (:mod:`~evalprism.serve.retries`): the user calls are the requests less these;
- ``evalprism_starved_attempts_total{upstream}``: upstream timeouts the router's own starvation explains,
  not counted against the upstream (:mod:`~evalprism.serve.loop_lag`), and
  ``evalprism_event_loop_lag_seconds``: how late the event loop ran its timer, sampled periodically.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest

#: the routes whose paths are endpoint labels as they are
ENDPOINTS = frozenset(
    {
        "/health",
        "/metrics",
        "/v1/models",
        "/v1/leaderboard",
        "/v1/route",
        "/v1/chat/completions",
        "/v1/responses",
        "/v1/messages",
        "/openapi.json",
        "/docs",
    }
)
if TYPE_CHECKING:
    from evalprism.serve.upstream import Attempt

CONTENT_TYPE = CONTENT_TYPE_LATEST
#: most (path, status) pairs whose metric children are kept at hand
_MAX_CACHED = 256


def endpoint_label(path: str) -> str:
    """The bounded endpoint label of a request path."""
    if path in ENDPOINTS:
        return path
    return "/v1/models/{id}" if path.startswith("/v1/models/") else "other"


class Metrics:
    """The service's counters and histograms."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("evalprism_requests", "HTTP requests answered", ["endpoint", "status"], registry=r)
        self.duration = Histogram(
            "evalprism_request_duration_seconds",
            "time to the last byte of the response",
            ["endpoint"],
            registry=r,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
        )
        self.batch_size = Histogram(
            "evalprism_batch_size",
            "prompts per P2L forward pass",
            registry=r,
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
        )
        self.decisions = Counter(
            "evalprism_routing_decisions", "routing decisions by chosen model", ["model"], registry=r
        )
        self.placements = Counter(
            "evalprism_placements", "forwarded requests by how their candidate was placed", ["placement"], registry=r
        )
        self.attempts = Counter(
            "evalprism_upstream_attempts", "upstream attempts by result", ["upstream", "result"], registry=r
        )
        self.upstream_errors = Counter(
            "evalprism_upstream_errors", "failed upstream attempts (429 excluded)", ["upstream"], registry=r
        )
        self.cost = Counter("evalprism_realised_cost", "usage x per-token prices, by model", ["model"], registry=r)
        self.client_retries = Counter(
            "evalprism_client_retries", "requests that were an SDK's retry of an earlier call", ["endpoint"], registry=r
        )
        self.starved = Counter(
            "evalprism_starved_attempts",
            "upstream timeouts explained by the router's own event-loop lag (not counted against the upstream)",
            ["upstream"],
            registry=r,
        )
        self.loop_lag = Histogram(
            "evalprism_event_loop_lag_seconds",
            "how late the event loop ran a periodic timer",
            registry=r,
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self._children: dict[tuple[str, int], tuple[Counter, Histogram]] = {}

    def observe_request(self, path: str, status: int, seconds: float) -> None:
        children = self._children.get((path, status))
        if children is None:  # labels() looks up its child under a lock: once per (path, status) here
            endpoint = endpoint_label(path)
            children = self.requests.labels(endpoint, str(status)), self.duration.labels(endpoint)
            if len(self._children) < _MAX_CACHED:  # paths are the client's: bounded
                self._children[(path, status)] = children
        children[0].inc()
        children[1].observe(seconds)

    def observe_attempts(self, attempts: Iterable[Attempt]) -> None:
        """Count upstream attempts by upstream and result (the attempt's outcome); only ``failed`` ones, the
        upstream's own fault, are upstream errors."""
        for a in attempts:
            if a.outcome == "failed":
                self.upstream_errors.labels(a.model).inc()
            elif a.outcome == "starved":
                self.starved.labels(a.model).inc()
            self.attempts.labels(a.model, a.outcome).inc()

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)
