"""Fair blame under load (evalprism.serve.loop_lag): an upstream timeout that the router's own
event-loop lag explains is the router's starvation, not the upstream's failure. The starvation is real:
a synchronous sleep injected into the in-process service's event loop (a test-only way in,
InProcessService.starve), while its request waits on the upstream.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from serve_harness import CLIENT_TIMEOUT_S, FakeUpstreams, constant_service, health, metric_values

from evalprism.serve.loop_lag import LoopLag

STALL_S = 1.5  # how long the service's loop is blocked: past the upstream timeout and the starvation threshold
SETTINGS = {"timeout_s": 0.5, "starvation_lag_s": 1.0}  # the config under test (breaker_failures: 3)


def test_an_overdue_wake_up_counts_before_the_sampler_runs() -> None:
    """A stall shows at once in worst_since, before the sampler has woken to record it (a timeout that
    fires late runs in the same turn of the loop as the sampler's overdue wake-up, maybe first); a window
    that starts after the stall ended does not see it."""

    async def scenario() -> tuple[float, float, float]:
        lag = LoopLag(horizon_s=10, interval_s=0.01)
        await lag.start()
        await asyncio.sleep(0.05)  # the sampler runs and sleeps again
        before = lag.clock()
        time.sleep(0.3)  # the loop stands still
        unrecorded = lag.worst_since(before)
        await asyncio.sleep(0.05)  # the sampler records the stall
        recorded = lag.worst_since(before)
        after = lag.clock()
        await asyncio.sleep(0.05)
        later = lag.worst_since(after)
        await lag.stop()
        return unrecorded, recorded, later

    unrecorded, recorded, later = asyncio.run(scenario())
    assert unrecorded >= 0.3 - 0.01 and recorded >= 0.3 - 0.01
    assert later < 0.3 - 0.01


def _chat_alpha_while(svc: Any, fake: FakeUpstreams, stall_s: float | None) -> httpx.Response:
    """One chat naming alpha (which hangs: it times out), the service's loop blocked ``stall_s`` once the
    request reached alpha (None: not blocked)."""
    before = fake.arrivals("alpha")
    answer: list[httpx.Response] = []
    body = {"model": "alpha", "messages": [{"role": "user", "content": "hi"}]}
    thread = threading.Thread(
        target=lambda: answer.append(httpx.post(svc.url + "/v1/chat/completions", json=body, timeout=CLIENT_TIMEOUT_S))
    )
    thread.start()
    while fake.arrivals("alpha") == before and thread.is_alive():
        time.sleep(0.005)
    if stall_s is not None:
        svc.starve(stall_s)
    thread.join(CLIENT_TIMEOUT_S)
    return answer[0]


def test_a_starved_service_does_not_open_the_circuit_of_a_healthy_upstream(fake: FakeUpstreams, tmp_path: Path) -> None:
    """Three attempts at alpha time out while the service's own loop stands still for 1.5 s each: they
    are starved (503 with Retry-After, the router's limit), alpha's circuit stays closed with no failure
    counted, and /health and /metrics count 3 starved attempts. Then three timeouts of the same kind
    without the stall open the circuit, as breaker_failures: 3 says (the control)."""
    fake.behaviour["alpha"] = "hang"
    with constant_service(fake, tmp_path, **SETTINGS) as svc:
        for _ in range(3):
            answer = _chat_alpha_while(svc, fake, STALL_S)
            assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
            assert "router's own event loop lagged" in answer.json()["error"]["message"]
            assert answer.json()["evalprism"]["attempts"][0]["starved"] is True
        report = health(svc)
        alpha = report["upstreams"]["alpha"]
        assert (alpha["state"], alpha["consecutive_failures"], alpha["starved_attempts"]) == ("closed", 0, 3)
        assert report["event_loop"]["starved_attempts"] == 3 and report["event_loop"]["lag_ms"] >= 1000
        assert metric_values(svc, "evalprism_starved_attempts_total") == {'upstream="alpha"': 3.0}
        assert metric_values(svc, "evalprism_upstream_errors_total") == {}
        assert [line["outcome"] for line in svc.log_lines()] == ["unavailable"] * 3
        for _ in range(3):  # the control: the same timeouts, the service not starved
            assert _chat_alpha_while(svc, fake, None).status_code == 502
        alpha = health(svc)["upstreams"]["alpha"]
        assert (alpha["state"], alpha["consecutive_failures"], alpha["starved_attempts"]) == ("open", 3, 3)
        assert "upstream timed out" in alpha["last_error"]


def _stream_alpha_while(svc: Any, stall_s: float | None, request_id: str) -> str:
    """A stream naming alpha, whose upstream sends its first event and hangs (a read timeout ends it), the
    service's loop blocked ``stall_s`` once that first event reached the client (None: not blocked)."""
    body = {"model": "alpha", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    received = b""
    with httpx.stream(
        "POST",
        svc.url + "/v1/chat/completions",
        json=body,
        headers={"x-request-id": request_id},
        timeout=CLIENT_TIMEOUT_S,
    ) as response:
        for piece in response.iter_raw():
            if not received and stall_s is not None:
                svc.starve(stall_s)
            received += piece
    return received.decode()


def test_a_stream_cut_by_a_starved_read_timeout_is_not_the_upstreams_failure(
    fake: FakeUpstreams, tmp_path: Path
) -> None:
    """alpha's stream sends one event and hangs, so a read timeout (4 s) ends it. While the service's loop
    stands still 5 s from when the first event reached the client, that timeout is the router's: no failure
    counted, one starved attempt, and the line's stream_error says so; the same break without the stall
    counts against alpha. (The stall begins within the timeout however slow the test process is at
    starting it, up to 4 s.)"""
    fake.behaviour["alpha"] = "hang_after_first"
    with constant_service(fake, tmp_path, timeout_s=4.0, starvation_lag_s=1.0) as svc:
        assert "upstream stream broke off (ReadTimeout)" in _stream_alpha_while(svc, 5.0, "starved-stream")
        line = svc.log_line("starved-stream")
        assert line["outcome"] == "stream_broken" and "router's own event loop lagged" in line["stream_error"]
        alpha = health(svc)["upstreams"]["alpha"]
        assert (alpha["consecutive_failures"], alpha["starved_attempts"]) == (0, 1)
        assert metric_values(svc, "evalprism_starved_attempts_total") == {'upstream="alpha"': 1.0}
        _stream_alpha_while(svc, None, "plain-stream")  # the control
        assert "lagged" not in svc.log_line("plain-stream")["stream_error"]
        alpha = health(svc)["upstreams"]["alpha"]
        assert (alpha["consecutive_failures"], alpha["starved_attempts"]) == (1, 1)
        assert metric_values(svc, "evalprism_upstream_errors_total") == {'upstream="alpha"': 1.0}
