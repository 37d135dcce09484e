// The C++ BertForSequenceClassification against Hugging Face transformers, an independent oracle.
//
// tests/golden/bert/ holds tiny checkpoints and what transformers 4.40.2 computed with them
// (tests/golden/make_bert_golden.py made them; its docstring says how to rerun it):
//   tiny-a, tiny-b  full BertForSequenceClassification checkpoints of two different
//                   configurations: logits, loss, pooled output, state-dict keys and shapes.
//   legacy-base     a bare BertModel checkpoint (no "bert." prefix, LayerNorm gamma/beta,
//                   embeddings.position_ids, pre-training heads "cls.*"): the pooled output and
//                   what transformers reported as missing and unexpected.
// Then the loader's errors, on small checkpoint folders made in a temp dir, and the
// save_pretrained -> from_pretrained round trip.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iostream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/io/file.h"
#include "dtlab/io/json_file.h"
#include "dtlab/io/safetensors.h"
#include "dtlab/model/bert.h"
#include "golden_util.h"
#include "test_util.h"

// Everything in a namespace named after the file (no anonymous namespace): the unit suites share
// one binary, compiled in groups of files (Note [Unity builds] in cmake/Dtlab.cmake), so helpers
// must not collide, and a TEST_F class must not derive from a type of an anonymous namespace.
namespace bert_golden_test {

namespace fs = std::filesystem;
using dtlab::model::BertForSequenceClassification;
using dtlab::model::LoadReport;
using nlohmann::json;

// Hugging Face and dtlab run the same float32 kernels; anything beyond rounding is a bug. The
// golden data comes from Debian's PyTorch 1.13; the same 1e-5 holds on PyPI's 2.15 (MKL's GEMM).
constexpr double kTolerance = 1e-5;

fs::path golden_dir(const std::string& name) {
  return fs::path(DTLAB_SOURCE_DIR) / "tests" / "golden" / "bert" / name;
}

json expected_of(const std::string& name) { return dtlab::io::read_json_file(golden_dir(name) / "expected.json"); }

// A [rows, cols] int64 tensor from a JSON array of arrays.
torch::Tensor int_matrix(const json& rows) { return dtlab::test::golden_tensor(rows, torch::kInt64); }

void expect_matches_golden(const torch::Tensor& actual, const json& golden, const std::string& what) {
  dtlab::test::expect_matches_golden(actual, golden, what, kTolerance);
}

struct Inputs {
  torch::Tensor input_ids, attention_mask, token_type_ids, labels;
};

Inputs inputs_of(const json& expected) {
  Inputs in;
  in.input_ids = int_matrix(expected.at("input_ids"));
  in.attention_mask = int_matrix(expected.at("attention_mask"));
  in.token_type_ids = int_matrix(expected.at("token_type_ids"));
  if (expected.contains("labels")) {
    in.labels = torch::tensor(expected.at("labels").get<std::vector<int64_t>>(), torch::kInt64);
  }
  return in;
}

// Parameter and buffer shapes by name.
std::map<std::string, std::vector<int64_t>> model_shapes(const BertForSequenceClassification& model) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& p : model->named_parameters()) shapes[p.key()] = p.value().sizes().vec();
  for (const auto& b : model->named_buffers()) shapes[b.key()] = b.value().sizes().vec();
  return shapes;
}

// state_dict_keys(model) equals the recorded keys, and each has the recorded shape.
void expect_state_dict_matches(const BertForSequenceClassification& model, const json& expected) {
  std::vector<std::string> keys = dtlab::model::state_dict_keys(model);
  std::sort(keys.begin(), keys.end());
  std::vector<std::string> golden_keys;
  std::map<std::string, std::vector<int64_t>> golden_shapes;
  for (const auto& entry : expected.at("state_dict")) {
    const auto key = entry.at("key").get<std::string>();
    golden_keys.push_back(key);
    golden_shapes[key] = entry.at("shape").get<std::vector<int64_t>>();
  }
  std::vector<std::string> only_model, only_golden;
  std::set_difference(keys.begin(), keys.end(), golden_keys.begin(), golden_keys.end(),
                      std::back_inserter(only_model));
  std::set_difference(golden_keys.begin(), golden_keys.end(), keys.begin(), keys.end(),
                      std::back_inserter(only_golden));
  for (const auto& k : only_model) ADD_FAILURE() << "state_dict_keys has " << k << ", transformers has not";
  for (const auto& k : only_golden) ADD_FAILURE() << "transformers has " << k << ", state_dict_keys has not";
  EXPECT_EQ(keys.size(), golden_keys.size()) << "duplicate or missing keys";

  const auto shapes = model_shapes(model);
  for (const auto& [key, shape] : golden_shapes) {
    auto it = shapes.find(key);
    if (it == shapes.end()) continue;  // reported above if state_dict_keys has it
    EXPECT_EQ(it->second, shape) << key << ": model " << dtlab::model::shape_string(it->second)
                                 << ", transformers " << dtlab::model::shape_string(shape);
  }
}

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// Expects `fn` to throw dtlab::Error whose message contains every needle (case-sensitive).
void expect_error_mentions(const std::function<void()>& fn,
                           std::initializer_list<std::string> needles) {
  try {
    fn();
    ADD_FAILURE() << "expected a dtlab::Error";
  } catch (const dtlab::Error& e) {
    const std::string message = e.what();
    for (const auto& needle : needles) {
      EXPECT_NE(message.find(needle), std::string::npos)
          << "message lacks \"" << needle << "\": " << message;
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

// Copies a golden checkpoint folder's config.json and model.safetensors into dir.
void copy_checkpoint(const std::string& name, const fs::path& dir) {
  fs::copy_file(golden_dir(name) / "config.json", dir / "config.json");
  fs::copy_file(golden_dir(name) / "model.safetensors", dir / "model.safetensors");
}

// gtest parameter names must be alphanumeric: "tiny-a" -> "tiny_a".
std::string param_name(const testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

// ---------------------------------------------------------------------------------------------
// Full checkpoints: everything transformers computed must come out the same.

class BertGoldenFull : public testing::TestWithParam<std::string> {};

TEST_P(BertGoldenFull, LoadsWithNoMissingOrUnexpectedKeys) {
  LoadReport report;
  auto model = dtlab::model::from_pretrained(golden_dir(GetParam()), {}, &report);
  EXPECT_TRUE(report.missing_keys.empty()) << report.describe(GetParam());
  EXPECT_TRUE(report.unexpected_keys.empty()) << report.describe(GetParam());
}

TEST_P(BertGoldenFull, StateDictKeysAndShapesMatchTransformers) {
  const json expected = expected_of(GetParam());
  auto model = dtlab::model::from_pretrained(golden_dir(GetParam()));
  expect_state_dict_matches(model, expected);
}

TEST_P(BertGoldenFull, LogitsAndLossMatchTransformers) {
  const json expected = expected_of(GetParam());
  auto model = dtlab::model::from_pretrained(golden_dir(GetParam()));
  model->eval();
  const Inputs in = inputs_of(expected);
  torch::NoGradGuard no_grad;
  const auto out = model->forward(in.input_ids, in.attention_mask, in.token_type_ids, in.labels);
  expect_matches_golden(out.logits, expected.at("logits"), GetParam() + " logits");
  expect_matches_golden(out.loss, expected.at("loss"), GetParam() + " loss");
}

// The base model alone: when the logits are off, this tells whether the classifier head is.
TEST_P(BertGoldenFull, PooledOutputMatchesTransformers) {
  const json expected = expected_of(GetParam());
  auto model = dtlab::model::from_pretrained(golden_dir(GetParam()));
  model->eval();
  const Inputs in = inputs_of(expected);
  torch::NoGradGuard no_grad;
  const auto pooled = model->bert->forward(in.input_ids, in.attention_mask, in.token_type_ids);
  expect_matches_golden(pooled, expected.at("pooled_output"), GetParam() + " pooled output");
}

// What sits under attention_mask 0 must not matter (transformers' numbers cannot show a mask
// that is applied to the wrong axis but happens to agree on these inputs).
TEST_P(BertGoldenFull, PaddedPositionsDoNotChangeLogits) {
  const json expected = expected_of(GetParam());
  auto model = dtlab::model::from_pretrained(golden_dir(GetParam()));
  model->eval();
  const Inputs in = inputs_of(expected);
  const torch::Tensor padded = in.attention_mask.eq(0);
  ASSERT_TRUE(padded.any().item<bool>()) << "the golden inputs should have padding";
  const torch::Tensor other_ids = in.input_ids.masked_fill(padded, 5);
  const torch::Tensor other_types = in.token_type_ids.masked_fill(padded, 1);
  torch::NoGradGuard no_grad;
  const auto a = model->forward(in.input_ids, in.attention_mask, in.token_type_ids).logits;
  const auto b = model->forward(other_ids, in.attention_mask, other_types).logits;
  EXPECT_LE((a - b).abs().max().item<double>(), 1e-6) << a << "\n" << b;
}

TEST_P(BertGoldenFull, SavePretrainedRoundTripReproducesLogitsExactly) {
  const json expected = expected_of(GetParam());
  auto model = dtlab::model::from_pretrained(golden_dir(GetParam()));
  model->eval();
  const Scratch scratch("bert-roundtrip-" + GetParam());
  const fs::path dir = scratch.path / "saved";
  dtlab::model::save_pretrained(model, dir);
  ASSERT_TRUE(fs::exists(dir / "config.json"));
  ASSERT_TRUE(fs::exists(dir / "model.safetensors"));

  LoadReport report;
  auto again = dtlab::model::from_pretrained(dir, {}, &report);
  again->eval();
  EXPECT_TRUE(report.missing_keys.empty()) << report.describe(dir.string());
  EXPECT_TRUE(report.unexpected_keys.empty()) << report.describe(dir.string());

  // The saved config describes the same network as the golden one.
  const json original = dtlab::io::read_json_file(golden_dir(GetParam()) / "config.json");
  const json saved = dtlab::io::read_json_file(dir / "config.json");
  for (const char* field : {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                            "intermediate_size", "hidden_act", "max_position_embeddings",
                            "type_vocab_size", "layer_norm_eps", "pad_token_id"}) {
    ASSERT_TRUE(saved.contains(field)) << field << " missing from the saved config.json";
    EXPECT_EQ(saved.at(field), original.at(field)) << field;
  }
  EXPECT_EQ(again->config().num_labels, model->config().num_labels);

  // The saved tensors are the model's, bit for bit, under Hugging Face's names.
  const auto tensors = dtlab::io::load_safetensors(dir / "model.safetensors");
  const auto golden_tensors = dtlab::io::load_safetensors(golden_dir(GetParam()) / "model.safetensors");
  ASSERT_EQ(tensors.size(), golden_tensors.size());
  for (const auto& [key, tensor] : golden_tensors) {
    auto it = tensors.find(key);
    ASSERT_NE(it, tensors.end()) << key << " not saved";
    EXPECT_EQ(it->second.scalar_type(), torch::kFloat32) << key;
    EXPECT_TRUE(torch::equal(it->second, tensor)) << key << " changed on the round trip";
  }

  const Inputs in = inputs_of(expected);
  torch::NoGradGuard no_grad;
  const auto a = model->forward(in.input_ids, in.attention_mask, in.token_type_ids, in.labels);
  const auto b = again->forward(in.input_ids, in.attention_mask, in.token_type_ids, in.labels);
  EXPECT_TRUE(torch::equal(a.logits, b.logits)) << a.logits << "\n" << b.logits;
  EXPECT_TRUE(torch::equal(a.loss, b.loss)) << a.loss << " vs " << b.loss;
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, BertGoldenFull, testing::Values("tiny-a", "tiny-b"),
                         param_name);

// ---------------------------------------------------------------------------------------------
// A bare BertModel checkpoint with legacy names and pre-training heads.

TEST(BertGoldenLegacy, ReportsFreshClassifierAndUnusedPreTrainingHeads) {
  const json expected = expected_of("legacy-base");
  LoadReport report;
  auto model = dtlab::model::from_pretrained(golden_dir("legacy-base"), {}, &report);
  // transformers: classifier.weight and classifier.bias missing; the cls.* heads unexpected
  // (gamma/beta renamed, embeddings.position_ids silently ignored).
  EXPECT_EQ(sorted(report.missing_keys), expected.at("missing_keys").get<std::vector<std::string>>())
      << report.describe("legacy-base");
  EXPECT_EQ(sorted(report.unexpected_keys),
            expected.at("unexpected_keys").get<std::vector<std::string>>())
      << report.describe("legacy-base");
  const std::string notice = report.describe("legacy-base");
  EXPECT_NE(notice.find("classifier.weight"), std::string::npos) << notice;
  EXPECT_NE(notice.find("cls.seq_relationship.weight"), std::string::npos) << notice;
}

TEST(BertGoldenLegacy, StateDictKeysAndShapesMatchTransformers) {
  const json expected = expected_of("legacy-base");
  auto model = dtlab::model::from_pretrained(golden_dir("legacy-base"));
  expect_state_dict_matches(model, expected);
}

// The classifier is freshly initialised (differently from transformers), so only the base
// model's output is comparable.
TEST(BertGoldenLegacy, PooledOutputMatchesTransformers) {
  const json expected = expected_of("legacy-base");
  auto model = dtlab::model::from_pretrained(golden_dir("legacy-base"));
  model->eval();
  const Inputs in = inputs_of(expected);
  torch::NoGradGuard no_grad;
  const auto pooled = model->bert->forward(in.input_ids, in.attention_mask, in.token_type_ids);
  expect_matches_golden(pooled, expected.at("pooled_output"), "legacy-base pooled output");
  const auto out = model->forward(in.input_ids, in.attention_mask, in.token_type_ids);
  EXPECT_EQ(out.logits.sizes(), (std::vector<int64_t>{in.input_ids.size(0), 2}));
  EXPECT_FALSE(out.loss.defined()) << "no labels, no loss";
}

// ---------------------------------------------------------------------------------------------
// The loader's errors.

TEST(BertLoaderErrors, ShapeMismatchNamesTheKeyAndBothShapes) {
  const Scratch scratch("bert-shape-mismatch");
  const fs::path dir = scratch.path;
  copy_checkpoint("tiny-b", dir);
  auto tensors = dtlab::io::load_safetensors(dir / "model.safetensors");
  const std::string key = "bert.embeddings.token_type_embeddings.weight";
  ASSERT_EQ(tensors.at(key).sizes(), (std::vector<int64_t>{3, 24}));
  tensors[key] = torch::zeros({5, 24});
  dtlab::io::save_safetensors(dir / "model.safetensors", tensors, {{"format", "pt"}});
  expect_error_mentions([&] { dtlab::model::from_pretrained(dir); }, {key, "5, 24", "3, 24"});
}

// run_glue with a task whose label count differs from the checkpoint's classifier.
TEST(BertLoaderErrors, NumLabelsOverrideThatContradictsTheClassifierIsAShapeMismatch) {
  dtlab::model::BertOverrides overrides;
  overrides.num_labels = 5;
  expect_error_mentions([&] { dtlab::model::from_pretrained(golden_dir("tiny-b"), overrides); },
                        {"classifier.weight", "3, 24", "5, 24"});
}

// A classifier fine-tuned for 3 labels (tiny-b's) run on a 2-label task such as RTE: refused as
// transformers refuses it, naming the weight file, the tensor, both shapes and the way out.
TEST(BertLoaderErrors, ClassifierOfAnotherLabelCountNamesTheFileTheShapesAndTheFlag) {
  dtlab::model::BertOverrides overrides;
  overrides.num_labels = 2;
  expect_error_mentions([&] { dtlab::model::from_pretrained(golden_dir("tiny-b"), overrides); },
                        {(golden_dir("tiny-b") / "model.safetensors").string() + ": classifier.weight",
                         "[3, 24] in the checkpoint but the model expects [2, 24]",
                         "classifier has 3 labels, the model is built for 2", "--ignore_mismatched_sizes"});
}

// transformers' ignore_mismatched_sizes: the mismatched weights keep their fresh initialisation
// (zero bias, as Hugging Face initialises it) and are reported; every other weight is loaded.
TEST(BertLoader, IgnoreMismatchedSizesStartsAFreshClassifierAndLoadsTheRest) {
  dtlab::model::BertOverrides overrides;
  overrides.num_labels = 2;
  overrides.ignore_mismatched_sizes = true;
  LoadReport report;
  torch::manual_seed(0);
  const auto model = dtlab::model::from_pretrained(golden_dir("tiny-b"), overrides, &report);
  EXPECT_EQ(model->classifier->weight.sizes(), (std::vector<int64_t>{2, 24}));
  EXPECT_TRUE(torch::equal(model->classifier->bias, torch::zeros({2})));
  const auto stored = dtlab::io::load_safetensors(golden_dir("tiny-b") / "model.safetensors");
  EXPECT_TRUE(torch::equal(model->bert->pooler->dense->weight, stored.at("bert.pooler.dense.weight")));
  EXPECT_EQ(report.mismatched_keys,
            (std::vector<std::string>{
                "classifier.weight: found shape [3, 24] in the checkpoint and [2, 24] in the model",
                "classifier.bias: found shape [3] in the checkpoint and [2] in the model"}));
  EXPECT_TRUE(report.missing_keys.empty()) << report.describe("tiny-b");
  EXPECT_TRUE(report.unexpected_keys.empty()) << report.describe("tiny-b");
  const std::string notice = report.describe("tiny-b");
  EXPECT_NE(notice.find("newly initialized because the shapes did not match:\n- classifier.weight"),
            std::string::npos) << notice;
}

TEST(BertLoaderErrors, OnlyPytorchModelBinAsksForASafetensorsConversion) {
  const Scratch scratch("bert-only-bin");
  const fs::path& dir = scratch.path;
  fs::copy_file(golden_dir("tiny-b") / "config.json", dir / "config.json");
  std::ofstream(dir / "pytorch_model.bin") << "not really a pickle";
  try {
    dtlab::model::from_pretrained(dir);
    ADD_FAILURE() << "expected a dtlab::Error";
  } catch (const dtlab::Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("pytorch_model.bin"), std::string::npos) << message;
    EXPECT_NE(message.find("safetensors"), std::string::npos) << message;
    EXPECT_NE(lower(message).find("convert"), std::string::npos)
        << "should give the conversion command: " << message;
  }
}

TEST(BertLoaderErrors, MissingConfigJsonNamesTheFile) {
  const Scratch scratch("bert-no-config");
  const fs::path& dir = scratch.path;
  fs::copy_file(golden_dir("tiny-b") / "model.safetensors", dir / "model.safetensors");
  EXPECT_THROW_WITH(dtlab::model::from_pretrained(dir), dtlab::Error, "config.json");
}

TEST(BertLoaderErrors, MissingWeightsNamesModelSafetensors) {
  const Scratch scratch("bert-no-weights");
  const fs::path& dir = scratch.path;
  fs::copy_file(golden_dir("tiny-b") / "config.json", dir / "config.json");
  EXPECT_THROW_WITH(dtlab::model::from_pretrained(dir), dtlab::Error, "model.safetensors");
}

// Multi-label classification needs a sigmoid per label: training it with the kit's cross-entropy
// would be silently wrong, so the config is refused with the field and the supported values.
TEST(BertLoaderErrors, MultiLabelProblemTypeIsRefusedNamingTheFieldAndTheSupportedValues) {
  nlohmann::json config = nlohmann::json::parse(dtlab::io::read_file(golden_dir("tiny-b") / "config.json"));
  config["problem_type"] = "multi_label_classification";
  EXPECT_THROW_WITH(dtlab::model::BertConfig::from_json(config, "config.json"), dtlab::Error,
                    "\"problem_type\": \"multi_label_classification\" is not supported (supported: "
                    "\"single_label_classification\", \"regression\"");
  config["problem_type"] = "regression";
  EXPECT_NO_THROW(dtlab::model::BertConfig::from_json(config, "config.json"));
}

// Note [Bounded configs]: sizes beyond their meaning, or beyond the machine's memory together,
// are one line naming the field, its value and the limit, before anything is allocated.
TEST(BertLoaderErrors, SizesBeyondTheirMeaningOrTheMachinesMemoryAreRejectedBeforeAllocating) {
  const nlohmann::json base = nlohmann::json::parse(dtlab::io::read_file(golden_dir("tiny-b") / "config.json"));
  auto with = [&](const char* key, const nlohmann::json& value) {
    nlohmann::json c = base;
    c[key] = value;
    return c;
  };
  EXPECT_THROW_WITH(dtlab::model::BertConfig::from_json(with("max_position_embeddings", 1000000000000), "c.json"),
                    dtlab::Error, "\"max_position_embeddings\" 1000000000000 is above the limit 1048576");
  nlohmann::json many_labels = with("num_labels", 100000);
  many_labels.erase("id2label");  // where id2label is there, it gives the count (as in transformers)
  EXPECT_THROW_WITH(dtlab::model::BertConfig::from_json(many_labels, "c.json"), dtlab::Error,
                    "\"num_labels\" 100000 is above the limit 65536");
  EXPECT_THROW_WITH(dtlab::model::BertConfig::from_json(with("layer_norm_eps", 2.0), "c.json"), dtlab::Error,
                    "\"layer_norm_eps\" must be in [0, 1)");
  nlohmann::json huge = with("vocab_size", 16777216);
  huge["hidden_size"] = 65536;
  huge["num_attention_heads"] = 1;
  EXPECT_THROW_WITH(dtlab::model::BertConfig::from_json(huge, "c.json"), dtlab::Error, "vocab_size x hidden_size");
  EXPECT_NO_THROW(dtlab::model::BertConfig::from_json(base, "c.json"));
}

TEST(BertLoaderErrors, MissingFolderNamesTheFolder) {
  const Scratch scratch("bert-no-folder");
  const fs::path dir = scratch.path / "no-such-model";
  EXPECT_THROW_WITH(dtlab::model::from_pretrained(dir), dtlab::Error, "no-such-model");
}

}  // namespace bert_golden_test
