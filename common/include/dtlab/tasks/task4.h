// Task 4: how many bytes does data-parallel training put on the network, and does the
// measurement agree with the model?
//
// The contract between the kit and the student: tasks/task4/ implements these functions,
// solutions/task4/ is the reference. The driver (common/drivers/task4_main.cpp) trains with
// the kit's DistributedDataParallel for each global batch size (64, 32, 16), records every
// all_reduce (shape, dtype, bytes) and reads the network interface's byte counters before and
// after; it calls expected_epoch_bytes_per_rank with the all_reduces of one iteration and prints
// expected against measured. handouts/task4.md explains each TODO.
#pragma once

#include <cstdint>
#include <vector>

#include "dtlab/dist/group.h"

namespace dtlab::task4 {

// Bytes one rank sends in a ring all_reduce of a tensor of `bytes` bytes over `world` ranks
// (Gloo's algorithm): a reduce-scatter then an all-gather, each of world - 1 steps that send
// one world-th of the tensor. 0 when world is 1.
double ring_allreduce_bytes_per_rank(int64_t bytes, int world);

// Bytes one rank is expected to send in `iterations` iterations, given the all_reduces of one
// iteration (as the CommLog recorded them) and the ring cost of each.
double expected_epoch_bytes_per_rank(const std::vector<dist::CommRecord>& one_iteration,
                                     int64_t iterations, int world);

}  // namespace dtlab::task4
