"""Test and benchmark harness for the router service, over real HTTP on loopback.

- :class:`FakeUpstreams`: one small OpenAI-compatible server standing in for the paid APIs. It
  answers ``POST /<model>/v1/chat/completions`` for every candidate (streaming and not, usage
  included) and can be told, per model, to fail with a 500 or a 529, to refuse with a 429 and
  ``Retry-After``, to answer 400, 401, 403, 404 or 422, to stall (until it shuts down: past any
  timeout of the service, however slow the machine), to hang until the test releases it, to break a
  stream off, or to send a stream's first event and then hang. It records what it received (to check
  the upstream model name and key the service sent). Only this stands in for something: the service
  under test is evalprism's own, started with ``evalprism serve``, or in-process by
  :class:`InProcessService` (the same app on a real port, with a tiny stand-in P2L model).
- :class:`ServiceProcess`: ``evalprism serve`` in a subprocess on a free port, ready once /health
  answers, however long that takes while the process runs.

Clients of the service use :data:`CLIENT_TIMEOUT_S`: a bound for a hang only, never for a slow answer.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import httpx
import uvicorn
import yaml
from helpers import HANG_LIMIT_S, ProcessExited, wait_while_running
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

CLIENT_TIMEOUT_S = HANG_LIMIT_S
"""httpx/openai timeout of a test's request to the service: a slow machine answers late, not never."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class FakeUpstreams:
    """OpenAI-compatible chat completions for every model under ``/<model>/v1``."""

    RETRY_AFTER: ClassVar[dict[str, str]] = {
        "poet-7b": "7",
        "calc-13b": "3",
        "coder-34b": "11",
        "generalist-70b": "5",
    }  # else "2"
    USAGE: ClassVar[dict[str, int]] = {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16}

    def __init__(self) -> None:
        # model -> "ok" (default) | "fail" (500) | "overloaded" (529) | "rate_limited" (429, Retry-After: RETRY_AFTER)
        #          | "slow" (no answer until the server shuts down) | "break" (a stream stops after its first chunk, the connection dropped)
        #          | "hang" (no answer until release() or shutdown) | "hang_after_first" (a stream's first event, then hang)
        #          | "status:NNN" (that status with an OpenAI-style error body)
        self.behaviour: dict[str, str] = {}
        self.received: list[dict[str, Any]] = []
        self.released = threading.Event()
        self.tool_call = False  # answer a conversation whose last turn is the user's with a tool call
        self.port = free_port()
        self.server = uvicorn.Server(
            uvicorn.Config(
                Starlette(routes=[Route("/{model}/v1/chat/completions", self._chat, methods=["POST"])]),
                host="127.0.0.1",
                port=self.port,
                log_level="warning",
                lifespan="off",
            )
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def reset(self) -> None:
        """Forget every behaviour and request of earlier tests; hanging answers wait again."""
        self.behaviour.clear()
        self.received.clear()
        self.released.clear()
        self.tool_call = False

    def base_url(self, model: str) -> str:
        return f"http://127.0.0.1:{self.port}/{model}/v1"

    @staticmethod
    def answer(model: str) -> str:
        return f"an answer from {model}"

    async def _chat(self, request: Request) -> Response:
        model = request.path_params["model"]
        body = await request.json()
        self.received.append({"path_model": model, "body": body, "authorization": request.headers.get("authorization")})
        behaviour = self.behaviour.get(model, "ok")
        if behaviour == "fail":
            return JSONResponse({"error": {"message": "upstream exploded"}}, status_code=500)
        if behaviour == "overloaded":
            return JSONResponse({"error": {"message": "overloaded"}}, status_code=529)
        if behaviour == "rate_limited":
            return JSONResponse(
                {"error": {"message": "slow down"}},
                status_code=429,
                headers={"retry-after": self.RETRY_AFTER.get(model, "2")},
            )
        if behaviour.startswith("status:"):
            status = int(behaviour.split(":")[1])
            return JSONResponse(
                {
                    "error": {
                        "message": f"fake upstream says {status}",
                        "type": "invalid_request_error",
                        "param": None,
                        "code": None,
                    }
                },
                status_code=status,
            )
        if behaviour == "slow":  # stalls past any timeout of the service; released only to let the server exit
            while not self.server.should_exit:
                await asyncio.sleep(0.05)
        if behaviour == "hang":
            await self._hang()
        text = self.answer(model)
        if body.get("stream"):
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return StreamingResponse(
                self._events(body["model"], text, usage, behaviour), media_type="text/event-stream"
            )
        message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None, "annotations": []}
        finish = "stop"
        if self.tool_call and body["messages"][-1]["role"] == "user":
            message = {
                "role": "assistant",
                "content": None,
                "refusal": None,
                "annotations": [],
                "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}
                ],
            }
            finish = "tool_calls"
        return JSONResponse(
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": self.USAGE,
            }
        )

    async def _hang(self) -> None:
        """Wait until the test releases the upstream (or the server shuts down)."""
        while not (self.released.is_set() or self.server.should_exit):
            await asyncio.sleep(0.01)

    def arrivals(self, model: str) -> int:
        """How many requests reached ``model``'s upstream so far."""
        return sum(r["path_model"] == model for r in list(self.received))

    async def _events(self, model: str, text: str, usage: bool, behaviour: str) -> Any:
        words = text.split(" ")
        for i, word in enumerate(words):
            piece = word if i == 0 else " " + word
            finish = "stop" if i == len(words) - 1 else None  # on the last content chunk, as some providers send it
            chunk = {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": model,
                "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": finish}],
            }
            yield f"data: {json.dumps(chunk)}\n\n"
            if behaviour == "hang_after_first":
                await self._hang()
            if behaviour == "break":
                raise ConnectionResetError("the fake upstream breaks the stream off")  # uvicorn drops the connection
        if usage:
            chunk = {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": model,
                "choices": [],
                "usage": self.USAGE,
            }
            yield f"data: {json.dumps(chunk)}\n\n"
        yield "data: [DONE]\n\n"

    def __enter__(self) -> FakeUpstreams:
        self.thread.start()
        deadline = time.monotonic() + HANG_LIMIT_S
        while not self.server.started:  # uvicorn's own signal that it listens
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the fake upstream server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=HANG_LIMIT_S)


def write_config(
    path: Path,
    upstreams: FakeUpstreams,
    costs: dict[str, float],
    prices: dict[str, tuple[float, float]] | None = None,
    **extra: Any,
) -> Path:
    """A router.yaml for candidates ``costs`` served by ``upstreams`` (key in $FAKE_UPSTREAM_KEY);
    ``prices``: per-token (prompt, completion) prices of some of them."""
    prices = prices or {}
    config = {
        "models": {
            name: {
                "base_url": upstreams.base_url(name),
                "upstream_model": f"up-{name}",
                "api_key_env": "FAKE_UPSTREAM_KEY",
                "cost": cost,
                **(
                    {"prompt_token_price": prices[name][0], "completion_token_price": prices[name][1]}
                    if name in prices
                    else {}
                ),
            }
            for name, cost in costs.items()
        },
        **extra,
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


class ServiceProcess:
    """``evalprism serve MODEL_DIR --config CONFIG`` on a free loopback port."""

    def __init__(self, model_dir: Path, config: Path, env: dict[str, str], *args: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cli = Path(sys.executable).with_name("evalprism")
        self.cmd = [
            str(cli),
            "serve",
            str(model_dir),
            "--config",
            str(config),
            "--port",
            str(self.port),
            "--log-level",
            "warning",
            *args,
        ]
        self.env = {**os.environ, **env}
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> ServiceProcess:
        """Start the service and return once /health answers 200: no deadline while the process runs
        (loading a model on a busy machine takes what it takes); its output at once if it exits first,
        and a failure after :data:`HANG_LIMIT_S` of running without answering (a hang)."""
        self.proc = subprocess.Popen(
            self.cmd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        try:
            wait_while_running(self._healthy, self.proc, "evalprism serve answering /health")
        except ProcessExited as exc:
            raise RuntimeError(f"{exc}:\n{self.proc.stdout.read()}") from None
        except TimeoutError:
            _, output = self.stop()
            raise RuntimeError(
                f"evalprism serve ran {HANG_LIMIT_S:.0f} s without answering /health:\n{output}"
            ) from None
        return self

    def _healthy(self) -> bool:
        try:  # refused until uvicorn listens; a slow answer is waited for
            return httpx.get(self.url + "/health", timeout=CLIENT_TIMEOUT_S).status_code == 200
        except httpx.TransportError:
            time.sleep(0.1)
            return False

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> tuple[int, str]:
        """SIGTERM and wait: (exit code, output)."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            out, _ = self.proc.communicate(timeout=HANG_LIMIT_S)  # a graceful shutdown, however slow
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        return self.proc.returncode, out


@contextmanager
def running_service(model_dir: Path, config: Path, env: dict[str, str], *args: str) -> Iterator[ServiceProcess]:
    service = ServiceProcess(model_dir, config, env, *args).start()
    try:
        yield service
    finally:
        service.stop()


class ConstantBackbone:
    """A stand-in P2L backbone for tests of the service's HTTP behaviour, not of P2L: every prompt gets
    the same one-dimensional feature, so the leaderboard is the head's bias and every routed request
    has the same decision and failover order (the order of ``bias``, best first)."""

    @staticmethod
    def model(models: list[str], bias: list[float]) -> Any:
        import torch

        from evalprism.p2l.backbones import Backbone
        from evalprism.p2l.model import CoefficientHead, P2LModel

        class _Constant(Backbone):
            spec, dim, trainable = "constant", 1, False

            def features(self, prompts: Any) -> torch.Tensor:
                return torch.ones((len(prompts), 1))

        head = CoefficientHead(1, len(models), "bt")
        with torch.no_grad():
            head.linear.bias.copy_(torch.tensor(bias))
        return P2LModel(_Constant(), head, models, {"outcome_model": "bt", "models": models})


class InProcessService:
    """The service's app (:func:`evalprism.serve.app.create_app`) served by uvicorn on a free loopback
    port in a thread of the test process: real HTTP, started in well under a second. Each one is a
    new app, with its own circuits, metrics, batcher and decision log: tests share none of them."""

    def __init__(
        self,
        model: Any,
        config_path: Path,
        log: Any,
        upstream_keys: dict[str, str | None],
        api_keys: tuple[str, ...] = (),
    ) -> None:
        """``log``: the decision log's path, or an open :class:`~evalprism.serve.decisions.DecisionLog`;
        ``api_keys``: the bearer tokens the service accepts (none: no auth)."""
        from evalprism.serve.app import create_app
        from evalprism.serve.config import Secrets, load_config

        config = load_config(config_path, model.models)
        app = create_app(model, config, Secrets(api_keys, upstream_keys), decision_log=log, precision="float32")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path: Path = Path(getattr(log, "path", log))
        self.app = app
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> InProcessService:
        self.thread.start()
        deadline = time.monotonic() + HANG_LIMIT_S
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the in-process service did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=HANG_LIMIT_S)

    def starve(self, seconds: float) -> None:
        """Block the service's event loop for ``seconds`` from now, as CPU starvation would: a synchronous
        sleep run in its thread, through the loop the service's lag sampler measures (a test-only way in)."""
        loop = self.app.state.service.loop_lag.loop
        loop.call_soon_threadsafe(time.sleep, seconds)

    def log_lines(self) -> list[dict[str, Any]]:
        """The decision log's lines as written, each checked to read back as the service's own
        (:func:`~evalprism.serve.decisions.read_line`: its declared schema, of the current version)."""
        from evalprism.serve.decisions import SCHEMA_VERSION, read_line

        text = self.log_path.read_text(encoding="utf-8") if self.log_path.exists() else ""
        lines = text.splitlines()
        assert all(read_line(line).schema_version == SCHEMA_VERSION for line in lines)
        return [json.loads(line) for line in lines]

    def log_line(self, request_id: str) -> dict[str, Any]:
        """The decision log's line of ``request_id``, once written (a stream's is written when it ends)."""
        deadline = time.monotonic() + HANG_LIMIT_S
        while True:
            found = [r for r in self.log_lines() if r.get("request_id") == request_id]
            if found:
                return found[-1]
            if time.monotonic() > deadline:
                raise AssertionError(f"no decision log line for request {request_id}")
            time.sleep(0.01)


# --- a service with the constant stand-in model, and what it reports -------------------------------

#: the candidates of :func:`constant_service`, best first: every routed request tries them in this order
MODELS = ["alpha", "beta", "gamma", "delta"]
COSTS = dict.fromkeys(MODELS, 1.0)


def topic_model(root: Path) -> Path:
    """A small P2L model really trained (frozen minilm, 3,000 simulated battles over three topics whose
    leaderboards disagree), saved in ``root``: the model `evalprism serve` runs in the tests."""
    from evalprism.p2l import TrainOptions, train_model
    from evalprism.p2l.simulate import simulate_topic_battles

    trained = train_model(
        simulate_topic_battles(3000, seed=0), TrainOptions(seed=0), cache_dir=str(root / "cache"), progress=False
    )
    return trained.save(root / "model")


def constant_service(fake: FakeUpstreams, tmp_path: Path, **settings: Any) -> InProcessService:
    """An in-process service over ``fake`` with the constant stand-in model (routed order alpha, beta,
    gamma, delta); ``settings``: config keys beyond its defaults (a 30 s upstream timeout, circuits that
    stay open an hour, seed 0)."""
    settings = {"timeout_s": 30.0, "breaker_cooldown_s": 3600.0, "seed": 0, **settings}
    config = write_config(tmp_path / "router.yaml", fake, COSTS, **settings)
    model = ConstantBackbone.model(MODELS, [3.0, 2.0, 1.0, 0.0])
    return InProcessService(model, config, tmp_path / "decisions.jsonl", dict.fromkeys(MODELS, "upstream-key"))


def health(svc: InProcessService | ServiceProcess) -> dict[str, Any]:
    return httpx.get(svc.url + "/health", timeout=CLIENT_TIMEOUT_S).json()


def metric_values(svc: InProcessService | ServiceProcess, name: str) -> dict[str, float]:
    """The samples of metric ``name`` on ``/metrics``, by their label text (``upstream="alpha"``; "" if none)."""
    out = {}
    for line in httpx.get(svc.url + "/metrics", timeout=CLIENT_TIMEOUT_S).text.splitlines():
        if line.startswith((name + "{", name + " ")):
            labels = line[len(name) :].split("}")[0].lstrip("{") if "{" in line else ""
            out[labels] = float(line.rsplit(" ", 1)[1])
    return out


def attempt_counts(svc: InProcessService, upstream: str) -> dict[str, float]:
    """/metrics' upstream attempts of ``upstream`` by result, and its upstream errors as ``errors``."""
    counts = {}
    for labels, value in metric_values(svc, "evalprism_upstream_attempts_total").items():
        if f'upstream="{upstream}"' in labels:
            counts[labels.split('result="')[1].split('"')[0]] = value
    errors = metric_values(svc, "evalprism_upstream_errors_total").get(f'upstream="{upstream}"')
    if errors is not None:
        counts["errors"] = errors
    return counts
