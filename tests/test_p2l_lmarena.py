"""Released lmarena P2L checkpoints (issue 16, section 1): evalprism loads a directory in the layout
lmarena's training code writes and computes what lmarena's code computes.

The checkpoints are built here, offline, in exactly that layout: a randomly initialised Qwen2 or
Llama base inside a ``P2LModel`` written like lmarena's ``p2l/model.py`` (``model`` + ``head`` with
``head.head`` and ``head.eta_head``), saved with ``save_pretrained``; a byte-level BPE tokenizer
trained on a few sentences, wrapped in ``PreTrainedTokenizerFast``, with a chat template and the
pad and CLS tokens added as lmarena's ``get_tokenizer`` adds them; ``model_list.json`` and
``training_config.json``. The reference is a literal re-implementation of lmarena's forward pass
(their endpoint's preprocessing, their data collator's CLS scrubbing, the CLS mask, the head and
their losses' maps of the eta output).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from builders import tiny_transformer_config
from helpers import route_per_prompt, run_cli
from torch import nn

from evalprism.errors import EvalprismError
from evalprism.p2l import P2LModel, route
from evalprism.p2l.likelihood import log_outcome_probs
from evalprism.p2l.lmarena import LmarenaBackbone, is_lmarena_checkpoint, load_lmarena

MODELS = ["alpha-7b", "beta-13b", "gamma-34b", "delta-70b", "epsilon-8x7b", "zeta-1b"]
CORPUS = [
    "Write a sonnet about the autumn sea.",
    "Solve the equation 3x + 7 = 22 for x.",
    "Fix the off-by-one bug in this Python loop: for i in range(len(xs) + 1): print(xs[i])",
    "Summarise the history of the Roman empire in three sentences.",
    "Qu'est-ce que la photosynthèse ?",
    "List ten prime numbers and explain why each is prime.",
]
PROMPTS = [*CORPUS[:4], "hi", "a prompt that mentions <|cls|> inside it", "Überprüfe diesen Satz bitte. " * 3, ""]
QWEN_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
LLAMA_TEMPLATE = (
    "{% for m in messages %}{% set content = '<|start_header_id|>' + m['role'] + '<|end_header_id|>\n\n'"
    " + m['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + "
    "content %}{% endif %}{{ content }}{% endfor %}"
)
SPECIAL = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|begin_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
]
#: lmarena's maps of the eta output (p2l/model.py, RK_Loss and GRK_loss), written out again here
RK_BETA = 0.1


def build_tokenizer(arch: str, cls: bool = True) -> Any:
    """A byte-level BPE tokenizer trained offline, with lmarena's added pad and CLS tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=SPECIAL,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(CORPUS * 3, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<|begin_of_text|>", eos_token="<|im_end|>" if arch == "qwen2" else "<|eot_id|>"
    )
    fast.chat_template = QWEN_TEMPLATE if arch == "qwen2" else LLAMA_TEMPLATE
    fast.add_special_tokens({"pad_token": "<|pad|>"})
    if cls:
        fast.add_special_tokens({"cls_token": "<|cls|>"})
    return fast


class Head(nn.Module):
    """lmarena's BTHead / RKHead (without eta_downsize): ``head`` and, for rk heads, ``eta_head``."""

    def __init__(self, input_dim: int, output_dim: int, downsize: int | None, eta: bool) -> None:
        super().__init__()
        if downsize:
            inner = output_dim // downsize
            self.head = nn.Sequential(nn.Linear(input_dim, inner), nn.Linear(inner, output_dim))
        else:
            self.head = nn.Linear(input_dim, output_dim)
        if eta:
            self.eta_head = nn.Linear(input_dim, 1)

    def forward(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        eta = self.eta_head(hidden) if hasattr(self, "eta_head") else None
        return self.head(hidden), eta


def reference_class(arch: str) -> type:
    """lmarena's ``get_p2l_model(model_type, ...)`` class: the base model under ``model``, the head
    under ``head``, the head fed by the hidden state at the CLS token (``input_ids == CLS``)."""
    from transformers import LlamaModel, LlamaPreTrainedModel, Qwen2Model, Qwen2PreTrainedModel

    pretrained, base = {"qwen2": (Qwen2PreTrainedModel, Qwen2Model), "llama": (LlamaPreTrainedModel, LlamaModel)}[arch]

    class P2LModel(pretrained):  # type: ignore[misc, valid-type]
        def __init__(
            self, config: Any, CLS_id: int, num_models: int, downsize: int | None = None, eta: bool = False
        ) -> None:
            super().__init__(config)
            self.cls_token_id = CLS_id
            self.model = base(config)
            self.head = Head(config.hidden_size, num_models, downsize, eta)
            self.post_init()

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, Any]:
            hidden = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            cls_hidden = hidden[input_ids == self.cls_token_id]
            assert cls_hidden.shape[0] == input_ids.shape[0]
            return self.head(cls_hidden)

    return P2LModel


def base_config(arch: str, vocab: int) -> Any:
    from transformers import LlamaConfig, Qwen2Config

    kind = Qwen2Config if arch == "qwen2" else LlamaConfig
    return tiny_transformer_config(kind, vocab, 512, num_key_value_heads=2)


HEAD_TYPES = {"bt": False, "bt_tie": False, "bt-tie": False, "rk": True, "grk": True, "bag": True}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Any, Any]]:
    """name -> (directory, reference model, tokenizer), one per head type and base model."""
    root = tmp_path_factory.mktemp("lmarena")
    built = {}
    for name, arch, loss_type, downsize in (
        ("qwen-bt", "qwen2", "bt", None),
        ("qwen-bt-tie", "qwen2", "bt_tie", None),
        ("qwen-rk", "qwen2", "rk", None),
        ("llama-grk", "llama", "bag", None),  # sharded
        ("llama-bt-tie", "llama", "bt-tie", None),
        ("qwen-grk-two-layer", "qwen2", "grk", 2),
    ):
        built[name] = write_checkpoint(root / name, arch, loss_type, downsize, seed=len(built))
    return built


def write_checkpoint(
    directory: Path, arch: str, loss_type: str, downsize: int | None, seed: int, training_config: bool = True
) -> tuple[Path, Any, Any]:
    """A checkpoint as lmarena's train.py writes it; head weights drawn large enough to matter.
    Llama checkpoints are written in shards (``model.safetensors.index.json``), as large ones are."""
    torch.manual_seed(seed)
    tokenizer = build_tokenizer(arch)
    model = reference_class(arch)(
        base_config(arch, len(tokenizer)),
        CLS_id=tokenizer.cls_token_id,
        num_models=len(MODELS),
        downsize=downsize,
        eta=HEAD_TYPES[loss_type],
    ).eval()
    with torch.no_grad():
        for param in model.head.parameters():
            param.normal_(0.0, 0.5)
        if loss_type == "rk":  # into softplus(e - 22.5, beta=0.1)'s curved part: η ~ 7, varying by prompt
            model.head.eta_head.bias.fill_(22.5)
        elif HEAD_TYPES[loss_type]:  # grk: θ = exp(e) + 1.000001 between about 1.5 and 4
            model.head.eta_head.weight.mul_(0.1)
            model.head.eta_head.bias.fill_(0.0)
    directory.mkdir(parents=True)
    model.save_pretrained(directory, max_shard_size="40KB" if arch == "llama" else "5GB")
    tokenizer.save_pretrained(directory)
    (directory / "model_list.json").write_text(json.dumps(MODELS, indent=1))
    if training_config:
        training = {
            "loss_type": loss_type,
            "model_type": arch,
            "head_type": "rk" if HEAD_TYPES[loss_type] else "bt",
            "max_length": 8192,
        }
        (directory / "training_config.json").write_text(json.dumps(training))
    return directory, model, tokenizer


def reference(
    model: Any, tokenizer: Any, prompts: list[str], loss_type: str, max_length: int = 8192
) -> tuple[np.ndarray, np.ndarray | None]:
    """lmarena's inference, one prompt at a time: chat template, CLS scrubbed and appended, left
    truncation, the CLS hidden state through the head; the eta output mapped as their loss maps it
    (rk: η; grk: θ)."""
    tokenizer.truncation_side, tokenizer.padding_side = "left", "right"
    coefs, etas = [], []
    for prompt in prompts:
        formatted = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=False
        )
        formatted = formatted.replace(tokenizer.cls_token, "<cls>") + tokenizer.cls_token
        batch = tokenizer(
            formatted,
            return_tensors="pt",
            max_length=max_length,
            padding="longest",
            truncation=True,
            add_special_tokens=False,
        )
        with torch.no_grad():
            c, e = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        coefs.append(c[0].numpy())
        if e is not None:
            etas.append(e[0, 0])
    if loss_type == "rk":
        eta = torch.clamp(torch.nn.functional.softplus(torch.stack(etas) - 22.5, RK_BETA), min=0.02)
    elif loss_type in ("grk", "bag"):
        eta = torch.exp(torch.stack(etas)) + 1.000001
    else:
        eta = None
    return np.array(coefs, dtype=np.float64), None if eta is None else eta.numpy().astype(np.float64)


def lmarena_probs(coef_a: np.ndarray, coef_b: np.ndarray, eta: np.ndarray, loss: str) -> np.ndarray:
    """lmarena's outcome probabilities (A, B, tie[, both bad]) from RK_Loss / GRK_loss."""
    if loss == "rk":
        p_w = 1 / (1 + np.exp(-(coef_a - coef_b - eta)))
        p_l = 1 / (1 + np.exp(-(coef_b - coef_a - eta)))
        return np.stack([p_w, p_l, 1 - p_w - p_l], axis=-1)
    pi_w, pi_l = np.exp(coef_a), np.exp(coef_b)
    p_w, p_l = pi_w / (pi_w + eta * pi_l + 1.0), pi_l / (pi_l + eta * pi_w + 1.0)
    p_bb = 1.0 / (1.0 + pi_w + pi_l)
    return np.stack([p_w, p_l, 1 - p_w - p_l - p_bb, p_bb], axis=-1)


@pytest.mark.parametrize(
    "name", ["qwen-bt", "qwen-bt-tie", "qwen-rk", "llama-grk", "llama-bt-tie", "qwen-grk-two-layer"]
)
def test_coefficients_and_tie_parameter_equal_lmarenas_forward(checkpoints: dict, name: str) -> None:
    directory, ref_model, tokenizer = checkpoints[name]
    loss_type = json.loads((directory / "training_config.json").read_text())["loss_type"]
    assert is_lmarena_checkpoint(directory)
    model = P2LModel.load(directory)
    assert model.models == MODELS
    assert (
        model.outcome_model
        == {"bt": "bt", "bt_tie": "bt-tie", "bt-tie": "bt-tie", "rk": "rk", "bag": "grk", "grk": "grk"}[loss_type]
    )
    assert model.routing_value == ("grk" if model.outcome_model == "grk" else "bt")
    pred = model.predict(PROMPTS)
    want_coefs, want_eta = reference(ref_model, tokenizer, PROMPTS, loss_type)
    np.testing.assert_allclose(pred.coefs, want_coefs, atol=1e-5, rtol=0)
    assert np.ptp(want_coefs, axis=0).max() > 0.1  # the prompts really get different leaderboards
    if want_eta is None:
        assert pred.extra is None
        return
    np.testing.assert_allclose(pred.extra, want_eta, atol=1e-5, rtol=0)  # η for rk, λ = θ for grk
    # the registry's probabilities at evalprism's parameters are lmarena's
    a, b = np.array([0, 1, 2, 3, 4, 5, 0, 2]), np.array([1, 2, 3, 4, 5, 0, 5, 1])
    with torch.no_grad():
        coefs, raw = model.head(model.backbone.features(PROMPTS))
        ours = (
            log_outcome_probs(model.outcome_model, coefs[torch.arange(8), a], coefs[torch.arange(8), b], raw)
            .exp()
            .numpy()
        )
    theirs = lmarena_probs(want_coefs[np.arange(8), a], want_coefs[np.arange(8), b], want_eta, model.outcome_model)
    np.testing.assert_allclose(ours[:, : theirs.shape[1]], theirs, atol=1e-5)


def test_left_truncation_keeps_the_end_and_the_cls_token(checkpoints: dict) -> None:
    directory, ref_model, tokenizer = checkpoints["qwen-rk"]
    long = ["start " * 40 + "the end matters", "short"]
    model = P2LModel(*load_lmarena(directory, max_length=24, batch_size=2))
    assert isinstance(model.backbone, LmarenaBackbone)
    ids = model.backbone.token_ids(long)
    assert len(ids[0]) == 24 and ids[0][-1] == tokenizer.cls_token_id
    pred = model.predict(long)
    want_coefs, want_eta = reference(ref_model, tokenizer, long, "rk", max_length=24)
    np.testing.assert_allclose(pred.coefs, want_coefs, atol=1e-5, rtol=0)
    np.testing.assert_allclose(pred.extra, want_eta, atol=1e-5, rtol=0)
    untruncated = P2LModel.load(directory).predict(long[:1]).coefs
    assert np.abs(untruncated - pred.coefs[:1]).max() > 1e-4


def test_batching_order_and_duplicates_do_not_change_the_leaderboards(checkpoints: dict) -> None:
    directory, _, _ = checkpoints["llama-grk"]
    prompts = PROMPTS + PROMPTS[::-1] + ["hi"] * 3
    one = P2LModel(*load_lmarena(directory, batch_size=1)).predict(prompts)
    many = P2LModel(*load_lmarena(directory, batch_size=7)).predict(prompts)
    np.testing.assert_allclose(many.coefs, one.coefs, atol=1e-5, rtol=0)
    np.testing.assert_allclose(many.extra, one.extra, atol=1e-5, rtol=0)


def test_bfloat16_stays_close_to_float32(checkpoints: dict) -> None:
    directory, _, _ = checkpoints["qwen-bt"]
    full = P2LModel.load(directory).leaderboards(PROMPTS)
    half = P2LModel.load(directory, precision="bfloat16").leaderboards(PROMPTS)
    assert np.abs(full - half).max() < 0.1


def test_a_bt_head_without_training_config_is_bt_tie(tmp_path: Path) -> None:
    directory, ref_model, tokenizer = write_checkpoint(
        tmp_path / "ck", "qwen2", "bt", None, seed=7, training_config=False
    )
    model = P2LModel.load(directory)
    assert model.outcome_model == "bt-tie"
    np.testing.assert_allclose(
        model.leaderboards(PROMPTS[:3]), reference(ref_model, tokenizer, PROMPTS[:3], "bt")[0], atol=1e-5, rtol=0
    )


@pytest.mark.slow  # three CLI runs, each loading the checkpoint
def test_cli_route_leaderboard_and_evaluate_run_on_a_released_checkpoint(
    checkpoints: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory, ref_model, tokenizer = checkpoints["llama-grk"]
    prompts = tmp_path / "prompts.txt"  # one prompt a line
    prompts.write_text("\n".join(PROMPTS[:4]) + "\n", encoding="utf-8")
    costs = dict(zip(MODELS, (0.2, 0.4, 1.0, 3.0, 0.8, 0.1), strict=True))
    cost_file = tmp_path / "costs.jsonl"
    cost_file.write_text("".join(json.dumps({"model": m, "cost": c}) + "\n" for m, c in costs.items()))
    routes = route_per_prompt(directory, prompts, cost_file, tmp_path / "routes", capsys)
    want_coefs, _ = reference(ref_model, tokenizer, PROMPTS[:4], "grk")
    want = route(want_coefs, np.array(list(costs.values())), 1.0, "uniform", names=MODELS, value="grk").frame()
    assert routes["model"].tolist() == want["model"].tolist()
    np.testing.assert_allclose(routes["prob"], want["prob"], atol=1e-6)
    np.testing.assert_allclose(routes["router_coef"], want["router_coef"], atol=1e-5)

    code, _, err = run_cli(["p2l", "leaderboard", directory, prompts, "--out", tmp_path / "board", "-q"], capsys)
    assert code == 0, err
    battles = tmp_path / "battles.csv"
    pd.DataFrame(
        {
            "prompt": PROMPTS[:4] * 2,
            "model_a": MODELS[:4] * 2,
            "model_b": MODELS[1:5] * 2,
            "winner": ["model_a", "model_b", "tie", "tie (bothbad)"] * 2,
        }
    ).to_csv(battles, index=False)
    code, _, err = run_cli(
        ["p2l", "evaluate", directory, battles, "--out", tmp_path / "eval", "--repeats", "1", "-q"], capsys
    )
    assert code == 0, err


def broken(source: Path, target: Path, what: str) -> Path:
    """A copy of checkpoint ``source`` with one thing wrong."""
    shutil.copytree(source, target)
    if what == "model list":
        (target / "model_list.json").write_text(json.dumps(MODELS[:-1]))
    elif what == "no cls":
        for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja"):
            (target / name).unlink(missing_ok=True)
        build_tokenizer("qwen2", cls=False).save_pretrained(target)
    elif what == "no loss":
        (target / "training_config.json").unlink()
    elif what == "unknown loss":
        (target / "training_config.json").write_text(json.dumps({"loss_type": "ba"}))
    return target


@pytest.mark.parametrize(
    ("what", "message"),
    [
        ("model list", "model_list.json names 5 models but the coefficient head 'head.head' has 6 outputs"),
        ("no cls", "the tokenizer has no CLS token"),
        ("no loss", "cannot infer the head type: the head has an eta head"),
        ("unknown loss", "cannot infer the head type: training_config.json names loss_type 'ba'"),
    ],
)
def test_bad_checkpoints_get_one_message_and_exit_2(
    checkpoints: dict, tmp_path: Path, what: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = broken(checkpoints["qwen-rk"][0], tmp_path / "broken", what)
    with pytest.raises(EvalprismError) as info:
        P2LModel.load(directory)
    assert str(directory) in str(info.value) and message in str(info.value)
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("hello\n")
    code, out, err = run_cli(["p2l", "leaderboard", directory, prompts, "--out", tmp_path / "out", "-q"], capsys)
    assert code == 2
    assert message in err and str(directory) in err and "Traceback" not in err + out
    assert not (tmp_path / "out").exists()


@pytest.mark.slow  # starts `evalprism serve` in a subprocess
def test_serve_routes_a_prompt_with_a_released_checkpoint(checkpoints: dict, tmp_path: Path) -> None:
    import httpx
    from serve_harness import CLIENT_TIMEOUT_S, FakeUpstreams, running_service, write_config

    directory, ref_model, tokenizer = checkpoints["qwen-rk"]
    costs = {"alpha-7b": 0.2, "gamma-34b": 1.0, "delta-70b": 3.0}
    prompt = PROMPTS[1]
    want_coefs, _ = reference(ref_model, tokenizer, [prompt], "rk")
    columns = [MODELS.index(m) for m in costs]
    want = route(want_coefs[0, columns], np.array(list(costs.values())), 1.0, "uniform", names=list(costs))
    with FakeUpstreams() as upstreams:
        config = write_config(
            tmp_path / "router.yaml", upstreams, costs, budget=1.0, precision="float32", runtime="auto", seed=0
        )
        with running_service(directory, config, {"FAKE_UPSTREAM_KEY": "k"}) as service:
            got = httpx.post(
                service.url + "/v1/route",
                json={"messages": [{"role": "user", "content": prompt}]},
                timeout=CLIENT_TIMEOUT_S,
            ).json()
            health = httpx.get(service.url + "/health", timeout=CLIENT_TIMEOUT_S).json()
    assert health["runtime"] == "torch"
    np.testing.assert_allclose([got["coefs"][m] for m in costs], want_coefs[0, columns], atol=1e-5)
    np.testing.assert_allclose([got["distribution"].get(m, 0.0) for m in costs], want.probs, atol=1e-6)
    assert got["router_coef"] == pytest.approx(want.router_coef, abs=1e-5)


def lmarena_collator(tokenizer: Any, data: list[str | list[str]], max_length: int = 8192) -> dict[str, torch.Tensor]:
    """lmarena's training ``DataCollator.__call__`` (p2l/dataset.py), written out again: a prompt that is
    a list of turns becomes one user message per turn; templated without special tokens; inner CLS
    tokens scrubbed, the CLS token appended; one padded batch, no special tokens added."""
    prompts = []
    for seq in data:
        if isinstance(seq, str):
            prompts.append([{"role": "user", "content": seq}])
        else:
            prompts.append([{"role": "user", "content": turn} for turn in seq])
    formatted_prompts = tokenizer.apply_chat_template(
        prompts, tokenize=False, add_generation_prompt=False, add_special_tokens=False
    )
    formatted_prompts = [prompt.replace(tokenizer.cls_token, "<cls>") for prompt in formatted_prompts]
    formatted_prompts = [seq + tokenizer.cls_token for seq in formatted_prompts]
    return tokenizer(
        formatted_prompts,
        padding=True,
        return_tensors="pt",
        add_special_tokens=False,
        truncation=True,
        max_length=max_length,
    )


MULTI_TURN = [
    ["Write a sonnet about the autumn sea.", "Now make it rhyme in French."],
    ["Solve the equation 3x + 7 = 22 for x.", "Explain each step.", "And check the answer <|cls|>."],
    ["hi"],
]


@pytest.mark.parametrize("name", ["qwen-rk", "llama-grk"])
def test_multi_turn_prompts_are_formatted_as_lmarena_trains_them(checkpoints: dict, name: str) -> None:
    """Each user turn its own user message of the chat template, as lmarena's collator and router do:
    through the library (a Conversation), the battle reader's user_turns and the service's
    routing_prompt (assistant turns left out); the blank-line join, one message, gives other
    coefficients, so the comparison can fail."""
    from evalprism.io.battles import Conversation, user_turns
    from evalprism.serve.apis.chat import routing_prompt
    from evalprism.serve.schemas import ChatMessage

    directory, ref_model, tokenizer = checkpoints[name]
    tokenizer.truncation_side, tokenizer.padding_side = "left", "right"
    batch = lmarena_collator(tokenizer, MULTI_TURN)
    with torch.no_grad():
        want = ref_model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])[0].numpy()
    model = P2LModel.load(directory)
    conversations = [Conversation(turns) if len(turns) > 1 else turns[0] for turns in MULTI_TURN]
    np.testing.assert_allclose(model.leaderboards(conversations), want, atol=1e-5, rtol=0)
    np.testing.assert_allclose(
        model.backbone.token_ids(conversations)[0], batch["input_ids"][0][batch["attention_mask"][0].bool()].tolist()
    )
    messages = [
        [m for turn in turns for m in ({"role": "user", "content": turn}, {"role": "assistant", "content": "ok"})]
        for turns in MULTI_TURN
    ]
    read = [user_turns(conversation) for conversation in messages]
    served = [routing_prompt([ChatMessage.model_validate(m) for m in conversation]) for conversation in messages]
    for prompts in (read, served):
        np.testing.assert_allclose(model.leaderboards(prompts), want, atol=1e-5, rtol=0)
    joined = model.leaderboards(["\n\n".join(turns) for turns in MULTI_TURN])
    assert np.abs(joined[:2] - want[:2]).max() > 1e-3  # one message of joined turns is not what lmarena reads
    # the same text as one turn and as two turns are two prompts, also within one batch
    both = model.leaderboards([conversations[0], str(conversations[0])])
    np.testing.assert_allclose(both, [want[0], joined[0]], atol=1e-5, rtol=0)
