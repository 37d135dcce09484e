// Greedy translation, see lm/translate.h.
#include "dtlab/lm/translate.h"

#include <torch/utils.h>

#include <algorithm>

#include "dtlab/core/device.h"

namespace dtlab::lm {
namespace {

std::vector<std::vector<int64_t>> prompts_of(const tokenizer::Gpt2Tokenizer& tokenizer,
                                             const LmTokenIds& ids,
                                             const std::vector<std::string>& sources,
                                             const TranslateOptions& o) {
  std::vector<std::vector<int64_t>> prompts;
  for (const std::string& source : sources) {
    std::vector<int64_t> p = tokenizer.encode(source);
    if (static_cast<int64_t>(p.size()) > o.max_length - 2) p.resize(std::max<int64_t>(o.max_length - 2, 0));
    p.push_back(ids.eos_source);
    prompts.push_back(std::move(p));
  }
  return prompts;
}

// Greedy continuations of prompts [begin, end), left-padded into one batch so that every row's
// positions start at its first real token (generate_greedy's attention_mask).
std::vector<std::vector<int64_t>> continue_batch(model::Gpt2LMHeadModel& model,
                                                 const std::vector<std::vector<int64_t>>& prompts,
                                                 size_t begin, size_t end, const LmTokenIds& ids,
                                                 int64_t max_new_tokens) {
  int64_t width = 0;
  for (size_t i = begin; i < end; ++i) width = std::max<int64_t>(width, prompts[i].size());
  const int64_t rows = static_cast<int64_t>(end - begin);
  torch::Tensor input = torch::full({rows, width}, ids.pad, torch::kInt64);
  torch::Tensor mask = torch::zeros({rows, width}, torch::kInt64);
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<int64_t>& p = prompts[begin + r];
    const int64_t start = width - static_cast<int64_t>(p.size());
    std::copy(p.begin(), p.end(), input.data_ptr<int64_t>() + r * width + start);
    mask[r].narrow(0, start, static_cast<int64_t>(p.size())).fill_(1);
  }
  const int64_t room = std::min(max_new_tokens, model->config().n_positions - width);
  std::vector<std::vector<int64_t>> out(rows);
  if (room <= 0) return out;
  // Decoding stops early once every row has produced <eos_en>.
  const torch::Device device = device_of(*model);
  const torch::Tensor output =
      model::generate_greedy(model, input.to(device), room, ids.eos_target, mask.to(device)).cpu();
  const torch::Tensor produced = output.narrow(1, width, output.size(1) - width).contiguous();
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t* row = produced.data_ptr<int64_t>() + r * produced.size(1);
    const int64_t* stop = std::find(row, row + produced.size(1), ids.eos_target);
    out[r].assign(row, stop);
  }
  return out;
}

}  // namespace

std::vector<std::string> translate(model::Gpt2LMHeadModel& model,
                                   const tokenizer::Gpt2Tokenizer& tokenizer, const LmTokenIds& ids,
                                   const std::vector<std::string>& sources,
                                   const TranslateOptions& o) {
  const bool was_training = model->is_training();
  model->eval();
  torch::NoGradGuard no_grad;
  const std::vector<std::vector<int64_t>> prompts = prompts_of(tokenizer, ids, sources, o);
  tokenizer::DecodeOptions decode;
  decode.skip_special_tokens = true;
  std::vector<std::string> translations;
  for (size_t begin = 0; begin < prompts.size(); begin += static_cast<size_t>(o.batch_size)) {
    const size_t end = std::min(prompts.size(), begin + static_cast<size_t>(o.batch_size));
    for (const auto& tokens : continue_batch(model, prompts, begin, end, ids, o.max_new_tokens)) {
      translations.push_back(tokenizer.decode(tokens, decode));
    }
  }
  model->train(was_training);
  return translations;
}

}  // namespace dtlab::lm
