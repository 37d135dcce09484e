// Note [The group in an autograd context] (tasks/tp.h): a custom autograd Function's backward sees
// only its context, whose saved_data holds IValues. The group travels there as a capsule (an
// IValue that holds any CustomClassHolder, no TorchScript registration needed) around a pointer:
// typed, per call, safe with ranks as threads. The group must outlive the backward pass.
#pragma once

#include <torch/autograd.h>

#include <string>

#include "dtlab/dist/group.h"

namespace dtlab::tp {

// In forward: keep the group and the tag of this call's collectives in ctx.
void save_group(torch::autograd::AutogradContext* ctx, dist::Group& group, const std::string& tag);
// In backward: what save_group kept. A dtlab::Error if forward kept nothing.
dist::Group& saved_group(torch::autograd::AutogradContext* ctx);
std::string saved_tag(torch::autograd::AutogradContext* ctx);

}  // namespace dtlab::tp
