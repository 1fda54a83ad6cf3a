"""P2L model: planted prompt-dependent leaderboards are recovered, save/load/resume are exact,
Hugging Face causal-LM backbones work offline (tiny random config)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from builders import tiny_transformer_config
from helpers import run_cli

from evalprism.errors import EvalprismError
from evalprism.p2l import P2LModel, TrainOptions, train_model
from evalprism.p2l.options import EvaluateOptions
from evalprism.p2l.simulate import MODELS, TRUE_COEFS, simulate_topic_battles, topic_prompts

pytestmark = pytest.mark.slow  # trains P2L models

TOPIC_PROMPTS = {
    "creative writing": "Write a short poem about a red balloon.",
    "arithmetic": "What is 36 * 12 + 5?",
    "coding": "Write a Python function that removes duplicates from a list.",
}


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    result = train_model(simulate_topic_battles(4000, seed=0), TrainOptions(seed=0), progress=False)
    out = tmp_path_factory.mktemp("p2l") / "model"
    result.save(out)
    return out, result


def test_frozen_p2l_beats_marginal_bt_on_held_out_prompts(trained) -> None:
    """Two or more topics with opposite rankings: the marginal leaderboard is near a coin flip on
    held-out prompts; P2L recovers each topic's leaderboard from the prompt text."""
    _, result = trained
    ev = result.evaluation.set_index("predictor")
    assert ev.loc["marginal", "nll"] > ev.loc["constant", "nll"] - 0.02  # the average hides everything here
    assert ev.loc["p2l", "nll"] < ev.loc["marginal", "nll"] - 0.08
    assert ev.loc["p2l", "accuracy"] > ev.loc["marginal", "accuracy"] + 0.1
    assert ev.loc["p2l", "brier"] < ev.loc["marginal", "brier"]
    # the default ridge fit chose a finite penalty over the marginal (λ = ∞), by cross-validation
    cv = result.history.set_index("penalty")
    chosen = float(cv.index[cv["chosen"]][0])
    assert np.isfinite(chosen) and result.summary.chosen.penalty_chosen == chosen
    assert cv.loc[chosen, "cv_nll"] < cv.loc[np.inf, "cv_nll"] - 0.05


def test_unseen_prompts_get_their_topic_leaderboard(trained) -> None:
    path, _ = trained
    model = P2LModel.load(path)
    assert model.models == sorted(MODELS)
    boards = model.leaderboards(list(TOPIC_PROMPTS.values()))
    for row, topic in zip(boards, TOPIC_PROMPTS, strict=True):
        truth = TRUE_COEFS[topic][[MODELS.index(m) for m in model.models]]
        assert model.models[int(row.argmax())] == model.models[int(truth.argmax())]
        assert np.corrcoef(row, truth)[0, 1] > 0.9


def test_save_load_round_trip_is_exact(trained) -> None:
    path, result = trained
    prompts = topic_prompts("coding")[:7] + topic_prompts("arithmetic")[:5]
    loaded = P2LModel.load(path)
    np.testing.assert_allclose(loaded.leaderboards(prompts), result.model.leaderboards(prompts), atol=1e-6)
    config = json.loads((path / "config.json").read_text())
    assert config["backbone"]["spec"] == "minilm" and config["outcome_model"] == "bt"
    assert (path / "marginal.csv").exists() and (path / "report.html").exists()


def test_bfloat16_inference_stays_close_to_float32(trained) -> None:
    """The service's fast path: a private bfloat16 copy of the encoder (the process-wide float32
    one is untouched), leaderboards within 0.05 and the same best model on every prompt."""
    path, _ = trained
    prompts = [p for topic in TOPIC_PROMPTS for p in topic_prompts(topic)[:10]]
    full = P2LModel.load(path).leaderboards(prompts)
    half = P2LModel.load(path, precision="bfloat16").leaderboards(prompts)
    assert 0 < np.abs(half - full).max() < 0.05
    assert (half.argmax(axis=1) == full.argmax(axis=1)).all()
    np.testing.assert_array_equal(P2LModel.load(path).leaderboards(prompts), full)
    with pytest.raises(EvalprismError, match="precision: expected one of float32, bfloat16, got 'float16'"):
        P2LModel.load(path, precision="float16")


def test_openvino_runtime_gives_the_torch_leaderboards(trained) -> None:
    """The router service's runtime: the same leaderboards as torch (float32 to 1e-5; bfloat16 as close
    as torch's own bfloat16), the same best model, and the backbone says what runs it."""
    path, _ = trained
    prompts = [p for topic in TOPIC_PROMPTS for p in topic_prompts(topic)[:10]]
    torch_model = P2LModel.load(path)
    openvino = P2LModel.load(path, runtime="openvino")
    assert (torch_model.backbone.runtime, openvino.backbone.runtime) == ("torch", "openvino")
    np.testing.assert_allclose(openvino.leaderboards(prompts), torch_model.leaderboards(prompts), atol=1e-5)
    half = P2LModel.load(path, runtime="auto", precision="bfloat16")
    assert half.backbone.runtime == "openvino"
    full = torch_model.leaderboards(prompts)
    assert np.abs(half.leaderboards(prompts) - full).max() < 0.05
    assert (half.leaderboards(prompts).argmax(axis=1) == full.argmax(axis=1)).all()
    with pytest.raises(EvalprismError, match="runtime: expected one of auto, torch, openvino, got 'onnx'"):
        P2LModel.load(path, runtime="onnx")


def test_resume_continues_exactly(tmp_path: Path) -> None:
    """3 epochs + resume to 6 equals 6 epochs straight: optimiser, RNG and best state are restored."""
    battles = simulate_topic_battles(1500, seed=3)
    straight = train_model(battles, TrainOptions(fit="adamw", max_epochs=6, patience=50), progress=False)
    ckpt = tmp_path / "ckpt"
    train_model(battles, TrainOptions(fit="adamw", max_epochs=3, patience=50), checkpoint_dir=ckpt, progress=False)
    resumed = train_model(
        battles, TrainOptions(fit="adamw", max_epochs=6, patience=50), checkpoint_dir=ckpt, resume=True, progress=False
    )
    assert resumed.history["epoch"].tolist() == list(range(7))
    # epoch 0 is the marginal start: validation NLL there equals the marginal baseline's
    marginal_nll = straight.evaluation.set_index("predictor").loc["marginal", "nll"]
    assert straight.history["val_nll"].iloc[0] == pytest.approx(marginal_nll, abs=1e-5)
    np.testing.assert_allclose(resumed.history["val_nll"], straight.history["val_nll"], rtol=1e-6)
    prompts = topic_prompts("creative writing")[:5]
    np.testing.assert_allclose(resumed.model.leaderboards(prompts), straight.model.leaderboards(prompts), atol=1e-6)
    with pytest.raises(EvalprismError, match="different battles or options"):
        train_model(
            battles, TrainOptions(fit="adamw", max_epochs=6, lr=0.1), checkpoint_dir=ckpt, resume=True, progress=False
        )


@pytest.mark.parametrize("loss", ["rk", "grk"])
def test_tie_losses_train_and_report_their_parameter(loss: str) -> None:
    battles = simulate_topic_battles(1200, seed=4)
    rng = np.random.default_rng(0)
    battles.loc[rng.random(len(battles)) < 0.15, "winner"] = "tie"
    battles.loc[rng.random(len(battles)) < 0.05, "winner"] = "tie (bothbad)"
    result = train_model(battles, TrainOptions(outcome_model=loss), progress=False)
    pred = result.model.predict(["What is 2 + 2?"])
    assert pred.coefs.shape == (1, 4) and pred.extra is not None
    assert pred.extra[0] > (1.0 if loss == "grk" else 0.0)
    assert np.isfinite(result.evaluation["nll"]).all()


def test_a_trained_tie_model_evaluates_before_and_after_saving(tmp_path: Path) -> None:
    """evaluate_model needs the marginal's tie parameter: the trained model carries it in memory as the
    saved one does (it used to fail with an AssertionError until saved and loaded)."""
    from evalprism.p2l import evaluate_model

    def with_ties(battles: pd.DataFrame, seed: int) -> pd.DataFrame:
        draw = np.random.default_rng(seed).random(len(battles))
        battles.loc[draw < 0.2, "winner"] = "tie"
        battles.loc[draw > 0.95, "winner"] = "tie (bothbad)"
        return battles

    result = train_model(
        with_ties(simulate_topic_battles(1200, seed=5), 1), TrainOptions(outcome_model="grk"), progress=False
    )
    held_out = with_ties(simulate_topic_battles(300, seed=6), 2)
    in_memory = evaluate_model(result.model, held_out, EvaluateOptions(repeats=1), progress=False).metrics
    result.save(tmp_path / "model")
    loaded = evaluate_model(
        P2LModel.load(tmp_path / "model"), held_out, EvaluateOptions(repeats=1), progress=False
    ).metrics
    assert set(in_memory["predictor"]) >= {"marginal", "p2l"}
    pd.testing.assert_frame_equal(in_memory, loaded, atol=1e-6, rtol=0)


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Torch on one thread, as each torchrun process (OMP_NUM_THREADS=1): on a busy 2-core machine two
    threads of a tiny model mostly wait for each other."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def tiny_causal_lm(directory: Path, texts: list[str]) -> Path:
    """A randomly initialised 2-layer Qwen2 with a word-level tokenizer: no download involved (and no
    dropout, so fine-tuning draws no random masks)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(texts, trainers.WordLevelTrainer(special_tokens=["[UNK]", "[PAD]", "[EOS]"]))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", eos_token="[EOS]")
    config = tiny_transformer_config(
        Qwen2Config, tok.get_vocab_size(), 128, num_key_value_heads=2, pad_token_id=1, eos_token_id=2, bos_token_id=2
    )
    torch.manual_seed(0)
    Qwen2ForCausalLM(config).save_pretrained(directory)
    fast.save_pretrained(directory)
    return directory


@pytest.mark.parametrize("finetune", [False, True])
def test_causal_lm_backbone_with_last_token_pooling(tmp_path: Path, finetune: bool) -> None:
    battles = simulate_topic_battles(300, seed=6)
    lm = tiny_causal_lm(tmp_path / "tiny-qwen", battles["prompt"].tolist())
    epochs = {"max_epochs": 1, "batch_size": 32} if finetune else {}  # a frozen backbone's head: ridge
    options = TrainOptions(backbone=f"hf:{lm}", finetune=finetune, **epochs)
    result = train_model(battles, options, progress=False)
    result.save(tmp_path / "model")
    loaded = P2LModel.load(tmp_path / "model")
    prompts = battles["prompt"].tolist()[:6]
    np.testing.assert_allclose(loaded.leaderboards(prompts), result.model.leaderboards(prompts), atol=1e-5)
    assert (tmp_path / "model" / "backbone").is_dir() == finetune
    # last-token pooling: padding a prompt inside a longer batch does not change its leaderboard
    alone = loaded.leaderboards(prompts[:1])
    with_longer = loaded.leaderboards([prompts[0], " ".join(prompts)])[:1]
    np.testing.assert_allclose(alone, with_longer, atol=1e-5)


def test_finetuned_minilm_round_trip(tmp_path: Path) -> None:
    battles = simulate_topic_battles(240, seed=7)
    result = train_model(battles, TrainOptions(finetune=True, max_epochs=1, batch_size=32), progress=False)
    result.save(tmp_path / "model")
    config = json.loads((tmp_path / "model" / "config.json").read_text())
    assert config["backbone"]["spec"] == "st:backbone" and config["backbone"]["finetuned"]
    prompts = battles["prompt"].tolist()[:4]
    np.testing.assert_allclose(
        P2LModel.load(tmp_path / "model", cache_dir=False).leaderboards(prompts),
        result.model.leaderboards(prompts),
        atol=1e-5,
    )


def test_cli_train_and_leaderboard(tmp_path: Path, capsys) -> None:
    battles = simulate_topic_battles(2000, seed=8)
    battles.to_json(tmp_path / "battles.jsonl", orient="records", lines=True)
    code, _, err = run_cli(["p2l", "train", tmp_path / "battles.jsonl", "--out", tmp_path / "model", "-q"], capsys)
    assert code == 0, err
    assert not (tmp_path / "model.checkpoint").exists()  # removed once the model is saved
    prompts = pd.DataFrame({"prompt": [p for t in TOPIC_PROMPTS for p in topic_prompts(t)[::3]]})
    prompts["topic"] = [t for t in TOPIC_PROMPTS for _ in topic_prompts(t)[::3]]
    prompts.to_csv(tmp_path / "prompts.csv", index=False)
    leaderboard = ["p2l", "leaderboard", tmp_path / "model", tmp_path / "prompts.csv"]
    options = ["--category-column", "topic", "--reference", "generalist-70b", "-q"]
    code, _, err = run_cli([*leaderboard, "--out", tmp_path / "lb", *options], capsys)
    assert code == 0, err
    cats = pd.read_csv(tmp_path / "lb" / "categories.csv")
    leaders = cats[cats["rank"] == 1].set_index("category")["model"].to_dict()
    assert leaders == {"creative writing": "poet-7b", "arithmetic": "calc-13b", "coding": "coder-34b"}
    strengths = pd.read_csv(tmp_path / "lb" / "strengths.csv")
    poet = strengths[strengths["model"] == "poet-7b"].set_index("category")["win_rate"]
    assert poet["creative writing"] > 0.5 > poet["arithmetic"]
    for name in ("prompts.csv", "leaderboard.csv", "report.html"):
        assert (tmp_path / "lb" / name).exists()
    # a category column the file lacks: refused naming the file, before any prompt is encoded
    code, _, err = run_cli([*leaderboard, "--out", tmp_path / "lb2", "--category-column", "topics"], capsys)
    assert code == 2 and "prompts.csv: no column 'topics' (columns: prompt, topic)" in " ".join(err.split()), err
    assert "predicting leaderboards" not in err and not (tmp_path / "lb2").exists()


def test_cli_refuses_empty_prompts(tmp_path: Path, capsys) -> None:
    battles = simulate_topic_battles(200, seed=9)
    battles.loc[17, "prompt"] = "  "
    battles.to_json(tmp_path / "b.jsonl", orient="records", lines=True)
    code, _, err = run_cli(["p2l", "train", tmp_path / "b.jsonl", "--out", tmp_path / "m", "-q"], capsys)
    assert code == 2 and "row 18, column 'prompt'" in err and not (tmp_path / "m").exists()


def test_fine_tuning_options_are_checked_before_any_work() -> None:
    battles = simulate_topic_battles(100, seed=10)
    with pytest.raises(EvalprismError, match="apply to a fine-tuned backbone") as info:
        train_model(battles, TrainOptions(max_length=64), progress=False)
    assert info.value.parameter == "finetune"
    with pytest.raises(EvalprismError, match="precision: expected one of auto, float32, bfloat16, got 'float16'"):
        train_model(battles, TrainOptions(finetune=True, precision="float16"), progress=False)
    with pytest.raises(EvalprismError, match="micro_batch_size"):
        train_model(battles, TrainOptions(finetune=True, micro_batch_size=0), progress=False)


def test_accumulation_and_checkpointing_train_the_same_model(tmp_path: Path) -> None:
    """Gradient accumulation (micro-batches of 8 in a global batch of 32) and gradient checkpointing
    change memory, not the model: the same losses as one step per batch; max_length is saved with the
    fine-tuned backbone, and bfloat16 autocast trains where asked for."""
    battles = simulate_topic_battles(200, seed=6)
    lm = tiny_causal_lm(tmp_path / "tiny-qwen", battles["prompt"].tolist())
    base = TrainOptions(
        backbone=f"hf:{lm}", finetune=True, max_epochs=2, batch_size=32, backbone_lr=1e-3, max_length=12
    )
    with one_thread():
        plain = train_model(battles, base, progress=False)
        options = TrainOptions(**{**base.__dict__, "micro_batch_size": 8, "gradient_checkpointing": True})
        accumulated = train_model(battles, options, progress=False)
        half = train_model(
            battles, TrainOptions(**{**base.__dict__, "precision": "bfloat16", "max_epochs": 1}), progress=False
        )
    np.testing.assert_allclose(accumulated.history["val_nll"], plain.history["val_nll"], rtol=0, atol=1e-6)
    assert plain.history["val_nll"].iloc[0] == pytest.approx(
        plain.evaluation.set_index("predictor").loc["marginal", "nll"], abs=1e-5
    )  # warm start when fine-tuning
    accumulated.save(tmp_path / "model")
    assert P2LModel.load(tmp_path / "model").backbone.max_length == 12
    assert np.isfinite(half.history["val_nll"]).all()
