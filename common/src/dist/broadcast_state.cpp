// broadcast_module_state and broadcast_tensors, see dist/broadcast_state.h.
#include "dtlab/dist/broadcast_state.h"

#include <torch/utils.h>

#include <map>
#include <set>

namespace dtlab::dist {

void broadcast_tensors(const std::vector<torch::Tensor>& tensors, Group& group, int src, const std::string& tag) {
  torch::NoGradGuard no_grad;
  std::map<c10::ScalarType, std::vector<torch::Tensor>> by_dtype;  // in the order given
  for (const auto& t : tensors) by_dtype[t.scalar_type()].push_back(t);
  for (auto& [dtype, group_tensors] : by_dtype) {
    std::vector<torch::Tensor> flat_views;
    for (const auto& t : group_tensors) flat_views.push_back(t.detach().reshape(-1));
    torch::Tensor flat = torch::cat(flat_views);
    group.broadcast(flat, src, tag);
    int64_t offset = 0;
    for (auto& t : group_tensors) {
      const int64_t n = t.numel();
      t.detach().copy_(flat.narrow(0, offset, n).view(t.sizes()));
      offset += n;
    }
  }
}

void broadcast_module_state(torch::nn::Module& module, Group& group, bool include_buffers,
                            const std::string& tag) {
  // Unique tensors (tied weights once), parameters, then buffers, in registration order.
  std::set<const void*> seen;
  std::vector<torch::Tensor> unique;
  auto add = [&](const torch::Tensor& t) {
    if (t.defined() && seen.insert(t.unsafeGetTensorImpl()).second) unique.push_back(t);
  };
  for (const auto& p : module.parameters(/*recurse=*/true)) add(p);
  if (include_buffers) {
    for (const auto& b : module.buffers(/*recurse=*/true)) add(b);
  }
  broadcast_tensors(unique, group, /*src=*/0, tag);
}

}  // namespace dtlab::dist
