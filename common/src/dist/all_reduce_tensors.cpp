// all_reduce_tensors, see dist/all_reduce_tensors.h.
#include "dtlab/dist/all_reduce_tensors.h"

#include <torch/utils.h>

#include <map>

namespace dtlab::dist {

void all_reduce_tensors(const std::vector<torch::Tensor>& tensors, Group& group, ReduceOp op, const std::string& tag) {
  torch::NoGradGuard no_grad;
  std::map<c10::ScalarType, std::vector<torch::Tensor>> by_dtype;  // in the order given
  for (const torch::Tensor& t : tensors) by_dtype[t.scalar_type()].push_back(t);
  for (auto& [dtype, same] : by_dtype) {
    std::vector<torch::Tensor> flat_views;
    for (const torch::Tensor& t : same) flat_views.push_back(t.reshape(-1));
    torch::Tensor flat = torch::cat(flat_views);
    group.all_reduce(flat, op, tag);
    int64_t offset = 0;
    for (const torch::Tensor& t : same) {
      t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  }
}

}  // namespace dtlab::dist
