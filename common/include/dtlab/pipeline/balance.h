// How many consecutive layers each pipeline stage holds (torchgpipe's `balance` list), chosen by
// layer size. Not here: splitting a module (the students' split_module) or measuring sizes.
#pragma once

#include <cstdint>
#include <vector>

namespace dtlab::pipeline {

// Splits layers 0..L-1 (L = sizes.size(), sizes[l] >= 0, e.g. parameter counts) into `stages`
// contiguous, non-empty groups so that the largest group sum is as small as possible (exact).
// Returns the number of layers of each stage, in order; it sums to L.
// Ties: among the optimal partitions, the one with the earliest splits, i.e. the
// lexicographically smallest list ({1, 2} before {2, 1} for three equal layers on two stages).
// stages < 1, stages > L or a negative size is a dtlab::Error.
std::vector<int> balance_by_size(const std::vector<int64_t>& sizes, int stages);

// layer -> stage for a balance list: {2, 1} gives {0, 0, 1}. Every entry must be positive.
std::vector<int> stage_of_layers(const std::vector<int>& balance);

// Throws dtlab::Error unless `balance` has at least one stage, every entry is positive and the
// entries sum to num_layers (a message for each, naming the stage or the two counts).
void check_balance(const std::vector<int>& balance, int num_layers);

}  // namespace dtlab::pipeline
