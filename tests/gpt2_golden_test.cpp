// The C++ GPT2LMHeadModel against Hugging Face transformers, an independent oracle.
//
// tests/golden/gpt2/ holds tiny checkpoints and what transformers 4.40.2 computed with them
// (tests/golden/make_gpt2_golden.py made them; its docstring says how to rerun it):
//   tiny-a, tiny-b              recent-style checkpoints ("transformer.*", no lm_head.weight) of
//                               two configurations; expected.json: logits and loss, load
//                               reports, greedy generations, initial weights.
//   tiny-a-original, tiny-b-original
//                               the same weights as the original `gpt2` hub files hold them (no
//                               prefix, attn.bias / attn.masked_bias buffers, old config.json).
//   presets/                    GPT2Config() and the kit's gpt2-mini as transformers saves them.
// Then what needs no oracle: the cache against the uncached forward, the stages against
// forward, the tied head, the loss in closed form, and the loader's and config's errors.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/io/json_file.h"
#include "dtlab/io/safetensors.h"
#include "dtlab/model/config_json.h"
#include "dtlab/model/gpt2.h"
#include "golden_util.h"
#include "test_util.h"

// Everything in a namespace named after the file (no anonymous namespace): the unit suites share
// one binary, compiled in groups of files (Note [Unity builds] in cmake/Dtlab.cmake), so helpers
// must not collide, and a TEST_F class must not derive from a type of an anonymous namespace.
namespace gpt2_golden_test {

namespace fs = std::filesystem;
using dtlab::model::Gpt2Config;
using dtlab::model::Gpt2LMHeadModel;
using dtlab::model::LoadReport;
using nlohmann::json;

// transformers and dtlab run the same float32 kernels of the same PyTorch (Debian's 1.13) on the
// same operations in the same order, so the logits agree to rounding; a real error (a dropped
// bias, a wrong eps, a mask off by one) moves them by 1e-3 or more. 1e-5 leaves room for
// threading and BLAS blocking differences in the sums, and holds unchanged on PyPI's 2.15, whose
// kernels (MKL's GEMM) differ from the golden data's (Note [LibTorch versions]).
constexpr double kTolerance = 1e-5;

fs::path golden_dir(const std::string& name) {
  return fs::path(DTLAB_SOURCE_DIR) / "tests" / "golden" / "gpt2" / name;
}

json expected_of(const std::string& name) { return dtlab::io::read_json_file(golden_dir(name) / "expected.json"); }

torch::Tensor ids_of(const json& values) { return dtlab::test::golden_tensor(values, torch::kInt64); }

void expect_matches_golden(const torch::Tensor& actual, const json& golden, const std::string& what) {
  dtlab::test::expect_matches_golden(actual, golden, what, kTolerance);
}

// Expects `fn` to throw dtlab::Error whose message contains every needle.
void expect_error_mentions(const std::function<void()>& fn, std::initializer_list<std::string> needles) {
  try {
    fn();
    ADD_FAILURE() << "expected a dtlab::Error";
  } catch (const dtlab::Error& e) {
    const std::string message = e.what();
    for (const auto& needle : needles) {
      EXPECT_NE(message.find(needle), std::string::npos) << "message lacks \"" << needle << "\": " << message;
    }
  }
}

// A fresh scratch folder, removed at the end of the test unless the test failed.
struct Scratch {
  explicit Scratch(const std::string& name) : path(dtlab::test::fresh_temp_dir(name)) {}
  ~Scratch() {
    std::error_code ignored;
    if (!testing::Test::HasFailure()) fs::remove_all(path, ignored);
  }
  const fs::path path;
};

// A copy of a golden checkpoint folder in dir, its config.json and tensors edited as given (the
// same edits make_gpt2_golden.py made to record transformers' answers).
void copy_checkpoint(const std::string& name, const fs::path& dir,
                     const std::function<void(json&)>& edit_config = nullptr,
                     const std::function<void(dtlab::io::TensorMap&)>& edit_tensors = nullptr) {
  fs::create_directories(dir);
  json config = dtlab::io::read_json_file(golden_dir(name) / "config.json");
  if (edit_config) edit_config(config);
  dtlab::io::write_json_file(dir / "config.json", config);
  auto tensors = dtlab::io::load_safetensors(golden_dir(name) / "model.safetensors");
  if (edit_tensors) edit_tensors(tensors);
  dtlab::io::save_safetensors(dir / "model.safetensors", tensors, {{"format", "pt"}});
}

Gpt2LMHeadModel load_eval(const fs::path& dir, LoadReport* report = nullptr) {
  auto model = dtlab::model::gpt2_from_pretrained(dir, {}, report);
  model->eval();
  return model;
}

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<std::string> strings_of(const json& j) { return j.get<std::vector<std::string>>(); }

// gtest parameter names must be alphanumeric: "tiny-a" -> "tiny_a".
std::string param_name(const testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

struct Batch {
  torch::Tensor input_ids, attention_mask, labels;
};

Batch padded_batch(const json& expected) {
  const json& p = expected.at("padded");
  return {ids_of(p.at("input_ids")), ids_of(p.at("attention_mask")), ids_of(p.at("labels"))};
}

// ---------------------------------------------------------------------------------------------
// Both configurations: everything transformers computed must come out the same.

class Gpt2Golden : public testing::TestWithParam<std::string> {
 protected:
  const std::string name = GetParam();
  const json expected = expected_of(GetParam());
};

TEST_P(Gpt2Golden, PaddedBatchLogitsAndLossMatchTransformers) {
  auto model = load_eval(golden_dir(name));
  const Batch b = padded_batch(expected);
  torch::NoGradGuard no_grad;
  const auto out = model->forward(b.input_ids, b.attention_mask, b.labels);
  expect_matches_golden(out.logits, expected.at("padded").at("logits"), name + " padded logits");
  expect_matches_golden(out.loss, expected.at("padded").at("loss"), name + " padded loss");
}

TEST_P(Gpt2Golden, UnmaskedBatchLogitsAndLossMatchTransformers) {
  auto model = load_eval(golden_dir(name));
  const json& p = expected.at("plain");
  torch::NoGradGuard no_grad;
  const auto out = model->forward(ids_of(p.at("input_ids")), {}, ids_of(p.at("labels")));
  expect_matches_golden(out.logits, p.at("logits"), name + " unmasked logits");
  expect_matches_golden(out.loss, p.at("loss"), name + " unmasked loss");
}

// The original `gpt2` key style holds the same weights, so it must give the same numbers.
TEST_P(Gpt2Golden, OriginalKeyStyleGivesTheSameLogits) {
  LoadReport report;
  auto original = load_eval(golden_dir(name + "-original"), &report);
  auto recent = load_eval(golden_dir(name));
  EXPECT_TRUE(report.missing_keys.empty()) << report.describe(name + "-original");
  EXPECT_TRUE(report.unexpected_keys.empty()) << report.describe(name + "-original");
  const Batch b = padded_batch(expected);
  torch::NoGradGuard no_grad;
  const auto a = original->forward(b.input_ids, b.attention_mask, b.labels);
  expect_matches_golden(a.logits, expected.at("padded").at("logits"), name + "-original padded logits");
  const auto r = recent->forward(b.input_ids, b.attention_mask, b.labels);
  EXPECT_TRUE(torch::equal(a.logits, r.logits));
}

// What sits under attention_mask 0 must not change the logits of real positions.
TEST_P(Gpt2Golden, PaddingTokensDoNotChangeRealPositions) {
  auto model = load_eval(golden_dir(name));
  const Batch b = padded_batch(expected);
  const torch::Tensor padded = b.attention_mask.eq(0);
  ASSERT_TRUE(padded.any().item<bool>()) << "the golden inputs should have padding";
  torch::NoGradGuard no_grad;
  const auto a = model->forward(b.input_ids, b.attention_mask).logits;
  const auto c = model->forward(b.input_ids.masked_fill(padded, 5), b.attention_mask).logits;
  const torch::Tensor real = b.attention_mask.eq(1).unsqueeze(-1).expand_as(a);
  EXPECT_LE((a - c).abs().masked_select(real).max().item<double>(), 1e-6);
}

TEST_P(Gpt2Golden, ScaleAttnWeightsFalseMatchesTransformers) {
  const Scratch scratch("gpt2-unscaled-" + name);
  copy_checkpoint(name, scratch.path, [](json& c) { c["scale_attn_weights"] = false; });
  auto model = load_eval(scratch.path);
  ASSERT_FALSE(model->config().scale_attn_weights);
  const Batch b = padded_batch(expected);
  torch::NoGradGuard no_grad;
  expect_matches_golden(model->forward(b.input_ids, b.attention_mask).logits,
                        expected.at("padded").at("logits_scale_attn_weights_false"),
                        name + " logits with scale_attn_weights false");
}

// The load report for each key style and for the checkpoint variants transformers was given.
TEST_P(Gpt2Golden, LoadReportsMatchTransformers) {
  const json& reports = expected.at("load_reports");
  const Scratch scratch("gpt2-reports-" + name);
  auto one_more_layer = [](json& c) { c["n_layer"] = c["n_layer"].get<int64_t>() + 1; };
  const int64_t n_embd = dtlab::io::read_json_file(golden_dir(name) / "config.json").at("n_embd").get<int64_t>();
  struct Case {
    std::string label, source;
    std::function<void(json&)> edit_config;
    std::function<void(dtlab::io::TensorMap&)> edit_tensors;
  };
  const std::vector<Case> cases = {
      {"recent", name, nullptr, nullptr},
      {"original", name + "-original", nullptr, nullptr},
      {"recent-one-more-layer", name, one_more_layer, nullptr},
      {"original-one-more-layer", name + "-original", one_more_layer, nullptr},
      {"recent-double-heads", name, nullptr,
       [&](dtlab::io::TensorMap& t) {
         t["multiple_choice_head.summary.weight"] = torch::zeros({1, n_embd});
         t["multiple_choice_head.summary.bias"] = torch::zeros({1});
       }},
      {"recent-with-lm-head", name, nullptr,
       [](dtlab::io::TensorMap& t) { t["lm_head.weight"] = 2.0 * t.at("transformer.wte.weight"); }},
  };
  ASSERT_EQ(reports.size(), cases.size()) << "the golden data has other cases than this test";
  for (const Case& c : cases) {
    SCOPED_TRACE(c.label);
    const fs::path dir = scratch.path / c.label;
    copy_checkpoint(c.source, dir, c.edit_config, c.edit_tensors);
    LoadReport report;
    auto model = load_eval(dir, &report);
    EXPECT_EQ(report.model_class, "GPT2LMHeadModel");
    EXPECT_EQ(sorted(report.missing_keys), strings_of(reports.at(c.label).at("missing_keys")))
        << report.describe(c.label);
    EXPECT_EQ(sorted(report.unexpected_keys), strings_of(reports.at(c.label).at("unexpected_keys")))
        << report.describe(c.label);
    if (c.label == "recent-with-lm-head") {
      // transformers copies lm_head.weight last: its values become the shared tensor's.
      const auto stored = dtlab::io::load_safetensors(dir / "model.safetensors").at("lm_head.weight");
      EXPECT_TRUE(torch::equal(model->transformer->wte->weight, stored));
    }
  }
}

TEST_P(Gpt2Golden, StateDictKeysAreTransformersSavedKeys) {
  auto model = load_eval(golden_dir(name));
  EXPECT_EQ(sorted(dtlab::model::state_dict_keys(model)), strings_of(expected.at("saved_keys")));
  // transformers' state_dict() names the tied tensor twice; save_pretrained keeps one name.
  std::vector<std::string> with_head = dtlab::model::state_dict_keys(model);
  with_head.push_back("lm_head.weight");
  EXPECT_EQ(sorted(with_head), strings_of(expected.at("state_dict_keys")));
}

TEST_P(Gpt2Golden, SavePretrainedRoundTripReproducesLogitsExactly) {
  auto model = load_eval(golden_dir(name));
  const Scratch scratch("gpt2-roundtrip-" + name);
  const fs::path dir = scratch.path / "saved";
  dtlab::model::save_pretrained(model, dir);

  // The tensors written are transformers' file, key for key and bit for bit.
  const auto saved = dtlab::io::load_safetensors(dir / "model.safetensors");
  const auto golden = dtlab::io::load_safetensors(golden_dir(name) / "model.safetensors");
  std::vector<std::string> saved_keys;
  for (const auto& [key, tensor] : saved) saved_keys.push_back(key);
  EXPECT_EQ(saved_keys, strings_of(expected.at("saved_keys")));
  for (const auto& [key, tensor] : golden) {
    auto it = saved.find(key);
    ASSERT_NE(it, saved.end()) << key << " not saved";
    EXPECT_EQ(it->second.scalar_type(), torch::kFloat32) << key;
    EXPECT_TRUE(torch::equal(it->second, tensor)) << key << " changed on the round trip";
  }
  // The config describes the same network.
  const json original = dtlab::io::read_json_file(golden_dir(name) / "config.json");
  const json written = dtlab::io::read_json_file(dir / "config.json");
  for (const auto& [field, value] : original.items()) {
    if (field == "transformers_version") continue;
    ASSERT_TRUE(written.contains(field)) << field << " missing from the saved config.json";
    EXPECT_EQ(written.at(field), value) << field;
  }

  LoadReport report;
  auto again = load_eval(dir, &report);
  EXPECT_TRUE(report.missing_keys.empty()) << report.describe(dir.string());
  EXPECT_TRUE(report.unexpected_keys.empty()) << report.describe(dir.string());
  const Batch b = padded_batch(expected);
  torch::NoGradGuard no_grad;
  const auto x = model->forward(b.input_ids, b.attention_mask, b.labels);
  const auto y = again->forward(b.input_ids, b.attention_mask, b.labels);
  EXPECT_TRUE(torch::equal(x.logits, y.logits));
  EXPECT_TRUE(torch::equal(x.loss, y.loss));
}

TEST_P(Gpt2Golden, GreedyGenerationMatchesTransformersTokenForToken) {
  auto model = load_eval(golden_dir(name));
  const json& cases = expected.at("generations");
  ASSERT_FALSE(cases.empty());
  for (const json& c : cases) {
    SCOPED_TRACE(c.dump());
    const torch::Tensor prompt = ids_of(c.at("prompt"));
    const torch::Tensor mask = c.contains("attention_mask") ? ids_of(c.at("attention_mask")) : torch::Tensor();
    std::optional<int64_t> eos;
    if (!c.at("eos_token_id").is_null()) eos = c.at("eos_token_id").get<int64_t>();
    const int64_t max_new_tokens = c.at("max_new_tokens").get<int64_t>();
    const torch::Tensor out = dtlab::model::generate_greedy(model, prompt, max_new_tokens, eos, mask);
    const torch::Tensor golden = ids_of(c.at("output"));
    ASSERT_EQ(out.sizes(), golden.sizes()) << out << "\n" << golden;
    EXPECT_TRUE(torch::equal(out, golden)) << "got\n" << out << "\ntransformers\n" << golden;
  }
}

// After torch::manual_seed(s) the constructor draws what GPT2LMHeadModel(config) draws after
// torch.manual_seed(s): same distributions (incl. c_proj's 0.02/sqrt(2 n_layer)), same order.
TEST_P(Gpt2Golden, InitialWeightsEqualTransformersForTheSameSeed) {
  const Gpt2Config config = Gpt2Config::from_file(golden_dir(name) / "config.json");
  torch::manual_seed(expected.at("init_seed").get<uint64_t>());
  Gpt2LMHeadModel model(config);
  const json& init = expected.at("init");
  std::set<std::string> seen;
  for (const auto& item : model->named_parameters()) {
    SCOPED_TRACE(item.key());
    seen.insert(item.key());
    ASSERT_TRUE(init.contains(item.key()));
    const json& stats = init.at(item.key());
    const torch::Tensor flat = item.value().detach().flatten().to(torch::kFloat64);
    const auto first = stats.at("first").get<std::vector<double>>();
    for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(flat[static_cast<int64_t>(i)].item<double>(), first[i]);
    EXPECT_NEAR(flat.sum().item<double>(), stats.at("sum").get<double>(), 1e-9 * double(flat.numel()));
    if (flat.numel() > 1) {
      EXPECT_NEAR(flat.std().item<double>(), stats.at("std").get<double>(), 1e-9);
    }
  }
  EXPECT_EQ(seen.size(), init.size());
}

// ---------------------------------------------------------------------------------------------
// Needing no oracle: the cache, the stages.

TEST_P(Gpt2Golden, KvCacheGivesTheUncachedArgmaxAtEveryStep) {
  auto model = load_eval(golden_dir(name));
  torch::NoGradGuard no_grad;
  torch::Tensor ids = torch::tensor({3, 1, 4, 1, 5}, torch::kInt64).unsqueeze(0);
  dtlab::model::Gpt2KVCache cache;
  torch::Tensor step_ids = ids;
  for (int step = 0; step < 12; ++step) {
    const torch::Tensor cached = model->forward(step_ids, {}, {}, {}, &cache).logits.select(1, -1);
    const torch::Tensor full = model->forward(ids).logits.select(1, -1);
    EXPECT_EQ(cache.length(), ids.size(1));
    EXPECT_LE((cached - full).abs().max().item<double>(), kTolerance) << "step " << step;
    const int64_t next = full.argmax(-1).item<int64_t>();
    ASSERT_EQ(cached.argmax(-1).item<int64_t>(), next) << "step " << step;
    step_ids = torch::tensor({next}, torch::kInt64).unsqueeze(0);
    ids = torch::cat({ids, step_ids}, 1);
  }
}

TEST_P(Gpt2Golden, StagesChainedAreForward) {
  auto model = load_eval(golden_dir(name));
  const Batch b = padded_batch(expected);
  torch::NoGradGuard no_grad;
  ASSERT_EQ(model->num_stages(), model->config().n_layer + 2);
  torch::Tensor x = b.input_ids;
  for (int64_t s = 0; s < model->num_stages(); ++s) x = model->forward_stage(s, x, b.attention_mask);
  EXPECT_TRUE(torch::equal(x, model->forward(b.input_ids, b.attention_mask).logits));

  // Every parameter belongs to a stage; only the tied embedding to two (the first and the last).
  std::map<std::string, int> owners;
  for (int64_t s = 0; s < model->num_stages(); ++s) {
    for (const auto& [key, tensor] : model->stage_parameters(s)) ++owners[key];
  }
  for (const auto& key : dtlab::model::state_dict_keys(model)) {
    EXPECT_EQ(owners[key], key == "transformer.wte.weight" ? 2 : 1) << key;
  }
  EXPECT_EQ(owners.size(), dtlab::model::state_dict_keys(model).size());
  EXPECT_THROW(model->forward_stage(model->num_stages(), x), dtlab::Error);
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, Gpt2Golden, testing::Values("tiny-a", "tiny-b"), param_name);

// ---------------------------------------------------------------------------------------------
// The head, the loss, the presets.

TEST(Gpt2Model, TiedHeadIsOneParameterThatBothEndsTrain) {
  auto model = load_eval(golden_dir("tiny-a"));
  std::set<const void*> storages;
  int64_t count = 0;
  for (const auto& p : model->parameters()) {
    storages.insert(p.data_ptr());
    ++count;
  }
  EXPECT_EQ(static_cast<size_t>(count), storages.size()) << "a tensor appears twice in parameters()";
  EXPECT_TRUE(model->lm_head_weight().is_same(model->transformer->wte->weight));
  EXPECT_TRUE(model->lm_head.is_empty());
  // Gradient from the output projection alone reaches wte (input ids that the batch never uses
  // still get a gradient row from the head).
  const torch::Tensor ids = torch::tensor({{1, 2, 3}}, torch::kInt64);
  model->forward(ids, {}, ids).loss.backward();
  const torch::Tensor grad = model->transformer->wte->weight.grad();
  ASSERT_TRUE(grad.defined());
  EXPECT_GT(grad[50].abs().sum().item<double>(), 0.0) << "row 50 is not an input: only the head uses it";
}

TEST(Gpt2Model, UntiedHeadIsItsOwnParameterAndRoundTrips) {
  Gpt2Config config = Gpt2Config::from_file(golden_dir("tiny-a") / "config.json");
  config.tie_word_embeddings = false;
  Gpt2LMHeadModel model(config);
  model->eval();
  const auto keys = dtlab::model::state_dict_keys(model);
  ASSERT_NE(std::find(keys.begin(), keys.end(), "lm_head.weight"), keys.end());
  EXPECT_FALSE(model->lm_head_weight().is_same(model->transformer->wte->weight));

  const Scratch scratch("gpt2-untied");
  dtlab::model::save_pretrained(model, scratch.path);
  EXPECT_EQ(dtlab::io::read_json_file(scratch.path / "config.json").at("tie_word_embeddings"), false);
  LoadReport report;
  auto again = load_eval(scratch.path, &report);
  EXPECT_TRUE(report.missing_keys.empty()) << report.describe("untied");
  EXPECT_TRUE(torch::equal(again->lm_head_weight(), model->lm_head_weight()));
}

// With all-zero logits every prediction is uniform, so each counted token costs log(vocab).
TEST(Gpt2Model, LmLossIsShiftedAndIgnoresMinus100) {
  const int64_t vocab = 7;
  const torch::Tensor logits = torch::zeros({2, 4, vocab});
  const torch::Tensor labels = torch::tensor({{1, 2, -100, 3}, {-100, -100, -100, 4}}, torch::kInt64);
  EXPECT_NEAR(dtlab::model::lm_loss(logits, labels).item<double>(), std::log(double(vocab)), 1e-6);
  // A confident, right prediction of labels[t + 1] at position t costs ~0; the first label is
  // never predicted, so putting all mass anywhere at the last position changes nothing.
  torch::Tensor sharp = torch::zeros({1, 3, vocab});
  sharp[0][0][5] = 100;
  sharp[0][1][6] = 100;
  sharp[0][2][0] = 100;
  EXPECT_NEAR(dtlab::model::lm_loss(sharp, torch::tensor({{0, 5, 6}}, torch::kInt64)).item<double>(), 0.0, 1e-6);
  EXPECT_NEAR(dtlab::model::lm_loss(sharp, torch::tensor({{0, 5, -100}}, torch::kInt64)).item<double>(), 0.0, 1e-6);
}

TEST(Gpt2Config, PresetsAreTransformersConfigs) {
  const json counts = dtlab::io::read_json_file(golden_dir("presets") / "expected.json").at("num_parameters");
  for (const std::string name : {"gpt2", "gpt2-mini"}) {
    SCOPED_TRACE(name);
    const Gpt2Config preset = Gpt2Config::preset(name);
    const fs::path file = golden_dir("presets") / name / "config.json";
    const Gpt2Config read = Gpt2Config::from_file(file);
    const json preset_json = preset.to_json(), read_as_json = read.to_json();
    for (const auto& [field, value] : read_as_json.items()) {
      if (field == "transformers_version") continue;
      EXPECT_EQ(preset_json.value(field, json()), value) << field;
    }
    // Everything transformers writes, to_json writes too, with the same value.
    const json written_by_transformers = dtlab::io::read_json_file(file);
    for (const auto& [field, value] : written_by_transformers.items()) {
      if (field == "transformers_version") continue;
      EXPECT_EQ(preset_json.value(field, json()), value) << field;
    }
  }
  Gpt2LMHeadModel mini(Gpt2Config::preset("gpt2-mini"));
  int64_t n = 0;
  for (const auto& p : mini->parameters()) n += p.numel();
  EXPECT_EQ(n, counts.at("gpt2-mini").get<int64_t>());
  expect_error_mentions([] { Gpt2Config::preset("gpt3"); }, {"gpt3", "gpt2", "gpt2-mini"});
}

TEST(Gpt2Config, AbsentFieldsTakeTransformersDefaultsAndNullNInnerIsFourTimesNEmbd) {
  const Gpt2Config c = Gpt2Config::from_json(json{{"n_embd", 64}, {"n_head", 4}, {"n_inner", nullptr}}, "test");
  EXPECT_EQ(c.inner_dim(), 256);
  EXPECT_EQ(c.head_dim(), 16);
  EXPECT_EQ(c.vocab_size, 50257);
  EXPECT_EQ(c.layer_norm_epsilon, 1e-5);
  EXPECT_EQ(c.eos_token_id, std::optional<int64_t>(50256));
  EXPECT_FALSE(c.pad_token_id.has_value());
  const Gpt2Config again = Gpt2Config::from_json(c.to_json(), "again");
  EXPECT_EQ(again.to_json(), c.to_json());
}

// ---------------------------------------------------------------------------------------------
// Errors.

TEST(Gpt2Errors, UnsupportedActivationNamesTheFieldAndTheSupportedOne) {
  const Scratch scratch("gpt2-relu");
  copy_checkpoint("tiny-a", scratch.path, [](json& c) { c["activation_function"] = "relu"; });
  expect_error_mentions([&] { dtlab::model::gpt2_from_pretrained(scratch.path); },
                        {"activation_function", "relu", "gelu_new", "config.json"});
}

TEST(Gpt2Errors, InconsistentConfigsAreRejected) {
  expect_error_mentions([] { Gpt2Config::from_json(json{{"n_embd", 30}, {"n_head", 4}}, "c.json"); },
                        {"c.json", "n_embd", "n_head"});
  expect_error_mentions([] { Gpt2Config::from_json(json{{"add_cross_attention", true}}, "c.json"); },
                        {"add_cross_attention"});
  expect_error_mentions([] { Gpt2Config::from_json(json{{"attn_pdrop", 1.5}}, "c.json"); }, {"attn_pdrop"});
  expect_error_mentions([] { Gpt2Config::from_json(json{{"model_type", "bert"}}, "c.json"); }, {"model_type"});
}

// Note [Bounded configs]: a size far beyond any GPT-2 is the kit's error naming the field, its
// value and the limit, before anything is allocated (it once reached LibTorch's allocator: "you
// tried to allocate 512000000000000 bytes"); sizes that each pass but together exceed the
// machine's memory name the largest part.
TEST(Gpt2Errors, SizesBeyondTheirMeaningOrTheMachinesMemoryAreRejectedBeforeAllocating) {
  expect_error_mentions([] { Gpt2Config::from_json(json{{"n_positions", 1000000000000}}, "c.json"); },
                        {"c.json", "n_positions", "1000000000000", "1048576"});
  expect_error_mentions([] { Gpt2Config::from_json(json{{"n_layer", 5000}}, "c.json"); }, {"n_layer", "5000", "1024"});
  expect_error_mentions([] { Gpt2Config::from_json(json{{"n_head", 1024}, {"n_embd", 768}}, "c.json"); },
                        {"n_head", "1024", "768"});
  expect_error_mentions([] { Gpt2Config::from_json(json{{"layer_norm_epsilon", 5.0}}, "c.json"); },
                        {"layer_norm_epsilon", "[0, 1)"});
  expect_error_mentions([] { Gpt2Config::from_json(json{{"layer_norm_epsilon", -1e-5}}, "c.json"); },
                        {"layer_norm_epsilon"});
  // 16M tokens x 65536 wide: each within its bound, together 4.4 TB of float32.
  expect_error_mentions(
      [] { Gpt2Config::from_json(json{{"vocab_size", 16777216}, {"n_embd", 65536}, {"n_head", 1}}, "c.json"); },
      {"c.json", "GB in float32", "more than this machine's", "vocab_size x n_embd"});
  // The limit is the memory given: GPT-2 small (124M parameters, 0.5 GB) fits 1 GB, not 0.1 GB.
  using dtlab::model::config_json::require_fits_in_memory;
  EXPECT_NO_THROW(require_fits_in_memory({{"all", 124e6}}, "x", 1e9));
  expect_error_mentions([] { require_fits_in_memory({{"a", 1e6}, {"b", 124e6}}, "x", 1e8); }, {"the most from b"});
  // The presets and the real GPT-2 shape still pass.
  EXPECT_NO_THROW(Gpt2Config::from_json(json{{"vocab_size", 50257}, {"n_positions", 1024}}, "c.json"));
}

TEST(Gpt2Errors, ShapeMismatchNamesTheKeyAndBothShapes) {
  for (const std::string style : {"tiny-b", "tiny-b-original"}) {
    SCOPED_TRACE(style);
    const Scratch scratch("gpt2-shape-" + style);
    const std::string key = style == "tiny-b" ? "transformer.h.1.mlp.c_fc.weight" : "h.1.mlp.c_fc.weight";
    copy_checkpoint(style, scratch.path, nullptr, [&](dtlab::io::TensorMap& t) {
      ASSERT_EQ(t.at(key).sizes(), (std::vector<int64_t>{30, 50}));
      t[key] = torch::zeros({50, 30});  // transposed, as a Linear would store it
    });
    expect_error_mentions([&] { dtlab::model::gpt2_from_pretrained(scratch.path); },
                          {key, "[50, 30]", "[30, 50]"});
  }
}

// transformers refuses this as a corrupted state dict (make_gpt2_golden.py checks that it does).
TEST(Gpt2Errors, UnprefixedCheckpointWithLmHeadIsRefused) {
  const Scratch scratch("gpt2-corrupt");
  copy_checkpoint("tiny-a-original", scratch.path, nullptr, [](dtlab::io::TensorMap& t) {
    t["lm_head.weight"] = t.at("wte.weight").clone();
  });
  expect_error_mentions([&] { dtlab::model::gpt2_from_pretrained(scratch.path); }, {"lm_head.weight", "prefix"});
}

TEST(Gpt2Errors, GenerationBeyondNPositionsIsRefused) {
  auto model = load_eval(golden_dir("tiny-a"));  // n_positions 32
  const torch::Tensor prompt = torch::zeros({30}, torch::kInt64);
  expect_error_mentions([&] { dtlab::model::generate_greedy(model, prompt, 3); }, {"n_positions", "32"});
  expect_error_mentions([&] { model->forward(torch::zeros({1, 33}, torch::kInt64)); }, {"n_positions"});
}

TEST(Gpt2Errors, MissingFilesAreNamed) {
  const Scratch scratch("gpt2-missing");
  expect_error_mentions([&] { dtlab::model::gpt2_from_pretrained(scratch.path / "nope"); }, {"nope"});
  fs::copy_file(golden_dir("tiny-a") / "config.json", scratch.path / "config.json");
  expect_error_mentions([&] { dtlab::model::gpt2_from_pretrained(scratch.path); }, {"model.safetensors"});
}

}  // namespace gpt2_golden_test
