"""Load benchmark of the P2L router service (`evalprism serve`), loopback only, bounded.

What runs, in one process tree on this machine:

* a P2L model with the default backbone (frozen minilm), trained on simulated battles (seconds);
* the small OpenAI-compatible upstream of ``tests/serve_harness.py`` standing in for the paid APIs;
* ``evalprism serve`` as a subprocess, three times: the default config (micro-batching, the
  encoder in OpenVINO, bfloat16 where the CPU has it), the peer with batching off
  (``max_batch: 1``: one P2L call per request), and the default config with ``runtime: torch``
  (what OpenVINO buys);
* a closed-loop load generator (``_loadgen.py``: keep-alive connections, httptools parser, about
  0.05 ms of CPU per request, so that it takes little from the service on the same two cores;
  ``--client httpx`` uses httpx instead): ``--clients`` concurrent clients sending ``--routes``
  ``POST /v1/route`` requests with distinct prompts, then ``--chats`` chat completions through the
  router (non-streaming and streaming alternately); for the default config also the route load
  with one request in 16 poisoned (a lone UTF-16 surrogate: 400 for it, 200 for every other).

With ``--static`` (the default) the same route and chat loads also run against a service whose model has
the static backbone (``--backbone static``: model2vec's distillation of MiniLM, built once into the cache,
about 7 minutes the first time), against the MiniLM service of the same run: CPU per request of routes and
of chats, p50/p99 and their ratios (targets: >= 20x less CPU per request, p99 <= 50 ms at 32 clients). ``--sweep`` runs
batching on and off at 1, 8 and 32 clients for each backbone (batching must never be slower).
Prompts are real Arena prompts (``--prompts arena``, the default when ``../shared/data`` is there: the
distinct first user turns of ``p2l-battles/arena33k_human_elobench``, in a seeded random order) or the
synthetic ones (``--prompts synthetic``: 10-40 words, cheaper to encode).

Reported: throughput, p50 / p99 latency of ``/v1/route`` seen by the clients, batching's gain
(throughput ratio and p99 ratio against batching off), CPU per request of the service and of the
load generator, errors (target 0) and whether the decision log holds exactly one line per
request. Target on 2 cores with the default backbone: p99 of ``/v1/route`` <= 100 ms at 32
concurrent clients. The table footer prints the load average.

Run ``python benchmarks/bench_serve.py`` (about a minute) or ``--quick``. Always exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
from _loadgen import Load, closed_loop
from _table import Report, Row, fmt_x, load_note, log, print_table, status

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from serve_harness import FakeUpstreams, ServiceProcess, write_config

TARGET_P99_MS = 100.0
TARGET_CLIENTS = 32
POISON_EVERY = 16  # the poisoned-request mix: one request in 16 holds a lone UTF-16 surrogate
COSTS = {"poet-7b": 0.2, "calc-13b": 0.4, "coder-34b": 1.0, "generalist-70b": 3.0}
_SUBJECTS = [
    "a sonnet about the autumn sea",
    "the integral of x squared times sine x",
    "a Python function that merges two sorted lists",
    "the causes of the French revolution",
    "a haiku about debugging at night",
    "the probability of two sixes in three dice rolls",
    "a SQL query for the top customers by revenue",
    "a short story about a lighthouse keeper",
]
_ASKS = ["Please write", "Can you explain", "I need help with", "Give me", "Walk me through"]
_DETAILS = [
    "Keep it under two hundred words.",
    "Show every step.",
    "Use plain language for a beginner.",
    "Add one example at the end.",
    "Mention the most common mistake.",
    "",
]


ARENA_BATTLES = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "data"
    / "p2l-battles"
    / "arena33k_human_elobench"
    / "battles.jsonl"
)
#: where the prompts come from: "arena" (real prompts) or "synthetic" (set by main)
PROMPT_SOURCE = ["synthetic"]
_ARENA: list[str] = []


def arena_prompts(n: int, seed: int) -> list[str]:
    """``n`` real Arena prompts (the distinct canonical prompts of the human Arena slice, in an order
    drawn with ``seed``); past its 1,773 prompts they repeat, each repeat numbered so none is the same text."""
    if not _ARENA:
        from evalprism.io.battles import read_battles

        _ARENA.extend(dict.fromkeys(read_battles(ARENA_BATTLES)["prompt"].astype(str)))
    order = np.random.default_rng(seed).permutation(len(_ARENA))
    return [_ARENA[order[k % len(order)]] + (f" (request {k})" if k >= len(order) else "") for k in range(n)]


def prompts(n: int, seed: int) -> list[str]:
    """``n`` distinct prompts: real Arena prompts (:func:`arena_prompts`) or, with ``--prompts synthetic``,
    10 to 40 words across the simulated topics (numbered, so that no cache anywhere could answer a repeat)."""
    if PROMPT_SOURCE[0] == "arena":
        return arena_prompts(n, seed)
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        parts = [
            _ASKS[rng.integers(len(_ASKS))],
            _SUBJECTS[rng.integers(len(_SUBJECTS))] + ".",
            *(_DETAILS[i] for i in rng.choice(len(_DETAILS), size=rng.integers(1, 4), replace=False)),
        ]
        out.append(" ".join(p for p in parts if p) + f" (request {k})")
    return out


async def closed_loop_httpx(url: str, path: str, bodies: list[dict], clients: int) -> Load:
    """The same closed loop with httpx's AsyncClient (``--client httpx``): what a Python client costs."""
    queue = list(reversed(bodies))
    latencies: list[float] = []
    errors = 0
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal errors
        while queue:
            body = queue.pop()
            start = time.perf_counter()
            try:
                async with client.stream("POST", path, json=body) as response:
                    async for _ in response.aiter_bytes():
                        pass
                ok = response.status_code == 200
            except httpx.HTTPError:
                ok = False
            latencies.append((time.perf_counter() - start) * 1e3)
            errors += not ok

    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
        cpu, start = time.thread_time(), time.perf_counter()
        await asyncio.gather(*(worker(client) for _ in range(clients)))
        seconds, cpu = time.perf_counter() - start, time.thread_time() - cpu
    return Load(seconds, np.array(latencies), errors, cpu * 1e3 / max(len(bodies), 1))


def run_load(
    service: ServiceProcess, path: str, bodies: list[dict], args: argparse.Namespace, expected: list[int] | None = None
) -> tuple[Load, float]:
    """One closed-loop run against ``service``: what the clients saw, and the service's CPU ms per request
    (``expected``: the status each body should get, default 200; the lean load generator only)."""
    if args.client == "httpx" and expected is None:
        coroutine = closed_loop_httpx(service.url, path, bodies, args.clients)
    else:
        coroutine = closed_loop("127.0.0.1", service.port, path, bodies, args.clients, expected=expected)
    # this process trained the model: a full collection of its heap mid-run would stall the clients
    gc.collect()
    gc.freeze()
    cpu = process_cpu_seconds(service.pid)
    with asyncio.Runner(loop_factory=_event_loop_factory()) as runner:
        load = runner.run(coroutine)
    return load, (process_cpu_seconds(service.pid) - cpu) * 1e3 / max(len(bodies), 1)


def _event_loop_factory():
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux /proc; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def train_model(root: Path, backbone: str = "minilm") -> Path:
    from evalprism.p2l import TrainOptions, train_model
    from evalprism.p2l.simulate import simulate_topic_battles

    # the static model lives in evalprism's own cache (built there once), not in this run's temporary one
    trained = train_model(
        simulate_topic_battles(3000, seed=0),
        TrainOptions(seed=0, backbone=backbone),
        cache_dir=None if backbone == "static" else str(root / "cache"),
        progress=False,
    )
    return trained.save(root / f"model-{backbone}")


def loadavg() -> str:
    """The 1, 5 and 15-minute load averages now (the machine is shared: every number goes with one)."""
    return "load " + "/".join(f"{x:.1f}" for x in os.getloadavg())


def sweep(model_dir: Path, root: Path, upstreams: FakeUpstreams, name: str, args: argparse.Namespace) -> list[dict]:
    """Batching on (the default config) and off (``max_batch: 1``) at 1, 8 and 32 clients, ``--routes``
    requests each, one service per mode: p50/p99, throughput, service CPU per request, load average."""
    rows = []
    for mode, config in (("batched", {}), ("off", {"max_batch": 1, "batch_window_ms": 0})):
        path = write_config(
            root / f"{name}-{mode}.yaml", upstreams, COSTS, budget=1.0, decision_log=f"{name}-{mode}.jsonl", **config
        )
        service = ServiceProcess(model_dir, path, {"FAKE_UPSTREAM_KEY": "bench"}).start()
        try:
            run_load(
                service,
                "/v1/route",
                [{"messages": [{"role": "user", "content": p}]} for p in prompts(64, seed=99)],
                args,
            )
            for clients in (1, 8, 32):
                log(f"{name}: batching {mode}, {args.routes} route requests at {clients} clients")
                bodies = [{"messages": [{"role": "user", "content": p}]} for p in prompts(args.routes, seed=clients)]
                load, cpu = run_load(
                    service, "/v1/route", bodies, argparse.Namespace(**{**vars(args), "clients": clients})
                )
                rows.append({"mode": mode, "clients": clients, "load": load, "cpu": cpu, "loadavg": loadavg()})
        finally:
            service.stop()
    return rows


def run_service(
    model_dir: Path,
    root: Path,
    upstreams: FakeUpstreams,
    name: str,
    args: argparse.Namespace,
    chats: bool = True,
    poisoned: bool = False,
    **config: object,
) -> dict:
    """Start one service, warm it up, put the load on it, stop it; its numbers and log count."""
    config_path = write_config(
        root / f"{name}.yaml", upstreams, COSTS, budget=1.0, decision_log=f"{name}.jsonl", **config
    )
    service = ServiceProcess(model_dir, config_path, {"FAKE_UPSTREAM_KEY": "bench"}).start()
    n_chats = args.chats if chats else 0
    n_poisoned = 0
    try:
        warm = [{"messages": [{"role": "user", "content": p}]} for p in prompts(64, seed=99)]
        run_load(service, "/v1/route", warm, args)
        log(f"{name}: {args.routes} route requests at {args.clients} clients")
        route_bodies = [{"messages": [{"role": "user", "content": p}]} for p in prompts(args.routes, seed=1)]
        routes, routes_cpu = run_load(service, "/v1/route", route_bodies, args)
        health = httpx.get(service.url + "/health").json()
        poisoned_load = None
        if poisoned:
            log(f"{name}: {args.routes} route requests, one in {POISON_EVERY} with a lone surrogate (400 expected)")
            bodies = [
                {"messages": [{"role": "user", "content": p + (" \udbed" if k % POISON_EVERY == 7 else "")}]}
                for k, p in enumerate(prompts(args.routes, seed=3))
            ]
            expected = [400 if k % POISON_EVERY == 7 else 200 for k in range(args.routes)]
            poisoned_load, _ = run_load(service, "/v1/route", bodies, args, expected)
            n_poisoned = expected.count(400)
        chat_load, chat_cpu = None, float("nan")
        if n_chats:
            log(f"{name}: {n_chats} chat completions through the router")
            chat_bodies = [
                {"messages": [{"role": "user", "content": p}], "stream": k % 2 == 1}
                for k, p in enumerate(prompts(n_chats, seed=2))
            ]
            chat_load, chat_cpu = run_load(service, "/v1/chat/completions", chat_bodies, args)
    finally:
        service.stop()
    lines = (root / f"{name}.jsonl").read_text().splitlines()
    expected = len(warm) + args.routes + (args.routes - n_poisoned if poisoned else 0) + n_chats  # a 400 is no decision
    valid = sum(1 for line in lines if json.loads(line).get("prompt_sha256"))
    return {
        "routes": routes,
        "service_cpu_ms": routes_cpu,
        "chats": chat_load,
        "chat_cpu_ms": chat_cpu,
        "health": health,
        "log_lines": len(lines),
        "log_valid": valid,
        "expected": expected,
        "poisoned": poisoned_load,
        "loadavg": loadavg(),
    }


def encoder_breakdown(model_dir: Path, batch: int) -> dict[str, float]:
    """Where a routed prompt's CPU goes outside HTTP: tokenising, the encoder (length-bucketed calls,
    evalprism's default, against one call padded to the batch's longest prompt, the peer) and the whole
    P2L forward, in-process on the service's batch size. The service's CPU per request minus the P2L
    forward is what HTTP, JSON, validation and the decision log cost."""
    import resource

    from evalprism.p2l.model import P2LModel

    def cpu_ms_per_prompt(step, batches: list[list[str]]) -> float:
        step(batches[0])
        usage = resource.getrusage(resource.RUSAGE_SELF)
        start = usage.ru_utime + usage.ru_stime
        for chunk in batches:
            step(chunk)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return (usage.ru_utime + usage.ru_stime - start) / sum(map(len, batches)) * 1e3

    model = P2LModel.load(model_dir, cache_dir=False, runtime="openvino")
    encoder = model.backbone.compiled
    texts = prompts(1024, seed=1)
    batches = [texts[k : k + batch] for k in range(0, len(texts), batch)]
    out = {
        "tokenise": cpu_ms_per_prompt(encoder.model.preprocess, batches),
        "bucketed": cpu_ms_per_prompt(encoder.encode, batches),
        "padded": cpu_ms_per_prompt(lambda b: encoder.encode(b, length_buckets=False), batches),
        "p2l": cpu_ms_per_prompt(model.leaderboards, batches),
    }
    int8 = int8_encoder(encoder)
    if int8 is not None:
        out["int8"] = cpu_ms_per_prompt(int8, batches)
        float32 = model.leaderboards(texts)
        quantised = np.concatenate([encoder_head(model, int8(chunk)) for chunk in batches])
        out["int8_same_best"] = float((quantised.argmax(1) == float32.argmax(1)).mean())
        out["int8_max_change"] = float(np.abs(quantised - float32).max())
    return out


def decision_timing(batch: int, candidates: int = 8, calls: int = 500) -> dict[str, float]:
    """CPU microseconds per routed prompt of the service's decisions (``RoutingCore.decide``, vectorised
    over the batch) against the per-prompt loop it replaced (the peer: numpy's ``Generator.choice`` with
    the routing distribution, then an argsort for the fallbacks, prompt by prompt), on the same
    leaderboards and seed; ``same`` is 1.0 when both draw the same models."""
    from serve_harness import ConstantBackbone

    from evalprism.p2l.routing import route
    from evalprism.serve.config import ServeConfig
    from evalprism.serve.router import RoutingCore

    names = [f"model-{i}" for i in range(candidates)]
    config = ServeConfig.model_validate(
        {"models": {n: {"base_url": f"http://{n}.test/v1", "cost": 1.0 + i} for i, n in enumerate(names)}, "seed": 0}
    )
    core = RoutingCore(ConstantBackbone.model(names, [0.0] * candidates), config)
    coefs = np.random.default_rng(0).normal(size=(batch, candidates))
    budget = candidates / 2

    def per_prompt_loop(rng: np.random.Generator) -> list[str]:
        chosen = route(coefs[:, core.columns], core.costs, budget, core.opponent, names=names, value=core.route_value)
        picks = []
        for k in range(batch):
            p = np.clip(chosen.probs[k], 0.0, None)
            pick = int(rng.choice(candidates, p=p / p.sum()))
            limit = max(budget, core.costs[pick])
            [int(j) for j in np.argsort(-chosen.values[k], kind="stable") if j != pick and core.costs[j] <= limit]
            picks.append(names[pick])
        return picks

    same = [d.chosen for d in core.decide(coefs, budget)] == per_prompt_loop(np.random.default_rng(0))
    timings = {}
    for name, step in (("ours", lambda: core.decide(coefs, budget)), ("peer", lambda: per_prompt_loop(core.rng))):
        start = time.process_time()
        for _ in range(calls):
            step()
        timings[name] = (time.process_time() - start) / (calls * batch) * 1e6
    return {**timings, "same": float(same)}


def int8_encoder(encoder):
    """The encoder quantised to int8 by OpenVINO's own tooling (NNCF post-training quantisation,
    transformer preset, 300 calibration prompts distinct from the measured ones), as ``texts -> vectors``
    padded per batch; None when nncf is not installed (``pip install nncf``)."""
    try:
        import nncf
    except ImportError:
        return None
    import warnings

    import torch

    from evalprism.embed.openvino_runtime import _sentence_embedding_module, import_openvino

    ov, st = import_openvino(), encoder.model
    probe = st.preprocess(["a probe sentence", "another, longer probe sentence"])
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        converted = ov.convert_model(
            _sentence_embedding_module(st, encoder.input_names),
            example_input=tuple(probe[n] for n in encoder.input_names),
        )
    calibration = prompts(300, seed=77)
    data = [[st.preprocess(calibration[k : k + 8])[n].numpy() for n in encoder.input_names] for k in range(0, 300, 8)]
    quantised = nncf.quantize(
        converted, nncf.Dataset(data), model_type=nncf.ModelType.TRANSFORMER, subset_size=len(data)
    )
    request = (
        ov.Core()
        .compile_model(quantised, "CPU", {"INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY"})
        .create_infer_request()
    )

    def encode(texts: list[str]) -> np.ndarray:
        features = st.preprocess(list(texts))
        return np.array(request.infer([features[n].numpy() for n in encoder.input_names])[0])

    return encode


def encoder_head(model, vectors: np.ndarray) -> np.ndarray:
    """The P2L head on given sentence vectors (normalised as the backbone's features are)."""
    import torch

    with torch.no_grad():
        features = torch.nn.functional.normalize(torch.from_numpy(vectors).float(), dim=-1)
        return model.head(features)[0].double().numpy()


def cpu_note() -> str:
    """The CPU's model and the flags the encoder's speed depends on (bf16 and AVX-512 / AVX2), from /proc/cpuinfo."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return f"cpu: {platform.processor() or 'unknown'}"
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "?")
    flags = next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), [])
    wanted = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "avx512_vnni", "avx_vnni") if f in flags]
    return f"cpu: {model}; flags: {' '.join(wanted) or 'none of avx2/avx512/bf16'}"


def mean_batch(health: dict) -> float:
    return health["prompts"] / max(health["batches"], 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--routes", type=int, default=2000)
    parser.add_argument("--chats", type=int, default=500)
    parser.add_argument("--clients", type=int, default=TARGET_CLIENTS)
    parser.add_argument(
        "--client",
        choices=["lean", "httpx"],
        default="lean",
        help="load generator: lean (asyncio + httptools, default) or httpx",
    )
    parser.add_argument("--skip-torch", action="store_true", help="skip the runtime: torch comparison")
    parser.add_argument("--quick", action="store_true", help="300 routes, 60 chats")
    parser.add_argument(
        "--prompts",
        choices=["arena", "synthetic"],
        default="arena" if ARENA_BATTLES.is_file() else "synthetic",
        help="real Arena prompts (default when ../shared/data is there) or synthetic ones",
    )
    parser.add_argument("--skip-static", action="store_true", help="skip the static backbone against MiniLM")
    parser.add_argument(
        "--sweep", action="store_true", help="batching on and off at 1, 8 and 32 clients, each backbone"
    )
    args = parser.parse_args()
    PROMPT_SOURCE[0] = args.prompts
    if args.quick:
        args.routes, args.chats = 300, 60
    load_before = os.getloadavg()
    import torch

    print(cpu_note())
    print(
        f"python {platform.python_version()}, torch {torch.__version__} ({torch.get_num_threads()} threads), "
        f"cores {os.cpu_count()}, clients {args.clients}, routes {args.routes}, chats {args.chats}, "
        f"load generator {args.client}, prompts {args.prompts}"
    )
    report = Report()
    with tempfile.TemporaryDirectory(prefix="evalprism-bench-serve-") as tmp, FakeUpstreams() as upstreams:
        root = Path(tmp)
        log("training a P2L model (frozen minilm, simulated battles)")
        model_dir = train_model(root)
        batched = run_service(model_dir, root, upstreams, "batched", args, poisoned=True)
        single = run_service(model_dir, root, upstreams, "one_at_a_time", args, max_batch=1, batch_window_ms=0)
        breakdown = encoder_breakdown(model_dir, max(1, round(mean_batch(batched["health"]))))
        torch_run = (
            None
            if args.skip_torch
            else run_service(model_dir, root, upstreams, "torch_runtime", args, chats=False, runtime="torch")
        )
        static_run, sweeps = None, {}
        if not args.skip_static or args.sweep:
            log("training a P2L model on the static backbone (the static model is distilled first if not cached)")
            static_dir = train_model(root, "static")
        if not args.skip_static:
            static_run = run_service(static_dir, root, upstreams, "static", args)
        if args.sweep:
            sweeps = {
                "static": sweep(static_dir, root, upstreams, "static", args),
                "minilm": sweep(model_dir, root, upstreams, "minilm", args),
            }

    b, s = batched["routes"], single["routes"]
    runtime, precision = batched["health"]["runtime"], batched["health"]["precision"]
    report.section(
        f"POST /v1/route, {args.routes:,} requests, {args.clients} concurrent clients ({runtime}, {precision})"
    )
    on_target = args.clients == TARGET_CLIENTS and args.routes >= 2000
    report.add(
        Row(
            what="p99 latency",
            ours=f"{b.percentile(99):.1f} ms",
            peer=f"{s.percentile(99):.1f} ms",
            ratio=fmt_x(s.percentile(99) / b.percentile(99)),
            target=f"<= {TARGET_P99_MS:.0f} ms at {TARGET_CLIENTS} clients",
            status=status(b.percentile(99) <= TARGET_P99_MS if on_target else None),
        )
    )
    report.add(
        Row(
            what="p50 latency",
            ours=f"{b.percentile(50):.1f} ms",
            peer=f"{s.percentile(50):.1f} ms",
            ratio=fmt_x(s.percentile(50) / b.percentile(50)),
        )
    )
    report.add(
        Row(
            what="throughput",
            ours=f"{b.throughput:,.0f} req/s",
            peer=f"{s.throughput:,.0f} req/s",
            ratio=fmt_x(b.throughput / s.throughput),
            quality=f"mean P2L batch {mean_batch(batched['health']):.1f} prompts vs {mean_batch(single['health']):.1f}",
        )
    )
    report.add(
        Row(
            what="CPU per request: service / load generator",
            ours=f"{batched['service_cpu_ms']:.2f} / {b.client_cpu_ms:.2f} ms",
            peer=f"{single['service_cpu_ms']:.2f} / {s.client_cpu_ms:.2f} ms",
            ratio=fmt_x(single["service_cpu_ms"] / batched["service_cpu_ms"]),
        )
    )
    report.add(Row(what="errors", ours=str(b.errors), peer=str(s.errors), target="0", status=status(b.errors == 0)))
    report.section(
        f"Where the service's CPU per routed prompt goes (in-process, batches of "
        f"{max(1, round(mean_batch(batched['health'])))} prompts, the service's mean)"
    )
    report.add(
        Row(
            what="encoder: length-bucketed calls vs one padded call",
            ours=f"{breakdown['bucketed']:.2f} ms",
            peer=f"{breakdown['padded']:.2f} ms",
            ratio=fmt_x(breakdown["padded"] / breakdown["bucketed"]),
            quality=f"tokenising {breakdown['tokenise']:.2f} ms of it",
        )
    )
    if "int8" in breakdown:
        report.add(
            Row(
                what="encoder: int8 (NNCF, one padded call) vs float32 (one padded call)",
                ours=f"{breakdown['int8']:.2f} ms",
                peer=f"{breakdown['padded']:.2f} ms",
                ratio=fmt_x(breakdown["padded"] / breakdown["int8"]),
                target="same best model >= 99%, coefficients within 0.05",
                quality=f"same best model {breakdown['int8_same_best']:.1%}, largest coefficient change "
                f"{breakdown['int8_max_change']:.3f}",
                status=status(breakdown["int8_same_best"] >= 0.99 and breakdown["int8_max_change"] <= 0.05),
            )
        )
    else:
        report.notes.append("int8 not measured: pip install nncf (OpenVINO's quantisation tooling) to add the row")
    decisions = decision_timing(max(1, round(mean_batch(batched["health"]))))
    report.add(
        Row(
            what="routing decisions: vectorised over the batch vs a Generator.choice loop per prompt",
            ours=f"{decisions['ours']:.1f} us",
            peer=f"{decisions['peer']:.1f} us",
            ratio=fmt_x(decisions["peer"] / decisions["ours"]),
            quality=f"same draws from the same seed: {'yes' if decisions['same'] == 1.0 else 'NO'}",
            status=status(decisions["same"] == 1.0),
        )
    )
    report.add(
        Row(
            what="P2L forward (encoder + head) / the rest (HTTP, JSON, checks, log)",
            ours=f"{breakdown['p2l']:.2f} / {max(batched['service_cpu_ms'] - breakdown['p2l'], 0):.2f} ms",
            quality=f"of {batched['service_cpu_ms']:.2f} ms service CPU per request",
        )
    )
    if batched["poisoned"] is not None:
        q = batched["poisoned"]
        report.section(f"POST /v1/route, the same load with one request in {POISON_EVERY} poisoned (lone surrogate)")
        report.add(
            Row(
                what="p99 / p50 latency",
                ours=f"{q.percentile(99):.1f} / {q.percentile(50):.1f} ms",
                peer=f"{b.percentile(99):.1f} / {b.percentile(50):.1f} ms (clean)",
                ratio=fmt_x(b.percentile(99) / q.percentile(99)),
            )
        )
        report.add(
            Row(
                what="answers other than 200 (innocent) / 400 (poisoned)",
                ours=str(q.errors),
                target="0",
                status=status(q.errors == 0),
            )
        )
    if torch_run is not None:
        t = torch_run["routes"]
        report.section(f"The same, batched, encoder in {runtime} (evalprism) vs in torch (peer), both {precision}")
        report.add(
            Row(
                what="p99 / p50 latency",
                ours=f"{b.percentile(99):.1f} / {b.percentile(50):.1f} ms",
                peer=f"{t.percentile(99):.1f} / {t.percentile(50):.1f} ms",
                ratio=fmt_x(t.percentile(99) / b.percentile(99)),
            )
        )
        report.add(
            Row(
                what="throughput",
                ours=f"{b.throughput:,.0f} req/s",
                peer=f"{t.throughput:,.0f} req/s",
                ratio=fmt_x(b.throughput / t.throughput),
                quality=f"peer errors {t.errors}",
            )
        )
    if batched["chats"] is not None:
        c, cs = batched["chats"], single["chats"]
        report.section(f"POST /v1/chat/completions through the router, {args.chats:,} requests (half streaming)")
        report.add(
            Row(
                what="p50 / p99 latency",
                ours=f"{c.percentile(50):.1f} / {c.percentile(99):.1f} ms",
                peer=f"{cs.percentile(50):.1f} / {cs.percentile(99):.1f} ms",
            )
        )
        report.add(
            Row(
                what="throughput",
                ours=f"{c.throughput:,.0f} req/s",
                peer=f"{cs.throughput:,.0f} req/s",
                ratio=fmt_x(c.throughput / cs.throughput),
            )
        )
        report.add(
            Row(what="errors", ours=str(c.errors), peer=str(cs.errors), target="0", status=status(c.errors == 0))
        )
    if static_run is not None:
        t, cpu_ratio = static_run["routes"], batched["service_cpu_ms"] / static_run["service_cpu_ms"]
        report.section(
            f"POST /v1/route, static backbone (evalprism) vs MiniLM ({runtime}, peer), both batched, "
            f"{args.clients} clients, {args.prompts} prompts"
        )
        report.add(
            Row(
                what="service CPU per request",
                ours=f"{static_run['service_cpu_ms']:.2f} ms",
                peer=f"{batched['service_cpu_ms']:.2f} ms",
                ratio=fmt_x(cpu_ratio),
                target=">= 20x less",
                quality=f"static run {static_run['loadavg']}; MiniLM run {batched['loadavg']}",
                status=status(cpu_ratio >= 20 if args.clients == TARGET_CLIENTS else None),
            )
        )
        chat_ratio = batched["chat_cpu_ms"] / static_run["chat_cpu_ms"]
        report.add(
            Row(
                what="service CPU per chat completion (half streaming; forwarding included)",
                ours=f"{static_run['chat_cpu_ms']:.2f} ms",
                peer=f"{batched['chat_cpu_ms']:.2f} ms",
                ratio=fmt_x(chat_ratio),
                target=">= 20x less",
                quality=f"{args.chats:,} chats each",
                status=status(chat_ratio >= 20 if args.clients == TARGET_CLIENTS else None),
            )
        )
        report.add(
            Row(
                what="p99 latency",
                ours=f"{t.percentile(99):.1f} ms",
                peer=f"{b.percentile(99):.1f} ms",
                ratio=fmt_x(b.percentile(99) / t.percentile(99)),
                target="<= 50 ms",
                status=status(t.percentile(99) <= 50 if args.clients == TARGET_CLIENTS else None),
            )
        )
        report.add(
            Row(
                what="p50 latency",
                ours=f"{t.percentile(50):.1f} ms",
                peer=f"{b.percentile(50):.1f} ms",
                ratio=fmt_x(b.percentile(50) / t.percentile(50)),
            )
        )
        report.add(
            Row(
                what="throughput",
                ours=f"{t.throughput:,.0f} req/s",
                peer=f"{b.throughput:,.0f} req/s",
                ratio=fmt_x(t.throughput / b.throughput),
                quality=f"errors {t.errors}",
            )
        )
    for name, rows in sweeps.items():
        report.section(
            f"Batching on (evalprism) vs off (peer), {name} backbone, {args.routes:,} requests per load, "
            f"{args.prompts} prompts"
        )
        for clients in (1, 8, 32):
            on, off = (next(r for r in rows if r["mode"] == m and r["clients"] == clients) for m in ("batched", "off"))
            report.add(
                Row(
                    what=f"{clients} clients: p50 / p99, CPU per request",
                    ours=f"{on['load'].percentile(50):.1f} / {on['load'].percentile(99):.1f} ms, {on['cpu']:.2f} ms",
                    peer=f"{off['load'].percentile(50):.1f} / {off['load'].percentile(99):.1f} ms, {off['cpu']:.2f} ms",
                    ratio=fmt_x(on["load"].throughput / off["load"].throughput),
                    target="throughput ratio >= 1",
                    quality=f"{on['load'].throughput:,.0f} vs {off['load'].throughput:,.0f} req/s; "
                    f"{on['loadavg']} / {off['loadavg']}",
                )
            )
    report.section("Decision log")
    runs = (
        [("batched", batched), ("one at a time", single)]
        + ([("torch runtime", torch_run)] if torch_run else [])
        + ([("static backbone", static_run)] if static_run else [])
    )
    for name, run in runs:
        exact = run["log_lines"] == run["expected"] == run["log_valid"]
        report.add(
            Row(
                what=f"lines ({name})",
                ours=f"{run['log_lines']:,}",
                quality=f"{run['expected']:,} requests (incl. 64 warm-up routes)",
                target="one per request",
                status=status(exact),
            )
        )
    report.notes.append(
        "peer = the same service with batching off (max_batch: 1): one P2L forward pass per request. "
        "Latencies are measured by the clients, end to end over HTTP; the load generator runs on "
        f"the same cores as the service ({args.client} client; its CPU per request is in the table)."
    )
    report.notes.append(load_note(load_before))
    print_table(
        report,
        "evalprism router service under load",
        quality="notes",
        with_n=False,
        footer="speedup = peer / evalprism for latencies and CPU, evalprism / peer for throughput.",
    )


if __name__ == "__main__":
    main()
