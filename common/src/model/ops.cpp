// The process-wide choice of model/ops.h.
#include "dtlab/model/ops.h"

#include <atomic>

namespace dtlab::model {

namespace ops_detail {
std::atomic<Ops> in_use{Ops::kit};
}  // namespace ops_detail

void use_ops(Ops ops) { ops_detail::in_use.store(ops); }
Ops ops_in_use() { return ops_detail::in_use.load(std::memory_order_relaxed); }

}  // namespace dtlab::model
