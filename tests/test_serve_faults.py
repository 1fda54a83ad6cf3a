"""The router service under real clients and real faults, over real HTTP on loopback: the official
openai SDK (and httpx where a client must misbehave: leave early, time out) against the service's
app in-process, with fake upstreams that stream, cut streams, hang, 429, 4xx and 5xx
(tests/serve_harness.py). The P2L model is a constant stand-in: these tests are about what the
service does around routing (every routed request has the failover order alpha, beta, gamma).
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from serve_harness import (
    CLIENT_TIMEOUT_S,
    COSTS,
    MODELS,
    ORDER,
    ConstantBackbone,
    FakeUpstreams,
    InProcessService,
    attempt_counts,
    health,
    user,
    write_config,
)
from serve_harness import constant_service as start

import evalprism.serve.app  # noqa: F401 - torch and the app load once, when the module is collected, not in its first test

openai = pytest.importorskip("openai", reason="the openai SDK (dev extra) is not installed")


def sdk(svc: InProcessService, **kwargs: Any) -> Any:
    return openai.OpenAI(
        base_url=svc.url + "/v1",
        api_key="unused",
        max_retries=0,
        timeout=kwargs.pop("timeout", CLIENT_TIMEOUT_S),
        **kwargs,
    )


# --- 1. the SDK's own multi-turn and tool loop -----------------------------------------------------


def test_the_sdk_tool_loop_sends_back_its_own_message_objects(fake: FakeUpstreams, tmp_path: Path) -> None:
    """messages.append(resp.choices[0].message): the SDK's assistant message (with `annotations: []`,
    `refusal: null` and `tool_calls`) and a tool result go back to the router, which passes every key
    on to the upstream; a near miss of `budget` is still refused."""
    fake.tool_call = True
    tools = [
        {
            "type": "function",
            "function": {
                "name": "add",
                "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}},
            },
        }
    ]
    with start(fake, tmp_path) as svc:
        client = sdk(svc)
        messages: list[Any] = user("What is 2 + 3? Use the tool.")
        first = client.chat.completions.create(model="evalprism-router", messages=messages, tools=tools)
        call = first.choices[0].message
        assert call.tool_calls[0].function.name == "add" and call.annotations == []
        messages.append(call)  # the SDK's own object, as its documentation's tool loop does
        messages.append({"role": "tool", "tool_call_id": call.tool_calls[0].id, "content": "5"})
        second = client.chat.completions.create(model="evalprism-router", messages=messages, tools=tools)
        assert second.choices[0].message.content == FakeUpstreams.answer("alpha")
        sent = fake.received[-1]["body"]["messages"]
        assert sent[1]["role"] == "assistant" and sent[1]["annotations"] == []
        assert sent[1]["tool_calls"][0]["function"]["arguments"] == '{"a": 2, "b": 3}'
        assert sent[2] == {"role": "tool", "tool_call_id": "call_1", "content": "5"}
        # keys of other providers' messages, as LiteLLM and vLLM clients send them, pass unchanged
        extra = [
            {"role": "system", "content": "be brief", "cache_control": {"type": "ephemeral"}},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "x", "reasoning_content": "thinking...", "annotations": []},
            {"role": "user", "content": "more"},
        ]
        client.chat.completions.create(model="alpha", messages=extra)
        assert fake.received[-1]["body"]["messages"] == extra
        route = httpx.post(svc.url + "/v1/route", json={"messages": extra}, timeout=CLIENT_TIMEOUT_S)
        assert route.status_code == 200, route.text
        with pytest.raises(openai.UnprocessableEntityError) as near_miss:
            client.chat.completions.create(model="evalprism-router", messages=extra, extra_body={"budegt": 2})
        assert "did you mean 'budget'" in near_miss.value.message


# --- 2. broken streams count --------------------------------------------------------------------------


def test_streams_that_break_every_time_open_the_circuit(fake: FakeUpstreams, tmp_path: Path) -> None:
    fake.behaviour["alpha"] = "break"
    with start(fake, tmp_path) as svc:
        client = sdk(svc)
        for i in range(3):
            with pytest.raises(openai.APIError):  # the SDK raises on the error event that ends a broken stream
                list(client.chat.completions.create(model="alpha", messages=user(f"hi {i}"), stream=True))
        state = health(svc)["upstreams"]["alpha"]
        assert state["state"] == "open" and state["consecutive_failures"] == 3
        assert "upstream stream broke off" in state["last_error"]
        routed = client.chat.completions.create(model="evalprism-router", messages=user("next"))
        assert routed.model_extra["evalprism"]["attempts"][0]["skipped"] is True
        assert routed.model_extra["evalprism"]["model"] == "beta"
        fake.behaviour.clear()
        whole = list(client.chat.completions.create(model="beta", messages=user("whole"), stream=True))
        assert "".join(c.choices[0].delta.content or "" for c in whole) == FakeUpstreams.answer("beta")
        assert health(svc)["upstreams"]["beta"]["consecutive_failures"] == 0


# --- 3. the upstream's configuration errors are the upstream's failures ---------------------------


@pytest.mark.parametrize("status", [401, 403, 404, 422])
def test_an_upstream_refusing_its_configuration_fails_over_and_counts(
    fake: FakeUpstreams, tmp_path: Path, status: int
) -> None:
    fake.behaviour["alpha"] = f"status:{status}"
    with start(fake, tmp_path) as svc:
        client = sdk(svc)
        raw = client.chat.completions.with_raw_response.create(
            model="evalprism-router", messages=user("hi"), extra_headers={"x-request-id": f"cfg-{status}"}
        )
        annotation = raw.parse().model_extra["evalprism"]
        assert annotation["model"] == "beta"
        assert annotation["attempts"][0]["status"] == status and "alpha" in annotation["attempts"][0]["error"]
        line = svc.log_line(f"cfg-{status}")
        assert line["model"] == "beta" and line["attempts"][0]["error"].startswith(f"alpha: upstream answered {status}")
        state = health(svc)["upstreams"]["alpha"]
        assert state["consecutive_failures"] == 1 and f"answered {status}" in state["last_error"]
        for name in ORDER:
            fake.behaviour[name] = f"status:{status}"
        with pytest.raises(openai.APIStatusError) as failed:
            client.chat.completions.create(model="evalprism-router", messages=user("hi"))
        assert failed.value.status_code == 502
        for name in ORDER:
            assert f"{name}: upstream answered {status}" in failed.value.message
        counts = {name: u["consecutive_failures"] for name, u in health(svc)["upstreams"].items()}
        assert counts == {"alpha": 2, "beta": 1, "gamma": 1, "delta": 0}
        with pytest.raises(openai.APIStatusError):  # a third: alpha's circuit opens, /health says so
            client.chat.completions.create(model="alpha", messages=user("hi"))
        report = health(svc)
        assert report["status"] == "degraded" and report["upstreams"]["alpha"]["state"] == "open"
        assert any("alpha" in reason for reason in report["reasons"])


def test_a_400_is_the_clients_and_is_relayed_without_failover(fake: FakeUpstreams, tmp_path: Path) -> None:
    fake.behaviour["alpha"] = "status:400"
    with start(fake, tmp_path) as svc:
        with pytest.raises(openai.BadRequestError) as refused:
            sdk(svc).chat.completions.create(model="evalprism-router", messages=user("hi"))
        assert refused.value.message.endswith("fake upstream says 400")
        assert fake.arrivals("alpha") == 1 and fake.arrivals("beta") == 0
        assert health(svc)["upstreams"]["alpha"]["consecutive_failures"] == 0


# --- 4. the router's own connection limit ----------------------------------------------------------


def test_a_full_connection_pool_is_a_503_not_an_upstream_failure(fake: FakeUpstreams, tmp_path: Path) -> None:
    """alpha may have one connection; while a request holds it (its upstream hangs), the next request
    naming alpha waits pool_timeout_s and gets a 503 naming the limit; no circuit counts it. A routed
    request fails over to beta."""
    fake.behaviour["alpha"] = "hang"
    config = write_config(tmp_path / "router.yaml", fake, COSTS, timeout_s=30.0, pool_timeout_s=0.2, seed=0)
    text = config.read_text().replace("  alpha:\n", "  alpha:\n    max_connections: 1\n", 1)
    config.write_text(text)
    model = ConstantBackbone.model(MODELS, [3.0, 2.0, 1.0, 0.0])
    with InProcessService(model, config, tmp_path / "decisions.jsonl", dict.fromkeys(MODELS)) as svc:

        async def scenario() -> tuple[Any, Any, Any]:
            client = openai.AsyncOpenAI(
                base_url=svc.url + "/v1", api_key="unused", max_retries=0, timeout=CLIENT_TIMEOUT_S
            )
            holder = asyncio.ensure_future(client.chat.completions.create(model="alpha", messages=user("hold")))
            while fake.arrivals("alpha") < 1:
                await asyncio.sleep(0.01)
            busy: Any = None
            try:
                await client.chat.completions.create(model="alpha", messages=user("wait"))
            except openai.APIStatusError as exc:
                busy = exc
            routed = await client.chat.completions.create(model="evalprism-router", messages=user("routed"))
            fake.released.set()
            held = await holder
            await client.close()
            return busy, routed, held

        busy, routed, held = asyncio.run(scenario())
        assert busy is not None and busy.status_code == 503 and busy.code == "upstream_unavailable"
        assert "alpha: busy: all 1 connections" in busy.message and "max_connections" in busy.message
        assert routed.model_extra["evalprism"]["model"] == "beta"
        assert routed.model_extra["evalprism"]["attempts"][0]["busy"] is True
        assert held.choices[0].message.content == FakeUpstreams.answer("alpha")
        assert fake.arrivals("alpha") == 1  # the waiting request never reached the upstream
        state = health(svc)["upstreams"]["alpha"]
        assert state["state"] == "closed" and state["consecutive_failures"] == 0 and state["last_error"] is None
        assert attempt_counts(svc, "alpha") == {"busy": 2.0, "ok": 1.0}


def test_connection_limits_are_checked_in_the_config(tmp_path: Path) -> None:
    from evalprism.errors import EvalprismError
    from evalprism.serve.config import load_config

    path = tmp_path / "router.yaml"
    path.write_text("models:\n  a: {base_url: 'http://127.0.0.1:9/v1', cost: 1, max_connections: 0}\n")
    with pytest.raises(EvalprismError, match=r"models\.a\.max_connections: Input should be greater than or equal to 1"):
        load_config(path)
    path.write_text(
        "models:\n  a: {base_url: 'http://127.0.0.1:9/v1', cost: 1, max_connections: 8}\npool_timeout_s: 0.5\n"
    )
    config = load_config(path)
    assert config.models["a"].max_connections == 8 and config.pool_timeout_s == 0.5


# --- 5. one trial request while half open -------------------------------------------------------------


HALF_OPEN_AFTER_S = 3.0


def test_a_half_open_circuit_admits_one_trial_request(fake: FakeUpstreams, tmp_path: Path) -> None:
    """alpha's circuit opens (three 500s); after the cool-down its upstream hangs. 16 concurrent routed
    requests: exactly one reaches alpha (the trial), the 15 others go to beta; 16 concurrent requests
    naming alpha get a 503 without reaching it. Released, the trial succeeds and closes the circuit."""
    fake.behaviour["alpha"] = "status:500"
    # a cool-down long enough that the circuit is still open when the test first looks, on a busy
    # machine too (0.3 s had passed before the health check under a load of 10)
    with start(fake, tmp_path, breaker_cooldown_s=HALF_OPEN_AFTER_S) as svc:
        for i in range(3):
            httpx.post(
                svc.url + "/v1/chat/completions",
                json={"model": "alpha", "messages": user(f"x{i}")},
                timeout=CLIENT_TIMEOUT_S,
            )
        assert health(svc)["upstreams"]["alpha"]["state"] == "open"
        fake.behaviour["alpha"] = "hang"
        while health(svc)["upstreams"]["alpha"]["state"] != "half_open":
            time.sleep(0.05)
        before = fake.arrivals("alpha")

        async def scenario() -> tuple[list[Any], list[Any], dict[str, Any]]:
            client = openai.AsyncOpenAI(
                base_url=svc.url + "/v1", api_key="unused", max_retries=0, timeout=CLIENT_TIMEOUT_S
            )
            routed = [
                asyncio.ensure_future(client.chat.completions.create(model="evalprism-router", messages=user(f"r{i}")))
                for i in range(16)
            ]
            while fake.arrivals("alpha") - before < 1 or sum(t.done() for t in routed) < 15:
                await asyncio.sleep(0.01)
            named = await asyncio.gather(
                *(client.chat.completions.create(model="alpha", messages=user(f"n{i}")) for i in range(16)),
                return_exceptions=True,
            )
            fake.released.set()
            answers = await asyncio.gather(*routed)
            await client.close()
            return answers, named, health(svc)

        routed, named, after = asyncio.run(scenario())
        assert fake.arrivals("alpha") - before == 1
        assert sorted(r.model_extra["evalprism"]["model"] for r in routed) == ["alpha"] + ["beta"] * 15
        assert all(isinstance(e, openai.APIStatusError) and e.status_code == 503 for e in named), named
        assert "its one trial request is in flight" in named[0].message
        assert after["upstreams"]["alpha"]["state"] == "closed"


# --- 6. the decision log says what the client got ------------------------------------------------


def test_a_client_that_left_before_the_first_byte_is_not_completed(fake: FakeUpstreams, tmp_path: Path) -> None:
    """A streaming and a non-streaming client time out while the upstream hangs: both are logged as
    client_left (499), not completed or 200, and the upstream's circuit counts nothing."""
    fake.behaviour["alpha"] = "hang"
    with start(fake, tmp_path) as svc:
        for stream in (True, False):
            rid = f"left-{stream}"
            with pytest.raises(openai.APITimeoutError):
                sdk(svc, timeout=0.3).chat.completions.create(
                    model="alpha", messages=user("hi"), stream=stream, extra_headers={"x-request-id": rid}
                )
            line = svc.log_line(rid)
            assert line["outcome"] == "client_left" and line["status"] == 499, line
            assert line["attempts"][0]["error"] == "alpha: abandoned: the client left before the upstream answered"
            assert "bytes_relayed" not in line
        state = health(svc)["upstreams"]["alpha"]
        assert state["consecutive_failures"] == 0 and state["state"] == "closed"
        assert attempt_counts(svc, "alpha") == {"abandoned": 2.0}


def test_a_cut_stream_counts_only_the_bytes_written(fake: FakeUpstreams, tmp_path: Path) -> None:
    """The upstream sends its first event and hangs; the client reads that event and leaves. The log
    says cut, with exactly the bytes the client received; a whole stream says completed with all."""
    fake.behaviour["alpha"] = "hang_after_first"
    with start(fake, tmp_path) as svc:
        received = b""
        with httpx.stream(
            "POST",
            svc.url + "/v1/chat/completions",
            timeout=CLIENT_TIMEOUT_S,
            headers={"x-request-id": "cut-1"},
            json={"model": "alpha", "stream": True, "messages": user("hi")},
        ) as response:
            for piece in response.iter_raw():
                received += piece
                if b"\n\n" in received:
                    break
        line = svc.log_line("cut-1")
        assert line["outcome"] == "cut" and line["bytes_relayed"] == len(received) > 0
        assert health(svc)["upstreams"]["alpha"]["consecutive_failures"] == 0
        whole = httpx.post(
            svc.url + "/v1/chat/completions",
            headers={"x-request-id": "whole-1"},
            json={"model": "beta", "stream": True, "messages": user("hi")},
            timeout=CLIENT_TIMEOUT_S,
        )
        line = svc.log_line("whole-1")
        assert line["outcome"] == "completed" and line["bytes_relayed"] == len(whole.content)
        assert json.loads(whole.text.split("data: ", 2)[1].split("\n")[0])["evalprism"]["model"] == "beta"
