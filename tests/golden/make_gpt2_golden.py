"""Golden test data for the kit's C++ GPT2LMHeadModel (tests/gpt2_golden_test.cpp).

Hugging Face transformers is the oracle: this script builds tiny random GPT-2s with it, saves them
as Hugging Face checkpoints in both key styles GPT-2 checkpoints come in, runs them on fixed
inputs and records what they compute, what from_pretrained reports, and what generate() returns.

Rerun (from the repo root; tooling only, the kit never runs Python):

    tests/golden/setup_venv.sh && .venv-golden/bin/python tests/golden/make_gpt2_golden.py

Generated with: Debian 12's python3-torch 1.13.0 (the same PyTorch as the kit's LibTorch),
transformers 4.40.2, tokenizers 0.19.1, safetensors 0.8.0, CPU, float32, eager attention. The
output is deterministic for these versions: rerunning rewrites byte-identical files.

Writes tests/golden/gpt2/ with
  tiny-a/           GPT-2's defaults in small (2 layers, 4 heads of 8, n_inner null): config.json and
                    model.safetensors as transformers 4.40.2 saves them (keys "transformer.*", no
                    lm_head.weight because it is tied), and expected.json.
  tiny-b/           the odd one: 3 layers, 5 heads of 6 (not a power of two), n_inner 50,
                    layer_norm_epsilon 1e-3 (against hidden states of variance ~0.02, large
                    enough to move every output far beyond the tolerance),
                    scale_attn_by_inverse_layer_idx and reorder_and_upcast_attn on.
  tiny-a-original/, tiny-b-original/
                    the same weights in the original `gpt2` hub style: no "transformer." prefix,
                    each layer's causal-mask buffers h.N.attn.bias ([1, 1, n_positions,
                    n_positions] of 1/0) and h.N.attn.masked_bias (-1e4), and an old-style
                    config.json (n_ctx, no n_inner or attention flags when at their defaults).
  presets/gpt2/config.json, presets/gpt2-mini/config.json, presets/expected.json
                    GPT2Config() (GPT-2 small) and the kit's teaching preset as transformers saves
                    them, and their parameter counts.

expected.json holds, for fixed inputs: the logits and loss of a batch with right and left padding
(attention_mask, labels -100 at padding) and of an unpadded batch (no mask); what from_pretrained
reported (missing and unexpected keys) for each key style and for checkpoint variants the C++
test rebuilds from them (one layer more in config.json; a GPT2DoubleHeadsModel's extra head; a
tied lm_head.weight stored too); greedy generations (with and without the cache, equal, every
token chosen by a margin of more than MIN_MARGIN over the runner-up so that rounding cannot decide
it); and the first values, sums and deviations of the weights GPT2LMHeadModel(config) draws after
torch.manual_seed(init_seed).

Weights are perturbed away from their initial values (LayerNorm weight 1 and bias 0, zero
biases) so that a dropped bias or swapped LayerNorm parameters change the result, and the
initializer range is large enough that attention is far from uniform. Dropout probabilities are
left at their non-zero defaults: every golden output is in eval mode. See Note [baddbmm] below for
the one change made to how transformers runs.
"""

import copy
import json
import os
import re
import shutil
import sys
import tempfile

import safetensors
import safetensors.torch
import tokenizers
import torch
import transformers
from transformers import GenerationConfig, GPT2Config, GPT2LMHeadModel

# Note [baddbmm]: GPT2Attention._upcast_and_reordered_attn (reorder_and_upcast_attn, tiny-b) calls
# torch.baddbmm(torch.empty(...), q, k, beta=0, alpha=scale). PyTorch 1.13's CPU baddbmm, out of
# place on small matrices, multiplies uninitialised memory by beta instead of ignoring it, so a
# NaN there comes out as NaN (seen here in the golden runs, at random). This script runs
# transformers with that call done in place on zeros, which is what beta=0 means, runs the same
# kernel and is what the C++ does.
_torch_baddbmm = torch.baddbmm


def _baddbmm_ignoring_input_when_beta_is_0(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    if beta == 0 and out is None:
        return torch.zeros_like(input).baddbmm_(batch1, batch2, beta=0, alpha=alpha)
    return _torch_baddbmm(input, batch1, batch2, beta=beta, alpha=alpha, out=out)


torch.baddbmm = _baddbmm_ignoring_input_when_beta_is_0

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "gpt2")
MAX_NEW_TOKENS = 12
MAX_FILE_BYTES = 300_000
# Smallest gap between the best and the second-best logit of a generated token.
MIN_MARGIN = 1e-3


def versions():
    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "safetensors": safetensors.__version__,
        "python": sys.version.split()[0],
    }


def write_json(path, obj):
    # Indented, with each innermost list of numbers on one line (a row of logits, a prompt).
    text = json.dumps(obj, indent=1)
    text = re.sub(r"\[\s+([-+0-9.eE,\s]+?)\s+\]",
                  lambda m: "[" + re.sub(r",\s+", ", ", m.group(1)) + "]", text)
    with open(path, "w") as f:
        f.write(text + "\n")


def floats(t):
    # float32 values, written as the shortest decimal that reads back as the same double, which
    # is exactly the float32 value.
    return t.detach().to(torch.float32).tolist()


def fresh_dir(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def perturb(model, gen):
    """Moves LayerNorm parameters and every bias away from their 1/0 initial values."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            is_norm = ".ln_" in name
            if is_norm and name.endswith(".weight"):
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=gen))
            elif is_norm and name.endswith(".bias"):
                p.copy_(0.2 * torch.randn(p.shape, generator=gen))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))


def load(d, **kwargs):
    model, info = GPT2LMHeadModel.from_pretrained(d, attn_implementation="eager",
                                                  output_loading_info=True, **kwargs)
    model.eval()
    assert not info["mismatched_keys"] and not info["error_msgs"], info
    return model, {"missing_keys": sorted(info["missing_keys"]),
                   "unexpected_keys": sorted(info["unexpected_keys"])}


# ---------------------------------------------------------------------------------------------
# Inputs

def padded_batch(config, gen):
    """Batch 3, length 10: row 0 full, row 1 with 3 right pads, row 2 with 2 left pads. Padding
    holds eos (GPT-2's usual pad); labels are the ids with -100 at padding."""
    seq = 10
    ids = torch.randint(0, config.vocab_size, (3, seq), generator=gen)
    mask = torch.ones(3, seq, dtype=torch.int64)
    mask[1, 7:] = 0
    mask[2, :2] = 0
    ids[mask == 0] = config.eos_token_id
    labels = ids.masked_fill(mask == 0, -100)
    return ids, mask, labels


def plain_batch(config, gen):
    ids = torch.randint(0, config.vocab_size, (2, 8), generator=gen)
    return ids, ids.clone()


# ---------------------------------------------------------------------------------------------
# Generation

def greedy(model, ids, eos, mask=None):
    # generate() falls back to the model's generation_config.eos_token_id (config.json's) when
    # the one it is given has none: clear it, so that eos=None means no eos.
    model.generation_config.eos_token_id = None
    gc = GenerationConfig(do_sample=False, max_new_tokens=MAX_NEW_TOKENS, eos_token_id=eos,
                          pad_token_id=None, bos_token_id=None)
    with torch.no_grad():
        out = model.generate(ids, attention_mask=mask, generation_config=gc,
                             return_dict_in_generate=True, output_scores=True)
        uncached = model.generate(ids, attention_mask=mask, generation_config=gc, use_cache=False)
    assert torch.equal(out.sequences, uncached), (out.sequences, uncached)
    # Every token chosen while its row was unfinished won by a margin that rounding cannot
    # overturn, so that another float32 implementation must choose the same.
    start = ids.shape[1]
    for step, scores in enumerate(out.scores):
        for row in range(ids.shape[0]):
            if eos is not None and eos in out.sequences[row, start:start + step].tolist():
                continue
            top2 = scores[row].topk(2).values
            assert top2[0] - top2[1] > MIN_MARGIN, (step, row, top2)
    return out.sequences


def first_new_token_not_in(row_tokens, other_tokens):
    for t in row_tokens:
        if t not in other_tokens:
            return t
    return None


def generations(model, config, gen):
    """Single prompts without and with an eos that stops one early, and a left-padded batch in
    which one row finishes early and is padded while the other goes on."""
    cases = []
    prompts = [torch.randint(0, config.vocab_size, (n,), generator=gen) for n in (1, 4, 7)]
    for p in prompts:
        out = greedy(model, p.unsqueeze(0), eos=None)
        cases.append({"prompt": p.tolist(), "eos_token_id": None, "output": out[0].tolist()})
    # eos = a token that the last prompt's continuation produces at its 4th new token or later
    # and not before, so that decoding stops early.
    p = prompts[-1]
    free = cases[-1]["output"][len(p):]
    eos = next((t for i, t in enumerate(free) if i >= 3 and t not in free[:i]), free[-1])
    out = greedy(model, p.unsqueeze(0), eos=eos)
    assert out.shape[1] < len(p) + MAX_NEW_TOKENS, "eos should stop decoding early"
    cases.append({"prompt": p.tolist(), "eos_token_id": eos, "output": out[0].tolist()})

    # Left-padded batch: 3 and 6 real tokens, padded on the left with eos.
    a = torch.randint(0, config.vocab_size, (3,), generator=gen)
    b = torch.randint(0, config.vocab_size, (6,), generator=gen)
    ids = torch.full((2, 6), config.eos_token_id, dtype=torch.int64)
    mask = torch.zeros(2, 6, dtype=torch.int64)
    ids[0, 3:], mask[0, 3:] = a, 1
    ids[1, :], mask[1, :] = b, 1
    free = greedy(model, ids, eos=None, mask=mask)
    new = free[:, 6:].tolist()
    eos = first_new_token_not_in(new[0], new[1])
    if eos is None:
        eos = first_new_token_not_in(new[1], new[0])
    assert eos is not None, "the two rows generate the same tokens: pick other prompts"
    out = greedy(model, ids, eos=eos, mask=mask)
    assert (out[:, 6:] == eos).any(), "one row should finish"
    cases.append({"prompt": ids.tolist(), "attention_mask": mask.tolist(), "eos_token_id": None,
                  "output": free.tolist()})
    cases.append({"prompt": ids.tolist(), "attention_mask": mask.tolist(), "eos_token_id": eos,
                  "output": out.tolist()})
    for c in cases:
        c["max_new_tokens"] = MAX_NEW_TOKENS
    return cases


# ---------------------------------------------------------------------------------------------
# Checkpoints and their variants

def original_style_config(config_dict):
    """config.json as the original `gpt2` hub folder has it: n_ctx, and none of the fields later
    transformers added when they are at their defaults."""
    c = copy.deepcopy(config_dict)
    c["n_ctx"] = c["n_positions"]
    for key, default in (("n_inner", None), ("scale_attn_weights", True),
                         ("scale_attn_by_inverse_layer_idx", False),
                         ("reorder_and_upcast_attn", False), ("torch_dtype", None),
                         ("transformers_version", None)):
        if key in c and (c[key] == default or key in ("torch_dtype", "transformers_version")):
            del c[key]
    return c


def save_original_style(recent_dir, d, config):
    """The recent checkpoint's weights under the original `gpt2` keys, with the mask buffers."""
    tensors = safetensors.torch.load_file(os.path.join(recent_dir, "model.safetensors"))
    out = {k[len("transformer."):]: v for k, v in tensors.items()}
    n = config.n_positions
    for i in range(config.n_layer):
        out[f"h.{i}.attn.bias"] = torch.tril(torch.ones(n, n)).view(1, 1, n, n)
        out[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    safetensors.torch.save_file(out, os.path.join(d, "model.safetensors"),
                                metadata={"format": "pt"})
    with open(os.path.join(recent_dir, "config.json")) as f:
        write_json(os.path.join(d, "config.json"), original_style_config(json.load(f)))


def variant(src, edit_config=None, edit_tensors=None):
    """A temporary copy of checkpoint folder src with its config.json and tensors edited."""
    d = tempfile.mkdtemp(prefix="gpt2-golden-")
    with open(os.path.join(src, "config.json")) as f:
        c = json.load(f)
    if edit_config:
        edit_config(c)
    write_json(os.path.join(d, "config.json"), c)
    tensors = safetensors.torch.load_file(os.path.join(src, "model.safetensors"))
    if edit_tensors:
        edit_tensors(tensors)
    safetensors.torch.save_file(tensors, os.path.join(d, "model.safetensors"),
                                metadata={"format": "pt"})
    return d


def load_cases(recent, original, config):
    """What from_pretrained reports for each style and for the variants the C++ test rebuilds
    (it applies the same edits; the names here are the ones it uses)."""
    cases = {}
    _, cases["recent"] = load(recent)
    _, cases["original"] = load(original)

    def one_more_layer(c):
        c["n_layer"] = c["n_layer"] + 1

    for style, src in (("recent", recent), ("original", original)):
        d = variant(src, edit_config=one_more_layer)
        _, cases[f"{style}-one-more-layer"] = load(d)
        shutil.rmtree(d)

    # A GPT2DoubleHeadsModel checkpoint: its multiple-choice head (Linear(n_embd, 1)) is unused.
    def double_heads(t):
        t["multiple_choice_head.summary.weight"] = torch.zeros(1, config.n_embd)
        t["multiple_choice_head.summary.bias"] = torch.zeros(1)

    d = variant(recent, edit_tensors=double_heads)
    _, cases["recent-double-heads"] = load(d)
    shutil.rmtree(d)

    # A tied lm_head.weight stored as well (older transformers wrote it): it is loaded last, so
    # its values become wte's.
    def with_lm_head(t):
        t["lm_head.weight"] = 2.0 * t["transformer.wte.weight"]

    d = variant(recent, edit_tensors=with_lm_head)
    model, cases["recent-with-lm-head"] = load(d)
    stored = safetensors.torch.load_file(os.path.join(d, "model.safetensors"))["lm_head.weight"]
    assert torch.equal(model.transformer.wte.weight, stored), "lm_head.weight should win"
    assert model.lm_head.weight is model.transformer.wte.weight
    shutil.rmtree(d)

    # The same with original keys: transformers refuses it.
    def original_with_lm_head(t):
        t["lm_head.weight"] = t["wte.weight"].clone()

    d = variant(original, edit_tensors=original_with_lm_head)
    try:
        load(d)
        raise AssertionError("transformers should refuse an unprefixed checkpoint with lm_head")
    except ValueError as e:
        assert "corrupted" in str(e), e
    shutil.rmtree(d)
    return cases


def init_stats(config, seed):
    """What GPT2LMHeadModel(config) draws after torch.manual_seed(seed), per state-dict key."""
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(config)
    stats = {}
    for key, p in model.named_parameters():
        flat = p.detach().flatten()
        stats[key] = {"first": floats(flat[:4]), "sum": float(flat.double().sum()),
                      "std": float(flat.double().std()) if flat.numel() > 1 else 0.0}
    return stats


def make(name, seed, **config_kwargs):
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed + 1)
    config = GPT2Config(attn_implementation="eager", **config_kwargs)
    model = GPT2LMHeadModel(config)
    perturb(model, gen)
    model.eval()

    recent = fresh_dir(os.path.join(OUT, name))
    model.save_pretrained(recent, safe_serialization=True)
    original = fresh_dir(os.path.join(OUT, name + "-original"))
    save_original_style(recent, original, config)

    # The golden numbers are those of the files on disk, loaded as transformers loads them.
    reloaded, _ = load(recent)
    from_original, _ = load(original)
    ids, mask, labels = padded_batch(config, gen)
    plain_ids, plain_labels = plain_batch(config, gen)
    with torch.no_grad():
        padded = reloaded(input_ids=ids, attention_mask=mask, labels=labels)
        plain = reloaded(input_ids=plain_ids, labels=plain_labels)
        ref = model(input_ids=ids, attention_mask=mask, labels=labels)
        orig = from_original(input_ids=ids, attention_mask=mask, labels=labels)
    assert torch.equal(padded.logits, ref.logits)
    assert torch.equal(padded.logits, orig.logits)

    expected = {
        "description": f"GPT2LMHeadModel {name}, generated by make_gpt2_golden.py",
        "versions": versions(),
        "padded": {"input_ids": ids.tolist(), "attention_mask": mask.tolist(),
                   "labels": labels.tolist(), "logits": floats(padded.logits),
                   "loss": float(padded.loss)},
        "plain": {"input_ids": plain_ids.tolist(), "labels": plain_labels.tolist(),
                  "logits": floats(plain.logits), "loss": float(plain.loss)},
        "state_dict_keys": sorted(reloaded.state_dict().keys()),
        "saved_keys": sorted(safetensors.torch.load_file(
            os.path.join(recent, "model.safetensors")).keys()),
        "load_reports": load_cases(recent, original, config),
        "generations": generations(reloaded, config, gen),
        "init_seed": seed + 2,
        "init": init_stats(config, seed + 2),
    }
    # The same weights without the 1/sqrt(head_dim) scaling (config.json edited by the test).
    d = variant(recent, edit_config=lambda c: c.update(scale_attn_weights=False))
    unscaled, _ = load(d)
    shutil.rmtree(d)
    with torch.no_grad():
        out = unscaled(input_ids=ids, attention_mask=mask, labels=labels)
    expected["padded"]["logits_scale_attn_weights_false"] = floats(out.logits)
    write_json(os.path.join(recent, "expected.json"), expected)


def make_presets():
    d = fresh_dir(os.path.join(OUT, "presets"))
    counts = {}
    for name, kwargs in (("gpt2", {}), ("gpt2-mini", {"n_embd": 128, "n_layer": 4, "n_head": 4})):
        config = GPT2Config(**kwargs)
        config.save_pretrained(os.path.join(d, name))
        counts[name] = GPT2LMHeadModel(config).num_parameters()
    write_json(os.path.join(d, "expected.json"), {"versions": versions(), "num_parameters": counts})


def main():
    torch.set_num_threads(1)
    make("tiny-a", seed=1234, vocab_size=97, n_positions=32, n_embd=32, n_layer=2, n_head=4,
         initializer_range=0.2, bos_token_id=96, eos_token_id=96)
    make("tiny-b", seed=5678, vocab_size=71, n_positions=40, n_embd=30, n_layer=3, n_head=5,
         n_inner=50, layer_norm_epsilon=1e-3, initializer_range=0.15, bos_token_id=70,
         eos_token_id=70, scale_attn_by_inverse_layer_idx=True, reorder_and_upcast_attn=True)
    make_presets()
    total = 0
    for root, _, files in os.walk(OUT):
        for f in sorted(files):
            path = os.path.join(root, f)
            size = os.path.getsize(path)
            assert not f.endswith(".safetensors") or size < MAX_FILE_BYTES, path
            total += size
            print(f"{os.path.relpath(path, HERE)}: {size} bytes")
    print(f"total: {total} bytes")


if __name__ == "__main__":
    main()
