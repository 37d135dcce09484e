"""Golden test data for the kit's C++ BertForSequenceClassification (tests/bert_golden_test.cpp).

Hugging Face transformers is the oracle: this script builds tiny random BERTs with it, saves them
as Hugging Face checkpoints, runs them on fixed inputs and records what they compute.

Rerun (from the repo root; tooling only, the kit never runs Python):

    tests/golden/setup_venv.sh && .venv-golden/bin/python tests/golden/make_bert_golden.py

Generated with: Debian 12's python3-torch 1.13.0 (the same PyTorch as the kit's LibTorch),
transformers 4.40.2, tokenizers 0.19.1, safetensors 0.8.0, CPU, float32. The output is
deterministic for these versions: rerunning rewrites byte-identical files.

Writes tests/golden/bert/<name>/ for
  tiny-a, tiny-b   full BertForSequenceClassification checkpoints (config.json, model.safetensors)
                   of two configurations that differ from each other and from the kit's fixture
                   (L2/H128/heads 2/intermediate 512): expected.json holds the inputs, logits, loss,
                   pooled output and the sorted state-dict keys with their shapes.
  legacy-base      a checkpoint as some hub models have it: a bare BertModel (keys without
                   "bert."), LayerNorm parameters in the legacy "gamma"/"beta" spelling, an
                   "embeddings.position_ids" buffer and the pre-training heads ("cls.*").
                   The classifier is missing, so it is freshly initialised and its logits are
                   not comparable across implementations: expected.json holds the pooled output
                   (BertModel's output) and what Hugging Face reported as missing and unexpected.

Weights are perturbed away from their initial values (LayerNorm weight 1 and bias 0, zero linear
biases) so that a dropped bias or swapped LayerNorm parameters change the result, and the
initializer range is large enough that attention and the pooler's tanh are far from trivial.
tiny-b's embeddings are scaled down so that its layer_norm_eps (1e-5) visibly changes the output.
Dropout probabilities are left at their non-zero defaults: the golden outputs are in eval mode.
"""

import json
import os
import shutil
import sys

import safetensors
import safetensors.torch
import tokenizers
import torch
import transformers
from transformers import BertConfig, BertForPreTraining, BertForSequenceClassification, BertModel

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "bert")

# Batch 3, sequence length 12. Row 0 is full, rows 1 and 2 end in padding (id 0, mask 0).
# Token 2 plays [CLS], 3 [SEP]; both segments appear in every row.
SEQ_LEN = 12


def make_inputs(vocab_size, type_vocab_size, num_labels, gen):
    lengths = [12, 9, 5]
    ids = torch.zeros(3, SEQ_LEN, dtype=torch.int64)
    mask = torch.zeros(3, SEQ_LEN, dtype=torch.int64)
    types = torch.zeros(3, SEQ_LEN, dtype=torch.int64)
    for row, n in enumerate(lengths):
        body = torch.randint(4, vocab_size, (n,), generator=gen)
        body[0] = 2
        split = n // 2
        body[split] = 3
        body[n - 1] = 3
        ids[row, :n] = body
        mask[row, :n] = 1
        # Segment 0 up to and including the first [SEP], then segment 1 (and, with three token
        # types, segment 2 for the last two real tokens of the first row).
        types[row, split + 1 : n] = 1
    if type_vocab_size > 2:
        types[0, lengths[0] - 2 : lengths[0]] = 2
    labels = torch.tensor([1, 0, num_labels - 1], dtype=torch.int64)
    return ids, mask, types, labels


def perturb(model, gen):
    """Moves LayerNorm parameters and every bias away from their 1/0 initial values."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm" in name and name.endswith(".weight"):
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=gen))
            elif "LayerNorm" in name and name.endswith(".bias"):
                p.copy_(0.2 * torch.randn(p.shape, generator=gen))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))


def floats(t):
    # float32 values, written as the shortest decimal that reads back as the same double, which
    # is exactly the float32 value.
    return t.detach().to(torch.float32).tolist()


def key_shapes(state_dict):
    return [{"key": k, "shape": list(state_dict[k].shape)} for k in sorted(state_dict)]


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")


def versions():
    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "safetensors": safetensors.__version__,
        "python": sys.version.split()[0],
    }


def fresh_dir(name):
    d = os.path.join(OUT, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def make_full(name, seed, embedding_scale=1.0, **config_kwargs):
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed + 1)
    config = BertConfig(attn_implementation="eager", **config_kwargs)
    model = BertForSequenceClassification(config)
    perturb(model, gen)
    # Small embeddings make the embedding LayerNorm's eps matter, so that a model that ignores
    # config.layer_norm_eps is caught.
    with torch.no_grad():
        for emb in ("word_embeddings", "position_embeddings", "token_type_embeddings"):
            getattr(model.bert.embeddings, emb).weight.mul_(embedding_scale)
    model.eval()

    d = fresh_dir(name)
    model.save_pretrained(d, safe_serialization=True)

    ids, mask, types, labels = make_inputs(config.vocab_size, config.type_vocab_size,
                                           config.num_labels, gen)
    # Reload what was written, so the golden numbers are those of the files on disk.
    reloaded, info = BertForSequenceClassification.from_pretrained(
        d, attn_implementation="eager", output_loading_info=True)
    reloaded.eval()
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    with torch.no_grad():
        out = reloaded(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=labels)
        pooled = reloaded.bert(input_ids=ids, attention_mask=mask, token_type_ids=types)[1]
        ref = model(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=labels)
    assert torch.equal(out.logits, ref.logits)
    assert reloaded.config.problem_type == "single_label_classification"

    expected = {
        "description": f"BertForSequenceClassification {name}, generated by make_bert_golden.py",
        "versions": versions(),
        "input_ids": ids.tolist(),
        "attention_mask": mask.tolist(),
        "token_type_ids": types.tolist(),
        "labels": labels.tolist(),
        "logits": floats(out.logits),
        "loss": float(out.loss),
        "pooled_output": floats(pooled),
        "state_dict": key_shapes(reloaded.state_dict()),
    }
    write_json(os.path.join(d, "expected.json"), expected)


def make_legacy(name, seed, **config_kwargs):
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed + 1)
    config = BertConfig(attn_implementation="eager", architectures=["BertForPreTraining"],
                        **config_kwargs)
    pretraining = BertForPreTraining(config)
    perturb(pretraining, gen)
    pretraining.eval()

    # A bare BertModel's keys, the legacy LayerNorm spelling, plus the pre-training heads.
    tensors = {}
    for k, v in pretraining.state_dict().items():
        if k.startswith("bert."):
            k = k[len("bert."):]
        k = k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias",
                                                                     "LayerNorm.beta")
        tensors[k] = v.detach().clone().contiguous()  # clone: the decoder weight is tied
    tensors["embeddings.position_ids"] = torch.arange(config.max_position_embeddings).unsqueeze(0)
    assert "cls.predictions.decoder.weight" in tensors

    d = fresh_dir(name)
    config.save_pretrained(d)
    safetensors.torch.save_file(tensors, os.path.join(d, "model.safetensors"),
                                metadata={"format": "pt"})

    ids, mask, types, _ = make_inputs(config.vocab_size, config.type_vocab_size, 2, gen)
    torch.manual_seed(seed + 2)
    model, info = BertForSequenceClassification.from_pretrained(
        d, attn_implementation="eager", output_loading_info=True)
    model.eval()
    with torch.no_grad():
        pooled = model.bert(input_ids=ids, attention_mask=mask, token_type_ids=types)[1]
        ref = pretraining.bert(input_ids=ids, attention_mask=mask, token_type_ids=types)[1]
    assert torch.equal(pooled, ref)
    assert sorted(info["missing_keys"]) == ["classifier.bias", "classifier.weight"], info
    assert info["unexpected_keys"] and all(k.startswith("cls.") for k in info["unexpected_keys"])
    assert not info["mismatched_keys"] and not info["error_msgs"], info

    expected = {
        "description": (f"{name}: a bare BertModel checkpoint with legacy LayerNorm gamma/beta "
                        "names, embeddings.position_ids and pre-training heads (cls.*), loaded "
                        "into BertForSequenceClassification; generated by make_bert_golden.py"),
        "versions": versions(),
        "input_ids": ids.tolist(),
        "attention_mask": mask.tolist(),
        "token_type_ids": types.tolist(),
        "pooled_output": floats(pooled),
        "checkpoint_keys": sorted(tensors),
        "missing_keys": sorted(info["missing_keys"]),
        "unexpected_keys": sorted(info["unexpected_keys"]),
        "state_dict": key_shapes(model.state_dict()),
    }
    write_json(os.path.join(d, "expected.json"), expected)


def main():
    torch.set_num_threads(1)
    make_full("tiny-a", seed=1234, vocab_size=101, hidden_size=32, num_hidden_layers=3,
              num_attention_heads=4, intermediate_size=37, max_position_embeddings=40,
              type_vocab_size=2, num_labels=2, layer_norm_eps=1e-12, hidden_act="gelu_new",
              initializer_range=0.2)
    make_full("tiny-b", seed=5678, vocab_size=77, hidden_size=24, num_hidden_layers=2,
              num_attention_heads=3, intermediate_size=50, max_position_embeddings=64,
              type_vocab_size=3, num_labels=3, layer_norm_eps=1e-5, hidden_act="gelu",
              initializer_range=0.15, embedding_scale=0.03)
    make_legacy("legacy-base", seed=4321, vocab_size=53, hidden_size=16, num_hidden_layers=2,
                num_attention_heads=2, intermediate_size=20, max_position_embeddings=24,
                type_vocab_size=2, layer_norm_eps=1e-12, hidden_act="relu",
                initializer_range=0.25)
    total = 0
    for root, _, files in os.walk(OUT):
        for f in sorted(files):
            size = os.path.getsize(os.path.join(root, f))
            total += size
            print(f"{os.path.relpath(os.path.join(root, f), HERE)}: {size} bytes")
    print(f"total: {total} bytes")


if __name__ == "__main__":
    main()
