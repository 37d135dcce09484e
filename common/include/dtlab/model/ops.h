// Which implementation the models' hot spots use: the kit's own (the default) or LibTorch's
// obvious one, kept so that a benchmark can time the same model written the obvious way in the
// same build (bench_task1 --plain, bench_gpt2 --plain; `--versus_plain` alternates the two) and
// a regression of the kit's own shows without Python. The two differ only in speed (and, for
// AdamW, in the last bits of a fused multiply-add):
//   linear   kit: at::linear, one addmm (bert.cpp); plain: torch::nn::Linear's forward
//            (LibTorch 1.13's F::linear: a matmul, then the bias added);
//   dropout  kit: the mask drawn in one loop (Note [Dropout's mask]); plain: torch::dropout;
//   AdamW    kit: the update in one pass (Note [AdamW in one pass], train/optimizer.h); plain:
//            torch::optim::AdamW::step, nine operators over each parameter.
// The last difference, the allocator (Note [Keeping freed memory]), is the process's: the
// benchmarks' --plain leaves glibc's defaults.
#pragma once

namespace dtlab::model {

enum class Ops { kit, plain };

void use_ops(Ops ops);  // for the whole process; set it before the first forward
Ops ops_in_use();

}  // namespace dtlab::model
