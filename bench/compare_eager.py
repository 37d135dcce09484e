#!/usr/bin/env python3
"""The kit's GPT-2 training step against the same step in eager PyTorch, in alternating rounds.

    tests/golden/setup_venv.sh          # once: Debian's python3-torch + transformers 4.40.2
    cmake --build build --target bench_gpt2
    .venv-golden/bin/python bench/compare_gpt2_eager.py [--models gpt2-mini,gpt2] [--rounds 3]

Each round runs both sides once, each in a fresh process: build/bench/bench_gpt2 (the kit:
dtlab::train::training_step, the step dtlab-gpt2 takes) and this script's --worker (Hugging Face
transformers' GPT2LMHeadModel, eager attention, in Python). The order alternates from round to
round, so that a slow spell of this shared machine falls on both. Both sides use Debian's
PyTorch 1.13 shared libraries (the kit's LibTorch is the same libtorch_cpu.so that python3-torch
loads), the same BLAS and the same thread count.

The same step on both sides: torch.manual_seed(seed), GPT2LMHeadModel(config) (the kit draws its
weights in transformers' order, so they are equal), tokens = randint(0, vocab, [batch, seq + 1])
from the same generator, forward on tokens[:, :-1], cross-entropy against tokens[:, 1:] averaged
over the target tokens, backward, clip_grad_norm_ 1.0, AdamW (lr 1e-4, weight decay 0, two groups:
parameters of fewer than two dimensions apart), the linear schedule, zero_grad (to zeros, as
LibTorch 1.13 does). The first losses of the two sides are printed side by side: they agree bit
for bit (dropout included: the same generator draws the same masks), or in the last digits where
a sum is split over threads, which shows that both sides train the same model on the same batch.

Each process discards its first step (warm-up) and averages the rest. The ratio quoted is
eager s/iter / kit s/iter per round; above 1 means the kit is faster. Tooling only: the kit never
needs Python.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Gpt2Config::preset in common/src/model/gpt2_config.cpp.
PRESETS = {"gpt2-mini": dict(n_embd=128, n_layer=4, n_head=4), "gpt2": dict(n_embd=768, n_layer=12, n_head=12)}


def eager_worker(args):
    """One process, one model: the eager step, --iters times; prints JSON like bench_gpt2's."""
    import torch
    import torch.nn.functional as F
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.set_num_threads(args.threads)
    kwargs = dict(PRESETS[args.models])
    if args.dropout is not None:
        kwargs.update(resid_pdrop=args.dropout, embd_pdrop=args.dropout, attn_pdrop=args.dropout)
    config = GPT2Config(**kwargs)
    config._attn_implementation = "eager"
    torch.manual_seed(args.seed)
    model = GPT2LMHeadModel(config)
    assert type(model.transformer.h[0].attn).__name__ == "GPT2Attention", "not the eager attention"
    tokens = torch.randint(0, config.vocab_size, (args.batch, args.seq + 1), dtype=torch.int64)
    input_ids = tokens[:, :-1].contiguous()
    labels = tokens[:, 1:].contiguous()
    weights = torch.ones(args.batch, args.seq)

    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.0}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=1e-4, eps=1e-8)
    total = args.iters
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: max(0.0, (total - step) / max(1, total)))

    seconds, losses = [], []
    for _ in range(args.iters):
        start = time.perf_counter()
        model.train()
        logits = model(input_ids).logits
        ce = F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1), reduction="none")
        w = weights.reshape(-1)
        loss = (ce * w).sum() / w.sum().clamp_min(1.0)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        model.zero_grad(set_to_none=False)
        losses.append(loss.item())
        seconds.append(time.perf_counter() - start)
    timed = seconds[1:]
    print(json.dumps({"models": [{"model": args.models, "seconds": seconds, "losses": losses,
                                  "seconds_per_iteration": {"mean": statistics.mean(timed)}}],
                      "environment": {"threads": torch.get_num_threads(), "torch": torch.__version__}}))


def run_side(command):
    """Runs one side's process and returns its JSON (stdout)."""
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=1800)
    if done.returncode != 0:
        sys.exit("compare_gpt2_eager: {} failed with exit code {}:\n{}".format(
            " ".join(command), done.returncode, done.stderr[-2000:]))
    return json.loads(done.stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="gpt2-mini,gpt2", help="comma-separated: gpt2-mini,gpt2")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of one kit and one eager run each")
    parser.add_argument("--iters", type=int, default=4, help="steps per run, the first discarded")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="intra-op threads on both sides")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--dropout", type=float, default=None, help="all dropout probabilities (default 0.1)")
    parser.add_argument("--bench_gpt2", default=os.path.join(REPO, "build", "bench", "bench_gpt2"))
    parser.add_argument("--json", help="also write every round's figures to this file")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return eager_worker(args)

    models = args.models.split(",")
    for m in models:
        if m not in PRESETS:
            sys.exit("compare_gpt2_eager: --models: unknown model {!r} (known: {})".format(m, ", ".join(PRESETS)))
    if args.iters < 2 or args.rounds < 1:
        sys.exit("compare_gpt2_eager: --iters must be at least 2 (the first step is discarded), --rounds at least 1")
    if not os.access(args.bench_gpt2, os.X_OK):
        sys.exit("compare_gpt2_eager: {} not found: cmake --build build --target bench_gpt2".format(args.bench_gpt2))

    common = ["--iters", str(args.iters), "--batch", str(args.batch), "--seq", str(args.seq),
              "--threads", str(args.threads), "--seed", str(args.seed)]
    if args.dropout is not None:
        common += ["--dropout", str(args.dropout)]
    sides = {
        "kit": lambda m: [args.bench_gpt2, "--models", m, "--json", "-"] + common,
        "eager": lambda m: [sys.executable, os.path.abspath(__file__), "--worker", "--models", m] + common,
    }
    print("compare_gpt2_eager: batch {} x seq {}, {} threads, {} steps per run (first discarded), {} rounds, "
          "order alternating".format(args.batch, args.seq, args.threads, args.iters, args.rounds))
    record = {"settings": vars(args), "models": {}}
    for m in models:
        rounds = []
        for r in range(args.rounds):
            order = ["kit", "eager"] if r % 2 == 0 else ["eager", "kit"]
            result = {}
            for side in order:
                out = run_side(sides[side](m))
                result[side] = out["models"][0]
                if side == "kit":
                    result["environment"] = out["environment"]
            kit, eager = result["kit"], result["eager"]
            ratio = eager["seconds_per_iteration"]["mean"] / kit["seconds_per_iteration"]["mean"]
            rounds.append({"order": order, "kit": kit, "eager": eager, "ratio": ratio,
                           "environment": result["environment"]})
            print("  {} round {} ({} first): kit {:.3f} s/iter, eager {:.3f} s/iter, eager/kit {:.3f}; "
                  "first loss kit {:.6f} eager {:.6f}".format(
                      m, r + 1, order[0], kit["seconds_per_iteration"]["mean"],
                      eager["seconds_per_iteration"]["mean"], ratio, kit["losses"][0], eager["losses"][0]))
            sys.stdout.flush()
        ratios = [x["ratio"] for x in rounds]
        kit_mean = statistics.mean(x["kit"]["seconds_per_iteration"]["mean"] for x in rounds)
        eager_mean = statistics.mean(x["eager"]["seconds_per_iteration"]["mean"] for x in rounds)
        tokens = args.batch * args.seq
        print("{}: kit {:.3f} s/iter ({:.0f} tokens/s), eager {:.3f} s/iter ({:.0f} tokens/s); eager/kit per round "
              "{}: median {:.3f}, min {:.3f}".format(
                  m, kit_mean, tokens / kit_mean, eager_mean, tokens / eager_mean,
                  ", ".join("{:.3f}".format(x) for x in ratios), statistics.median(ratios), min(ratios)))
        print("  runtime: {} | {}".format(rounds[0]["environment"]["blas"], rounds[0]["environment"]["libtorch"]))
        record["models"][m] = {"rounds": rounds, "median_ratio": statistics.median(ratios)}
    if args.json:
        tmp = args.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(record, f, indent=1)
        os.replace(tmp, args.json)
        print("json: " + args.json)


if __name__ == "__main__":
    main()
