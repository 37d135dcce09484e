#!/usr/bin/env python3
"""The kit's training step against the same step in eager PyTorch, in alternating rounds.

    tests/golden/setup_venv.sh          # once: Debian's python3-torch + transformers 4.40.2
    cmake --build build --target bench_task1 bench_gpt2
    .venv-golden/bin/python bench/compare_eager.py --bench task1 [--models tiny,mini,small] [--rounds 4]
    .venv-golden/bin/python bench/compare_eager.py --bench gpt2 [--models gpt2-mini,gpt2] [--rounds 3]
    ... --profile DIR                   # also profile both sides: DIR/kit/<model>/, DIR/eager/<model>/

    On PyPI's torch 2.x (scripts/setup.sh --torch; tests/golden/setup_venv.sh --torch):
    .torch/venv/bin/python bench/compare_eager.py --build build-pip --bench task1 [--compile]
    ... --compile                       # a third side: eager under torch.compile (inductor, CPU)

    On a GPU (a CUDA build of the kit against a CUDA torch, e.g. build-gpu of scripts/gpu_check.sh):
    python3 bench/compare_eager.py --build build-gpu --bench gpt2 --device cuda

Each round runs both sides once, each in a fresh process: the kit's bench (build/bench/bench_task1:
dtlab::task1::train_step, task 1's step; build/bench/bench_gpt2: dtlab::train::training_step, the
step dtlab-gpt2 takes) and this script's --worker (Hugging Face transformers' BertForSequence-
Classification or GPT2LMHeadModel, eager attention, in Python). The order alternates from round to
round, so that a slow spell of this shared machine falls on both. Both sides use Debian's PyTorch
1.13 shared libraries (the kit's LibTorch is the same libtorch_cpu.so that python3-torch loads),
the same BLAS and the same thread count.

The same step on both sides: torch.manual_seed(seed), the model from its config, a random batch
from the same generator, forward and loss (task1: the classifier's cross-entropy on random labels,
all-ones attention mask, random segment ids; gpt2: forward on tokens[:, :-1], cross-entropy
against tokens[:, 1:] averaged over the target tokens), backward, clip_grad_norm_ 1.0, AdamW (two
groups: parameters of fewer than two dimensions apart, weight decay 0; task1 lr 5e-5, gpt2 1e-4),
the linear schedule, zero_grad. For GPT-2 the kit draws its
weights in transformers' order, so the first losses of the two sides agree bit for bit (or in the
last digits where a sum is split over threads); the kit's BERT draws its weights in another order,
so there the first losses are only both near ln 2.

With --compile (torch 2.x), a third side runs the same eager step with the model under
torch.compile (inductor on the CPU, the default mode): the stronger anchor. Its first step, which
compiles, is discarded like every side's. The three sides rotate their order from round to round.
zero_grad sets gradients to None on the eager sides (PyTorch 2's default; the kit's update does
the same).

With --device cuda (or cuda:N), both sides run on that GPU: the kit's bench gets --device, the
eager side draws its weights and batch on the CPU as before (the same numbers) and moves them
there, and reads its clock after torch.cuda.synchronize(). Float32 on both sides, TF32 off
(PyTorch's default for matmuls).

Each process discards its first step (warm-up) and averages the rest. The ratio quoted is
kit s/iter / eager s/iter per round (the goal: at most 0.9), with its median. With
--profile, each side also profiles 3 more steps after its timed ones (the kit: bench --profile,
report/profile.h; eager: torch.autograd.profiler, the same legacy CPU profiler), so the tables
of profile.txt can be read side by side. Tooling only: the kit never needs Python.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Gpt2Config::preset in common/src/model/gpt2_config.cpp; bench_task1's kShapes (Turc et al.).
PRESETS = {
    "gpt2": {"gpt2-mini": dict(n_embd=128, n_layer=4, n_head=4), "gpt2": dict(n_embd=768, n_layer=12, n_head=12)},
    "task1": {"tiny": (2, 128, 2), "mini": (4, 256, 4), "small": (4, 512, 8), "base": (12, 768, 12)},
}
DEFAULTS = {"gpt2": dict(models="gpt2-mini,gpt2", batch=8, lr=1e-4), "task1": dict(models="tiny,mini,small", batch=64, lr=5e-5)}


def make_model(args, torch):
    """The model, a random batch from the same generator as the kit's bench, and its loss function.

    Drawn on the CPU (the generator the kit's bench draws from too), then moved to args.device."""
    device = torch.device(args.device)
    if args.bench == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel
        import torch.nn.functional as F
        kwargs = dict(PRESETS["gpt2"][args.models])
        if args.dropout is not None:
            kwargs.update(resid_pdrop=args.dropout, embd_pdrop=args.dropout, attn_pdrop=args.dropout)
        config = GPT2Config(**kwargs)
        config._attn_implementation = "eager"
        torch.manual_seed(args.seed)
        model = GPT2LMHeadModel(config)
        assert type(model.transformer.h[0].attn).__name__ == "GPT2Attention", "not the eager attention"
        tokens = torch.randint(0, config.vocab_size, (args.batch, args.seq + 1), dtype=torch.int64)
        input_ids = tokens[:, :-1].contiguous().to(device)
        labels = tokens[:, 1:].contiguous().to(device)
        weights = torch.ones(args.batch, args.seq).reshape(-1).to(device)
        model.to(device)

        def loss_of():
            logits = model(input_ids).logits
            ce = F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1), reduction="none")
            return (ce * weights).sum() / weights.sum().clamp_min(1.0)
        return model, loss_of
    from transformers import BertConfig, BertForSequenceClassification
    layers, hidden, heads = PRESETS["task1"][args.models]
    config = BertConfig(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                        intermediate_size=4 * hidden, num_labels=2)
    config._attn_implementation = "eager"
    torch.manual_seed(args.seed)
    model = BertForSequenceClassification(config)
    assert type(model.bert.encoder.layer[0].attention.self).__name__ == "BertSelfAttention", "not the eager attention"
    # bench_task1's random_batch: ids, all-ones mask, segment ids, labels, in this order.
    input_ids = torch.randint(0, config.vocab_size, (args.batch, args.seq), dtype=torch.int64)
    attention_mask = torch.ones(args.batch, args.seq, dtype=torch.int64)
    token_type_ids = torch.randint(0, 2, (args.batch, args.seq), dtype=torch.int64)
    labels = torch.randint(0, 2, (args.batch,), dtype=torch.int64)
    model.to(device)
    input_ids, attention_mask, token_type_ids, labels = (
        t.to(device) for t in (input_ids, attention_mask, token_type_ids, labels))

    def loss_of():
        return model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                     labels=labels).loss
    return model, loss_of


def eager_worker(args):
    """One process, one model: the eager step, --iters times; prints JSON like the kit's bench."""
    import torch

    torch.set_num_threads(args.threads)
    model, loss_of = make_model(args, torch)
    if args.compile:
        loss_of = torch.compile(loss_of)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.0}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=DEFAULTS[args.bench]["lr"], eps=1e-8)
    total = args.iters
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: max(0.0, (total - step) / max(1, total)))

    def step():
        model.train()
        loss = loss_of()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        model.zero_grad(set_to_none=True)
        return loss.item()

    cuda = args.device.startswith("cuda")

    def synchronize():
        if cuda:
            torch.cuda.synchronize(args.device)

    seconds, losses = [], []
    for _ in range(args.iters):
        synchronize()
        start = time.perf_counter()
        losses.append(step())
        synchronize()
        seconds.append(time.perf_counter() - start)
    if args.profile:
        # As the kit's bench: 3 more steps under the (legacy CPU) autograd profiler, after the timed ones.
        folder = os.path.join(args.profile, args.models)
        os.makedirs(folder, exist_ok=True)
        with torch.autograd.profiler.profile() as prof:
            for _ in range(3):
                step()
        prof.export_chrome_trace(os.path.join(folder, "trace.json"))
        with open(os.path.join(folder, "profile.txt"), "w") as f:
            f.write("eager PyTorch, 3 steps; times are totals over the 3 steps\n")
            f.write(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=40))
    timed = seconds[1:]
    environment = {"threads": torch.get_num_threads(), "torch": torch.__version__}
    if cuda:
        environment.update(device=args.device, device_name=torch.cuda.get_device_name(args.device))
    print(json.dumps({"models": [{"model": args.models, "seconds": seconds, "losses": losses, "torch": torch.__version__,
                                  "last_loss": losses[-1], "seconds_per_iteration": {"mean": statistics.mean(timed)}}],
                      "environment": environment}))


def run_side(command):
    """Runs one side's process and returns its JSON (the last line of stdout)."""
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=3600)
    if done.returncode != 0:
        sys.exit("compare_eager: {} failed with exit code {}:\n{}".format(
            " ".join(command), done.returncode, done.stderr[-2000:]))
    return json.loads(done.stdout.strip().splitlines()[-1])


def first_loss(side):
    return side["losses"][0] if "losses" in side else float("nan")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bench", choices=sorted(PRESETS), default="gpt2", help="which step: task1 (BERT) or gpt2")
    parser.add_argument("--models", help="comma-separated (task1: tiny,mini,small,base; gpt2: gpt2-mini,gpt2)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of one kit and one eager run each")
    parser.add_argument("--iters", type=int, default=4, help="steps per run, the first discarded")
    parser.add_argument("--batch", type=int, help="examples per step (task1: 64, gpt2: 8)")
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="intra-op threads on both sides")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--dropout", type=float, default=None, help="gpt2: all dropout probabilities (default 0.1)")
    parser.add_argument("--profile", help="folder: both sides also profile 3 steps into FOLDER/kit, FOLDER/eager")
    parser.add_argument("--build", default=os.path.join(REPO, "build"), help="the kit's build folder")
    parser.add_argument("--json", help="also write every round's figures to this file")
    parser.add_argument("--compile", action="store_true", help="also time eager under torch.compile (torch 2.x)")
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda or cuda:N: both sides on that device")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    defaults = DEFAULTS[args.bench]
    if args.batch is None:
        args.batch = defaults["batch"]
    if args.device != "cpu" and not re.fullmatch(r"cuda(:[0-9]+)?", args.device):
        sys.exit("compare_eager: --device {}: expected cpu, cuda or cuda:N".format(args.device))
    if args.worker:
        return eager_worker(args)
    if args.models is None:
        args.models = defaults["models"]
    if args.dropout is not None and args.bench != "gpt2":
        sys.exit("compare_eager: --dropout: bench_task1 keeps BERT's 0.1")

    models = args.models.split(",")
    for m in models:
        if m not in PRESETS[args.bench]:
            sys.exit("compare_eager: --models: unknown {} model {!r} (known: {})".format(
                args.bench, m, ", ".join(PRESETS[args.bench])))
    if args.iters < 2 or args.rounds < 1:
        sys.exit("compare_eager: --iters must be at least 2 (the first step is discarded), --rounds at least 1")
    bench = os.path.join(args.build, "bench", "bench_" + args.bench)
    if not os.access(bench, os.X_OK):
        sys.exit("compare_eager: {} not found: cmake --build {} --target {}".format(
            bench, args.build, os.path.basename(bench)))

    if args.device != "cpu":
        import torch  # the eager side's torch: it must see the GPU too, asked once before any round
        if not torch.cuda.is_available():
            sys.exit("compare_eager: --device {}: this Python's torch {} sees no GPU (torch.cuda.is_available() is "
                     "false)".format(args.device, torch.__version__))
    common = ["--iters", str(args.iters), "--batch", str(args.batch), "--seq", str(args.seq),
              "--threads", str(args.threads), "--seed", str(args.seed)]
    if args.device != "cpu":
        common += ["--device", args.device]
    if args.dropout is not None:
        common += ["--dropout", str(args.dropout)]
    kit_only = ["--base_iters", str(args.iters)] if args.bench == "task1" else []

    def profile(side):
        return ["--profile", os.path.abspath(os.path.join(args.profile, side))] if args.profile else []
    sides = {
        "kit": lambda m: [bench, "--models", m, "--json", "-"] + common + kit_only + profile("kit"),
        "eager": lambda m: [sys.executable, os.path.abspath(__file__), "--worker", "--bench", args.bench,
                            "--models", m] + common + profile("eager"),
        "compiled": lambda m: [sys.executable, os.path.abspath(__file__), "--worker", "--compile", "--bench",
                               args.bench, "--models", m] + common + profile("compiled"),
    }
    names = ["kit", "eager"] + (["compiled"] if args.compile else [])
    print("compare_eager: {} step, batch {} x seq {}, {} threads, {} steps per run (first discarded), {} rounds, "
          "order alternating{}".format(args.bench, args.batch, args.seq, args.threads, args.iters, args.rounds,
                                       "" if args.device == "cpu" else ", on " + args.device))
    record = {"settings": vars(args), "models": {}}
    for m in models:
        rounds = []
        for r in range(args.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            if len(names) == 2 and r % 2 == 1:
                order = ["eager", "kit"]
            result = {}
            for side in order:
                out = run_side(sides[side](m))
                result[side] = out["models"][0]
                if side == "kit":
                    result["environment"] = out["environment"]
            kit, eager = result["kit"], result["eager"]
            ratio = kit["seconds_per_iteration"]["mean"] / eager["seconds_per_iteration"]["mean"]
            entry = {"order": order, "kit": kit, "eager": eager, "ratio": ratio,
                     "environment": result["environment"]}
            compiled_text = ""
            if "compiled" in result:
                compiled = result["compiled"]
                entry["compiled"] = compiled
                entry["ratio_compiled"] = kit["seconds_per_iteration"]["mean"] / compiled["seconds_per_iteration"]["mean"]
                compiled_text = ", compiled {:.3f} s/iter, kit/compiled {:.3f}".format(
                    compiled["seconds_per_iteration"]["mean"], entry["ratio_compiled"])
            rounds.append(entry)
            print("  {} round {} ({} first): kit {:.3f} s/iter, eager {:.3f} s/iter, kit/eager {:.3f}{}; "
                  "first loss kit {:.6f} eager {:.6f}".format(
                      m, r + 1, order[0], kit["seconds_per_iteration"]["mean"],
                      eager["seconds_per_iteration"]["mean"], ratio, compiled_text, first_loss(kit),
                      first_loss(eager)))
            sys.stdout.flush()
        ratios = [x["ratio"] for x in rounds]
        kit_mean = statistics.mean(x["kit"]["seconds_per_iteration"]["mean"] for x in rounds)
        eager_mean = statistics.mean(x["eager"]["seconds_per_iteration"]["mean"] for x in rounds)
        tokens = args.batch * args.seq
        print("{}: kit {:.3f} s/iter ({:.0f} tokens/s), eager {:.3f} s/iter ({:.0f} tokens/s); kit/eager per round "
              "{}: median {:.3f}, max {:.3f}".format(
                  m, kit_mean, tokens / kit_mean, eager_mean, tokens / eager_mean,
                  ", ".join("{:.3f}".format(x) for x in ratios), statistics.median(ratios), max(ratios)))
        if args.compile:
            compiled_ratios = [x["ratio_compiled"] for x in rounds]
            compiled_mean = statistics.mean(x["compiled"]["seconds_per_iteration"]["mean"] for x in rounds)
            print("{}: compiled {:.3f} s/iter ({:.0f} tokens/s); kit/compiled per round {}: median {:.3f}".format(
                m, compiled_mean, tokens / compiled_mean, ", ".join("{:.3f}".format(x) for x in compiled_ratios),
                statistics.median(compiled_ratios)))
        env = rounds[0]["environment"]
        print("  runtime: {} | LibTorch {} | eager's torch {}{}".format(
            env.get("blas", "?"), env.get("libtorch", "?"), rounds[0]["eager"].get("torch", "?"),
            " | {} {}".format(env["device"]["device"], env["device"].get("name", "")) if "device" in env else ""))
        record["models"][m] = {"rounds": rounds, "median_ratio": statistics.median(ratios)}
    if args.json:
        tmp = args.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(record, f, indent=1)
        os.replace(tmp, args.json)
        print("json: " + args.json)


if __name__ == "__main__":
    main()
