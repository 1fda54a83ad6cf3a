"""The P2L router service over real HTTP on loopback, with a small OpenAI-compatible server standing
in for the paid upstreams (tests/serve_harness.py). Each test gets a new app in-process
(:class:`InProcessService`: its own circuits, metrics, batcher and decision log, so no test depends
on another or on their order); a few run `evalprism serve` itself in a subprocess (SIGTERM, the
CLI's decision-log and address checks, a real full disk).

The P2L model is really trained (frozen minilm, simulated battles over three topics whose
leaderboards disagree), so routing decisions are the model's; they are checked against
:func:`evalprism.p2l.route` on the same prompt's leaderboard.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pandas as pd
import pytest
from helpers import HANG_LIMIT_S, FillingDisk, route_per_prompt
from serve_harness import (
    CLIENT_TIMEOUT_S,
    ConstantBackbone,
    FakeUpstreams,
    InProcessService,
    ServiceProcess,
    running_service,
    topic_model,
    write_config,
)

from evalprism.errors import EvalprismError
from evalprism.p2l import P2LModel, TrainOptions, route, train_model
from evalprism.p2l.backbones import native_bf16
from evalprism.p2l.simulate import simulate_topic_battles
from evalprism.serve.config import load_config
from evalprism.serve.decisions import SCHEMA_VERSION, line_json, read_log

pytestmark = pytest.mark.slow  # trains a P2L model; some tests start the router service in a subprocess

COSTS = {"poet-7b": 0.2, "calc-13b": 0.4, "coder-34b": 1.0, "generalist-70b": 3.0}
KEY = "test-bearer-token"
UPSTREAM_KEY = "upstream-secret-key"
AUTH = {"authorization": f"Bearer {KEY}"}
ENV = {"SERVICE_KEY": KEY, "FAKE_UPSTREAM_KEY": UPSTREAM_KEY}
PROMPTS = [
    "Write a sonnet about the autumn sea",
    "Solve the equation 3x + 7 = 22 for x",
    "Fix the off-by-one bug in this Python loop",
    "Summarise the history of the Roman empire",
]


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return topic_model(tmp_path_factory.mktemp("p2l"))


@pytest.fixture(scope="module")
def loaded(model_dir: Path) -> P2LModel:
    """The trained model as `evalprism serve` runs it with this module's config (float32: decisions are
    compared to 1e-6; the default runtime, OpenVINO for a sentence encoder), loaded once: the apps of
    the tests share it (it holds no state of theirs), not their circuits, metrics or logs."""
    return P2LModel.load(model_dir, cache_dir=False, precision="float32", runtime="auto")


@pytest.fixture()
def service(loaded: P2LModel, fake: FakeUpstreams, tmp_path: Path) -> Iterator[InProcessService]:
    """A new service for this test only (bearer auth, budget 1, token prices for poet-7b), in-process."""
    root = tmp_path / "service"
    root.mkdir()
    config = write_config(
        root / "router.yaml",
        fake,
        COSTS,
        PRICES,
        apis=["chat", "responses", "messages"],
        budget=1.0,
        api_keys_env=["SERVICE_KEY"],
        timeout_s=UPSTREAM_TIMEOUT_S,
        breaker_cooldown_s=BREAKER_COOLDOWN_S,
        seed=0,
        precision="float32",
    )
    with InProcessService(
        loaded, config, root / "decisions.jsonl", dict.fromkeys(COSTS, UPSTREAM_KEY), api_keys=(KEY,)
    ) as svc:
        yield svc


PRICES = {"poet-7b": (0.001, 0.002)}  # per prompt / completion token
# The service's own timers, set so that no test races them on a slow machine: a "slow" upstream never
# answers (so it times out however late), while an answering one has 5 s, far beyond its answer time
# even at load 32; an opened circuit stays open for the hour a test has to observe it.
UPSTREAM_TIMEOUT_S = 5.0
BREAKER_COOLDOWN_S = 3600.0

Service = InProcessService | ServiceProcess


def post(svc: Service, path: str, body: Any, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(svc.url + path, json=body, headers=AUTH if headers is None else headers, timeout=CLIENT_TIMEOUT_S)


def test_route_equals_p2l_route_on_the_prompts_leaderboard(service: InProcessService, loaded: P2LModel) -> None:
    assert httpx.get(service.url + "/health", timeout=CLIENT_TIMEOUT_S).json()["runtime"] == loaded.backbone.runtime
    model = loaded  # what the service runs (openvino by default)
    names = list(COSTS)
    columns = [model.models.index(n) for n in names]
    costs = np.array([COSTS[n] for n in names])
    for prompt in PROMPTS:
        for budget in (None, 0.5, 1.0, 2.0):
            body = {"messages": user(prompt)} | ({} if budget is None else {"budget": budget})
            got = post(service, "/v1/route", body).json()
            theta = model.leaderboards([prompt])[0][columns]
            want = route(theta, costs, 1.0 if budget is None else budget, "uniform", names=names)
            np.testing.assert_allclose([got["distribution"].get(n, 0.0) for n in names], want.probs, atol=1e-6)
            assert got["expected_winrate"] == pytest.approx(want.expected_winrate, abs=1e-6)
            assert got["router_coef"] == pytest.approx(want.router_coef, abs=1e-5)
            assert got["model"] in {n for n, p in got["distribution"].items() if p > 0}
            np.testing.assert_allclose([got["coefs"][n] for n in names], theta, atol=1e-5)
            assert got["expected_cost"] <= (1.0 if budget is None else budget) + 1e-9


def test_route_sends_each_topic_to_its_planted_best_model(service: InProcessService) -> None:
    """Unconstrained (budget above every cost), each topic's prompt goes to the model the
    simulation made best on that topic."""
    picks = {p: post(service, "/v1/route", {"messages": user(p), "budget": 5.0}).json()["model"] for p in PROMPTS[:3]}
    assert picks == {PROMPTS[0]: "poet-7b", PROMPTS[1]: "calc-13b", PROMPTS[2]: "coder-34b"}


def test_chat_completion_is_routed_forwarded_and_annotated(service: InProcessService, fake: FakeUpstreams) -> None:
    before = len(fake.received)
    response = post(service, "/v1/chat/completions", {"messages": user(PROMPTS[1]), "temperature": 0.2})
    assert response.status_code == 200
    body = response.json()
    decided = body["evalprism"]["decided"]
    assert body["choices"][0]["message"]["content"] == FakeUpstreams.answer(decided)
    assert (
        body["evalprism"]["routed"] and body["evalprism"]["model"] == decided == response.headers["x-evalprism-model"]
    )
    sent = fake.received[before]
    assert sent["path_model"] == decided and sent["body"]["model"] == f"up-{decided}"
    assert sent["body"]["temperature"] == 0.2 and "budget" not in sent["body"]
    assert sent["authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert UPSTREAM_KEY not in response.text and KEY not in response.text


def test_naming_a_candidate_bypasses_routing(service: InProcessService, fake: FakeUpstreams) -> None:
    body = post(service, "/v1/chat/completions", {"model": "generalist-70b", "messages": user(PROMPTS[0])}).json()
    assert body["evalprism"] == body["evalprism"] | {"routed": False, "model": "generalist-70b"}
    assert body["choices"][0]["message"]["content"] == FakeUpstreams.answer("generalist-70b")


def test_streaming_relays_the_upstream_events(service: InProcessService, fake: FakeUpstreams) -> None:
    with httpx.stream(
        "POST",
        service.url + "/v1/chat/completions",
        headers=AUTH,
        timeout=CLIENT_TIMEOUT_S,
        json={"stream": True, "messages": user(PROMPTS[2])},
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [line[5:].strip() for line in response.iter_lines() if line.startswith("data:")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    decided = chunks[0]["evalprism"]["decided"]
    assert "".join(c["choices"][0]["delta"]["content"] for c in chunks) == FakeUpstreams.answer(decided)
    assert all("evalprism" not in c for c in chunks[1:])


@pytest.mark.parametrize("failure", ["fail", "slow"])
@pytest.mark.parametrize("stream", [False, True])
def test_failover_to_the_next_best_model(
    service: InProcessService, fake: FakeUpstreams, failure: str, stream: bool
) -> None:
    """A 500 or a timeout (the config's timeout_s is 5 s, the upstream never answers) of the chosen
    model's upstream: the answer comes from the decision's next model, and both attempts are told."""
    decision = post(service, "/v1/route", {"messages": user(PROMPTS[0]), "budget": 5.0}).json()
    chosen = decision["model"]
    coefs = decision["coefs"]
    fake.behaviour[chosen] = failure
    body = {"messages": user(PROMPTS[0]), "budget": 5.0, "stream": stream}
    if stream:
        with httpx.stream(
            "POST", service.url + "/v1/chat/completions", headers=AUTH, json=body, timeout=CLIENT_TIMEOUT_S
        ) as r:
            first = json.loads(next(line for line in r.iter_lines() if line.startswith("data:"))[5:])
        annotation = first["evalprism"]
    else:
        annotation = post(service, "/v1/chat/completions", body).json()["evalprism"]
    next_best = max((n for n in COSTS if n != chosen), key=lambda n: coefs[n])  # uniform q: order of θ
    assert annotation["decided"] == chosen and annotation["model"] == next_best
    assert [a["model"] for a in annotation["attempts"]] == [chosen, next_best]
    assert annotation["attempts"][0]["error"] and annotation["attempts"][1]["status"] == 200


def test_every_upstream_failing_is_a_502_not_a_500(service: InProcessService, fake: FakeUpstreams) -> None:
    """max_attempts (default 3) of the four candidates are tried, in the decision's order; the 502 says
    why for each, in the structured `evalprism.attempts` of a successful answer."""
    for name in COSTS:
        fake.behaviour[name] = "fail"
    response = post(service, "/v1/chat/completions", {"messages": user(PROMPTS[3])})
    assert response.status_code == 502
    body = response.json()
    assert "every upstream attempt failed" in body["error"]["message"]
    assert body["error"]["code"] == "upstream_error" and body["error"]["param"] is None
    attempts = body["evalprism"]["attempts"]
    assert [a["status"] for a in attempts] == [500, 500, 500]
    assert attempts[0]["model"] == body["evalprism"]["decided"] and len({a["model"] for a in attempts}) == 3


def failover_order(svc: Service, prompt: str) -> list[str]:
    """The candidates in the order a chat on ``prompt`` (budget 5: above every cost) tries them."""
    coefs = post(svc, "/v1/route", {"messages": user(prompt), "budget": 5.0}).json()["coefs"]
    return sorted(COSTS, key=lambda n: -coefs[n])  # unconstrained, uniform opponent: the order of θ


def test_a_429_then_a_529_fail_over_to_the_third_candidate(service: InProcessService, fake: FakeUpstreams) -> None:
    order = failover_order(service, PROMPTS[0])
    fake.behaviour |= {order[0]: "rate_limited", order[1]: "overloaded"}
    response = post(service, "/v1/chat/completions", {"messages": user(PROMPTS[0]), "budget": 5.0})
    assert response.status_code == 200, response.text
    annotation = response.json()["evalprism"]
    assert [(a["model"], a["status"]) for a in annotation["attempts"]] == [
        (order[0], 429),
        (order[1], 529),
        (order[2], 200),
    ]
    assert annotation["attempts"][0]["retry_after"] == float(FakeUpstreams.RETRY_AFTER[order[0]])
    assert annotation["model"] == order[2]


def test_every_attempt_rate_limited_is_a_429_with_retry_after(service: InProcessService, fake: FakeUpstreams) -> None:
    order = failover_order(service, PROMPTS[0])
    for name in COSTS:
        fake.behaviour[name] = "rate_limited"
    response = post(service, "/v1/chat/completions", {"messages": user(PROMPTS[0]), "budget": 5.0})
    assert response.status_code == 429, response.text
    assert response.headers["retry-after"] == str(min(int(FakeUpstreams.RETRY_AFTER[m]) for m in order[:3]))
    body = response.json()
    assert body["error"]["code"] == "rate_limit_exceeded"
    assert [a["model"] for a in body["evalprism"]["attempts"]] == order[:3]
    health = httpx.get(
        service.url + "/health", timeout=CLIENT_TIMEOUT_S
    ).json()  # rate limiting is no outage: no circuit opened
    assert health["status"] == "ok" and {u["state"] for u in health["upstreams"].values()} == {"closed"}


def test_a_failing_upstream_is_skipped_once_its_circuit_opens(service: InProcessService, fake: FakeUpstreams) -> None:
    """breaker_failures (default 3) consecutive failures open the circuit: /health says so, and the
    next request goes straight to the next candidate without calling the failing upstream."""
    order = failover_order(service, PROMPTS[0])
    fake.behaviour[order[0]] = "fail"
    body = {"messages": user(PROMPTS[0]), "budget": 5.0}
    for _ in range(3):
        assert post(service, "/v1/chat/completions", body).json()["evalprism"]["model"] == order[1]
    health = httpx.get(service.url + "/health", timeout=CLIENT_TIMEOUT_S).json()
    assert health["status"] == "degraded"
    assert health["upstreams"][order[0]]["state"] == "open"
    assert health["upstreams"][order[0]]["consecutive_failures"] == 3
    assert 0 < health["upstreams"][order[0]]["retry_in_s"] <= BREAKER_COOLDOWN_S
    calls = sum(r["path_model"] == order[0] for r in fake.received)
    annotation = post(service, "/v1/chat/completions", body).json()["evalprism"]
    assert sum(r["path_model"] == order[0] for r in fake.received) == calls
    assert [(a["model"], a["skipped"]) for a in annotation["attempts"]] == [(order[0], True), (order[1], False)]


def test_every_circuit_open_makes_health_unavailable(service: InProcessService, fake: FakeUpstreams) -> None:
    for name in COSTS:
        fake.behaviour[name] = "fail"
    for _ in range(3):
        for name in COSTS:
            post(service, "/v1/chat/completions", {"model": name, "messages": user("hi")})
    health = httpx.get(service.url + "/health", timeout=CLIENT_TIMEOUT_S).json()
    assert health["status"] == "unavailable"
    assert {u["state"] for u in health["upstreams"].values()} == {"open"}


def log_lines(svc: Service) -> list[dict[str, Any]]:
    """Every line of the decision log, parsed by a strict parser (Infinity and NaN are refused)."""

    def refuse(constant: str) -> None:
        raise ValueError(f"non-JSON constant {constant} in the decision log")

    text = svc.log_path.read_text(encoding="utf-8")  # type: ignore[union-attr]
    return [json.loads(line, parse_constant=refuse) for line in text.splitlines()]


def test_one_poisoned_prompt_never_fails_its_neighbours(service: InProcessService) -> None:
    """A lone UTF-16 surrogate (what JSON.stringify writes for a string cut inside an emoji) is a 400 at
    the boundary; the 15 requests sent with it, in the same micro-batch window, all get 200, every round."""
    poisoned = b'{"messages": [{"role": "user", "content": "hello \\udbed"}]}'
    headers = {**AUTH, "content-type": "application/json"}

    async def round_(k: int) -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=service.url, headers=headers, timeout=CLIENT_TIMEOUT_S) as client:
            return await asyncio.gather(
                *(
                    client.post("/v1/route", content=poisoned)
                    if i == 7
                    else client.post("/v1/route", json={"messages": user(f"{PROMPTS[i % 4]} {k}.{i}")})
                    for i in range(16)
                )
            )

    for k in range(4):
        replies = asyncio.run(round_(k))
        assert [r.status_code for i, r in enumerate(replies) if i != 7] == [200] * 15
        assert replies[7].status_code == 400
        assert "lone UTF-16 surrogate U+DBED" in replies[7].json()["error"]["message"]
    for path in ("/v1/chat/completions", "/v1/leaderboard"):
        body = poisoned if path != "/v1/leaderboard" else b'{"prompt": ["fine", "cut \\ud83d"]}'
        response = httpx.post(service.url + path, content=body, headers=headers, timeout=CLIENT_TIMEOUT_S)
        assert response.status_code == 400, response.text
        assert response.json()["error"]["param"] in ("messages.0.content", "prompt.1")


@pytest.mark.parametrize("literal", ["Infinity", "-Infinity", "NaN", "1e999"])
def test_non_finite_numbers_are_refused_and_the_log_stays_json(service: InProcessService, literal: str) -> None:
    finite = post(service, "/v1/route", {"messages": user("hi"), "budget": 2.0}, {**AUTH, "x-request-id": "finite-1"})
    assert finite.status_code == 200, finite.text
    for path in ("/v1/route", "/v1/chat/completions"):
        content = f'{{"messages": [{{"role": "user", "content": "hi"}}], "budget": {literal}}}'.encode()
        response = httpx.post(
            service.url + path,
            content=content,
            timeout=CLIENT_TIMEOUT_S,
            headers={**AUTH, "content-type": "application/json"},
        )
        assert response.status_code == 422, response.text
        assert response.json()["error"] == {
            "message": response.json()["error"]["message"],
            "type": "invalid_request_error",
            "param": "budget",
            "code": None,
        }
        assert "is not a finite number" in response.json()["error"]["message"]
    lines = log_lines(service)  # every line parses as strict JSON
    assert [r["request_id"] for r in lines] == ["finite-1"]  # and the refused requests wrote none


def test_a_broken_stream_is_logged_as_broken(service: InProcessService, fake: FakeUpstreams) -> None:
    fake.behaviour["calc-13b"] = "break"
    received = b""
    with httpx.stream(
        "POST",
        service.url + "/v1/chat/completions",
        timeout=CLIENT_TIMEOUT_S,
        headers={**AUTH, "x-request-id": "broken-stream-1"},
        json={"model": "calc-13b", "stream": True, "messages": user(PROMPTS[1])},
    ) as response:
        assert response.status_code == 200 and response.headers["x-request-id"] == "broken-stream-1"
        for piece in response.iter_bytes():
            received += piece
    events = [line[5:].strip() for line in received.decode().splitlines() if line.startswith("data:")]
    assert "[DONE]" not in events and "upstream stream broke off" in json.loads(events[-1])["error"]["message"]
    line = service.log_line("broken-stream-1")  # a stream's line is written as it ends, maybe after the last byte
    assert line["outcome"] == "stream_broken" and line["bytes_relayed"] == len(received)
    whole = post(
        service,
        "/v1/chat/completions",
        {"model": "poet-7b", "stream": True, "messages": user("hi")},
        {**AUTH, "x-request-id": "whole-stream-1"},
    )
    line = service.log_line("whole-stream-1")
    assert line["outcome"] == "completed" and line["bytes_relayed"] == len(whole.content)


def test_leaderboard_for_a_prompt_and_for_a_prompt_set(service: InProcessService, model_dir: Path) -> None:
    from evalprism.stats.aggregate import aggregate_leaderboards

    model = P2LModel.load(model_dir, cache_dir=False)
    one = post(service, "/v1/leaderboard", {"messages": user(PROMPTS[0])}).json()
    np.testing.assert_allclose(one["leaderboards"][0]["coefs"], model.leaderboards([PROMPTS[0]])[0], atol=1e-5)
    assert one["aggregate"] is None and one["ranking"][0] == "poet-7b"
    many = post(service, "/v1/leaderboard", {"prompt": PROMPTS}).json()
    assert [lb["prompt_sha256"] for lb in many["leaderboards"]] == [
        post(service, "/v1/route", {"messages": user(p)}).json()["prompt_sha256"] for p in PROMPTS
    ]
    np.testing.assert_allclose(many["aggregate"], aggregate_leaderboards(model.leaderboards(PROMPTS)), atol=1e-5)
    assert many["models"] == model.models


def test_models_and_health(service: InProcessService) -> None:
    ids = [
        m["id"] for m in httpx.get(service.url + "/v1/models", headers=AUTH, timeout=CLIENT_TIMEOUT_S).json()["data"]
    ]
    assert ids == ["evalprism-router", *COSTS]
    health = httpx.get(service.url + "/health", timeout=CLIENT_TIMEOUT_S).json()  # no token needed
    assert health["status"] == "ok" and health["precision"] == "float32" and health["models"] == 4


def test_concurrent_requests_are_micro_batched(service: InProcessService) -> None:
    before = httpx.get(service.url + "/health", timeout=CLIENT_TIMEOUT_S).json()

    async def burst() -> list[int]:
        async with httpx.AsyncClient(base_url=service.url, headers=AUTH, timeout=CLIENT_TIMEOUT_S) as client:
            replies = await asyncio.gather(
                *(client.post("/v1/route", json={"messages": user(f"{PROMPTS[k % 4]} #{k}")}) for k in range(48))
            )
        return [r.status_code for r in replies]

    assert asyncio.run(burst()) == [200] * 48
    after = httpx.get(service.url + "/health", timeout=CLIENT_TIMEOUT_S).json()
    assert after["prompts"] - before["prompts"] == 48
    assert after["batches"] - before["batches"] < 48 / 2  # shared model calls, not one each


@pytest.mark.parametrize("headers", [{}, {"authorization": "Bearer wrong"}, {"authorization": KEY}])
def test_auth_is_required_everywhere_but_health(service: InProcessService, headers: dict[str, str]) -> None:
    for method, path in [
        ("GET", "/v1/models"),
        ("POST", "/v1/route"),
        ("POST", "/v1/chat/completions"),
        ("POST", "/v1/leaderboard"),
        ("GET", "/openapi.json"),
    ]:
        response = httpx.request(
            method, service.url + path, headers=headers, json={"messages": user("hi")}, timeout=CLIENT_TIMEOUT_S
        )
        assert response.status_code == 401, path
        assert response.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize(
    "path,content,status,message",
    [
        ("/v1/chat/completions", b"{not json", 400, "not valid JSON"),
        ("/v1/chat/completions", b'{"messages": []}', 422, "messages"),
        ("/v1/route", b'{"messages": [{"role": "user", "content": "hi"}], "budegt": 2}', 422, "unknown field 'budegt'"),
        ("/v1/route", b'{"messages": [{"role": "system", "content": "be brief"}]}', 422, "no user message"),
        ("/v1/route", b'{"messages": [{"role": "user", "content": "   "}]}', 422, "no user message"),
        ("/v1/route", b'{"messages": [{"role": "robot", "content": "hi"}]}', 422, "messages.0.role"),
        (
            "/v1/route",
            b'{"messages": [{"role": "user", "content": "hi"}], "budget": 0.1}',
            422,
            "budget 0.1 is below the cheapest model's cost 0.2 (poet-7b)",
        ),
        ("/v1/route", b'{"messages": [{"role": "user", "content": "hi"}], "budget": -1}', 422, "budget"),
        ("/v1/route", json.dumps({"messages": user("x" * 40_000)}).encode(), 413, "more than the limit"),
        ("/v1/route", json.dumps({"messages": user("x" * 1_100_000)}).encode(), 413, "larger than"),
        (
            "/v1/chat/completions",
            b'{"model": "gpt-5", "messages": [{"role": "user", "content": "hi"}]}',
            404,
            "not served",
        ),
        ("/v1/leaderboard", b'{"prompt": "a", "messages": [{"role": "user", "content": "hi"}]}', 422, "exactly one"),
        ("/v1/leaderboard", b'{"prompt": []}', 422, "empty list"),
        ("/v1/leaderboard", b'{"messages": []}', 422, "empty list"),  # once a 500, found by the fuzzer
        ("/v1/route", b"[1, 2]", 422, "body"),
    ],
)
def test_bad_requests_get_a_clear_4xx(
    service: InProcessService, path: str, content: bytes, status: int, message: str
) -> None:
    response = httpx.post(
        service.url + path,
        content=content,
        timeout=CLIENT_TIMEOUT_S,
        headers={**AUTH, "content-type": "application/json"},
    )
    assert response.status_code == status, response.text
    assert message in response.json()["error"]["message"]


def test_a_body_sent_as_a_form_is_told_to_send_json(service: InProcessService) -> None:
    """``curl -d '{...}'`` without a content-type header sends a form: the answer says what to send instead."""
    body = b'{"messages": [{"role": "user", "content": "hi"}]}'
    response = httpx.post(
        service.url + "/v1/route",
        content=body,
        timeout=CLIENT_TIMEOUT_S,
        headers={**AUTH, "content-type": "application/x-www-form-urlencoded"},
    )
    assert response.status_code == 415, response.text
    assert response.json()["error"]["message"] == (
        "send the body as JSON with 'Content-Type: application/json' (got 'application/x-www-form-urlencoded')"
    )
    bare = httpx.post(service.url + "/v1/route", content=body, timeout=CLIENT_TIMEOUT_S, headers=AUTH)
    assert (bare.status_code, bare.json()["error"]["message"].endswith("(got no Content-Type)")) == (415, True)
    json_type = {**AUTH, "content-type": "application/json; charset=utf-8"}
    assert (
        httpx.post(service.url + "/v1/route", content=body, timeout=CLIENT_TIMEOUT_S, headers=json_type).status_code
        == 200
    )


def test_decision_log_has_one_line_per_request_and_survives_sigterm(
    model_dir: Path, fake: FakeUpstreams, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "router.yaml", fake, COSTS, budget=2.0, max_prompt_tokens=6)
    service = ServiceProcess(model_dir, config, {"FAKE_UPSTREAM_KEY": UPSTREAM_KEY}).start()
    long_prompt = "Write a sonnet about the autumn sea, then explain its rhyme scheme line by line."
    try:
        capped = httpx.post(
            service.url + "/v1/leaderboard", json={"prompt": long_prompt}, timeout=CLIENT_TIMEOUT_S
        ).json()

        async def traffic() -> None:
            async with httpx.AsyncClient(base_url=service.url, timeout=CLIENT_TIMEOUT_S) as client:
                await asyncio.gather(
                    *(client.post("/v1/route", json={"messages": user(f"question {k}")}) for k in range(40)),
                    *(
                        client.post("/v1/chat/completions", json={"messages": user(f"chat {k}"), "stream": k % 2 == 0})
                        for k in range(10)
                    ),
                )

        asyncio.run(traffic())
        health = httpx.get(service.url + "/health", timeout=CLIENT_TIMEOUT_S).json()
    finally:
        code, output = service.stop()  # SIGTERM
    assert code in (0, -15), output  # uvicorn shuts down gracefully, then re-raises SIGTERM to exit by it
    assert health["precision"] == ("bfloat16" if native_bf16() else "float32")  # precision: auto (the default)
    assert health["runtime"] == "openvino"  # runtime: auto (the default) for a sentence encoder
    # max_prompt_tokens: 6 reads the prompt as a backbone capped at six tokens would, not as the whole prompt
    model = P2LModel.load(model_dir, cache_dir=False, precision=health["precision"], runtime="openvino")
    whole = model.leaderboards([long_prompt])[0]
    model.backbone.limit_prompt_tokens(6)
    np.testing.assert_allclose(capped["leaderboards"][0]["coefs"], model.leaderboards([long_prompt])[0], atol=1e-5)
    assert np.abs(np.asarray(capped["leaderboards"][0]["coefs"]) - whole).max() > 1e-3
    lines = [json.loads(line) for line in (tmp_path / "decisions.jsonl").read_text().splitlines()]
    assert len(lines) == 50
    assert sum(r["endpoint"] == "/v1/route" for r in lines) == 40
    assert all({"time", "prompt_sha256", "distribution", "budget", "latency_ms"} <= r.keys() for r in lines)
    # every line is one declared DecisionLine of the current schema, and reads back as written
    read = read_log(tmp_path / "decisions.jsonl")
    assert all(r.schema_version == SCHEMA_VERSION for r in read)
    assert [json.loads(line_json(r)) for r in read] == lines
    text = (tmp_path / "decisions.jsonl").read_text()
    assert "question 1" not in text and UPSTREAM_KEY not in text and UPSTREAM_KEY not in output


def test_openai_shape_of_models_errors_and_request_ids(service: InProcessService) -> None:
    listed = httpx.get(service.url + "/v1/models", headers=AUTH, timeout=CLIENT_TIMEOUT_S)
    cards = listed.json()["data"]
    assert all(isinstance(c["created"], int) and c["object"] == "model" for c in cards)
    one = httpx.get(service.url + "/v1/models/calc-13b", headers=AUTH, timeout=CLIENT_TIMEOUT_S)
    assert one.json() == next(c for c in cards if c["id"] == "calc-13b")
    missing = httpx.get(service.url + "/v1/models/gpt-9", headers=AUTH, timeout=CLIENT_TIMEOUT_S)
    assert missing.status_code == 404
    assert missing.json()["error"] | {"message": ""} == {
        "message": "",
        "type": "invalid_request_error",
        "param": "model",
        "code": "model_not_found",
    }
    unauthorised = httpx.get(service.url + "/v1/models", timeout=CLIENT_TIMEOUT_S)
    assert unauthorised.json()["error"]["code"] == "invalid_api_key" and unauthorised.json()["error"]["param"] is None
    # a request id on every response: the client's own if it sent one, else a fresh one
    ids = {r.headers["x-request-id"] for r in (listed, one, missing, unauthorised)}
    assert len(ids) == 4 and all(i.startswith("req_") for i in ids)
    routed = post(service, "/v1/route", {"messages": user(PROMPTS[2])}, {**AUTH, "x-request-id": "client-id-42"})
    assert routed.headers["x-request-id"] == "client-id-42"
    line = next(r for r in log_lines(service) if r.get("request_id") == "client-id-42")
    assert line["prompt_sha256"] == routed.json()["prompt_sha256"] and line["chosen"] == routed.json()["model"]
    wrong_method = httpx.get(service.url + "/v1/route", headers=AUTH, timeout=CLIENT_TIMEOUT_S)
    assert wrong_method.status_code == 405 and wrong_method.headers["allow"] == "POST"


def test_unknown_openai_parameters_pass_through_but_near_misses_of_budget_do_not(
    service: InProcessService, fake: FakeUpstreams
) -> None:
    extras = {
        "prompt_cache_key": "k1",
        "safety_identifier": "u-9",
        "verbosity": "low",
        "function_call": "auto",
        "functions": [{"name": "f", "parameters": {}}],
        "prompt_cache_retention": "24h",
    }
    before = len(fake.received)
    response = post(service, "/v1/chat/completions", {"messages": user(PROMPTS[0]), **extras})
    assert response.status_code == 200, response.text
    assert fake.received[before]["body"] | extras == fake.received[before]["body"]
    for typo in ("budegt", "Budget", "buget"):
        refused = post(service, "/v1/chat/completions", {"messages": user(PROMPTS[0]), typo: 1.0})
        assert refused.status_code == 422
        assert refused.json()["error"]["message"].startswith(f"unknown field '{typo}': did you mean 'budget'?")
        assert refused.json()["error"]["param"] == typo
    assert len(fake.received) == before + 1


@pytest.mark.parametrize(
    "parts,message",
    [
        ([{}, {"type": "text", "text": "hi"}], "messages.0.content: part 0 has no 'type'"),
        (
            [{"type": "text", "text": "hi"}, {"type": "image_url"}],
            "messages.0.content: part 1 (image_url): image_url: Field required",
        ),
        ([{"type": "image_url", "image_url": {"detail": "low"}}], "part 0 (image_url): image_url.url: Field required"),
        ([{"type": "txet", "text": "hi"}], 'part 0 has type "txet": expected one of text, image_url'),
        ([{"type": {}, "refusal": ""}], "part 0 has type {}: expected one of"),  # once a 500, found by schemathesis
        ([{"type": "text"}], "part 0 (text): text: Field required"),
    ],
)
def test_malformed_content_parts_are_refused_before_any_upstream_call(
    service: InProcessService, fake: FakeUpstreams, parts: list[dict[str, Any]], message: str
) -> None:
    before = len(fake.received)
    response = post(service, "/v1/chat/completions", {"messages": [{"role": "user", "content": parts}]})
    assert response.status_code == 422 and message in response.json()["error"]["message"], response.text
    assert len(fake.received) == before


def test_well_formed_parts_route_on_their_text(service: InProcessService, fake: FakeUpstreams) -> None:
    parts = [
        {"type": "text", "text": PROMPTS[2]},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
    ]
    response = post(service, "/v1/chat/completions", {"messages": [{"role": "user", "content": parts}]})
    assert response.status_code == 200
    assert (
        response.json()["evalprism"]["prompt_sha256"]
        == post(service, "/v1/route", {"messages": user(PROMPTS[2])}).json()["prompt_sha256"]
    )
    assert fake.received[-1]["body"]["messages"][0]["content"] == parts


def metric_samples(svc: Service) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """/metrics parsed by prometheus-client's own parser."""
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(svc.url + "/metrics", headers=AUTH, timeout=CLIENT_TIMEOUT_S).text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_count_requests_decisions_batches_and_upstream_errors(
    service: InProcessService, fake: FakeUpstreams
) -> None:
    assert httpx.get(service.url + "/metrics", timeout=CLIENT_TIMEOUT_S).status_code == 401  # behind the same auth
    before = metric_samples(service)
    for k in range(5):
        post(service, "/v1/route", {"messages": user(f"{PROMPTS[0]} {k}"), "budget": 5.0})
    fake.behaviour["coder-34b"] = "fail"
    post(service, "/v1/chat/completions", {"model": "coder-34b", "messages": user("hi")})
    after = metric_samples(service)

    def delta(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    assert delta("evalprism_requests_total", endpoint="/v1/route", status="200") == 5
    assert delta("evalprism_request_duration_seconds_count", endpoint="/v1/route") == 5
    assert delta("evalprism_routing_decisions_total", model="poet-7b") == 5  # the planted best, unconstrained
    assert delta("evalprism_batch_size_sum") == 5  # each prompt in exactly one batch
    assert delta("evalprism_upstream_errors_total", upstream="coder-34b") == 1
    assert delta("evalprism_requests_total", endpoint="/v1/chat/completions", status="502") == 1


def test_realised_cost_is_usage_times_the_token_prices(service: InProcessService, fake: FakeUpstreams) -> None:
    usage = FakeUpstreams.USAGE
    want = usage["prompt_tokens"] * PRICES["poet-7b"][0] + usage["completion_tokens"] * PRICES["poet-7b"][1]
    body = post(
        service,
        "/v1/chat/completions",
        {"model": "poet-7b", "messages": user("hi")},
        {**AUTH, "x-request-id": "cost-1"},
    ).json()
    assert body["evalprism"]["realised_cost"] == pytest.approx(want, rel=1e-12)
    assert (
        "realised_cost"
        not in post(service, "/v1/chat/completions", {"model": "calc-13b", "messages": user("hi")}).json()["evalprism"]
    )  # no prices
    with httpx.stream(
        "POST",
        service.url + "/v1/chat/completions",
        timeout=CLIENT_TIMEOUT_S,
        headers={**AUTH, "x-request-id": "cost-2"},
        json={"model": "poet-7b", "stream": True, "stream_options": {"include_usage": True}, "messages": user("hi")},
    ) as response:
        chunks = [
            json.loads(line[5:]) for line in response.iter_lines() if line.startswith("data:") and "[DONE]" not in line
        ]
    assert [c["evalprism"]["realised_cost"] for c in chunks if c.get("usage")] == [pytest.approx(want, rel=1e-12)]
    lines = {rid: service.log_line(rid) for rid in ("cost-1", "cost-2")}  # the stream's, once it has ended
    assert lines["cost-1"]["realised_cost"] == lines["cost-2"]["realised_cost"] == pytest.approx(want, rel=1e-12)


def test_the_official_openai_sdk_as_client(service: InProcessService, fake: FakeUpstreams) -> None:
    """openai's Python SDK against the router: models list and retrieve, chat (routed, with the `budget`
    extension in extra_body and parameters the SDK knows but the router does not declare), streaming with
    usage, the request id, and the SDK's error classes for 401, 404, 422 and 429."""
    openai = pytest.importorskip("openai", reason="the openai SDK (dev extra) is not installed")
    client = openai.OpenAI(base_url=service.url + "/v1", api_key=KEY, max_retries=0, timeout=CLIENT_TIMEOUT_S)
    assert [m.id for m in client.models.list()] == ["evalprism-router", *COSTS]
    assert client.models.retrieve("coder-34b").created > 0
    completion = client.chat.completions.with_raw_response.create(
        model="evalprism-router",
        messages=user(PROMPTS[1]),
        extra_body={"budget": 5.0},
        prompt_cache_key="cache-1",
        safety_identifier="user-1",
        extra_headers={"x-request-id": "sdk-1"},
    )
    parsed = completion.parse()
    annotation = parsed.model_extra["evalprism"]
    assert annotation["decided"] == "calc-13b" and annotation["budget"] == 5.0  # the planted best on algebra
    assert parsed.choices[0].message.content == FakeUpstreams.answer("calc-13b")
    assert parsed._request_id == "sdk-1"
    assert fake.received[-1]["body"]["prompt_cache_key"] == "cache-1"
    stream = client.chat.completions.create(
        model="poet-7b", messages=user("hi"), stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == FakeUpstreams.answer("poet-7b")
    assert chunks[-1].usage.total_tokens == FakeUpstreams.USAGE["total_tokens"]
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(
            base_url=service.url + "/v1", api_key="wrong", max_retries=0, timeout=CLIENT_TIMEOUT_S
        ).models.list()
    with pytest.raises(openai.NotFoundError) as missing:
        client.chat.completions.create(model="gpt-9", messages=user("hi"))
    assert missing.value.code == "model_not_found"
    with pytest.raises(openai.UnprocessableEntityError) as refused:
        client.chat.completions.create(model="evalprism-router", messages=user("hi"), extra_body={"budget": 0.1})
    assert refused.value.param == "budget"
    with pytest.raises(openai.UnprocessableEntityError):
        client.chat.completions.create(model="poet-7b", messages=[{"role": "user", "content": [{"type": "text"}]}])
    fake.behaviour["poet-7b"] = "rate_limited"
    with pytest.raises(openai.RateLimitError) as limited:
        client.chat.completions.create(model="poet-7b", messages=user("hi"))
    assert limited.value.response.headers["retry-after"] == FakeUpstreams.RETRY_AFTER["poet-7b"]


def run_serve(model_dir: Path, config: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    cli = Path(sys.executable).with_name("evalprism")
    return subprocess.run(
        [str(cli), "serve", str(model_dir), "--config", str(config), *args],
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=HANG_LIMIT_S,
    )


def test_startup_refusals_exit_2_with_one_message(model_dir: Path, fake: FakeUpstreams, tmp_path: Path) -> None:
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("SERVICE_KEY", "FAKE_UPSTREAM_KEY")}
    open_config = write_config(tmp_path / "open.yaml", fake, COSTS)
    cases = [
        (
            open_config,
            {**env, "FAKE_UPSTREAM_KEY": "k"},
            ["--host", "0.0.0.0"],
            "refusing to listen on 0.0.0.0 without API keys",
        ),
        (open_config, env, [], "FAKE_UPSTREAM_KEY named in the config are not set"),
        (
            write_config(tmp_path / "unknown.yaml", fake, {**COSTS, "gpt-9": 1.0}),
            {**env, "FAKE_UPSTREAM_KEY": "k"},
            [],
            "gpt-9 not in the P2L model's list",
        ),
    ]
    for config, environ, args, message in cases:
        done = run_serve(model_dir, config, environ, *args)
        assert done.returncode == 2, done.stderr
        assert message in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "text,message",
    [
        ("models: {a: {base_url: 'http://x/v1', cost: 1}}\nbudgett: 2\n", "budgett: Extra inputs are not permitted"),
        ("models: {a: {base_url: 'ftp://x', cost: 1}}\n", "models.a.base_url"),
        ("models: {a: {base_url: 'http://x/v1', cost: -1}}\n", "models.a.cost"),
        (
            "models: {a: {base_url: 'http://x/v1', cost: 1}}\nbudget: 0.5\n",
            "budget 0.5 is below the cheapest model's cost 1 (a)",
        ),
        (
            "models: {a: {base_url: 'http://x/v1', cost: 1}}\nopponent: {b: 1}\n",
            "opponent: b not among the candidate models",
        ),
        ("models: [a, b\n", "not valid YAML at line"),
        ("models: {}\n", "models"),
        (
            "models: {a: {base_url: 'http://x/v1', cost: 1}}\nruntime: tensorrt\n",
            "runtime: Input should be 'auto', 'torch' or 'openvino'",
        ),
    ],
)
def test_config_errors_name_the_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "router.yaml"
    path.write_text(text)
    with pytest.raises(EvalprismError) as info:
        load_config(path)
    assert str(path) in str(info.value) and message in str(info.value)


def test_schemathesis_checks_all_find_no_failure(service: InProcessService, fake: FakeUpstreams) -> None:
    """schemathesis's own CLI with ``--checks all`` on the published schema: no 5xx, every status and
    response (SSE events included) as documented, schema-valid requests accepted and schema-violating ones
    refused, auth enforced, 405 with Allow. Deterministic generation, 25 examples per operation and phase.
    A busy machine answers late, not wrongly: each request may take up to the hang limit (schemathesis's own
    default is 10 s) and a request that fails at the network level is sent again, up to 3 times. The fake
    upstreams take any previous_response_id the fuzzer makes up (the router itself routes an id it has
    not seen; an upstream that never issued it would refuse it)."""
    pytest.importorskip("schemathesis", reason="schemathesis (the dev extra) is not installed")
    fake.check_previous = False
    cli = Path(sys.executable).with_name("schemathesis")
    done = subprocess.run(
        [
            str(cli),
            "run",
            service.url + "/openapi.json",
            "--checks",
            "all",
            "-H",
            f"Authorization: Bearer {KEY}",
            "-n",
            "25",
            "--generation-deterministic",
            "--no-color",
            "--request-timeout",
            str(CLIENT_TIMEOUT_S),
            "--request-retries",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=HANG_LIMIT_S,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:]
    # health, models, one model, leaderboard, route, chat, responses, messages (/metrics is not in it)
    assert "Tested: 8" in done.stdout
    assert re.search(r"(\d+) generated, \1 passed", done.stdout), done.stdout[-2000:]


def test_grk_model_routes_alike_in_the_cli_and_the_service(tmp_path: Path, fake: FakeUpstreams, capsys) -> None:
    """The value a model is routed by is one property of the model: a grk-trained model routed by
    `evalprism p2l route` and by /v1/route gives the same mixes, values and router coefficients."""

    battles = simulate_topic_battles(1500, seed=5)
    rng = np.random.default_rng(5)
    battles.loc[rng.random(len(battles)) < 0.2, "winner"] = "tie"
    battles.loc[rng.random(len(battles)) < 0.05, "winner"] = "tie (bothbad)"
    model_path = train_model(
        battles, TrainOptions(outcome_model="grk", seed=0), cache_dir=str(tmp_path / "cache"), progress=False
    ).save(tmp_path / "grk-model")
    grk = P2LModel.load(model_path, cache_dir=False, precision="float32", runtime="torch")  # as the config says
    assert grk.routing_value == "grk"
    prompts = tmp_path / "prompts.csv"
    pd.DataFrame({"prompt": PROMPTS}).to_csv(prompts, index=False)
    costs = tmp_path / "costs.csv"
    pd.DataFrame({"model": list(COSTS), "cost": list(COSTS.values())}).to_csv(costs, index=False)
    cli = route_per_prompt(model_path, prompts, costs, tmp_path / "routes", capsys)
    config = write_config(
        tmp_path / "router.yaml",
        fake,
        COSTS,
        budget=1.0,
        api_keys_env=["SERVICE_KEY"],
        seed=0,
        precision="float32",
        runtime="torch",
    )
    with InProcessService(
        grk, config, tmp_path / "decisions.jsonl", dict.fromkeys(COSTS, UPSTREAM_KEY), api_keys=(KEY,)
    ) as svc:
        for row in cli.itertuples():
            got = post(svc, "/v1/route", {"messages": user(row.prompt)}).json()
            want = {row.model: row.prob} | ({row.model_2: row.prob_2} if row.prob_2 > 0 else {})
            assert got["distribution"] == pytest.approx(want, abs=1e-6)
            assert got["expected_winrate"] == pytest.approx(row.expected_winrate, abs=1e-6)
            assert got["router_coef"] == pytest.approx(row.router_coef, abs=1e-5)


# ------------------------------------------------------------------ the decision log and the address, before the model


def test_decision_log_never_lands_in_an_input_or_a_foreign_file(
    model_dir: Path, fake: FakeUpstreams, tmp_path: Path
) -> None:
    """`--decision-log` at the model's config.json once appended decision lines to it and the model no
    longer loaded. Every such path is refused with exit 2 before the model loads, and nothing changes."""
    import os

    env = {**os.environ, **ENV}
    config = write_config(tmp_path / "router.yaml", fake, COSTS, api_keys_env=["SERVICE_KEY"])
    notes = tmp_path / "notes.jsonl"
    notes.write_text('{"time": "2026-01-01", "note": "mine"}\n', encoding="utf-8")
    cases = [
        (model_dir / "config.json", f"it is inside the input {model_dir}"),
        (model_dir / "decisions.jsonl", f"it is inside the input {model_dir}"),
        (config, f"it is the input {config}"),
        (notes, "the file exists and is not a decision log evalprism wrote (line 1 is not a routing decision"),
        (model_dir, f"it is the input {model_dir}"),
    ]
    before = {p: p.read_bytes() for p in [*model_dir.rglob("*"), config, notes] if p.is_file()}
    for log, message in cases:
        done = run_serve(model_dir, config, env, "--decision-log", str(log), "--port", "1")
        assert done.returncode == 2, done.stderr
        assert f"error: {log}: cannot be the decision log: {message}" in done.stderr.replace("\n", " "), done.stderr
        assert "Traceback" not in done.stderr and "loading the P2L model" not in done.stderr
    assert {p: p.read_bytes() for p in before} == before and not (model_dir / "decisions.jsonl").exists()
    P2LModel.load(model_dir, cache_dir=False)  # still loads


def test_an_earlier_decision_log_and_an_empty_file_are_appended_to(
    model_dir: Path, fake: FakeUpstreams, tmp_path: Path
) -> None:
    import os

    config = write_config(
        tmp_path / "router.yaml",
        fake,
        COSTS,
        api_keys_env=["SERVICE_KEY"],
        seed=0,
        runtime="torch",
        precision="float32",
    )
    earlier = tmp_path / "earlier.jsonl"
    earlier.write_text(
        '{"time":"2026-01-01T00:00:00+00:00","endpoint":"/v1/route","prompt_sha256":"ab","chosen":"poet-7b"}\n',
        encoding="utf-8",
    )
    empty = tmp_path / "empty.jsonl"
    empty.touch()
    for log, lines_before in ((earlier, 1), (empty, 0)):
        with running_service(model_dir, config, {**os.environ, **ENV}, "--decision-log", str(log)) as svc:
            assert post(svc, "/v1/route", {"messages": user(PROMPTS[0])}).status_code == 200
            health = httpx.get(svc.url + "/health", timeout=CLIENT_TIMEOUT_S).json()
            assert (health["precision"], health["runtime"]) == ("float32", "torch")  # as the config says
        lines = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
        assert len(lines) == lines_before + 1 and lines[-1]["endpoint"] == "/v1/route"


def test_an_address_that_cannot_be_bound_is_refused_before_the_model_loads(
    model_dir: Path, fake: FakeUpstreams, tmp_path: Path
) -> None:
    """A port in use or a host that is not this machine's: `error: ...` and exit 2, not uvicorn's
    message and exit 3 after the model loaded."""
    import os
    import socket

    env = {**os.environ, **ENV}
    config = write_config(tmp_path / "router.yaml", fake, COSTS, api_keys_env=["SERVICE_KEY"])
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cases = [
            (
                ["--port", str(port)],
                (
                    f"error: cannot listen on 127.0.0.1:{port}: --port {port} is in use by another "
                    "process; choose another --port"
                ),
            ),
            (
                ["--host", "192.0.2.1", "--port", "8000"],  # TEST-NET-1: no machine's own address
                "error: cannot listen on 192.0.2.1:8000: --host '192.0.2.1' is not an address of this machine",
            ),
            (
                ["--host", "no-such-host.invalid"],
                ("error: --host 'no-such-host.invalid': not an address this machine can listen on"),
            ),
        ]
        for args, message in cases:
            done = run_serve(model_dir, config, env, *args, "--decision-log", str(tmp_path / "d.jsonl"))
            assert done.returncode == 2, done.stderr
            assert message in done.stderr.replace("\n", " "), done.stderr
            assert "Traceback" not in done.stderr and "loading the P2L model" not in done.stderr
    assert not (tmp_path / "d.jsonl").exists()


def test_a_full_disk_is_a_503_and_degraded_health_until_writes_succeed(
    loaded: P2LModel, fake: FakeUpstreams, tmp_path: Path
) -> None:
    """The service in-process with the real DecisionLog whose file fills up: routing and chat answer 503
    naming the log and the reason (no 500 with a traceback, no upstream paid), the file keeps whole lines
    only, /health is degraded naming it; once writes succeed, the refused decision is written (marked
    late) and everything is as before."""
    from evalprism.serve.decisions import DecisionLog, not_a_decision_log

    config = write_config(tmp_path / "router.yaml", fake, COSTS, seed=0)
    disks: list[FillingDisk] = []
    path = tmp_path / "decisions.jsonl"
    log = DecisionLog(path, opener=lambda p: disks.append(FillingDisk(p)) or disks[0])  # type: ignore[func-returns-value]
    route_body = {"messages": user(PROMPTS[0])}
    with (
        InProcessService(loaded, config, log, dict.fromkeys(COSTS, "k")) as svc,
        httpx.Client(base_url=svc.url, timeout=CLIENT_TIMEOUT_S) as client,
    ):
        assert client.post("/v1/route", json=route_body).status_code == 200
        assert client.get("/health").json()["status"] == "ok"
        disks[0].full, disks[0].room = True, 7
        refused = client.post("/v1/route", json=route_body)
        assert refused.status_code == 503, refused.text
        assert refused.json()["error"]["code"] == "decision_log_unwritable"
        assert refused.json()["error"]["message"].startswith(
            f"the decision log {path} cannot be written (the disk is full)"
        )
        assert len(path.read_text().splitlines()) == 1 and path.read_text().endswith("\n")  # the cut line is gone
        sent = len(fake.received)
        chat = client.post("/v1/chat/completions", json={"messages": user("hello")})
        assert chat.status_code == 503 and len(fake.received) == sent  # refused before any upstream call
        health = client.get("/health").json()
        assert health["status"] == "degraded"
        assert health["reasons"] == [
            (f"the decision log {path} cannot be written (the disk is full): routing and chat answer 503")
        ]
        assert health["decision_log"] == {
            "path": str(path),
            "writable": False,
            "error": "the disk is full",
            "unwritten": 1,
            "dropped": 0,
        }
        disks[0].full = False  # space freed
        health = client.get("/health").json()
        assert health["status"] == "ok" and health["reasons"] == [] and health["decision_log"]["writable"]
        assert client.post("/v1/chat/completions", json={"messages": user("hello")}).status_code == 200
        assert client.post("/v1/route", json=route_body).status_code == 200
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["endpoint"] for r in lines] == ["/v1/route", "/v1/route", "/v1/chat/completions", "/v1/route"]
    assert lines[1]["late"] == {"answered": False, "reason": "the disk is full"}
    assert all("late" not in r for r in (lines[0], *lines[2:])) and not_a_decision_log(path) is None
    assert health["decisions"] == 2  # the first decision and the late one


def test_the_app_runs_without_a_socket_through_its_transport_seams(tmp_path: Path) -> None:
    """``create_app(transport=)`` carries the upstream calls (an ``httpx.MockTransport`` standing in for
    the providers) and ``httpx.ASGITransport`` the client's: the whole request path in one event loop,
    no port. An upstream answering 200 with a body that is not JSON, or with a JSON list, has failed:
    the request fails over (alpha, beta, gamma: the stand-in model's order), each attempt says why, and
    both failures count against their circuits."""
    from evalprism.serve.app import create_app
    from evalprism.serve.config import Secrets, load_config

    names = ["alpha", "beta", "gamma"]
    sent: list[tuple[str, str, str | None]] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        name, body = request.url.host.removesuffix(".test"), json.loads(request.content)
        sent.append((str(request.url), body["model"], request.headers.get("authorization")))
        if name == "alpha":
            return httpx.Response(200, text="<html>down for maintenance</html>")
        if name == "beta":
            return httpx.Response(200, json=["not", "an", "object"])
        return httpx.Response(
            200,
            json={
                "id": "c1",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": f"an answer from {name}"},
                    }
                ],
            },
        )

    path = tmp_path / "router.yaml"
    path.write_text(
        "models:\n" + "".join(f"  {n}: {{base_url: 'http://{n}.test/v1', cost: 1}}\n" for n in names) + "seed: 0\n"
    )
    model = ConstantBackbone.model(names, [2.0, 1.0, 0.0])
    app = create_app(
        model,
        load_config(path, names),
        Secrets((KEY,), {n: f"key-{n}" for n in names}),
        decision_log=tmp_path / "decisions.jsonl",
        transport=httpx.MockTransport(upstream),
    )

    async def scenario() -> tuple[httpx.Response, httpx.Response, dict[str, Any]]:
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://router") as client,
        ):
            refused = await client.get("/v1/models")
            chat = await client.post(
                "/v1/chat/completions", json={"messages": user("hi")}, headers={**AUTH, "x-request-id": "seam-1"}
            )
            return refused, chat, (await client.get("/health")).json()

    refused, chat, health = asyncio.run(scenario())
    assert refused.status_code == 401
    assert chat.status_code == 200, chat.text
    body = chat.json()
    assert (
        body["choices"][0]["message"]["content"] == "an answer from gamma"
        and chat.headers["x-evalprism-model"] == "gamma"
    )
    assert [(a["model"], a["status"], a["error"]) for a in body["evalprism"]["attempts"]] == [
        ("alpha", 200, "alpha: upstream answered 200 with a body that is not JSON"),
        ("beta", 200, "beta: upstream answered a JSON list, expected an object"),
        ("gamma", 200, None),
    ]
    assert sent == [(f"http://{n}.test/v1/chat/completions", n, f"Bearer key-{n}") for n in names]
    assert {n: u["consecutive_failures"] for n, u in health["upstreams"].items()} == {"alpha": 1, "beta": 1, "gamma": 0}
    line = json.loads((tmp_path / "decisions.jsonl").read_text().splitlines()[-1])
    assert line["request_id"] == "seam-1" and line["model"] == "gamma" and line["outcome"] == "completed"


def test_a_really_full_disk_under_the_running_service(model_dir: Path, fake: FakeUpstreams, tmp_path: Path) -> None:
    """The same with a real file system: the decision log on a 64 KiB tmpfs that another file fills up
    (needs the right to mount; skipped elsewhere). 503 and degraded health while full, whole lines
    only, and back to normal once the space is freed."""
    import os

    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = (
        os.geteuid() == 0
        and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)], capture_output=True, check=False
        ).returncode
        == 0
    )
    if not mounted:
        pytest.skip("cannot mount a small tmpfs here (needs root and the right to mount)")
    try:
        config = write_config(
            tmp_path / "router.yaml", fake, COSTS, api_keys_env=["SERVICE_KEY"], seed=0, runtime="torch"
        )
        log = disk / "decisions.jsonl"
        with running_service(model_dir, config, {**os.environ, **ENV}, "--decision-log", str(log)) as svc:
            assert post(svc, "/v1/route", {"messages": user(PROMPTS[0])}).status_code == 200
            fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
            try:
                while os.write(fd, b"\0" * 4096):
                    pass
            except OSError:
                pass
            finally:
                os.close(fd)
            statuses = []
            for _ in range(60):  # the log's last page may hold a few more lines before a write needs a new one
                statuses.append(post(svc, "/v1/route", {"messages": user(PROMPTS[1])}).status_code)
                if statuses[-1] != 200:
                    break
            assert statuses[-1] == 503 and set(statuses[:-1]) <= {200}
            health = httpx.get(svc.url + "/health", timeout=CLIENT_TIMEOUT_S).json()
            assert health["status"] == "degraded" and health["decision_log"]["error"] == "the disk is full"
            assert log.read_bytes().endswith(b"\n")
            (disk / "filler").unlink()
            assert httpx.get(svc.url + "/health", timeout=CLIENT_TIMEOUT_S).json()["status"] == "ok"
            assert post(svc, "/v1/route", {"messages": user(PROMPTS[2])}).status_code == 200
        lines = [json.loads(line) for line in log.read_text().splitlines()]
        assert len(lines) == len(statuses) + 2 and sum("late" in r for r in lines) == 1
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True, check=False)
