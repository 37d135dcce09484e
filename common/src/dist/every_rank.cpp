// every_rank, see dist/every_rank.h.
#include "dtlab/dist/every_rank.h"

#include <torch/types.h>

namespace dtlab::dist {

std::vector<std::vector<double>> every_rank(Group& group, const std::vector<double>& mine, const std::string& tag) {
  const torch::Tensor t = torch::tensor(mine, torch::kFloat64).to(group.device());
  std::vector<std::vector<double>> rows;
  for (const torch::Tensor& r : group.all_gather(t, tag)) {
    const torch::Tensor c = r.cpu().contiguous();
    rows.emplace_back(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
  }
  return rows;
}

}  // namespace dtlab::dist
