"""An independent check of the tp exercise's save: Hugging Face transformers reloads the folder
that a tensor-parallel run writes from its shards, and it is one process's model.

The kit's own tests (tp_train_test) load the saved folder back with the kit's loader, which is the
same code that wrote it; this script asks transformers instead. It trains the fixture's GPT-2
(fixtures/gpt2-tiny: vocabulary 1482, tied head) for a few steps twice, from the same weights and
on the same rows:

  - tp-solution at TP 2 x DP 2 (4 local ranks), which gathers the slices and saves one folder;
  - dp-solution at one rank: one process, the model tensor parallelism must equal;

with dropout off (with it on, each data-parallel replica draws the masks of its own rows, as dp's
ranks do, so TP x DP is not one process's run; tp_run_test holds TP alone with dropout to one),
then loads both folders with GPT2LMHeadModel.from_pretrained and requires: no missing or
unexpected keys, the head tied to wte, the vocabulary unpadded, every weight of the TP folder
within --tolerance of one process's, and the same logits and loss on a sentence of the fixture's
tokenizer (GPT2TokenizerFast, also transformers'). Exits 1 and says which part differs otherwise.

Run from the repo root, after `make fixtures` (which builds the kit):

    tests/golden/setup_venv.sh && .venv-golden/bin/python tests/golden/check_tp_save.py

(--build build-pip for the PyPI torch build; --out DIR keeps the runs' folders). Tooling only:
nothing in the kit runs Python; docs/MEASUREMENTS.md records what it printed.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import torch
import transformers
from transformers import GPT2LMHeadModel, GPT2TokenizerFast

SENTENCE = "Der Hund schläft im Garten. The dog sleeps in the garden."


def train(build, program, world, extra, out, port, args):
    """Runs `program` on `world` local ranks and returns the folder it saved."""
    folder = os.path.join(out, program)
    command = [
        "scripts/run_local_ranks.sh", str(world), os.path.join(folder, "logs"), "--",
        os.path.join(build, program),
        "--model_name_or_path", args.model, "--data_dir", args.data,
        "--global_batch_size", str(args.batch), "--learning_rate", "1e-3", "--max_steps", str(args.steps),
        "--no_eval", "--seed", "42", "--dropout", "0", "--output_dir", folder, "--overwrite_output_dir",
        "--master_ip", "127.0.0.1", "--master_port", str(port), "--world_size", str(world),
        "--local_rank", "{rank}", *extra,
    ]
    print("$ " + " ".join(command), flush=True)
    try:
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        sys.exit(f"check_tp_save: {program} did not end in 600 s (its rank logs: {folder}/logs)")
    if done.returncode != 0:
        sys.exit(f"check_tp_save: {program} failed (exit {done.returncode}):\n{done.stdout[-4000:]}")
    return folder


def load(folder):
    model, info = GPT2LMHeadModel.from_pretrained(folder, output_loading_info=True)
    return model.eval(), info


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build", help="the kit's build folder (build, build-pip)")
    parser.add_argument("--model", default="fixtures/gpt2-tiny", help="the Hugging Face GPT-2 folder both runs start from")
    parser.add_argument("--data", default="fixtures/translation", help="the translation set")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--batch", type=int, default=16, help="global batch (pairs)")
    parser.add_argument("--tolerance", type=float, default=1e-4,
                        help="largest difference allowed in a weight or a logit (Adam amplifies float32 rounding)")
    parser.add_argument("--out", help="keep the runs' folders here (default: a temporary folder)")
    parser.add_argument("--port", type=int, default=29640)
    args = parser.parse_args()

    out = args.out or tempfile.mkdtemp(prefix="check-tp-save-")
    os.makedirs(out, exist_ok=True)
    tp_folder = train(args.build, "tp-solution", 4, ["--tp", "2"], out, args.port, args)
    one_folder = train(args.build, "dp-solution", 1, [], out, args.port + 1, args)

    tp, tp_info = load(tp_folder)
    one, _ = load(one_folder)
    start, _ = load(args.model)
    problems = []
    for kind in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        if tp_info[kind]:
            problems.append(f"transformers reports {kind} loading {tp_folder}: {tp_info[kind]}")
    if tp.lm_head.weight.data_ptr() != tp.transformer.wte.weight.data_ptr():
        problems.append("the head is not tied to wte")
    vocab = tp.config.vocab_size
    if vocab != start.config.vocab_size or tp.transformer.wte.weight.shape[0] != vocab:
        problems.append(f"vocabulary {vocab} (wte rows {tp.transformer.wte.weight.shape[0]}), "
                        f"not the start's {start.config.vocab_size}: padding saved?")

    tp_state, one_state, start_state = tp.state_dict(), one.state_dict(), start.state_dict()
    worst, worst_name, moved = 0.0, "", 0.0
    for name, value in one_state.items():
        if name not in tp_state or tp_state[name].shape != value.shape:
            problems.append(f"{name}: {tuple(tp_state[name].shape) if name in tp_state else 'absent'} "
                            f"in the TP folder, {tuple(value.shape)} in one process's")
            continue
        difference = (tp_state[name] - value).abs().max().item()
        moved = max(moved, (value - start_state[name]).abs().max().item())
        if difference > worst:
            worst, worst_name = difference, name
    if worst > args.tolerance:
        problems.append(f"{worst_name} differs from one process's by {worst:.3g} (tolerance {args.tolerance:g})")
    if moved == 0:
        problems.append("training moved no weight: the comparison would prove nothing")

    tokenizer = GPT2TokenizerFast.from_pretrained(args.model)
    ids = tokenizer(SENTENCE, return_tensors="pt").input_ids
    with torch.no_grad():
        tp_out, one_out = tp(ids, labels=ids), one(ids, labels=ids)
    logits = (tp_out.logits - one_out.logits).abs().max().item()
    if logits > args.tolerance:
        problems.append(f"the logits of the sentence differ by {logits:.3g}")

    print(f"transformers {transformers.__version__}, torch {torch.__version__}: "
          f"{tp_folder} loaded with no missing or unexpected keys; vocabulary {vocab}, head tied")
    print(f"{args.steps} steps of {args.batch} at TP 2 x DP 2 against one process: every weight within {worst:.2g} "
          f"(largest in {worst_name}) after moving up to {moved:.2g}")
    print(f"a sentence of {ids.shape[1]} tokens: loss {tp_out.loss.item():.6f} against {one_out.loss.item():.6f}, "
          f"logits within {logits:.2g}")
    for problem in problems:
        print("check_tp_save: " + problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
