"""The lean path (evalprism.serve.lean) answers exactly as FastAPI does: the same requests, good and bad,
sent to two in-process services over real HTTP, one with the lean path and one whose app has it taken
out (FastAPI answers everything there), get the same statuses, bodies and decision-log lines; the lean
one answers the well-formed ones itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from serve_harness import CLIENT_TIMEOUT_S, FakeUpstreams, InProcessService, constant_service

from evalprism.serve.lean import LeanRoutes, is_json

JSON = {"content-type": "application/json"}
HI = [{"role": "user", "content": "hi"}]
#: (path, body, headers): well-formed requests, the lean path's own, then everything it hands to FastAPI
REQUESTS: list[tuple[str, bytes, dict[str, str]]] = [
    ("/v1/route", json.dumps({"messages": HI}).encode(), JSON),
    (
        "/v1/route",
        json.dumps({"messages": HI, "budget": 2.5}).encode(),
        {"content-type": "application/json; charset=utf-8"},
    ),
    ("/v1/chat/completions", json.dumps({"messages": HI, "temperature": 0.5, "seed": 3}).encode(), JSON),
    ("/v1/chat/completions", json.dumps({"model": "beta", "messages": HI, "stream": True}).encode(), JSON),
    # refused by the endpoints themselves (the lean path calls them: their exceptions, the app's handlers)
    ("/v1/route", json.dumps({"messages": HI, "budget": 0.5}).encode(), JSON),
    ("/v1/route", json.dumps({"messages": [{"role": "system", "content": "be brief"}]}).encode(), JSON),
    ("/v1/chat/completions", json.dumps({"model": "gpt-9", "messages": HI}).encode(), JSON),
    ("/v1/route", json.dumps({"messages": [{"role": "user", "content": "x" * 40_000}]}).encode(), JSON),
    # refused by validation or decoding: FastAPI's own answers
    ("/v1/route", b"{not json", JSON),
    ("/v1/route", b"", JSON),
    ("/v1/route", b"[1, 2]", JSON),
    ("/v1/route", b'{"messages": [{"role": "user", "content": "hi \\udbed"}]}', JSON),
    ("/v1/route", b'{"messages": [{"role": "user", "content": "hi \xed\xa0\x80 \xff"}]}', JSON),
    ("/v1/route", b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", JSON),
    ("/v1/route", b'{"messages": [{"role": "user", "content": "hi"}], "budget": NaN}', JSON),
    ("/v1/route", b'{"messages": [{"role": "user", "content": "hi"}], "budget": 1e999}', JSON),
    ("/v1/route", b'{"messages": [{"role": "user", "content": "hi"}], "budegt": 2}', JSON),
    ("/v1/route", b'{"messages": [{"role": "robot", "content": "hi"}]}', JSON),
    ("/v1/route", b'{"messages": [{"role": "user", "content": [{"type": "text"}]}]}', JSON),
    ("/v1/chat/completions", b'{"messages": [], "model": "alpha"}', JSON),
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "hi"}], "budegt": 2}', JSON),
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}', JSON),
    # not declared as plain JSON: FastAPI's way (415, or parsed as +json)
    ("/v1/route", json.dumps({"messages": HI}).encode(), {"content-type": "text/plain"}),
    ("/v1/route", json.dumps({"messages": HI}).encode(), {}),
    ("/v1/route", json.dumps({"messages": HI}).encode(), {"content-type": "application/vnd.api+json"}),
]
#: the fields that differ between two runs of one request (times, ids, durations)
# bytes_relayed: a stream carries routing_ms and latencies in its first event, whose digits vary in number
VOLATILE = {"time", "request_id", "latency_ms", "routing_ms", "id", "created", "bytes_relayed"}


def _stable(value: Any) -> Any:
    """``value`` without the fields that differ between runs."""
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def _answer(svc: InProcessService, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, Any]:
    response = httpx.post(svc.url + path, content=body, headers=headers, timeout=CLIENT_TIMEOUT_S)
    text = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        events = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]
        return response.status_code, _stable(events)
    return response.status_code, _stable(json.loads(text))


def _lines(svc: InProcessService) -> list[str]:
    """The service's decision-log lines without their volatile fields, in a fixed order."""
    return sorted(json.dumps(_stable(line), sort_keys=True) for line in svc.log_lines())


def _lean_of(svc: InProcessService) -> LeanRoutes | None:
    """The app's lean-path middleware, if its middleware stack has one."""
    layer: Any = svc.app.middleware_stack
    while layer is not None and not isinstance(layer, LeanRoutes):
        layer = getattr(layer, "app", None)
    return layer


def test_the_lean_path_answers_as_fastapi_does(fake: FakeUpstreams, tmp_path: Path) -> None:
    (tmp_path / "lean").mkdir()
    (tmp_path / "fastapi").mkdir()
    with constant_service(fake, tmp_path / "lean") as lean, constant_service(fake, tmp_path / "fastapi") as plain:
        plain.app.user_middleware = [m for m in plain.app.user_middleware if m.cls is not LeanRoutes]
        plain.app.middleware_stack = plain.app.build_middleware_stack()
        assert _lean_of(plain) is None
        for path, body, headers in REQUESTS:
            answer = _answer(lean, path, body, headers)
            assert answer == _answer(plain, path, body, headers), (path, body[:80], headers)
            assert answer[0] < 500, answer
        lean_path = _lean_of(lean)
        assert lean_path is not None and lean_path.answered == 8  # the well-formed ones and the endpoints' own refusals
        # as sets of lines: a stream's line is written when the stream ends, which under load can come after
        # the next request's line
        assert _lines(lean) == _lines(plain)
        assert len(lean.log_lines()) == 5  # the four well-formed requests and the one +json


@pytest.mark.parametrize(
    "value,plain",
    [
        (b"application/json", True),
        (b"Application/JSON; charset=utf-8", True),
        (b"application/json ", True),
        (b"application/jsonp", False),
        (b"application/vnd.api+json", False),
        (b"text/plain", False),
        (None, False),
    ],
)
def test_what_counts_as_plain_json(value: bytes | None, plain: bool) -> None:
    assert is_json(value) is plain
