// The machine's measured peak, for model FLOPs utilisation (MFU): what an fp32 matrix product
// reaches on this rank's threads, beside the FLOPs a training step of the model needs.
//
// Note [The machine's peak]: MFU is the model's FLOPs a second over the peak the hardware can
// reach. A datasheet's peak assumes every core at its top clock with nothing beside it; this
// machine's cores are shared. So the kit measures: n x n x n fp32 products (torch::mm, the same
// BLAS the model's matmuls call), `repeats` of them after a warm-up, their FLOPs over their time,
// on this rank's threads, every rank at once after training (they meet at a barrier first), so
// that ranks which share cores measure what each gets while the others run and their sum is what
// the machine gives them all. (Best-of timing would let a rank measure in the moments the others
// wait, and the sum would exceed the machine.) The run's MFU is the model's FLOPs a second over
// the sum of the ranks' peaks. It is the peak of fp32 on this BLAS: a bf16 run's MFU is against
// that peak too (a CPU without bf16 units computes bf16 no faster), and a GPU run would compare
// with its own product.
#pragma once

#include <cstdint>

namespace dtlab::report {

// FLOP/s of `repeats` n x n x n fp32 products in a row, 2 n^3 FLOPs each, after one warm-up.
double measure_matmul_flops(int64_t n = 512, int repeats = 8);

}  // namespace dtlab::report
