"""End to end on the real embedded pair (SmolLM2-135M-Instruct, offline), and the command line."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from spec_core.__main__ import main
from spec_core.analysis.peers import run_peer
from spec_core.engine.loop import generate

pytestmark = pytest.mark.embedded
PROMPTS = ["Write a Python function that adds two numbers.", "What is the capital of Italy?"]


@pytest.mark.parametrize("prompt", PROMPTS)
def test_float32_greedy_identity(embedded_f32, prompt):
    ar = generate(embedded_f32, prompt, "ar", max_new_tokens=24)
    hf = run_peer(embedded_f32, "hf-ar", list(ar.prompt_ids), 24)
    assert hf.token_ids == ar.token_ids  # our ar is transformers' greedy generate
    for method in ["fixed:4", "heuristic", "confidence:0.4"]:
        assert generate(embedded_f32, prompt, method, max_new_tokens=24).token_ids == ar.token_ids, method


def test_bfloat16_greedy_identity():
    """In bf16 too: the target's passes are batch-invariant (spec_core/model/invariance.py), so a k-token verify pass
    and a one-token step break near-ties alike (tests/engine/test_batch_invariance.py checks the bits)."""
    from spec_core.model.models import load_pair

    pair = load_pair("embedded", device="cpu", dtype="bfloat16")
    ar = generate(pair, PROMPTS[0], "ar", max_new_tokens=32)
    spec = generate(pair, PROMPTS[0], "fixed:4", max_new_tokens=32)
    assert ar.text.strip() and spec.token_ids == ar.token_ids
    assert spec.stats.target_forwards <= ar.stats.target_forwards


def test_cli_generate_and_bench(tmp_path, capsys):
    assert main(["generate", "--prompt", "Say hi.", "--method", "fixed:3", "--max-new-tokens", "8"]) == 0
    out = capsys.readouterr()
    assert "fixed:3" in out.err and "tau" in out.err and out.out.strip()
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"id": "a", "category": "chat", "prompt": "Say hello."}\n')
    csv = tmp_path / "bench.csv"
    rc = main(
        [
            "bench",
            "--prompts",
            str(prompts),
            "--methods",
            "fixed:2,hf-ar,hf-assisted:2",
            "--repeats",
            "1",
            "--max-new-tokens",
            "8",
            "--out",
            str(csv),
        ]
    )
    assert rc == 0
    df = pd.read_csv(csv)
    needed = {
        "method",
        "prompt_id",
        "category",
        "new_tokens",
        "wall_s",
        "tokens_per_s",
        "target_forwards",
        "drafted_tokens",
        "accepted_tokens",
        "tau",
        "speedup_vs_ar",
        "output_sha",
    }
    assert needed <= set(df.columns)
    assert list(df["method"]) == ["ar", "fixed:2", "hf-ar", "hf-assisted:2"]  # ar always runs first
    assert df.loc[df.method == "ar", "speedup_vs_ar"].item() == 1.0
    assert (df["tau"] >= 1.0).all()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["generate", "--prompt", "", "--method", "ar"], "prompt is empty"),
        (["generate", "--prompt", "x", "--method", "warp:9"], "unknown method"),
        (["generate", "--prompt", "x", "--temperature", "-1"], "temperature"),
        (["generate", "--prompt", "x", "--dtype", "int3"], "unknown dtype"),
        (["bench", "--prompts", "/no/such/file.jsonl"], "does not exist"),
        (["bench", "--methods", "ar,bogus"], "unknown method"),
    ],
)
def test_cli_bad_input_one_line_error(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and message in err[0]


def test_cli_bad_prompt_file(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    assert main(["bench", "--prompts", str(bad)]) == 2
    assert "not JSON" in capsys.readouterr().err


def test_unreachable_model_id_is_a_clear_error():
    from spec_core.core.errors import SpecScopeError
    from spec_core.model.models import load_pair

    with pytest.raises(SpecScopeError, match="cannot load"):
        load_pair("no-such-org/no-such-model,no-such-org/draft", device="cpu", cached=False, operator=True)


def test_an_unreachable_hub_is_one_message_before_the_clients_retries(monkeypatch):
    """The hub's client retries a failed connection five times with backoff (23 s a file): a hub id that nothing
    here can serve is refused after one connection attempt, and the client is never asked."""
    import socket

    import transformers

    from spec_core.core.errors import SpecScopeError
    from spec_core.model import models

    tried = []

    def refused(address, timeout=None):
        tried.append((address, timeout))
        raise OSError("[Errno -2] Name or service not known")

    def never(*args, **kwargs):
        raise AssertionError("the hub's client was asked")

    monkeypatch.setattr(socket, "create_connection", refused)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", never)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    with pytest.raises(SpecScopeError, match="cannot be reached from here") as err:
        models.load_pair("no-such-org/target,no-such-org/draft", device="cpu", cached=False, operator=True)
    assert "'no-such-org/target'" in str(err.value) and "Name or service not known" in str(err.value)
    assert len(tried) == 1 and tried[0][1] == models.HUB_PROBE_S


def test_behind_a_proxy_the_probe_tries_the_proxy(monkeypatch):
    """The hub's client connects through HTTPS_PROXY; so does the probe, and a refused proxy is named."""
    import socket

    from spec_core.core.errors import SpecScopeError
    from spec_core.model import models

    tried = []

    def refused(address, timeout=None):
        tried.append(address)
        raise OSError("Connection refused")

    monkeypatch.setattr(socket, "create_connection", refused)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with pytest.raises(SpecScopeError, match="through proxy.example"):
        models.check_hub_reachable(["no-such-org/target"])
    assert tried == [("proxy.example", 3128)]


def test_a_cached_or_local_model_is_never_probed(monkeypatch, tmp_path):
    import socket

    from spec_core.model import models

    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: pytest.fail("probed the hub"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    monkeypatch.setattr("huggingface_hub.try_to_load_from_cache", lambda repo, name: f"/cache/{repo}/{name}")
    models.check_hub_reachable([str(tmp_path), "some-org/cached-model"])  # a local folder; a cached id


def test_pair_with_different_tokenizers_is_refused(tmp_path):
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from spec_core.core.errors import SpecScopeError
    from spec_core.model.models import embedded_target_dir, load_pair

    tok = AutoTokenizer.from_pretrained(embedded_target_dir())
    cfg = LlamaConfig(
        vocab_size=len(tok) + 1,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
    )
    for name, extra in [("a", None), ("b", "<|extra|>")]:
        LlamaForCausalLM(cfg).save_pretrained(tmp_path / name)
        t = AutoTokenizer.from_pretrained(embedded_target_dir())
        if extra:
            t.add_tokens([extra])
        t.save_pretrained(tmp_path / name)
    with pytest.raises(SpecScopeError, match="tokenizer"):
        load_pair(f"{tmp_path / 'a'},{tmp_path / 'b'}", device="cpu", dtype="float32", cached=False, operator=True)
    pair = load_pair(f"{tmp_path / 'a'},{tmp_path / 'a'}", device="cpu", dtype="float32", cached=False, operator=True)
    assert pair.draft_design == "standalone" and pair.dtype == torch.float32


@pytest.mark.parametrize(
    "argv, option",
    [
        (["train", "draft", "--help"], "--feature-layers"),
        (["train", "block", "--help"], "--block-size"),
        (["train", "data", "--help"], "--num-prompts"),
        (["analyze", "block", "--help"], "--heldout-blocks"),
    ],
)
def test_cli_train_and_analyze_help_is_the_command_s_own(argv, option, capsys):
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert f"python -m spec_core {argv[0]} {argv[1]}" in out and option in out


def test_cli_train_without_what_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as done:
        main(["train"])
    assert done.value.code == 2 and "draft" in capsys.readouterr().err
