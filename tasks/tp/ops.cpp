// Your file: replace every `throw dtlab::NotImplemented(...)` below with your code.
// (Generated from the reference solution by dtlab-skeletons; the handout explains each TODO.)
// tp, part 1: Megatron's conjugate operators f and g as autograd Functions (dtlab/tasks/tp.h).
#include "dtlab/tasks/tp.h"
#include "dtlab/tp/saved_group.h"

namespace dtlab::tp {

torch::Tensor CopyToTensorParallel::forward(AutogradContext* ctx, const torch::Tensor& x, dist::Group* group,
                                            std::string tag) {
  // TODO(tp): keep the group and tag for backward (save_group); forward is the identity.
  throw dtlab::NotImplemented("TODO(tp): keep the group and tag for backward (save_group); forward is the identity.");
}

variable_list CopyToTensorParallel::backward(AutogradContext* ctx, variable_list grad_outputs) {
  // TODO(tp): every rank holds part of d loss / d x (its slice of the next layer's); the whole is their sum over the group.
  throw dtlab::NotImplemented("TODO(tp): every rank holds part of d loss / d x (its slice of the next layer's); the whole is their sum over the group.");
}

torch::Tensor ReduceFromTensorParallel::forward(AutogradContext* ctx, const torch::Tensor& x, dist::Group* group,
                                                std::string tag) {
  // TODO(tp): the ranks' partial results summed over the group, on a copy (x is the caller's).
  throw dtlab::NotImplemented("TODO(tp): the ranks' partial results summed over the group, on a copy (x is the caller's).");
}

variable_list ReduceFromTensorParallel::backward(AutogradContext* ctx, variable_list grad_outputs) {
  // TODO(tp): the output is the same on every rank, so is its gradient: each rank's partial result gets it unchanged.
  throw dtlab::NotImplemented("TODO(tp): the output is the same on every rank, so is its gradient: each rank's partial result gets it unchanged.");
}

torch::Tensor copy_to_tensor_parallel(const torch::Tensor& x, dist::Group& group, const std::string& tag) {
  return CopyToTensorParallel::apply(x, &group, tag);
}

torch::Tensor reduce_from_tensor_parallel(const torch::Tensor& x, dist::Group& group, const std::string& tag) {
  return ReduceFromTensorParallel::apply(x, &group, tag);
}

}  // namespace dtlab::tp
