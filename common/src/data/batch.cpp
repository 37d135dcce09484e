// Batch's token count and placement, see data/batch.h.
#include "dtlab/data/batch.h"

namespace dtlab::data {

int64_t Batch::real_tokens() const {
  if (!attention_mask.defined()) return input_ids.defined() ? input_ids.numel() : 0;
  return attention_mask.sum().item<int64_t>();
}

Batch Batch::to(const torch::Device& device) const {
  auto moved = [&](const torch::Tensor& t) { return t.defined() ? t.to(device) : t; };
  return {moved(input_ids), moved(attention_mask), moved(token_type_ids), moved(labels), moved(label_weights)};
}

}  // namespace dtlab::data
