// One step of one stage rank, see pipeline/stage_step.h.
#include "dtlab/pipeline/stage_step.h"

#include <fmt/format.h>

#include <chrono>
#include <set>
#include <thread>

#include "dtlab/core/error.h"

namespace dtlab::pipeline {

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

StageStep::StageStep(StagePlace place, StageCompute compute, std::vector<torch::Tensor> micro_inputs,
                     std::vector<std::vector<int64_t>> output_shapes, torch::ScalarType dtype)
    : place_(place),
      compute_(std::move(compute)),
      inputs_(std::move(micro_inputs)),
      output_shapes_(std::move(output_shapes)),
      dtype_(dtype),
      forwards_(inputs_.size(), 0),
      backwards_(inputs_.size(), 0) {
  if (!place_.group) throw Error("StageStep: no group");
  if (place_.stages < 1 || place_.stage < 0 || place_.stage >= place_.stages) {
    throw Error(fmt::format("StageStep: stage {} of {} does not exist", place_.stage, place_.stages));
  }
  if (inputs_.empty()) throw Error(where() + ": a step needs at least one micro-batch");
  if (!is_last() && output_shapes_.size() != inputs_.size()) {
    throw Error(fmt::format("{}: {} output shapes for {} micro-batches", where(), output_shapes_.size(), inputs_.size()));
  }
  if (is_last() && !compute_.loss) throw Error(where() + ": the last stage needs the loss");
}

std::string StageStep::where() const {
  return fmt::format("stage {} (rank {})", place_.stage, place_.group->rank());
}

void StageStep::check_micro(int micro, const char* what) const {
  if (micro < 0 || micro >= micro_batches()) {
    throw Error(fmt::format("{}: {} of micro-batch {}, but this step has micro-batches 0..{}", where(), what, micro,
                            micro_batches() - 1));
  }
}

std::string StageStep::activation_tag(int micro) { return fmt::format("activation {}", micro); }
std::string StageStep::gradient_tag(int micro) { return fmt::format("gradient {}", micro); }

torch::Tensor StageStep::activation_buffer(int micro) const {
  check_micro(micro, "activation_buffer");
  if (is_first()) throw Error(where() + ": the first stage receives no activation (it reads the input ids)");
  return torch::empty_like(inputs_[static_cast<size_t>(micro)]);
}

torch::Tensor StageStep::gradient_buffer(int micro) const {
  check_micro(micro, "gradient_buffer");
  if (is_last()) throw Error(where() + ": the last stage receives no gradient (its backward starts from the loss)");
  const torch::Device device = inputs_[static_cast<size_t>(micro)].device();
  return torch::empty(output_shapes_[static_cast<size_t>(micro)], torch::TensorOptions(dtype_).device(device));
}

torch::Tensor StageStep::forward(int micro, const torch::Tensor& input) {
  check_micro(micro, "forward");
  const auto i = static_cast<size_t>(micro);
  if (forwards_[i]++ > 0) throw Error(fmt::format("{}: forward of micro-batch {} ran twice in one step", where(), micro));
  const torch::Tensor& expected = inputs_[i];
  torch::Tensor x;
  if (is_first()) {
    x = expected;  // the input ids
  } else {
    if (!input.defined()) {
      throw Error(fmt::format("{}: forward of micro-batch {} needs the activation received from stage {}", where(),
                              micro, stage() - 1));
    }
    if (input.sizes() != expected.sizes() || input.scalar_type() != expected.scalar_type()) {
      throw Error(fmt::format("{}: forward of micro-batch {} was given a {} tensor of shape [{}]; its activation is {} "
                              "[{}] (activation_buffer({}))", where(), micro, c10::toString(input.scalar_type()),
                              fmt::join(input.sizes(), ", "), c10::toString(expected.scalar_type()),
                              fmt::join(expected.sizes(), ", "), micro));
    }
    x = input.detach().requires_grad_(true);  // a leaf: backward leaves the gradient to send back here
  }
  ActionRecord record{{StageOp::kForward, micro}, wall_seconds(), 0};
  torch::Tensor y = compute_.forward(x);
  torch::Tensor kept = y, sent;
  if (is_last()) {
    kept = compute_.loss(micro, y);
    loss_ += kept.item<double>();
  } else {
    sent = y.detach().contiguous();
  }
  if (compute_.sleep.count() > 0) std::this_thread::sleep_for(compute_.sleep);
  record.end = wall_seconds();
  records_.push_back(record);
  // The bytes of the boundary tensors it holds: its output (the logits on the last stage) and the
  // received input. What the layers' graphs hold inside grows with them alike.
  const int64_t bytes = y.numel() * y.element_size() + (is_first() ? 0 : x.numel() * x.element_size());
  stored_[micro] = {x, kept, bytes};
  stored_bytes_ += bytes;
  peak_stored_ = std::max(peak_stored_, static_cast<int>(stored_.size()));
  // Counted once while stored when it is the output's own memory (a contiguous output).
  if (sent.defined()) watch_sent(sent, micro, /*activation=*/sent.storage().is_alias_of(y.storage()));
  measure_held();
  return sent;
}

torch::Tensor StageStep::backward(int micro, const torch::Tensor& output_grad) {
  check_micro(micro, "backward");
  const auto i = static_cast<size_t>(micro);
  auto it = stored_.find(micro);
  if (it == stored_.end()) {
    throw Error(fmt::format("{}: backward of micro-batch {} {}", where(), micro,
                            backwards_[i] > 0 ? "ran twice in one step"
                                              : "before its forward: nothing is stored for it"));
  }
  ++backwards_[i];
  Stored s = std::move(it->second);
  stored_.erase(it);
  ActionRecord record{{StageOp::kBackward, micro}, wall_seconds(), 0};
  if (is_last()) {
    s.output.backward();
  } else {
    if (!output_grad.defined() || output_grad.sizes() != s.output.sizes()) {
      throw Error(fmt::format("{}: backward of micro-batch {} needs the gradient of its output, shape [{}] "
                              "(gradient_buffer({})), received from stage {}; it was given {}", where(), micro,
                              fmt::join(s.output.sizes(), ", "), micro, stage() + 1,
                              output_grad.defined() ? fmt::format("[{}]", fmt::join(output_grad.sizes(), ", "))
                                                    : std::string("nothing")));
    }
    s.output.backward(output_grad);
  }
  torch::Tensor input_grad;
  if (!is_first()) input_grad = s.input.grad().contiguous();
  if (compute_.sleep.count() > 0) std::this_thread::sleep_for(compute_.sleep);
  record.end = wall_seconds();
  records_.push_back(record);
  stored_bytes_ -= s.bytes;
  // Freed here, so that what is measured next is only what something else still keeps alive (a
  // send of this micro-batch's activation not yet waited for).
  s = Stored{};
  if (input_grad.defined()) watch_sent(input_grad, micro, /*activation=*/false);
  measure_held();
  return input_grad;
}

void StageStep::watch_sent(const torch::Tensor& t, int micro, bool activation) {
  sent_.push_back({t.storage().getWeakStorageImpl(), micro, static_cast<int64_t>(t.storage().nbytes()), activation});
}

// Note [Held, not only stored]: stored + the sent tensors something still keeps alive.
void StageStep::measure_held() {
  std::set<int> micro_batches;
  for (const auto& [micro, s] : stored_) micro_batches.insert(micro);
  int64_t bytes = stored_bytes_;
  std::vector<Sent> alive;
  for (Sent& s : sent_) {
    if (s.storage.expired()) continue;  // its send was waited for and nothing else holds it
    if (!(s.activation && stored_.count(s.micro))) {
      bytes += s.bytes;
      micro_batches.insert(s.micro);
    }
    alive.push_back(std::move(s));
  }
  sent_ = std::move(alive);
  peak_held_ = std::max(peak_held_, static_cast<int>(micro_batches.size()));
  peak_held_bytes_ = std::max(peak_held_bytes_, bytes);
}

void StageStep::check_complete() const {
  std::vector<std::string> wrong;
  for (int i = 0; i < micro_batches(); ++i) {
    const auto k = static_cast<size_t>(i);
    if (forwards_[k] != 1 || backwards_[k] != 1) {
      wrong.push_back(fmt::format("micro-batch {}: {} forward(s), {} backward(s)", i, forwards_[k], backwards_[k]));
    }
  }
  if (!wrong.empty()) {
    throw Error(fmt::format("{}: the step ran each micro-batch's forward and backward once except {}: the schedule "
                            "must hold F(i) and B(i) for every micro-batch", where(), fmt::join(wrong, "; ")));
  }
}

}  // namespace dtlab::pipeline
