"""The router service's parts that need no model or server: micro-batch isolation, the circuit
breaker, Retry-After, the request-body checks and the decision log's JSON (tests/test_serve.py
covers the whole service over HTTP)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from email.utils import format_datetime

import httpx
import pytest
from pydantic import ValidationError

from evalprism.serve.batcher import MicroBatcher
from evalprism.serve.decisions import DecisionLog, json_line
from evalprism.serve.health import HealthBoard
from evalprism.serve.schemas import ChatCompletionRequest, check_values
from evalprism.serve.upstream import retry_after_seconds


def test_one_failing_item_fails_only_its_own_request() -> None:
    """16 concurrent items, one of which makes the batch function raise (as the tokenizer did on a
    lone surrogate): the 15 others get their results, in every round, and batches really were shared."""
    calls: list[int] = []

    def reciprocal(items: list[int]) -> list[float]:
        calls.append(len(items))
        return [1 / x for x in items]

    async def rounds() -> list[list[object]]:
        batcher: MicroBatcher[int, float] = MicroBatcher(reciprocal, window_s=0.05, max_batch=16)
        await batcher.start()
        out = []
        for _ in range(5):
            out.append(
                await asyncio.gather(
                    *(batcher.submit(0 if i == 9 else i + 1) for i in range(16)), return_exceptions=True
                )
            )
        await batcher.stop()
        return out

    for results in asyncio.run(rounds()):
        assert isinstance(results[9], ZeroDivisionError)
        assert [r for i, r in enumerate(results) if i != 9] == [1 / (i + 1) for i in range(16) if i != 9]
    assert max(calls) > 1  # the poisoned item really shared batches with innocent ones


def test_a_lone_item_never_waits_for_a_batch() -> None:
    """An item that finds the queue empty runs at once, whatever the window: with a 30 s window the old
    batcher held it 30 s. Concurrent items still share batches."""
    calls: list[int] = []

    def double(items: list[int]) -> list[int]:
        calls.append(len(items))
        return [2 * x for x in items]

    async def run() -> tuple[int, list[int]]:
        batcher: MicroBatcher[int, int] = MicroBatcher(double, window_s=30.0, max_batch=16)
        await batcher.start()
        alone = await asyncio.wait_for(batcher.submit(21), timeout=10)
        together = await asyncio.wait_for(asyncio.gather(*(batcher.submit(i) for i in range(16))), timeout=10)
        await batcher.stop()
        return alone, together

    alone, together = asyncio.run(run())
    assert alone == 42 and together == [2 * i for i in range(16)]
    assert calls[0] == 1 and max(calls[1:]) > 1


@pytest.mark.parametrize("inline", [True, False])
def test_batches_run_inline_when_the_batch_function_asks(inline: bool) -> None:
    """A batch function marked ``inline`` (the routing core of a static backbone) runs in the event
    loop's thread; any other in the batcher's worker thread. Failures are isolated either way."""
    import threading

    threads: set[int] = set()

    class Reciprocal:
        def __init__(self) -> None:
            self.inline = inline

        def __call__(self, items: list[int]) -> list[float]:
            threads.add(threading.get_ident())
            return [1 / x for x in items]

    async def run() -> tuple[int, list[object]]:
        batcher: MicroBatcher[int, float] = MicroBatcher(Reciprocal(), max_batch=8)
        await batcher.start()
        out = await asyncio.gather(*(batcher.submit(i) for i in range(4)), return_exceptions=True)
        await batcher.stop()
        return threading.get_ident(), out

    loop_thread, out = asyncio.run(run())
    assert isinstance(out[0], ZeroDivisionError) and out[1:] == [1.0, 0.5, 1 / 3]
    assert (threads == {loop_thread}) == inline and len(threads) == 1


def test_circuit_opens_after_threshold_failures_and_half_opens_after_the_cool_down() -> None:
    now = [100.0]
    board = HealthBoard(["a", "b"], threshold=3, cooldown_s=30.0, clock=lambda: now[0])
    board.failure(board.acquire("a"), "boom")
    board.failure(board.acquire("a"), "boom")
    assert board.state("a") == "closed"
    board.success(board.acquire("a"))  # a success in between resets the count
    for _ in range(3):
        board.failure(board.acquire("a"), "boom")
    assert board.state("a") == "open" and board.acquire("a") is None and board.acquire("b") is not None
    assert board.report()["a"].retry_in_s == 30.0 and board.report()["a"].consecutive_failures == 3
    now[0] += 29.9
    assert board.state("a") == "open"
    now[0] += 0.2
    assert board.state("a") == "half_open" and board.admits("a")
    trial = board.acquire("a")
    board.failure(trial, "still down")  # the trial failed: open for another cool-down
    assert board.state("a") == "open" and board.report()["a"].retry_in_s == 30.0
    now[0] += 31
    board.success(board.acquire("a"))
    assert board.state("a") == "closed" and board.report()["a"].consecutive_failures == 0


def test_a_half_open_circuit_gives_one_trial_ticket_at_a_time() -> None:
    now = [0.0]
    board = HealthBoard(["a"], threshold=1, cooldown_s=10.0, clock=lambda: now[0])
    board.failure(board.acquire("a"), "boom")
    assert board.acquire("a") is None
    now[0] = 10.0
    tickets = [board.acquire("a") for _ in range(16)]
    trial = tickets[0]
    assert trial is not None and trial.trial and tickets[1:] == [None] * 15
    assert board.blocked_by_trial("a") and board.acquire("a", force=True) is None
    board.release(trial)  # the trial's client left: no verdict, the slot is free again
    assert board.state("a") == "half_open" and board.report()["a"].consecutive_failures == 1
    second = board.acquire("a")
    assert second is not None and second.trial
    board.success(second)
    board.failure(second, "reported twice")  # a ticket reports once; the second report is ignored
    assert board.state("a") == "closed" and board.report()["a"].consecutive_failures == 0
    board.failure(board.acquire("a"), "boom")  # open again: only a forced request (no other candidate) gets in
    assert board.acquire("a") is None
    forced = board.acquire("a", force=True)
    assert forced is not None and forced.trial and board.acquire("a", force=True) is None


def test_retry_after_in_seconds_or_as_an_http_date() -> None:
    now = datetime(2026, 11, 24, 12, 0, 0, tzinfo=UTC)
    assert retry_after_seconds("7") == 7.0
    assert retry_after_seconds(format_datetime(datetime(2026, 11, 24, 12, 1, 30, tzinfo=UTC), usegmt=True), now) == 90.0
    assert retry_after_seconds("Tue, 24 Nov 2026 11:00:00 GMT", now) == 0.0  # in the past: retry now
    assert retry_after_seconds("soon") is None and retry_after_seconds(None) is None
    assert retry_after_seconds("inf") is None


@pytest.mark.parametrize(
    "body,kind,param",
    [
        ({"messages": [{"role": "user", "content": "cut \ud83d"}]}, "invalid_text", "messages.0.content"),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": "x\udc00"}]}]},
            "invalid_text",
            "messages.0.content.0.text",
        ),
        ({"messages": [{"role": "user", "content": "hi"}], "metadata": {"k\udbed": "v"}}, "invalid_text", "metadata"),
        (
            {"messages": [{"role": "user", "content": "hi"}], "temperature": float("nan")},
            "non_finite_number",
            "temperature",
        ),
        (
            {"messages": [{"role": "user", "content": "hi"}], "logit_bias": {"5": float("-inf")}},
            "non_finite_number",
            "logit_bias.5",
        ),
    ],
)
def test_body_checks_name_the_place(body: dict, kind: str, param: str) -> None:
    with pytest.raises(ValidationError) as info:
        ChatCompletionRequest.model_validate(body)
    error = info.value.errors()[0]
    assert (error["type"], error["ctx"]["param"]) == (kind, param)


def test_valid_text_passes_the_checks() -> None:
    check_values({"messages": [{"content": "emoji \U0001f600 and accents é, 1.5e300"}], "n": 1, "t": 1e308})


def test_decision_log_lines_are_strict_json(tmp_path) -> None:
    assert json_line({"x": float("inf"), "y": [1.0, float("nan")], "z": 2.5}) == '{"x":null,"y":[1.0,null],"z":2.5}'
    log = DecisionLog(tmp_path / "d.jsonl")
    log.write({"budget": float("inf"), "ok": 1})
    log.close()

    def refuse(constant: str) -> None:
        raise ValueError(constant)

    line = json.loads((tmp_path / "d.jsonl").read_text(), parse_constant=refuse)
    assert line["budget"] is None and line["ok"] == 1


def _sse_response(lines: list[bytes]) -> httpx.Response:
    """A real httpx response whose body streams ``lines`` (what an upstream sends)."""

    async def body():
        for line in lines:
            yield line

    return httpx.Response(200, content=body(), headers={"content-type": "text/event-stream"})


CHUNK = b'data: {"choices": [{"delta": {"content": "hi"}}]}\n\n'
USAGE = b'data: {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}\n\n'


@pytest.mark.parametrize(
    "lines,end",
    [
        ([CHUNK, USAGE, b"data: [DONE]\n\n"], "completed"),
        ([CHUNK, USAGE], "stream_broken"),  # the upstream closed without [DONE]
    ],
)
def test_a_relayed_stream_says_how_it_ended(lines: list[bytes], end: str) -> None:
    from evalprism.serve.upstream import Relayed, relay_events

    async def relay() -> tuple[Relayed, bytes]:
        relayed = Relayed()
        out = b"".join(
            [
                chunk
                async for chunk in relay_events(
                    _sse_response(lines), {"decided": "m"}, relayed, lambda usage: usage["prompt_tokens"] * 0.5
                )
            ]
        )
        return relayed, out

    relayed, out = asyncio.run(relay())
    assert relayed.end == end and relayed.usage["completion_tokens"] == 2
    events = [json.loads(line[5:]) for line in out.decode().splitlines() if line.startswith("data: {")]
    assert events[0]["evalprism"] == {"decided": "m"} and events[1]["evalprism"] == {"realised_cost": 1.5}


def test_a_stream_the_client_leaves_is_cut() -> None:
    from evalprism.serve.upstream import Relayed, relay_events

    async def leave_after_one() -> tuple[Relayed, int]:
        relayed = Relayed()
        stream = relay_events(_sse_response([CHUNK, CHUNK, b"data: [DONE]\n\n"]), {}, relayed)
        first = await anext(stream)
        await stream.aclose()  # what Starlette does when the client disconnects or the server shuts down
        return relayed, len(first)

    relayed, sent = asyncio.run(leave_after_one())
    assert relayed.end == "cut" and sent > 0


_TWO = "models:\n  a: {base_url: 'http://127.0.0.1:9/v1', cost: 1}\n  b: {base_url: 'http://127.0.0.1:9/v1', cost: 2}\n"


@pytest.mark.parametrize(
    "text,message",
    [
        (
            "models: {a: {base_url: 'http://x/v1', cost: true}}\n",
            "models.a.cost: expected a number, not the boolean true",
        ),
        (_TWO + "budget: false\n", "budget: expected a number, not the boolean false"),
        (_TWO + "opponent: {a: true, b: 1}\n", "opponent.a: expected a number, not the boolean true"),
        ("models: {a: {base_url: 'http:///v1', cost: 1}}\n", "models.a.base_url: expected a URL with a host"),
        (
            "models: {a: {base_url: 'http://x:99999/v1', cost: 1}}\n",
            "models.a.base_url: expected a port number between 1 and 65535 after the host (got 'http://x:99999/v1')",
        ),
        ("models: {a: {base_url: 'http://x:80a/v1', cost: 1}}\n", "models.a.base_url: expected a port number"),
        ("models: {a: {base_url: 'http://x:/v1', cost: 1}}\n", "models.a.base_url: expected a port number"),
        ("models: {a: {base_url: 'http://x /v1', cost: 1}}\n", "models.a.base_url: expected a URL without spaces"),
        (_TWO + "router_name: ''\n", "router_name: expected a non-empty name"),
        (_TWO + "router_name: b\n", "router_name: expected a name that is not also a candidate's"),
        (_TWO + "timeout_s: .inf\n", "timeout_s: expected a finite number (got .inf)"),
        (_TWO + "breaker_cooldown_s: .inf\n", "breaker_cooldown_s: expected a finite number (got .inf)"),
        (_TWO + "connect_timeout_s: .inf\n", "connect_timeout_s: expected a finite number (got .inf)"),
        (_TWO + "batch_window_ms: .inf\n", "batch_window_ms: Input should be less than or equal to 1000 (got .inf)"),
        (_TWO + "batch_window_ms: 60000\n", "batch_window_ms: Input should be less than or equal to 1000 (got 60000)"),
        (
            _TWO + "  a: {base_url: 'http://127.0.0.1:9/v1', cost: 5}\n",
            "models.a: the key 'a' is given twice (lines 2 and 4); expected each key once",
        ),
        (
            "models:\n  a: {base_url: 'http://x/v1', cost: 1}\nbudget: 2\nbudget: 3\n",
            "budget: the key 'budget' is given twice (lines 3 and 4)",
        ),
    ],
)
def test_config_values_the_service_would_misuse_are_refused(tmp_path, text: str, message: str) -> None:
    """Each is refused by load_config with one message naming the file and the key path (before,
    a boolean cost was 1.0, a duplicate model the later one, a window of .inf a service never healthy)."""
    from evalprism.errors import EvalprismError
    from evalprism.serve.config import load_config

    path = tmp_path / "router.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(EvalprismError) as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}: ") and message in str(info.value), str(info.value)
    assert "more problem" not in str(info.value)


def test_config_limits_that_are_fine_pass(tmp_path) -> None:
    from evalprism.serve.config import load_config

    path = tmp_path / "router.yaml"
    path.write_text(
        _TWO.replace("127.0.0.1:9", "[::1]:65535") + "batch_window_ms: 1000\nrouter_name: auto\n"
        "timeout_s: 1\nopponent: {a: 1, b: 3}\n",
        encoding="utf-8",
    )
    config = load_config(path)
    assert config.batch_window_ms == 1000 and config.router_name == "auto" and config.timeout_s == 1.0
    assert config.models["a"].base_url == "http://[::1]:65535/v1" and config.opponent == {"a": 1.0, "b": 3.0}


def test_a_real_enospc_is_reported_and_the_decision_kept(tmp_path) -> None:
    """/dev/full fails every write with the kernel's ENOSPC: the log says why, keeps the decision
    (marked late, refused) and never raises anything but DecisionLogUnwritable."""
    import os

    from evalprism.serve.decisions import DecisionLogUnwritable

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    log = DecisionLog("/dev/full")
    with pytest.raises(DecisionLogUnwritable) as info:
        log.write({"endpoint": "/v1/route", "prompt_sha256": "ab"})
    assert str(info.value) == "the decision log /dev/full cannot be written (the disk is full)"
    assert (log.error, log.unwritten, log.count) == ("the disk is full", 1, 0)
    assert not log.retry() and log.unwritten == 1
    with pytest.raises(DecisionLogUnwritable):
        log.require()
    log.close()


def test_decisions_kept_while_the_log_fails_are_bounded_and_counted(tmp_path, monkeypatch) -> None:
    from helpers import FillingDisk

    from evalprism.serve import decisions
    from evalprism.serve.decisions import DecisionLogUnwritable

    monkeypatch.setattr(decisions, "MAX_UNWRITTEN", 3)
    disk: list[FillingDisk] = []

    def full_disk(path):  # the log's file, on a disk that is full from the start
        if not disk:
            disk.append(FillingDisk(path))
            disk[0].full = True
        return disk[0]

    log = DecisionLog(tmp_path / "d.jsonl", opener=full_disk)
    for k in range(5):
        with pytest.raises(DecisionLogUnwritable):
            log.write({"endpoint": "/v1/route", "prompt_sha256": str(k)}, answered=k == 4)
    assert (log.unwritten, log.dropped) == (3, 2)
    disk[0].full = False
    assert log.retry() and log.error is None and log.count == 3
    log.close()
    lines = [json.loads(line) for line in (tmp_path / "d.jsonl").read_text().splitlines()]
    assert [r["prompt_sha256"] for r in lines] == ["2", "3", "4"]  # the oldest two were dropped
    assert [r["late"]["answered"] for r in lines] == [False, False, True]


@pytest.mark.parametrize(
    "text,reason",
    [
        ('{"time":"t","endpoint":"/v1/route","prompt_sha256":"a"}\n', None),
        ('{"time":"t","endpoint":"/v1/chat/completions","prompt_sha256":"a","late":{}}\n', None),
        ('{"time":"t","endpoint":"/v1/route","prompt_sha256":"a"}\n\n', "line 2 is not a JSON object"),
        ('{"_name_or_path": "x",\n "hidden_size": 384}\n', "line 1 is not a JSON object"),
        ('{"time":"t","endpoint":"/v1/route","prompt_sha256":"a"}\n[1, 2]\n', "line 2 is not a JSON object"),
        (
            '{"time":"t","endpoint":"/v1/leaderboard","prompt_sha256":"a"}\n',
            "line 1 is not a routing decision (expected time, endpoint and prompt_sha256)",
        ),
        ("models:\n  a: {cost: 1}\n", "line 1 is not a JSON object"),
    ],
)
def test_what_counts_as_a_decision_log(tmp_path, text: str, reason: str | None) -> None:
    from evalprism.serve.decisions import not_a_decision_log

    (tmp_path / "log.jsonl").write_text(text, encoding="utf-8")
    assert not_a_decision_log(tmp_path / "log.jsonl") == reason


def test_a_long_decision_log_is_recognised_by_its_head_and_tail(tmp_path) -> None:
    """A log of many decisions is read at both ends only (a service's log of millions of decisions must not
    cost seconds at start), and a foreign text appended after its first lines is still found at its end."""
    from evalprism.serve.decisions import not_a_decision_log

    line = '{"time":"t","endpoint":"/v1/route","prompt_sha256":"a"}\n'
    log = tmp_path / "log.jsonl"
    log.write_text(line * 50, encoding="utf-8")
    assert not_a_decision_log(log, sample_lines=10) is None
    log.write_text(line * 50 + "models:\n  a: {cost: 1}\n", encoding="utf-8")
    assert not_a_decision_log(log, sample_lines=10) == "a line near its end is not a JSON object"
    log.write_text(line * 5 + "oops\n" + line * 50, encoding="utf-8")
    assert not_a_decision_log(log, sample_lines=10) == "line 6 is not a JSON object"


def test_the_output_rules_for_an_appended_file(tmp_path) -> None:
    from evalprism.errors import EvalprismError
    from evalprism.io.outputs import check_output_file

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}\n")
    config = tmp_path / "router.yaml"
    config.write_text("models: {}\n")
    (tmp_path / "link.jsonl").symlink_to(model / "config.json")
    (tmp_path / "empty.jsonl").touch()
    (tmp_path / "foreign.txt").write_text("hello\n")
    inputs = [model, config]

    def refusal(path) -> str:
        with pytest.raises(EvalprismError) as info:
            check_output_file(path, "decision log", inputs=inputs, not_ours=lambda p: "line 1 is not mine")
        return str(info.value)

    assert refusal(model / "config.json").endswith(
        f"it is inside the input {model}, which appending would change; name a file outside the run's inputs"
    )
    assert refusal(model / "sub" / "new.jsonl").startswith(
        f"{model / 'sub' / 'new.jsonl'}: cannot be the decision log: it is inside the input {model}"
    )
    assert f"it is the input {config}" in refusal(config)
    assert "it is a symbolic link" in refusal(tmp_path / "link.jsonl")
    assert "it is a directory" in refusal(tmp_path)
    assert refusal(tmp_path / "foreign.txt") == (
        f"{tmp_path / 'foreign.txt'}: cannot be the decision log: the file exists and is not a decision log evalprism "
        "wrote (line 1 is not mine); evalprism appends only to its own decision logs; name a new file"
    )
    assert "foreign.txt is a file, not a directory" in refusal(tmp_path / "foreign.txt" / "d.jsonl")
    for fine in (tmp_path / "empty.jsonl", tmp_path / "new" / "d.jsonl"):
        assert check_output_file(fine, "decision log", inputs=inputs, not_ours=lambda p: "never") == fine
    assert (model / "config.json").read_text() == "{}\n" and not (tmp_path / "new").exists()


@pytest.mark.parametrize("budget", [None, 1.5, 2.6])
def test_routing_decisions_draw_as_numpy_choice_does(budget: float | None) -> None:
    """The batch's decisions, vectorised, are the per-prompt loop they replaced: each model drawn by
    ``Generator.choice(p=...)`` from the same seed (numpy as the oracle, draw for draw), the
    distribution's non-zero entries, and the affordable other candidates as fallbacks, best first."""
    import numpy as np
    from serve_harness import ConstantBackbone

    from evalprism.p2l.routing import route
    from evalprism.serve.config import ServeConfig
    from evalprism.serve.router import RoutingCore

    names = ["a", "b", "c", "d"]
    costs = {"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0}
    config = ServeConfig.model_validate(
        {"models": {n: {"base_url": f"http://{n}.test/v1", "cost": c} for n, c in costs.items()}, "seed": 3}
    )
    core = RoutingCore(ConstantBackbone.model(names, [0.0] * 4), config)
    coefs = np.random.default_rng(0).normal(0.0, 1.0, (400, 4))
    decisions = core.decide(coefs, budget)

    rng = np.random.default_rng(3)
    want = route(
        coefs[:, core.columns], core.costs, budget, core.opponent, names=names, value=core.route_value
    )  # as the core calls it
    limit_of = np.inf if budget is None else budget
    assert len(decisions) == 400
    mixed = 0
    for k, d in enumerate(decisions):
        p = np.clip(want.probs[k], 0.0, None)
        pick = int(rng.choice(4, p=p / p.sum()))
        limit = max(limit_of, costs[names[pick]])
        order = [int(j) for j in np.argsort(-want.values[k], kind="stable") if j != pick and costs[names[j]] <= limit]
        assert d.chosen == names[pick]
        assert d.probs == {names[j]: float(p[j]) for j in np.flatnonzero(p > 0)}
        assert d.fallbacks == tuple(names[j] for j in order)
        assert d.expected_winrate == float(want.expected_winrate[k])
        assert d.router_coef == float(want.router_coef[k]) and d.expected_cost == float(want.expected_cost[k])
        mixed += len(d.probs) > 1
    assert budget is None or mixed > 0  # a budget between costs mixes two models: the draw is exercised
