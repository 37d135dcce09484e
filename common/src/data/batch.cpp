// Batch's token count, see data/batch.h.
#include "dtlab/data/batch.h"

namespace dtlab::data {

int64_t Batch::real_tokens() const {
  if (!attention_mask.defined()) return input_ids.defined() ? input_ids.numel() : 0;
  return attention_mask.sum().item<int64_t>();
}

}  // namespace dtlab::data
