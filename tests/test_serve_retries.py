"""Retries that compose (evalprism.serve.retries): the official openai SDK at its default
``max_retries=2`` against the service in-process, over real HTTP, with fake upstreams that fail, hang
or rate-limit. The router's exhausted failover says ``x-should-retry: false``, so one SDK call is one
decision and circuits open after ``breaker_failures`` calls, not sooner; a retry the SDK does make is
recorded as a retry of its call (``client_retry``), not as a new one.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import HANG_LIMIT_S
from serve_harness import (
    CLIENT_TIMEOUT_S,
    MODELS,
    ORDER,
    FakeUpstreams,
    InProcessService,
    constant_service,
    health,
    metric_values,
    user,
)

openai = pytest.importorskip("openai", reason="the openai SDK (dev extra) is not installed")


def lines_of(svc: InProcessService, request_id: str, count: int) -> list[dict[str, Any]]:
    """The decision-log lines of ``request_id`` once there are ``count`` of them (a client that left is
    logged when the service notices)."""
    deadline = time.monotonic() + HANG_LIMIT_S
    while True:
        found = [r for r in svc.log_lines() if r.get("request_id") == request_id]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.02)


@pytest.mark.parametrize("stream", [False, True])
def test_one_sdk_call_against_failing_upstreams_is_one_decision(
    fake: FakeUpstreams, tmp_path: Path, stream: bool
) -> None:
    """Every candidate answers 500. Each SDK call (default max_retries=2), streamed or not, gets one 502
    with x-should-retry: false and raises at once: one decision-log line, one attempt per candidate, and
    the circuits open at the third call (breaker_failures: 3), not at the first as three retried calls did."""
    for name in ORDER:
        fake.behaviour[name] = "status:500"
    with constant_service(fake, tmp_path) as svc:
        client = openai.OpenAI(base_url=svc.url + "/v1", api_key="unused", timeout=CLIENT_TIMEOUT_S)
        assert client.max_retries == 2  # the SDK's default, as a new user has it
        for call in (1, 2, 3):
            with pytest.raises(openai.InternalServerError) as failed:
                client.chat.completions.create(model="evalprism-router", messages=user(f"call {call}"), stream=stream)
            assert failed.value.status_code == 502
            assert failed.value.response.headers["x-should-retry"] == "false"
            assert len(svc.log_lines()) == call
            assert [fake.arrivals(name) for name in ORDER] == [call] * 3
            states = {name: u["state"] for name, u in health(svc)["upstreams"].items()}
            assert states == {name: "open" if call == 3 and name in ORDER else "closed" for name in MODELS}
        assert all("client_retry" not in line and line["outcome"] == "upstream_failed" for line in svc.log_lines())
        assert metric_values(svc, "evalprism_client_retries_total") == {}


def test_an_sdk_retry_is_recorded_as_a_retry_of_its_call(fake: FakeUpstreams, tmp_path: Path) -> None:
    """The upstream hangs and the SDK times out (0.5 s), which it retries twice: three requests of one
    call, each logged as client_left, the second and third with client_retry 1 and 2, and counted in
    evalprism_client_retries_total; no circuit counts any of them."""
    fake.behaviour["alpha"] = "hang"
    with constant_service(fake, tmp_path) as svc:
        client = openai.OpenAI(base_url=svc.url + "/v1", api_key="unused", timeout=0.5)
        with pytest.raises(openai.APITimeoutError):
            client.chat.completions.create(model="alpha", messages=user("hi"), extra_headers={"x-request-id": "call-1"})
        lines = lines_of(svc, "call-1", 3)
        assert [line.get("client_retry") for line in lines] == [None, 1, 2]
        assert {line["outcome"] for line in lines} == {"client_left"}
        assert metric_values(svc, "evalprism_client_retries_total") == {'endpoint="/v1/chat/completions"': 2.0}
        assert health(svc)["upstreams"]["alpha"]["consecutive_failures"] == 0


@pytest.mark.parametrize("sent,logged", [("1", 1), ("2", 2), ("0", None), ("x", None), ("99999", None)])
def test_the_retry_count_header_marks_a_route_line(
    fake: FakeUpstreams, tmp_path: Path, sent: str, logged: int | None
) -> None:
    """x-stainless-retry-count of 1 or more marks the line as that retry; 0 (a first try) or a value no
    SDK sends marks nothing."""
    with constant_service(fake, tmp_path) as svc:
        answer = httpx.post(
            svc.url + "/v1/route",
            json={"messages": user("hi")},
            headers={"x-stainless-retry-count": sent},
            timeout=CLIENT_TIMEOUT_S,
        )
        assert answer.status_code == 200
        assert svc.log_line(answer.headers["x-request-id"]).get("client_retry") == logged
