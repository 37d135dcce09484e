// Note [The block in an autograd context] (dtlab/tasks/precision.h).
#include "dtlab/core/error.h"
#include "dtlab/tasks/precision.h"

namespace dtlab::precision {
namespace {

struct BlockHandle : torch::CustomClassHolder {
  explicit BlockHandle(const BlockForward* b) : block(b) {}
  const BlockForward* block;
};

constexpr const char* kBlockKey = "dtlab.precision.block";

}  // namespace

void save_block(AutogradContext* ctx, const BlockForward* block) {
  if (!block) throw Error("precision: save_block was given no block");
  ctx->saved_data[kBlockKey] = c10::IValue::make_capsule(c10::make_intrusive<BlockHandle>(block));
}

const BlockForward& saved_block(AutogradContext* ctx) {
  const auto found = ctx->saved_data.find(kBlockKey);
  if (found == ctx->saved_data.end()) {
    throw Error("precision: backward found no block in its autograd context: call save_block(ctx, block) in forward");
  }
  const c10::intrusive_ptr<torch::CustomClassHolder> held = found->second.toCapsule();
  return *static_cast<BlockHandle*>(held.get())->block;
}

}  // namespace dtlab::precision
