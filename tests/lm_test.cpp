// The GPT-2 translation driver (lm/): the target-token loss in closed form, the minibatches, the
// flags and their errors, greedy translation and evaluation (on one process and split over two
// ranks), the gpt2-tiny fixture, and dtlab-gpt2 end to end on a small generated set.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "dist_test_util.h"
#include "dtlab/core/error.h"
#include "dtlab/io/file.h"
#include "dtlab/io/json_file.h"
#include "dtlab/lm/dataset.h"
#include "dtlab/lm/evaluate.h"
#include "dtlab/lm/loss.h"
#include "dtlab/lm/model.h"
#include "dtlab/lm/options.h"
#include "dtlab/lm/translate.h"
#include "dtlab/metrics/bleu.h"
#include "dtlab/model/gpt2.h"
#include "dtlab/tokenizer/bpe_trainer.h"
#include "dtlab/tooling/gpt2_fixtures.h"
#include "dtlab/tooling/process.h"
#include "dtlab/tooling/translation_fixtures.h"
#include "lm_fixture_util.h"
#include "test_util.h"

// Everything in a namespace named after the file (no anonymous namespace): the unit suites share
// one binary, compiled in groups of files (Note [Unity builds] in cmake/Dtlab.cmake), so helpers
// must not collide, and a TEST_F class must not derive from a type of an anonymous namespace.
namespace lm_test {

namespace fs = std::filesystem;
using dtlab::data::LmExamples;
using dtlab::data::TranslationPair;
using dtlab::lm::LmOptions;
using dtlab::lm::LmTokenIds;
using dtlab::model::Gpt2LMHeadModel;
using dtlab::tokenizer::Gpt2Tokenizer;

// A small translation set (400 / 50 / 20 pairs) and a GPT-2 far smaller than gpt2-tiny, both
// generated once for the whole suite.
constexpr int64_t kTrain = 400, kValidation = 50, kTest = 20;

using dtlab::test::small_gpt2;

const fs::path& small_fixture() {
  static const fs::path dir = [] {
    const fs::path d = dtlab::test::fresh_temp_dir("lm-fixture");
    dtlab::test::write_small_lm_fixture(d, kTrain, kValidation, kTest);
    return d;
  }();
  return dir;
}

fs::path data_dir() { return small_fixture() / "translation"; }
fs::path model_dir() { return small_fixture() / "gpt2"; }

Gpt2LMHeadModel load_small_model() {
  static std::mutex m;  // construction draws from the one global generator
  std::lock_guard<std::mutex> lock(m);
  return dtlab::model::gpt2_from_pretrained(model_dir());
}

// Words to ids by their length, so a test can count tokens by eye: "a bb" -> 11 12.
std::vector<int64_t> encode_by_length(const std::string& text) {
  std::vector<int64_t> ids;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    ids.push_back(10 + static_cast<int64_t>(end - start));
    start = end + 1;
  }
  return ids;
}

dtlab::data::LmExampleOptions by_length_options(int64_t max_length) {
  dtlab::data::LmExampleOptions o;
  o.pad_id = 0;
  o.eos_src_id = 1;
  o.eos_tgt_id = 2;
  o.max_length = max_length;
  return o;
}

// ---------------------------------------------------------------------------------------------
// The loss

TEST(WeightedTokenLoss, IsTheMeanCrossEntropyOverEveryCountedTokenOfTheBatch) {
  // Two classes. Equal logits give ln 2; logits (0, ln 3) give p = 1/4, 3/4; (ln 3, 0) the reverse.
  const double l3 = std::log(3.0);
  const torch::Tensor logits = torch::tensor({0.0, 0.0, 0.0, l3, 0.0, l3,     // row 0
                                              l3, 0.0, 0.0, 0.0, l3, 0.0},    // row 1
                                             torch::kFloat64).view({2, 3, 2});
  const torch::Tensor labels = torch::tensor({0, 1, 0, 0, 1, 0}, torch::kInt64).view({2, 3});
  const torch::Tensor weights = torch::tensor({1, 1, 0, 0, 0, 1}, torch::kFloat32).view({2, 3});
  // Counted: ln 2 (row 0, t 0), ln 4/3 (row 0, t 1), ln 4/3 (row 1, t 2). Row 0's third label
  // (ln 4) and row 1's first two do not count. The mean is over the three tokens, not of the
  // two rows' means.
  const double expected = (std::log(2.0) + 2 * std::log(4.0 / 3.0)) / 3;
  EXPECT_NEAR(dtlab::lm::weighted_token_loss(logits, labels, weights).item<double>(), expected, 1e-12);
}

TEST(WeightedTokenLoss, EqualsGpt2LmLossWithTheUncountedLabelsIgnored) {
  torch::manual_seed(3);
  const torch::Tensor logits = torch::randn({2, 5, 7}, torch::kFloat64);
  const torch::Tensor labels = torch::randint(0, 7, {2, 5}, torch::kInt64);
  const torch::Tensor weights = torch::tensor({1, 1, 0, 1, 0, 0, 1, 1, 1, 0}, torch::kFloat32).view({2, 5});
  // lm_loss shifts by one itself: give it one more logit column (never read) and the labels
  // one column later, with -100 where the weight is 0.
  const torch::Tensor full_logits = torch::cat({logits, torch::zeros({2, 1, 7}, torch::kFloat64)}, 1);
  const torch::Tensor masked = labels.masked_fill(weights.eq(0), dtlab::model::kIgnoreIndex);
  const torch::Tensor full_labels = torch::cat({torch::zeros({2, 1}, torch::kInt64), masked}, 1);
  EXPECT_NEAR(dtlab::lm::weighted_token_loss(logits, labels, weights).item<double>(),
              dtlab::model::lm_loss(full_logits, full_labels).item<double>(), 1e-12);
}

TEST(WeightedTokenLoss, ABatchWithoutTargetTokensGivesZeroAndFiniteGradients) {
  const torch::Tensor logits = torch::randn({1, 3, 4}, torch::kFloat64).requires_grad_();
  const torch::Tensor loss = dtlab::lm::weighted_token_loss(
      logits, torch::zeros({1, 3}, torch::kInt64), torch::zeros({1, 3}, torch::kFloat32));
  loss.backward();
  EXPECT_EQ(loss.item<double>(), 0.0);
  EXPECT_TRUE(torch::isfinite(logits.grad()).all().item<bool>());
}

// Note [Data-parallel loss]: two ranks whose minibatches hold 5 and 17 target tokens. The union
// of the two minibatches, in one process, is the reference.
struct UnevenShards {
  dtlab::model::Gpt2Config config;
  torch::Tensor input_ids, labels, weights;  // the union: rows 0-1 are rank 0's, rows 2-3 rank 1's

  UnevenShards() {
    config.vocab_size = 40;
    config.n_positions = 16;
    config.n_embd = 12;
    config.n_layer = 2;
    config.n_head = 3;
    dtlab::model::Gpt2Overrides::dropout(0.0).apply(config);
    torch::manual_seed(11);
    input_ids = torch::randint(0, 40, {4, 10}, torch::kInt64);
    labels = torch::randint(0, 40, {4, 10}, torch::kInt64);
    weights = torch::zeros({4, 10}, torch::kFloat32);
    const int64_t counted[4] = {2, 3, 8, 9};  // target tokens at the end of each row
    for (int64_t r = 0; r < 4; ++r) weights[r].narrow(0, 10 - counted[r], counted[r]).fill_(1);
  }
  // The same weights on every call: the seed is fixed.
  Gpt2LMHeadModel model() const {
    torch::manual_seed(5);
    return Gpt2LMHeadModel(config);
  }
  torch::Tensor rows(const torch::Tensor& t, int rank) const { return t.narrow(0, 2 * rank, 2); }
};

// Each rank's gradients after all_reduce and division by the world size, as average_gradients
// does, with this rank's loss from `loss`. Returns rank 0's gradients and each rank's loss.
std::pair<std::vector<torch::Tensor>, std::vector<double>> averaged_gradients(
    const UnevenShards& d,
    const std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&,
                                      dtlab::dist::Group&)>& loss) {
  std::vector<Gpt2LMHeadModel> replicas = {d.model(), d.model()};
  std::vector<torch::Tensor> gradients;
  std::vector<double> losses(2);
  dtlab::test::run_ranks(2, [&](dtlab::dist::Group& group) {
    const int r = group.rank();
    Gpt2LMHeadModel& m = replicas[r];
    const torch::Tensor logits = m->forward(d.rows(d.input_ids, r)).logits;
    const torch::Tensor l = loss(logits, d.rows(d.labels, r), d.rows(d.weights, r), group);
    l.backward();
    losses[r] = l.item<double>();
    for (torch::Tensor& p : m->parameters()) {
      torch::Tensor g = p.grad();
      group.all_reduce(g, dtlab::dist::ReduceOp::SUM, "gradients");
      g.div_(group.size());
    }
  });
  for (const torch::Tensor& p : replicas[0]->parameters()) gradients.push_back(p.grad().clone());
  return {gradients, losses};
}

// The largest difference between two lists of gradients, relative to the largest gradient.
double relative_difference(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, (a[i] - b[i]).abs().max().item<double>());
    scale = std::max(scale, b[i].abs().max().item<double>());
  }
  return diff / scale;
}

TEST(DataParallelLoss, AveragedGradientsEqualOneProcessOnTheUnionOfUnevenMinibatches) {
  const UnevenShards d;
  Gpt2LMHeadModel one = d.model();
  const torch::Tensor union_loss =
      dtlab::lm::weighted_token_loss(one->forward(d.input_ids).logits, d.labels, d.weights);
  union_loss.backward();
  std::vector<torch::Tensor> reference;
  for (const torch::Tensor& p : one->parameters()) reference.push_back(p.grad().clone());

  const auto [gradients, losses] = averaged_gradients(d, dtlab::lm::data_parallel_token_loss);
  EXPECT_LT(relative_difference(gradients, reference), 1e-5);
  // The mean of the ranks' losses is the union's loss (what the loop prints).
  EXPECT_NEAR((losses[0] + losses[1]) / 2, union_loss.item<double>(), 1e-5);
}

TEST(DataParallelLoss, EachRankAveragingOverItsOwnTokensIsNotTheUnionsGradient) {
  // The lesson of the note: with 5 and 17 target tokens, per-rank means weigh rank 0's tokens
  // 17/5 times as much. If this difference vanished, the test above would prove nothing.
  const UnevenShards d;
  Gpt2LMHeadModel one = d.model();
  dtlab::lm::weighted_token_loss(one->forward(d.input_ids).logits, d.labels, d.weights).backward();
  std::vector<torch::Tensor> reference;
  for (const torch::Tensor& p : one->parameters()) reference.push_back(p.grad().clone());

  const auto per_rank_mean = [](const torch::Tensor& logits, const torch::Tensor& labels,
                                const torch::Tensor& weights, dtlab::dist::Group&) {
    return dtlab::lm::weighted_token_loss(logits, labels, weights);
  };
  EXPECT_GT(relative_difference(averaged_gradients(d, per_rank_mean).first, reference), 0.05);
}

TEST(DataParallelLoss, CountsTheTargetTokensOfEveryRankOnceAStep) {
  const UnevenShards d;
  dtlab::test::run_ranks(2, [&](dtlab::dist::Group& group) {
    const int r = group.rank();
    const torch::Tensor logits = torch::zeros({2, 10, 40});  // uniform: ce = ln 40 per token
    const double loss =
        dtlab::lm::data_parallel_token_loss(logits, d.rows(d.labels, r), d.rows(d.weights, r), group)
            .item<double>();
    // R / N * N_r * ln 40 with R = 2, N = 22, N_r = 5 or 17.
    EXPECT_NEAR(loss, 2.0 / 22.0 * (r == 0 ? 5 : 17) * std::log(40.0), 1e-6) << "rank " << r;
    const std::vector<dtlab::dist::CommRecord> records = group.log().records();
    ASSERT_EQ(records.size(), 1u);
    EXPECT_EQ(records[0].op, "all_reduce");
    EXPECT_EQ(records[0].tag, "target tokens");
  });
}

// ---------------------------------------------------------------------------------------------
// The minibatches

TEST(LmDataset, ABatchHoldsItsRowsInOrderCutToTheLongest) {
  // Rows before the shift: "a bb" <eos_de> "c" <eos_en> = 5 tokens; the long pair is 13 tokens,
  // cut to max_length 12 (11 real input positions); "x" "y" is 4 tokens.
  const std::vector<TranslationPair> pairs = {{"a bb", "c"}, {"a b c d e", "f g h i j k"}, {"x", "y"}};
  const LmExamples examples = dtlab::data::make_lm_examples(pairs, encode_by_length, by_length_options(12));
  const dtlab::lm::LmDataset dataset(examples);
  ASSERT_EQ(dataset.size(), 3);

  const dtlab::data::Batch b = dataset.batch({2, 0});
  ASSERT_EQ(b.input_ids.sizes(), (std::vector<int64_t>{2, 5}));  // the longest row has 5 real tokens
  EXPECT_TRUE(b.input_ids[0].equal(examples.input_ids[2].narrow(0, 0, 5)));
  EXPECT_TRUE(b.input_ids[1].equal(examples.input_ids[0].narrow(0, 0, 5)));
  EXPECT_TRUE(b.labels[1].equal(torch::tensor({12, 1, 11, 2, 0}, torch::kInt64)));
  EXPECT_TRUE(b.attention_mask.equal(torch::tensor({{1, 1, 1, 1, 0}, {1, 1, 1, 1, 1}}, torch::kInt64)));
  EXPECT_EQ(b.real_tokens(), 4 + 5);
  // Every counted label survives the cut: "y"/"c" and <eos_en> in each row.
  EXPECT_EQ(b.label_weights.sum().item<float>(), 4.0f);
  EXPECT_TRUE(b.label_weights[1].equal(torch::tensor({0, 0, 1, 1, 0}, torch::kFloat32)));

  const dtlab::data::Batch cut = dataset.batch({1});
  EXPECT_EQ(cut.input_ids.size(1), 11);  // a row cut at max_length keeps every column
  EXPECT_EQ(cut.label_weights.sum().item<float>(), examples.label_token_weights[1].sum().item<float>());
}

TEST(LmDataset, CuttingThePaddingColumnsLeavesTheLossUnchanged) {
  const Gpt2Tokenizer tokenizer = Gpt2Tokenizer::from_pretrained(model_dir());
  const LmTokenIds ids = dtlab::lm::lm_token_ids(tokenizer, model_dir().string());
  const LmExamples examples = dtlab::lm::encode_pairs(
      dtlab::data::read_translation_split(data_dir(), "validation"), tokenizer, ids, 96);
  const dtlab::lm::LmDataset dataset(examples);
  Gpt2LMHeadModel model = load_small_model();
  model->eval();
  torch::NoGradGuard no_grad;
  const std::vector<int64_t> rows = {3, 1, 4, 1, 5, 9, 2, 6};
  const dtlab::data::Batch b = dataset.batch(rows);
  ASSERT_LT(b.input_ids.size(1), 95) << "the fixture's rows should be much shorter than 96 tokens";
  const torch::Tensor index = torch::tensor(rows, torch::kInt64);
  const torch::Tensor full_logits = model->forward(examples.input_ids.index_select(0, index)).logits;
  const double full = dtlab::lm::weighted_token_loss(full_logits, examples.labels.index_select(0, index),
                                                     examples.label_token_weights.index_select(0, index))
                          .item<double>();
  EXPECT_NEAR(dtlab::lm::translation_loss(model)(b).item<double>(), full, 1e-6);
}

// ---------------------------------------------------------------------------------------------
// The flags

// Parses args as dtlab-gpt2 would (with a real data and model folder unless args name others),
// then validates.
LmOptions parse(std::vector<std::string> args, bool with_defaults = true) {
  if (with_defaults) {
    args.insert(args.begin(), {"--data_dir", data_dir().string(), "--output_dir", "unused"});
  }
  CLI::App app;
  LmOptions o;
  dtlab::lm::add_lm_flags(app, o);
  std::vector<const char*> argv = {"dtlab-gpt2"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  // CLI11 reads argv from the end.
  app.parse(static_cast<int>(argv.size()), argv.data());
  dtlab::lm::validate(o);
  return o;
}

std::vector<std::string> with_model(std::vector<std::string> args) {
  args.insert(args.begin(), {"--model_name_or_path", model_dir().string()});
  return args;
}

TEST(LmFlags, DefaultsAndTheBatchSizeAlias) {
  const LmOptions o = parse(with_model({"--batch_size", "7"}));
  EXPECT_EQ(o.per_device_batch_size, 7);
  EXPECT_EQ(o.max_length, 128);
  EXPECT_DOUBLE_EQ(o.learning_rate, 1e-4);
  EXPECT_EQ(o.bleu_examples, -1);
  EXPECT_EQ(dtlab::lm::tokenizer_folder(o), model_dir().string());
  const LmOptions preset = parse({"--model_config", "gpt2-mini", "--tokenizer_dir", model_dir().string()});
  EXPECT_EQ(dtlab::lm::tokenizer_folder(preset), model_dir().string());
}

TEST(LmFlags, ExactlyOneModelSource) {
  EXPECT_THROW_WITH(parse({}), dtlab::Error, "exactly one of --model_name_or_path");
  EXPECT_THROW_WITH(parse(with_model({"--model_config", "gpt2-mini"})), dtlab::Error,
                    "exactly one of --model_name_or_path");
  EXPECT_THROW_WITH(parse({"--model_config", "gpt2-mini"}), dtlab::Error,
                    "--model_config gpt2-mini needs --tokenizer_dir");
  EXPECT_THROW_WITH(parse({"--model_config", "gpt3", "--tokenizer_dir", model_dir().string()}),
                    dtlab::Error, "--model_config: unknown GPT-2 preset \"gpt3\"");
  EXPECT_THROW_WITH(parse({"--model_name_or_path", "/no/such/model"}), dtlab::Error,
                    "--model_name_or_path /no/such/model is not a folder");
  EXPECT_THROW_WITH(parse(with_model({"--tokenizer_dir", "/no/such/tokenizer"})), dtlab::Error,
                    "--tokenizer_dir /no/such/tokenizer is not a folder");
}

TEST(LmFlags, EveryBadValueNamesItsFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--per_device_batch_size", "0"}, "--per_device_batch_size must be positive"},
      {{"--max_length", "1"}, "--max_length must be at least 2"},
      {{"--learning_rate", "0"}, "--learning_rate must be positive"},
      {{"--weight_decay", "-0.1"}, "--weight_decay must not be negative"},
      {{"--warmup_steps", "-1"}, "--warmup_steps must not be negative"},
      {{"--num_epochs", "0"}, "--num_epochs must be positive"},
      {{"--threads", "-1"}, "--threads must not be negative"},
      {{"--dropout", "1"}, "--dropout must be in [0, 1)"},
      {{"--eval_batch_size", "0"}, "--eval_batch_size must be positive"},
      {{"--bleu_examples", "-2"}, "--bleu_examples must be -1 (all), 0 (no BLEU) or positive"},
      {{"--max_new_tokens", "0"}, "--max_new_tokens must be positive"},
      {{"--samples", "-1"}, "--samples must not be negative"},
  };
  for (const auto& [args, needle] : cases) {
    SCOPED_TRACE(args[0]);
    EXPECT_THROW_WITH(parse(with_model(args)), dtlab::Error, needle);
  }
  EXPECT_NO_THROW(parse(with_model({"--num_epochs", "0", "--max_steps", "5"})));
  EXPECT_THROW_WITH(parse(with_model({"--data_dir", "/no/such/data", "--output_dir", "o"}), false),
                    dtlab::Error, "--data_dir /no/such/data is not a folder");
  EXPECT_THROW(parse(with_model({"--output_dir", "o"}), false), CLI::RequiredError);
}

// The parallel axes' counts: an error naming the flag, in the kit's words (CLI11's PositiveNumber
// said "Value 0 not in range 0.000000 to 1.797...e308"), before any probe or rank starts.
TEST(LmFlags, EveryCountOfAParallelAxisMustBePositive) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--stages", "0"}, "--stages must be positive, got 0"},
      {{"--micro_batches", "-3"}, "--micro_batches must be positive, got -3"},
      {{"--stage_sleep_ms", "-1"}, "--stage_sleep_ms must not be negative, got -1"},
  };
  for (const auto& [args, needle] : cases) {
    SCOPED_TRACE(args[0]);
    CLI::App app;
    LmOptions o;
    dtlab::lm::add_stage_rank_flags(app, o);
    std::vector<const char*> argv = {"pp", args[0].c_str(), args[1].c_str()};
    app.parse(static_cast<int>(argv.size()), argv.data());
    EXPECT_THROW_WITH(dtlab::lm::validate_counts(o), dtlab::Error, needle);
  }
  LmOptions o;
  o.tp = 0;
  EXPECT_THROW_WITH(dtlab::lm::validate_counts(o), dtlab::Error, "--tp must be positive, got 0");
  EXPECT_NO_THROW(dtlab::lm::validate_counts(LmOptions()));
  LmOptions whole = parse(with_model({}));  // validate checks the counts with everything else
  whole.tp = 0;
  EXPECT_THROW_WITH(dtlab::lm::validate(whole), dtlab::Error, "--tp must be positive, got 0");
}

// the pipeline's --balance must list --stages stages, checked with the
// other flags (before a model is loaded).
TEST(LmFlags, TheBalanceMustListAsManyStagesAsStages) {
  LmOptions o = parse(with_model({}));
  o.balance = {3, 3};
  o.stages = 2;
  EXPECT_NO_THROW(dtlab::lm::validate(o));
  o.stages = 3;
  EXPECT_THROW_WITH(dtlab::lm::validate(o), dtlab::Error,
                    "--balance lists 2 stages and --stages is 3: give both the same number of stages");
  o.balance = {2, 2, 2};
  o.stages = LmOptions().stages;
  EXPECT_THROW_WITH(dtlab::lm::validate(o), dtlab::Error, "--stages is 2 (its default)");
}

TEST(LmFlags, TheModelMustFitTheTokenizerAndTheRows) {
  const Gpt2Tokenizer tokenizer = Gpt2Tokenizer::from_pretrained(model_dir());
  const LmTokenIds ids = dtlab::lm::lm_token_ids(tokenizer, model_dir().string());
  EXPECT_THROW_WITH(dtlab::lm::load_model(parse(with_model({"--max_length", "130"})), tokenizer, ids, nullptr),
                    dtlab::Error, "--max_length 130 makes rows of 129 positions but");
  // A model folder whose vocabulary is smaller than its tokenizer's.
  const fs::path small_vocab = dtlab::test::fresh_temp_dir("lm-small-vocab");
  dtlab::model::Gpt2Config config = dtlab::model::Gpt2Config::from_file(model_dir() / "config.json");
  config.vocab_size = tokenizer.vocab_size() - 1;
  dtlab::model::save_pretrained(Gpt2LMHeadModel(config), small_vocab);
  EXPECT_THROW_WITH(dtlab::lm::load_model(parse({"--model_name_or_path", small_vocab.string(), "--tokenizer_dir",
                                                 model_dir().string()}),
                                          tokenizer, ids, nullptr),
                    dtlab::Error, "tokens but " + small_vocab.string() + " has vocab_size");
  // A preset takes the tokenizer's vocabulary and the layout's eos and pad.
  const Gpt2LMHeadModel preset = dtlab::lm::load_model(
      parse({"--model_config", "gpt2-mini", "--tokenizer_dir", model_dir().string()}), tokenizer, ids, nullptr);
  EXPECT_EQ(preset->config().vocab_size, tokenizer.vocab_size());
  EXPECT_EQ(preset->config().eos_token_id, ids.eos_target);
  EXPECT_EQ(preset->config().pad_token_id, ids.pad);
}

TEST(LmFlags, ATokenizerWithoutTheLayoutTokensSaysHowToMakeOne) {
  dtlab::tokenizer::BpeTrainerOptions options;
  options.vocab_size = 300;
  options.special_tokens = {"<eos_de>", "<pad>"};
  dtlab::tokenizer::BpeTrainer trainer(options);
  trainer.feed("Der Hund bellt. The dog barks.");
  EXPECT_THROW_WITH(dtlab::lm::lm_token_ids(trainer.train().tokenizer(), "DIR"), dtlab::Error,
                    "the tokenizer in DIR has no <eos_en> token");
}

// ---------------------------------------------------------------------------------------------
// Translation and evaluation

TEST(Translate, LeftPaddedBatchesTranslateAsOneAtATime) {
  const Gpt2Tokenizer tokenizer = Gpt2Tokenizer::from_pretrained(model_dir());
  const LmTokenIds ids = dtlab::lm::lm_token_ids(tokenizer, model_dir().string());
  Gpt2LMHeadModel model = load_small_model();
  std::vector<std::string> sources;
  for (const TranslationPair& p : dtlab::data::read_translation_split(data_dir(), "test")) sources.push_back(p.de);
  sources.resize(6);
  dtlab::lm::TranslateOptions o;
  o.max_new_tokens = 12;
  o.batch_size = 1;
  const std::vector<std::string> alone = dtlab::lm::translate(model, tokenizer, ids, sources, o);
  o.batch_size = 4;
  EXPECT_EQ(dtlab::lm::translate(model, tokenizer, ids, sources, o), alone);
  EXPECT_TRUE(model->is_training()) << "translate must leave the model's mode as it was";
  // A random model never ends its translation: each is 12 new tokens of text.
  for (const std::string& t : alone) EXPECT_FALSE(t.empty());
}

TEST(Translate, AModelThatEndsAtOnceGivesEmptyTranslations) {
  const Gpt2Tokenizer tokenizer = Gpt2Tokenizer::from_pretrained(model_dir());
  const LmTokenIds ids = dtlab::lm::lm_token_ids(tokenizer, model_dir().string());
  Gpt2LMHeadModel model = load_small_model();
  {
    // ln_f outputs its bias whatever the input; a bias along a long <eos_en> embedding makes
    // <eos_en> the argmax at every position (the head is tied to the embeddings).
    torch::NoGradGuard no_grad;
    const torch::Tensor wte = model->transformer->wte->weight;
    wte[ids.eos_target].mul_(100);
    model->transformer->ln_f->weight.zero_();
    model->transformer->ln_f->bias.copy_(wte[ids.eos_target]);
  }
  dtlab::lm::TranslateOptions o;
  o.batch_size = 2;
  const std::vector<std::string> out =
      dtlab::lm::translate(model, tokenizer, ids, {"Der Hund.", "Ein Hund bellt laut."}, o);
  EXPECT_EQ(out, (std::vector<std::string>{"", ""}));
}

// The validation rows and test pairs of the small fixture; the first half of the test pairs
// take the random model's own translations as references, so that BLEU is far from 0 and
// from 100 and a wrong sum of the ranks' statistics shows.
struct EvalSets {
  Gpt2Tokenizer tokenizer = Gpt2Tokenizer::from_pretrained(model_dir());
  LmTokenIds ids = dtlab::lm::lm_token_ids(tokenizer, model_dir().string());
  LmExamples validation;
  std::vector<TranslationPair> test;
  dtlab::lm::EvalInputs inputs(Gpt2LMHeadModel model) const {
    dtlab::lm::TranslateOptions t;
    t.batch_size = 1;  // one at a time, so every rank's translations are bit for bit the same
    t.max_new_tokens = 8;
    return {model, &tokenizer, ids, &validation, &test, 16, t};
  }
};

EvalSets make_eval_sets() {
  EvalSets s;
  s.validation = dtlab::lm::encode_pairs(dtlab::data::read_translation_split(data_dir(), "validation"),
                                         s.tokenizer, s.ids, 96);
  s.test = dtlab::data::read_translation_split(data_dir(), "test");
  Gpt2LMHeadModel model = load_small_model();
  std::vector<std::string> sources;
  for (const TranslationPair& p : s.test) sources.push_back(p.de);
  const std::vector<std::string> own = dtlab::lm::translate(model, s.tokenizer, s.ids, sources, s.inputs(model).translate);
  for (size_t i = 0; i < s.test.size() / 2; ++i) s.test[i].en = own[i];
  return s;
}

TEST(EvaluateTranslation, LossPerTargetTokenPerplexityAndCorpusBleu) {
  const EvalSets s = make_eval_sets();
  Gpt2LMHeadModel model = load_small_model();
  std::vector<dtlab::lm::Translation> translations;
  const dtlab::train::EvalResult r = dtlab::lm::evaluate_translation(s.inputs(model), nullptr, &translations);

  // The loss: all validation rows in one batch, every target token counted once.
  torch::NoGradGuard no_grad;
  model->eval();
  const double whole = dtlab::lm::weighted_token_loss(model->forward(s.validation.input_ids).logits,
                                                      s.validation.labels, s.validation.label_token_weights)
                           .item<double>();
  EXPECT_NEAR(r.loss, whole, 1e-5);
  EXPECT_EQ(r.examples, kValidation);
  EXPECT_DOUBLE_EQ(r.metrics.at("perplexity"), std::exp(r.loss));

  ASSERT_EQ(translations.size(), static_cast<size_t>(kTest));
  std::vector<std::string> hypotheses, references;
  for (size_t i = 0; i < translations.size(); ++i) {
    EXPECT_EQ(translations[i].source, s.test[i].de);
    EXPECT_EQ(translations[i].reference, s.test[i].en);
    hypotheses.push_back(translations[i].hypothesis);
    references.push_back(translations[i].reference);
  }
  const double bleu = dtlab::metrics::corpus_bleu(hypotheses, references).score;
  EXPECT_GT(bleu, 5.0);
  EXPECT_LT(bleu, 95.0);
  EXPECT_DOUBLE_EQ(r.metrics.at("bleu"), bleu);
}

TEST(EvaluateTranslation, SplitOverTwoRanksGivesTheOneProcessResult) {
  const EvalSets s = make_eval_sets();
  const dtlab::train::EvalResult one = dtlab::lm::evaluate_translation(s.inputs(load_small_model()), nullptr);
  std::vector<dtlab::train::EvalResult> ranks(2);
  dtlab::test::run_ranks(2, [&](dtlab::dist::Group& group) {
    ranks[group.rank()] = dtlab::lm::evaluate_translation(s.inputs(load_small_model()), &group);
  });
  for (const dtlab::train::EvalResult& r : ranks) {
    EXPECT_NEAR(r.loss, one.loss, 1e-6);
    EXPECT_EQ(r.examples, one.examples);
    EXPECT_DOUBLE_EQ(r.metrics.at("bleu"), one.metrics.at("bleu"));
  }
}

TEST(EvaluateTranslation, NoTestPairsMeansNoBleu) {
  EvalSets s = make_eval_sets();
  s.test.clear();
  const dtlab::train::EvalResult r = dtlab::lm::evaluate_translation(s.inputs(load_small_model()), nullptr);
  EXPECT_EQ(r.metrics.count("bleu"), 0u);
  EXPECT_EQ(r.metrics.count("perplexity"), 1u);
}

// ---------------------------------------------------------------------------------------------
// The gpt2-tiny fixture

TEST(Gpt2Fixture, TokenizerAndModelAgreeAndFollowTheSeed) {
  const std::vector<TranslationPair> train = dtlab::data::read_translation_split(data_dir(), "train");
  const fs::path a = dtlab::test::fresh_temp_dir("lm-gpt2-a"), b = dtlab::test::fresh_temp_dir("lm-gpt2-b"),
                 c = dtlab::test::fresh_temp_dir("lm-gpt2-c");
  dtlab::tooling::write_gpt2_fixture(a, train, small_gpt2(0));
  dtlab::tooling::write_gpt2_fixture(b, train, small_gpt2(0));
  dtlab::tooling::write_gpt2_fixture(c, train, small_gpt2(1));
  for (const char* file : {"vocab.json", "merges.txt", "tokenizer_config.json", "config.json", "model.safetensors"}) {
    EXPECT_EQ(dtlab::io::read_file(a / file), dtlab::io::read_file(b / file)) << file;
  }
  EXPECT_EQ(dtlab::io::read_file(a / "vocab.json"), dtlab::io::read_file(c / "vocab.json"));
  EXPECT_NE(dtlab::io::read_file(a / "model.safetensors"), dtlab::io::read_file(c / "model.safetensors"));

  const Gpt2Tokenizer tokenizer = Gpt2Tokenizer::from_pretrained(a);
  const LmTokenIds ids = dtlab::lm::lm_token_ids(tokenizer, a.string());
  EXPECT_EQ(ids.eos_source, 0);
  EXPECT_EQ(ids.eos_target, 1);
  EXPECT_EQ(ids.pad, 2);
  dtlab::model::LoadReport report;
  const Gpt2LMHeadModel model = dtlab::model::gpt2_from_pretrained(a, {}, &report);
  EXPECT_TRUE(report.missing_keys.empty());
  EXPECT_EQ(model->config().vocab_size, tokenizer.vocab_size());
  EXPECT_EQ(model->config().eos_token_id, ids.eos_target);
  EXPECT_EQ(model->config().pad_token_id, ids.pad);
  // The BPE learnt the fixture's words: a sentence takes far fewer tokens than bytes.
  const std::string sentence = train.front().de + " " + train.front().en;
  EXPECT_LT(tokenizer.encode(sentence).size() * 3, sentence.size()) << sentence;
}

TEST(Gpt2Fixture, DtlabFixturesWritesGpt2TinyFromItsTrainingPairs) {
  const fs::path out = dtlab::test::fresh_temp_dir("lm-fixtures-bin");
  const dtlab::ProcessResult r = dtlab::run_process(
      {DTLAB_PROGRAM("dtlab-fixtures"), "--out", out.string(), "--train_examples", "8", "--dev_examples", "4",
       "--translation_sizes", "60", "10", "10"},
      120);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path expected = dtlab::test::fresh_temp_dir("lm-fixtures-lib");
  dtlab::tooling::write_gpt2_fixture(expected, dtlab::data::read_translation_split(out / "translation", "train"), {});
  for (const char* file : {"vocab.json", "merges.txt", "config.json", "model.safetensors"}) {
    EXPECT_EQ(dtlab::io::read_file(out / "gpt2-tiny" / file), dtlab::io::read_file(expected / file)) << file;
  }
  const dtlab::model::Gpt2Config config = dtlab::model::Gpt2Config::from_file(out / "gpt2-tiny" / "config.json");
  EXPECT_EQ(config.vocab_size, Gpt2Tokenizer::from_pretrained(out / "gpt2-tiny").vocab_size());
  EXPECT_EQ(config.n_embd, 128);
}

// ---------------------------------------------------------------------------------------------
// dtlab-gpt2 end to end

TEST(DtlabGpt2, TrainsRecordsAndSavesAFolderThatReloads) {
  const fs::path out = dtlab::test::fresh_temp_dir("lm-run");
  const dtlab::ProcessResult r = dtlab::run_process(
      {DTLAB_PROGRAM("dtlab-gpt2"), "--model_name_or_path", model_dir().string(), "--data_dir", data_dir().string(),
       "--output_dir", out.string(), "--overwrite_output_dir", "--num_epochs", "2", "--batch_size", "16",
       "--learning_rate", "3e-3", "--max_length", "96", "--max_new_tokens", "16", "--threads", "1",
       "--samples", "2"},
      120);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("sample 2: source"), std::string::npos) << r.output;

  const nlohmann::json results = dtlab::io::read_json_file(out / "results.json");
  EXPECT_EQ(results.at("exercise"), "gpt2");
  EXPECT_EQ(results.at("config").at("per_rank_train_batch_size"), 16);
  const nlohmann::json& iterations = results.at("iterations");
  ASSERT_EQ(iterations.size(), 2u * (kTrain / 16));
  // Each epoch reads every training row once: its iterations' tokens add up to the rows' real tokens.
  const Gpt2Tokenizer fixture_tokenizer = Gpt2Tokenizer::from_pretrained(model_dir());
  const LmExamples train = dtlab::lm::encode_pairs(dtlab::data::read_translation_split(data_dir(), "train"),
                                                   fixture_tokenizer,
                                                   dtlab::lm::lm_token_ids(fixture_tokenizer, "fixture"), 96);
  int64_t epoch_tokens = 0;
  for (size_t i = 0; i < kTrain / 16; ++i) epoch_tokens += iterations[i].at("tokens").get<int64_t>();
  EXPECT_EQ(epoch_tokens, train.real_tokens.sum().item<int64_t>());
  // The loss falls: the last five steps against the first.
  double last = 0;
  for (size_t i = iterations.size() - 5; i < iterations.size(); ++i) last += iterations[i].at("loss").get<double>() / 5;
  EXPECT_LT(last, iterations[0].at("loss").get<double>() - 1.0);

  const nlohmann::json& epochs = results.at("epochs");
  ASSERT_EQ(epochs.size(), 2u);
  for (const nlohmann::json& e : epochs) {
    EXPECT_EQ(e.at("eval_examples"), kValidation);
    EXPECT_NEAR(e.at("eval_perplexity").get<double>(), std::exp(e.at("eval_loss").get<double>()), 1e-9);
    EXPECT_GE(e.at("eval_bleu").get<double>(), 0.0);
    EXPECT_LE(e.at("eval_bleu").get<double>(), 100.0);
  }
  EXPECT_LT(epochs[1].at("eval_loss").get<double>(), epochs[0].at("eval_loss").get<double>());

  // The folder reloads, and the reloaded model is the trained one: its validation loss is the
  // last epoch's.
  const Gpt2Tokenizer tokenizer = Gpt2Tokenizer::from_pretrained(out);
  EXPECT_EQ(tokenizer.vocab_size(), fixture_tokenizer.vocab_size());
  const LmTokenIds ids = dtlab::lm::lm_token_ids(tokenizer, out.string());
  Gpt2LMHeadModel model = dtlab::model::gpt2_from_pretrained(out);
  const LmExamples validation = dtlab::lm::encode_pairs(
      dtlab::data::read_translation_split(data_dir(), "validation"), tokenizer, ids, 96);
  std::vector<int64_t> rows(kValidation);
  for (int64_t i = 0; i < kValidation; ++i) rows[i] = i;
  const dtlab::lm::TokenLoss loss = dtlab::lm::validation_loss(model, validation, rows, 64);
  EXPECT_NEAR(loss.sum / loss.tokens, epochs[1].at("eval_loss").get<double>(), 1e-5);
}

TEST(DtlabGpt2, RefusesAnOutputDirThatIsNotEmpty) {
  const fs::path out = dtlab::test::fresh_temp_dir("lm-full-out");
  dtlab::io::write_file_atomically(out / "keep.txt", "x");
  const dtlab::ProcessResult r = dtlab::run_process(
      {DTLAB_PROGRAM("dtlab-gpt2"), "--model_name_or_path", model_dir().string(), "--data_dir", data_dir().string(),
       "--output_dir", out.string()},
      60);
  EXPECT_EQ(r.exit_code, dtlab::kExitUsage) << r.output;
  EXPECT_NE(r.output.find("use --overwrite_output_dir"), std::string::npos) << r.output;
}

TEST(DtlabGpt2, AFlagErrorIsOneLineNamingTheFlag) {
  const dtlab::ProcessResult r = dtlab::run_process(
      {DTLAB_PROGRAM("dtlab-gpt2"), "--model_name_or_path", model_dir().string(), "--data_dir", data_dir().string(),
       "--output_dir", "unused", "--max_length", "1"},
      60);
  EXPECT_EQ(r.exit_code, dtlab::kExitUsage) << r.output;
  EXPECT_NE(r.output.find("error: --max_length must be at least 2"), std::string::npos) << r.output;
}

}  // namespace lm_test
