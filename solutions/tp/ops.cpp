// tp, part 1: Megatron's conjugate operators f and g as autograd Functions (dtlab/tasks/tp.h).
#include "dtlab/tasks/tp.h"
#include "dtlab/tp/saved_group.h"

namespace dtlab::tp {

torch::Tensor CopyToTensorParallel::forward(AutogradContext* ctx, const torch::Tensor& x, dist::Group* group,
                                            std::string tag) {
  // BEGIN TODO(tp): keep the group and tag for backward (save_group); forward is the identity.
  save_group(ctx, *group, tag);
  // The input itself: autograd gives the output its own identity (a view) and this node.
  return x;
  // END TODO
}

variable_list CopyToTensorParallel::backward(AutogradContext* ctx, variable_list grad_outputs) {
  // BEGIN TODO(tp): every rank holds part of d loss / d x (its slice of the next layer's); the whole is their sum over the group.
  torch::Tensor grad = grad_outputs[0].clone(at::MemoryFormat::Contiguous);  // all_reduce works in place
  saved_group(ctx).all_reduce(grad, dist::ReduceOp::SUM, saved_tag(ctx));
  return {grad, torch::Tensor(), torch::Tensor()};
  // END TODO
}

torch::Tensor ReduceFromTensorParallel::forward(AutogradContext* ctx, const torch::Tensor& x, dist::Group* group,
                                                std::string tag) {
  // BEGIN TODO(tp): the ranks' partial results summed over the group, on a copy (x is the caller's).
  torch::Tensor sum = x.clone(at::MemoryFormat::Contiguous);
  group->all_reduce(sum, dist::ReduceOp::SUM, tag);
  return sum;
  // END TODO
}

variable_list ReduceFromTensorParallel::backward(AutogradContext* ctx, variable_list grad_outputs) {
  // BEGIN TODO(tp): the output is the same on every rank, so is its gradient: each rank's partial result gets it unchanged.
  return {grad_outputs[0], torch::Tensor(), torch::Tensor()};
  // END TODO
}

torch::Tensor copy_to_tensor_parallel(const torch::Tensor& x, dist::Group& group, const std::string& tag) {
  return CopyToTensorParallel::apply(x, &group, tag);
}

torch::Tensor reduce_from_tensor_parallel(const torch::Tensor& x, dist::Group& group, const std::string& tag) {
  return ReduceFromTensorParallel::apply(x, &group, tag);
}

}  // namespace dtlab::tp
