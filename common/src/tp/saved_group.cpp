// Note [The group in an autograd context] (tasks/tp.h, tp/saved_group.h).
#include "dtlab/tp/saved_group.h"

#include "dtlab/core/error.h"

namespace dtlab::tp {
namespace {

struct GroupHandle : torch::CustomClassHolder {
  explicit GroupHandle(dist::Group* g) : group(g) {}
  dist::Group* group;
};

constexpr const char* kGroupKey = "dtlab.tp.group";
constexpr const char* kTagKey = "dtlab.tp.tag";

}  // namespace

void save_group(torch::autograd::AutogradContext* ctx, dist::Group& group, const std::string& tag) {
  ctx->saved_data[kGroupKey] = c10::IValue::make_capsule(c10::make_intrusive<GroupHandle>(&group));
  ctx->saved_data[kTagKey] = tag;
}

dist::Group& saved_group(torch::autograd::AutogradContext* ctx) {
  const auto found = ctx->saved_data.find(kGroupKey);
  if (found == ctx->saved_data.end()) {
    throw Error("tp: backward found no group in its autograd context: call save_group(ctx, *group, tag) in forward");
  }
  const c10::intrusive_ptr<torch::CustomClassHolder> held = found->second.toCapsule();
  return *static_cast<GroupHandle*>(held.get())->group;
}

std::string saved_tag(torch::autograd::AutogradContext* ctx) {
  const auto found = ctx->saved_data.find(kTagKey);
  return found == ctx->saved_data.end() ? std::string() : found->second.toStringRef();
}

}  // namespace dtlab::tp
