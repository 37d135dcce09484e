// broadcast_module_state, see dist/broadcast_state.h.
#include "dtlab/dist/broadcast_state.h"

#include <torch/utils.h>

#include <map>
#include <set>

namespace dtlab::dist {

void broadcast_module_state(torch::nn::Module& module, Group& group, bool include_buffers,
                            const std::string& tag) {
  torch::NoGradGuard no_grad;
  // Unique tensors (tied weights once), grouped by dtype in registration order: parameters,
  // then buffers.
  std::set<const void*> seen;
  std::map<c10::ScalarType, std::vector<torch::Tensor>> by_dtype;
  auto add = [&](const torch::Tensor& t) {
    if (t.defined() && seen.insert(t.unsafeGetTensorImpl()).second) by_dtype[t.scalar_type()].push_back(t);
  };
  for (const auto& p : module.parameters(/*recurse=*/true)) add(p);
  if (include_buffers) {
    for (const auto& b : module.buffers(/*recurse=*/true)) add(b);
  }
  for (auto& [dtype, tensors] : by_dtype) {
    std::vector<torch::Tensor> flat_views;
    for (const auto& t : tensors) flat_views.push_back(t.detach().reshape(-1));
    torch::Tensor flat = torch::cat(flat_views);
    group.broadcast(flat, /*src=*/0, tag);
    int64_t offset = 0;
    for (auto& t : tensors) {
      const int64_t n = t.numel();
      t.detach().copy_(flat.narrow(0, offset, n).view(t.sizes()));
      offset += n;
    }
  }
}

}  // namespace dtlab::dist
