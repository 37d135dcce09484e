// Partitions layers into pipeline stages by size, see pipeline/balance.h.
#include "dtlab/pipeline/balance.h"

#include <fmt/core.h>

#include <algorithm>
#include <limits>

#include "dtlab/core/error.h"

namespace dtlab::pipeline {

namespace balance_detail {

// Whether layers [from, L) can form exactly `groups` non-empty contiguous groups of sum <= cap,
// given that every single layer fits under cap: packing greedily gives the fewest groups, and
// any count between that and the number of layers is reachable by splitting groups further.
bool fits(const std::vector<int64_t>& sizes, size_t from, int groups, int64_t cap) {
  const size_t left = sizes.size() - from;
  if (groups < 0 || left < static_cast<size_t>(groups) || (left > 0 && groups == 0)) return false;
  int needed = 0;
  int64_t sum = 0;
  for (size_t l = from; l < sizes.size(); ++l) {
    if (needed == 0 || sum + sizes[l] > cap) {
      ++needed;
      sum = 0;
    }
    sum += sizes[l];
  }
  return needed <= groups;
}

}  // namespace balance_detail

std::vector<int> balance_by_size(const std::vector<int64_t>& sizes, int stages) {
  const int layers = static_cast<int>(sizes.size());
  if (stages < 1) throw Error(fmt::format("cannot balance layers over {} stages: at least 1 is needed", stages));
  if (stages > layers) {
    throw Error(fmt::format("cannot place {} layers on {} stages: every stage needs at least one layer", layers,
                            stages));
  }
  for (int l = 0; l < layers; ++l) {
    if (sizes[l] < 0) throw Error(fmt::format("layer {} has a negative size ({})", l, sizes[l]));
  }
  // best[s][l]: the smallest possible largest sum when layers [0, l) form s groups (O(S L^2):
  // models have tens of layers).
  std::vector<int64_t> prefix(layers + 1, 0);
  for (int l = 0; l < layers; ++l) prefix[l + 1] = prefix[l] + sizes[l];
  constexpr int64_t kImpossible = std::numeric_limits<int64_t>::max();
  std::vector<std::vector<int64_t>> best(stages + 1, std::vector<int64_t>(layers + 1, kImpossible));
  best[0][0] = 0;
  for (int s = 1; s <= stages; ++s) {
    for (int l = s; l <= layers; ++l) {
      for (int first = s - 1; first < l; ++first) {  // the last group is [first, l)
        if (best[s - 1][first] == kImpossible) continue;
        best[s][l] = std::min(best[s][l], std::max(best[s - 1][first], prefix[l] - prefix[first]));
      }
    }
  }
  const int64_t cap = best[stages][layers];
  // The earliest splits: each stage, in order, takes the fewest layers that leave the rest
  // placeable under the optimal cap.
  std::vector<int> balance;
  size_t from = 0;
  for (int s = 0; s < stages; ++s) {
    int64_t sum = 0;
    size_t end = from;
    while (true) {
      sum += sizes[end++];
      if (sum > cap) throw Error("balance_by_size: internal error, no split under the optimal cap");
      if (balance_detail::fits(sizes, end, stages - s - 1, cap)) break;
    }
    balance.push_back(static_cast<int>(end - from));
    from = end;
  }
  return balance;
}

std::vector<int> stage_of_layers(const std::vector<int>& balance) {
  std::vector<int> stage_of;
  for (size_t s = 0; s < balance.size(); ++s) {
    if (balance[s] <= 0) {
      throw Error(fmt::format("balance[{}] is {}: every stage needs at least one layer", s, balance[s]));
    }
    stage_of.insert(stage_of.end(), static_cast<size_t>(balance[s]), static_cast<int>(s));
  }
  return stage_of;
}

void check_balance(const std::vector<int>& balance, int num_layers) {
  if (balance.empty()) throw Error("the balance list is empty: a pipeline needs at least one stage");
  if (static_cast<int64_t>(balance.size()) > num_layers) {
    throw Error(fmt::format("the balance list has {} stages but the model has only {} layers: every stage needs "
                            "at least one layer",
                            balance.size(), num_layers));
  }
  int64_t sum = 0;
  for (size_t s = 0; s < balance.size(); ++s) {
    if (balance[s] <= 0) {
      throw Error(fmt::format("balance[{}] is {}: every stage needs at least one layer", s, balance[s]));
    }
    sum += balance[s];
  }
  if (sum != num_layers) {
    throw Error(fmt::format("the balance list sums to {} layers but the model has {}", sum, num_layers));
  }
}

}  // namespace dtlab::pipeline
