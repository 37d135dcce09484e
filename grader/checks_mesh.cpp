// The checks of the mesh exercise: the layout asked as a function about meshes too large to run
// here; step 1's gradient of every rank's slices and 20 losses at data 2 x pipeline 2 x tensor 2
// (8 ranks), 20 losses at data 1 x pipeline 3 x tensor 2 (6 ranks, a middle stage with no tied
// copy) and 20 with ZeRO-1 at 2 x 2 x 2 (Note [ZeRO-1 on the mesh]) against the kit's
// single-process run; each send's peer, measured from the kit's log (Note [The sends measured] in
// mesh/mesh_trainer.h); every group's operations and bytes a step, and each rank's parameters and
// stored boundary activations, against what GPT-2's shape predicts (Note [Each group's bytes]).
//
// Note [What the mesh's numbers cannot show]: every tensor rank of a stage holds the whole
// boundary activation, so a stage that sends to the wrong tensor rank of the next (tensor rank 0
// to 1 and 1 to 0) trains the same numbers, and so does a layout whose first axis turns fastest:
// both are right in every loss and wrong in the lesson (the wrong tensor rank is a message across
// hosts; a tensor group spread over hosts runs its every all-reduce over the slow link). Only the
// layout probe and the measured sends see them, and the numbers checks never blame them.
//
// The runs read the data as tp's and pp's do (each replica a part of every global batch of 16, a
// replica's ranks the same rows), so they compare with the same single-process runs as those
// checks, and one grading of tp and mesh runs those once.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <torch/types.h>

#include "checks.h"
#include "compare.h"
#include "dtlab/mesh/layout.h"
#include "dtlab/model/checkpoint.h"
#include "placement.h"

namespace dtlab::grader {
namespace mesh_check {

using mesh::Axis;
using mesh::MeshLayout;
using mesh::MeshShape;

constexpr int kBatch = 16;  // pp's and tp's: one reference run serves all three
constexpr int kLossSteps = 20;
// Note [Each group's bytes]: per-step averages of whole bytes over the run's steps (20, or 3 when
// no losses are compared: losses_run_steps) compared with the prediction's arithmetic in another
// order, so equal up to rounding; the smallest mistake, one float more in one step, is 0.2 bytes a
// step over 20 steps (1.3 over 3).
constexpr double kByteSlack = 0.01;

struct Mesh {
  int data, pipeline, tensor;
  int micro_batches;  // more than the stages where 1F1B's bound must show (the memory check)
  bool zero1 = false;  // --zero_stage 1: ZeRO-1 over the data group (Note [ZeRO-1 on the mesh])
  // The check that compares this mesh's losses: its run trains 20 steps only where that check is
  // graded (losses_run_steps).
  const char* losses_check = "losses";
  int world() const { return data * pipeline * tensor; }
  std::string label() const {
    return fmt::format("data {} x pipeline {} x tensor {} ({} ranks){}", data, pipeline, tensor, world(),
                       zero1 ? " with ZeRO-1" : "");
  }
};

constexpr Mesh kEven = {2, 2, 2, 2};
// 4 micro-batches on 3 stages: 1F1B stores 3, 2 and 1 of them, GPipe (or a warm-up too long) more.
constexpr Mesh kOdd = {1, 3, 2, 4, false, "losses-odd"};
// The even mesh with the optimiser's state sharded over its data group of 2 by the student's zero.
constexpr Mesh kZero1 = {2, 2, 2, 2, true, "losses-zero1"};

// The single-process flags of pp's and tp's checks (checks_tp.cpp): the same ids, the same runs.
std::vector<std::string> reference_flags(int steps) {
  std::vector<std::string> flags = lm_equivalence_flags(steps);
  flags.insert(flags.end(), {"--batch_size", std::to_string(kBatch)});
  return flags;
}

RunRequest mesh_request(const std::string& e, const Mesh& m, int steps) {
  std::vector<std::string> flags = lm_equivalence_flags(steps);
  flags.insert(flags.end(), {"--global_batch_size", std::to_string(kBatch), "--stages", std::to_string(m.pipeline),
                             "--tp", std::to_string(m.tensor), "--micro_batches", std::to_string(m.micro_batches),
                             "--schedule", "1f1b"});
  if (m.zero1) flags.insert(flags.end(), {"--zero_stage", "1"});
  const std::string purpose = steps == 1 ? "gradients" : "losses";
  return {fmt::format("{}-{}-d{}p{}t{}{}", e, purpose, m.data, m.pipeline, m.tensor, m.zero1 ? "-zero1" : ""), e,
          "mesh-" + purpose, m.world(), flags, steps == 1};
}

// The steps of the losses run at `m`: 20 where this grading compares its losses, else the few the
// sends, traffic and memory checks need (Note [A run as long as its checks], shared_run_steps).
int losses_run_steps(const Runner& runner, const Mesh& m) {
  return shared_run_steps(runner, {m.losses_check}, kLossSteps);
}

// The "mesh" section of the losses run at `m` (the sends and traffic checks read it), and
// who it is; nullptr and the verdict when the run failed or wrote none.
const nlohmann::json* losses_section(Runner& runner, const std::string& e, const Mesh& m, std::string* who,
                                     Verdict* failure) {
  const Run& run = runner.run(mesh_request(e, m, losses_run_steps(runner, m)));
  *who = fmt::format("{} at {}", e, m.label());
  if (run.failure) {
    *failure = *run.failure;
    return nullptr;
  }
  if (run.results.is_object() && run.results.contains("mesh") && run.results["mesh"].is_object()) {
    return &run.results["mesh"];
  }
  *failure = {Status::kError, *who + ": results.json has no \"mesh\" section (the kit writes it at the end of the "
                                     "run: did the run end?)"};
  return nullptr;
}

// ---- the layout ----

// The meshes the probe asks about: Megatron's 3 x 2 x 4 (24 ranks, too many to run here), a cube,
// and four axes with a size-1 axis among them.
const std::vector<std::vector<int>> kProbeSizes = {{3, 2, 4}, {2, 2, 2}, {2, 1, 3, 2}};

std::string brackets(const nlohmann::json& v) { return v.dump(); }

Verdict layout(Runner& runner, const std::string& e) {
  std::string summary;
  for (const std::vector<int>& sizes : kProbeSizes) {
    const std::string text = fmt::format("{}", fmt::join(sizes, ","));
    const Run& run = runner.run({fmt::format("{}-probe-layout-{}", e, fmt::join(sizes, "x")), e, "mesh-probe", 1,
                                 {"--probe", "layout", "--mesh_sizes", text}, false});
    if (run.failure) return *run.failure;
    const std::string who = fmt::format("{} --probe layout --mesh_sizes {}", e, text);
    if (!run.results.is_object() || !run.results.contains("result")) {
      return {Status::kError, who + ": results.json holds no probe result (did the probe run?)"};
    }
    const nlohmann::json& r = run.results["result"];
    std::vector<Axis> axes;
    for (size_t i = 0; i < sizes.size(); ++i) axes.push_back({fmt::format("axis {}", i), sizes[i]});
    const MeshLayout kit{MeshShape(axes)};
    const int world = kit.shape().world();
    if (!r.contains("coordinates") || static_cast<int>(r["coordinates"].size()) != world ||
        !r.contains("groups") || static_cast<int>(r["groups"].size()) != world) {
      return {Status::kError, who + ": the probe's result does not hold one answer per rank"};
    }
    for (int rank = 0; rank < world; ++rank) {
      const nlohmann::json& got = r["coordinates"].at(static_cast<size_t>(rank));
      const nlohmann::json want = kit.coordinates(rank);
      if (got.is_object()) {
        return {Status::kWrongNumber, fmt::format("{}: coordinates_of({}) threw: {}", who, rank,
                                                  got.value("error", std::string("?")))};
      }
      if (got != want) {
        // The classic mistake named: the first axis turning fastest puts rank 1 on it.
        const bool first_fastest = rank == 1 && got.size() == sizes.size() && !got.empty() && got[0] == 1;
        return {Status::kWrongNumber,
                fmt::format("{}: coordinates_of({}) is {}, not {}. {}", who, rank, brackets(got), brackets(want),
                            first_fastest
                                ? "The FIRST axis turns fastest here: the last must (an odometer: rank 1 is one step "
                                  "on the last axis). With Megatron's order (pipeline, data, tensor) that puts a "
                                  "tensor group's ranks next to each other, on one host, where its every-layer "
                                  "all-reduces need the fast link; the first axis fastest spreads them over hosts."
                                : "The sizes are slowest first: peel the rank's digits off from the last axis (the "
                                  "fastest) to the first, coordinate = rest % size, rest = rest / size.")};
      }
    }
    // The groups once every rank's coordinates are right: a group_of wrong with them is its own.
    for (int rank = 0; rank < world; ++rank) {
      const nlohmann::json want = kit.coordinates(rank);
      for (size_t axis = 0; axis < sizes.size(); ++axis) {
        const nlohmann::json& group = r["groups"].at(static_cast<size_t>(rank)).at(axis);
        const nlohmann::json expected = kit.group(rank, axes[axis].name);
        if (group.is_object()) {
          return {Status::kWrongNumber, fmt::format("{}: group_of({}, {}) threw: {}", who, rank, axis,
                                                    group.value("error", std::string("?")))};
        }
        if (group != expected) {
          return {Status::kWrongNumber,
                  fmt::format("{}: group_of({}, {}) is {}, not {}: the ranks whose coordinates equal rank {}'s ({}) on "
                              "every other axis, in the order of their coordinate on axis {} (its stride is the "
                              "product of the sizes after it)",
                              who, rank, axis, brackets(group), brackets(expected), rank, brackets(want), axis)};
        }
      }
    }
    if (!r.value("rank_outside_throws", false) || !r.value("axis_outside_throws", false)) {
      return {Status::kWrongNumber,
              fmt::format("{}: {} returns where the contract says it throws a dtlab::Error", who,
                          !r.value("rank_outside_throws", false) ? fmt::format("coordinates_of({}) (a rank outside the "
                                                                               "mesh)", world)
                                                                 : fmt::format("group_of(0, {}) (an axis outside the "
                                                                               "sizes)", sizes.size()))};
    }
    summary += fmt::format("\n  {}: {} ranks, each rank's coordinates and its group on each axis", text, world);
  }
  return {Status::kPassed, fmt::format("{}: the layout is the odometer's, the last axis fastest:{}", e, summary)};
}

// ---- the numbers ----

// The hint for a gradient that differs, from where it differs: the tied embedding alone, or every
// parameter.
std::string gradient_hint(const std::string& worst_name, bool only_tied) {
  if (only_tied || worst_name == "transformer.wte.weight") {
    return "Only the tied embedding (wte, also the head) differs: its two copies, on the first and the last stage, "
           "must each get the sum of both uses' gradients. tied_embedding_peer must be the rank at the other end that "
           "holds the SAME slice: the same replica and the SAME tensor rank (another tensor rank holds other rows).";
  }
  return "Is average_over_data a mean over the data group only (mesh.group(kData): the replicas that hold the same "
         "slices), divided by its size? A mean over the pipeline or tensor group adds gradients of different "
         "parameters, or of different slices.";
}

Verdict gradients(Runner& runner, const std::string& e) {
  Verdict failure;
  const Run* ref = kit_run(runner, {"reference-gpt2-pp-step1", kReferenceGpt2, "pp-reference", 1, reference_flags(1),
                                    true}, &failure);
  if (!ref) return failure;
  const io::TensorMap full = load_dumps(ref->dump_dir, 1).at(0);
  const Mesh m = kEven;
  const Run& run = runner.run(mesh_request(e, m, 1));
  if (run.failure) return *run.failure;
  const std::string who = fmt::format("{} at {}", e, m.label());
  const std::vector<io::TensorMap> dumps = load_dumps(run.dump_dir, m.world());
  double worst = 0, scale = 0;
  std::string worst_name;
  int worst_rank = 0;
  std::map<std::string, int> holders;  // how many ranks hold a part of each parameter
  std::map<std::string, double> differs;
  for (int rank = 0; rank < m.world(); ++rank) {
    const io::TensorMap& mine = dumps.at(static_cast<size_t>(rank));
    std::map<std::string, Placement> placed;
    for (const bool biases : {false, true}) {  // a split bias lies where its weight's columns do
      for (const auto& [key, held] : mine) {
        if (key.rfind("param.", 0) != 0 || model::key_ends_with(key, ".bias") != biases) continue;
        const std::string name = key.substr(6);
        const auto whole = full.find(key);
        const auto grad = mine.find("grad." + name);
        if (whole == full.end() || grad == mine.end()) {
          return {Status::kError, fmt::format("{}: rank {}'s dump holds {} {}", who, rank, name,
                                              whole == full.end() ? "which one process's model has not"
                                                                  : "without its gradient")};
        }
        std::string why;
        const std::optional<Placement> p = place_parameter(name, held, whole->second, placed, &why);
        if (!p) {
          return {Status::kWrongNumber,
                  fmt::format("{}: rank {}'s {} [{}] is no slice of one process's [{}] at step 1 ({}): the tp part "
                              "of your answer splits it wrongly (the tp exercise's checks say where)",
                              who, rank, name, fmt::join(held.sizes(), ", "), fmt::join(whole->second.sizes(), ", "),
                              why)};
        }
        placed[name] = *p;
        ++holders[name];
        const torch::Tensor want = paired_part_of_whole(full.at("grad." + name).to(torch::kFloat64), *p);
        const torch::Tensor got = real_part_of_mine(grad->second.to(torch::kFloat64), *p);
        scale = std::max(scale, full.at("grad." + name).abs().max().item<double>());
        const double diff = want.numel() > 0 ? (got - want).abs().max().item<double>() : 0.0;
        differs[name] = std::max(differs[name], diff);
        if (diff > worst) worst = diff, worst_name = name, worst_rank = rank;
      }
    }
  }
  for (const auto& [key, whole] : full) {
    if (key.rfind("param.", 0) == 0 && !holders.count(key.substr(6))) {
      return {Status::kError, fmt::format("{}: no rank's dump holds {}", who, key.substr(6))};
    }
  }
  const double relative = scale > 0 ? worst / scale : worst;
  if (relative > kGradientTolerance) {
    bool only_tied = true;
    for (const auto& [name, diff] : differs) {
      if (name != "transformer.wte.weight" && (scale > 0 ? diff / scale : diff) > kGradientTolerance) only_tied = false;
    }
    return {Status::kWrongNumber,
            fmt::format("{}: step 1's gradient of rank {}'s slice of {} differs from one process's gradient at the "
                        "same places by {:.3g} (relative {:.2g} > {:g}; after the data average, before the clip). {}",
                        who, worst_rank, worst_name, worst, relative, kGradientTolerance,
                        gradient_hint(worst_name, only_tied))};
  }
  return {Status::kPassed,
          fmt::format("{}: step 1's gradient of every rank's slices equals one process's at the same places (largest "
                      "difference {:.2g}, relative {:.2g}), the tied embedding's on both ends",
                      who, worst, relative)};
}

Verdict losses(Runner& runner, const std::string& e, const Mesh& m) {
  Verdict failure;
  const Run* ref = kit_run(runner, {"reference-gpt2-pipeline", kReferenceGpt2, "pipeline-reference", 1,
                                    reference_flags(kLossSteps), false}, &failure);
  if (!ref) return failure;
  const Run& run = runner.run(mesh_request(e, m, losses_run_steps(runner, m)));
  if (run.failure) return *run.failure;
  const std::string later =
      std::string("Step 1 agrees, so an update differs. The clip (max norm 0.5 here) scales every gradient by the "
                  "whole model's norm: does whole_model_gradient_norm count each parameter once (a replicated one on "
                  "one tensor rank only, the tied embedding on one end only), sum over the world and divide by the "
                  "replicas, which all add the same? And is average_over_data over the data group?") +
      (m.zero1 ? " With ZeRO-1 each rank of a data group holds a different piece of the averaged gradient (your "
                 "tasks/zero's reduce-scatter), so the world's sum of squares is one replica's already: does "
                 "whole_model_gradient_norm divide by the data size only when sharded_over_data is false? A ZeRO-1 "
                 "that fails zero's own checks fails here too."
               : "");
  return losses_match(run, *ref, kLossSteps, fmt::format("{} at {}", e, m.label()),
                      "Step 1 already differs, before any update: the forward is not one process's. The pp and tp "
                      "parts are yours from those exercises (their checks say where); is the tied embedding's "
                      "gradient summed with the same tensor rank of the other end?",
                      later);
}

// Every rank's entry of a per-rank array of the mesh section, or nullopt when it has none.
std::optional<std::vector<double>> per_rank(const nlohmann::json& s, const std::string& key, int world) {
  if (!s.contains(key) || !s[key].is_array() || static_cast<int>(s[key].size()) != world) return std::nullopt;
  std::vector<double> out;
  for (const auto& v : s[key]) {
    if (!v.is_number()) return std::nullopt;
    out.push_back(v.get<double>());
  }
  return out;
}

// The per-rank arrays `keys` of the mesh section into `at`; the verdict naming the first missing.
std::optional<Verdict> per_rank_all(const nlohmann::json& s, std::initializer_list<const char*> keys, int world,
                                    const std::string& who, std::map<std::string, std::vector<double>>* at) {
  for (const char* key : keys) {
    std::optional<std::vector<double>> v = per_rank(s, key, world);
    if (!v) return Verdict{Status::kError, fmt::format("{}: results.json's mesh section has no {} of every rank", who, key)};
    (*at)[key] = std::move(*v);
  }
  return std::nullopt;
}

// ZeRO-1's losses, and what it is for, told: AdamW's state on each rank (the kit's optimiser of the
// rank's piece, measured) against the two float32 moments of the whole slices a replica without
// ZeRO-1 keeps.
Verdict losses_zero1(Runner& runner, const std::string& e) {
  Verdict v = losses(runner, e, kZero1);
  if (v.status != Status::kPassed) return v;
  const Run& run = runner.run(mesh_request(e, kZero1, losses_run_steps(runner, kZero1)));
  const nlohmann::json* s = run.results.contains("mesh") ? &run.results["mesh"] : nullptr;
  const std::optional<std::vector<double>> state =
      s ? per_rank(*s, "zero1_optimizer_state_bytes", kZero1.world()) : std::nullopt;
  const std::optional<std::vector<double>> held = s ? per_rank(*s, "parameter_bytes", kZero1.world()) : std::nullopt;
  if (!state || !held) {
    return {Status::kError, fmt::format("{} at {}: results.json's mesh section has no AdamW state of every rank", e,
                                        kZero1.label())};
  }
  // What the process held beside it (Note [Memory a rank holds]): rank 0's resident peak in the steps.
  const nlohmann::json& rss = run.results.value("memory", nlohmann::json::object()).value("steps_peak_rss_bytes",
                                                                                          nlohmann::json::array());
  v.message += fmt::format("; AdamW's state on rank 0 {:.3f} MB, where the whole slices' two moments take {:.3f} MB{}",
                           1e-6 * state->front(), 1e-6 * 2 * held->front(),
                           !rss.empty() && rss[0].is_number()
                               ? fmt::format(" (rank 0's resident peak in the steps {:.1f} MiB)",
                                             rss[0].get<double>() / (1 << 20))
                               : std::string());
  return v;
}

// ---- the sends ----

// The rank at (data, pipeline, tensor) among the run's coordinates, or -1.
int rank_at(const nlohmann::json& coordinates, int data, int stage, int tensor) {
  for (size_t r = 0; r < coordinates.size(); ++r) {
    if (coordinates[r] == nlohmann::json{data, stage, tensor}) return static_cast<int>(r);
  }
  return -1;
}

std::string place_text(const nlohmann::json& c) {
  return fmt::format("replica {}, stage {}, tensor rank {}", c[0].get<int>(), c[1].get<int>(), c[2].get<int>());
}

// Where each rank's sends of `kind` must go, by the coordinates the run's layout gave (a wrong
// layout is the layout check's, Note [Fair evidence]): the same replica and tensor rank, the stage
// `to_stage` gives (or none).
std::optional<Verdict> sends_go(const nlohmann::json& sends, const nlohmann::json& coordinates, const std::string& kind,
                                const std::function<int(int stage)>& to_stage, const std::string& who,
                                const std::string& lesson) {
  const nlohmann::json& table = sends.at(kind);
  for (size_t from = 0; from < table.size(); ++from) {
    const nlohmann::json& c = coordinates.at(from);
    const int stage = to_stage(c[1].get<int>());
    const int due = stage < 0 ? -1 : rank_at(coordinates, c[0].get<int>(), stage, c[2].get<int>());
    for (size_t to = 0; to < table[from].size(); ++to) {
      const auto count = table[from][to].get<int64_t>();
      if (count > 0 && static_cast<int>(to) != due) {
        return Verdict{Status::kWrongNumber,
                       fmt::format("{}: rank {} ({}) sent {} {} message{} to rank {} ({}){}. {}", who, from,
                                   place_text(c), count, kind, count == 1 ? "" : "s", to, place_text(coordinates.at(to)),
                                   due < 0 ? ", where it sends none"
                                           : fmt::format(", where rank {} ({}) was due", due,
                                                         place_text(coordinates.at(static_cast<size_t>(due)))),
                                   lesson)};
      }
    }
    if (due >= 0 && table[from][static_cast<size_t>(due)].get<int64_t>() == 0) {
      return Verdict{Status::kWrongNumber, fmt::format("{}: rank {} ({}) sent no {} message to rank {}, its counterpart "
                                                       "on stage {}", who, from, place_text(c), kind, due, stage)};
    }
  }
  return std::nullopt;
}

Verdict sends(Runner& runner, const std::string& e) {
  std::string summary;
  for (const Mesh& m : {kEven, kOdd}) {
    Verdict failure;
    std::string who;
    const nlohmann::json* s = losses_section(runner, e, m, &who, &failure);
    if (!s) return failure;
    if (!s->contains("sends") || !s->contains("coordinates") ||
        static_cast<int>(s->at("coordinates").size()) != m.world()) {
      return {Status::kError, who + ": results.json's mesh section has no sends or coordinates of every rank"};
    }
    const nlohmann::json& c = s->at("coordinates");
    const int last = m.pipeline - 1;
    const std::string boundary =
        "Every tensor rank of a stage holds the whole boundary tensor, so the numbers come out the same whichever "
        "tensor rank receives it; but the same replica and tensor rank is the one message that stays on its own "
        "path (with Megatron's order, a tensor rank's counterpart on the next stage is the same slot of the next "
        "host). Does stage_neighbours keep this rank's data and tensor coordinates and change only the pipeline's?";
    for (const auto& [kind, to_stage] :
         std::vector<std::pair<std::string, std::function<int(int)>>>{
             {"activation", [&](int p) { return p < last ? p + 1 : -1; }},
             {"gradient", [&](int p) { return p > 0 ? p - 1 : -1; }},
             {"tied embedding gradient", [&](int p) { return last > 0 && p == 0 ? last : last > 0 && p == last ? 0 : -1; }}}) {
      const std::string lesson =
          kind == "tied embedding gradient"
              ? "The tied embedding's two copies of one slice are on the first and the last stage at the same "
                "replica and tensor rank: does tied_embedding_peer keep this rank's data and tensor coordinates?"
              : boundary;
      if (std::optional<Verdict> wrong = sends_go(s->at("sends"), c, kind, to_stage, who, lesson)) return *wrong;
    }
    summary += fmt::format("\n  {}: every activation to the next stage's same replica and tensor rank, every "
                           "gradient to the previous stage's, the tied embedding's between the two ends' same slots",
                           m.label());
  }
  return {Status::kPassed, fmt::format("{}: the sends, counted from the kit's log of every rank:{}", e, summary)};
}

// Note [Each group's bytes] (mesh/mesh_trainer.h): what every group of a rank carries a step,
// predicted from GPT-2's shape and held against the kit's logs (H the width, I the MLP's, V_T =
// ceil(V / T) the vocabulary rows of a tensor rank, N the positions, T the tensor size, P the
// stages, m the micro-batches, BS the replica's positions a step, L_s the blocks of the rank's
// stage; float32, 4 bytes an element):
//   parameters: the first stage wte's V_T x H and wpe's N x H; per block 6H replicated (two
//     LayerNorms, the two row-parallel biases) and (4H^2 + 2HI + 3H + I) / T split; the last stage
//     ln_f's 2H and, unless it is also the first, its own copy of the wte slice;
//   the data group (Note [The data group's traffic]): one all-reduce a step of exactly those bytes.
//     Counted, not only weighed: an all-reduce per gradient moves the same bytes and trains the
//     same numbers;
//   the tensor group (T > 1): per micro-batch 4 L_s all-reduces of activations (a block's two g
//     forward, two f backward), the embedding's g on the first stage, the head's f and the loss's
//     three [B x S] vectors on the last; only all-reduces, of (4 L_s + first + last) x BS x H and
//     3 x BS (last) floats;
//   the pipeline: BS x H floats of activations to the next stage, as many of their gradients to
//     the previous, and the tied slice's V_T x H between the two ends;
//   the norm (the student's whole_model_gradient_norm): a few numbers, at most one collective per
//     axis of the mesh. One all-reduce of each gradient's squared norm trains the same numbers and
//     pays the link's latency as many times as the stage has tensors.
struct Shape {
  int64_t layers = 0, width = 0, inner = 0, vocab = 0, positions = 0;
};

struct RankPrediction {
  int64_t parameter_bytes = 0;
  double tensor_all_reduces = 0, tensor_bytes = 0, sent_bytes = 0;
};

RankPrediction predict(const Shape& g, const std::vector<int>& layer_stages, int stage, int stages, int tensor,
                       int micro_batches, double positions) {
  const int64_t H = g.width, I = g.inner, vocab_rows = (g.vocab + tensor - 1) / tensor;
  const bool first = stage == 0, last = stage == stages - 1;
  int64_t blocks = 0;
  for (int64_t l = 1; l <= g.layers && l < static_cast<int64_t>(layer_stages.size()); ++l) {
    blocks += layer_stages[static_cast<size_t>(l)] == stage ? 1 : 0;
  }
  RankPrediction p;
  int64_t elements = blocks * (6 * H + (4 * H * H + 2 * H * I + 3 * H + I) / tensor);
  if (first) elements += vocab_rows * H + g.positions * H;
  if (last) elements += 2 * H + (first ? 0 : vocab_rows * H);
  p.parameter_bytes = 4 * elements;
  if (tensor > 1) {
    const double activations = 4.0 * double(blocks) + (first ? 1 : 0) + (last ? 1 : 0);
    p.tensor_all_reduces = micro_batches * (activations + (last ? 3 : 0));
    p.tensor_bytes = activations * positions * double(H) * 4 + (last ? 3 * positions * 4 : 0);
  }
  const double boundary = positions * double(H) * 4;
  p.sent_bytes = (last ? 0 : boundary) + (first ? 0 : boundary) +
                 (stages > 1 && (first || last) ? double(vocab_rows * H * 4) : 0);
  return p;
}

// The model's shape, the layers' stages and every rank's stage, from a run's mesh section.
struct Placed {
  Shape shape;
  std::vector<int> layer_stages;
  std::vector<int> stages;  // per rank
};

std::optional<Placed> placed_of(const nlohmann::json& s, const Mesh& m) {
  Placed p;
  p.shape = {s.value("n_layer", int64_t{0}), s.value("n_embd", int64_t{0}), s.value("inner_dim", int64_t{0}),
             s.value("vocab_size", int64_t{0}), s.value("n_positions", int64_t{0})};
  if (!s.contains("layer_stages") || !s.at("layer_stages").is_array()) return std::nullopt;
  for (const auto& v : s.at("layer_stages")) {
    if (!v.is_number_integer()) return std::nullopt;
    p.layer_stages.push_back(v.get<int>());
  }
  const nlohmann::json& coordinates = s.value("coordinates", nlohmann::json());
  if (p.shape.layers <= 0 || p.shape.width <= 0 || static_cast<int64_t>(p.layer_stages.size()) != p.shape.layers + 2 ||
      !coordinates.is_array() || static_cast<int>(coordinates.size()) != m.world()) {
    return std::nullopt;
  }
  for (const auto& c : coordinates) {
    if (!c.is_array() || c.size() != 3 || !c[1].is_number_integer()) return std::nullopt;
    const int stage = c[1].get<int>();
    if (stage < 0 || stage >= m.pipeline) return std::nullopt;
    p.stages.push_back(stage);
  }
  return p;
}

Verdict traffic(Runner& runner, const std::string& e) {
  const Mesh m = kEven;
  Verdict failure;
  std::string who;
  const nlohmann::json* s = losses_section(runner, e, m, &who, &failure);
  if (!s) return failure;
  std::map<std::string, std::vector<double>> at;
  if (std::optional<Verdict> missing =
          per_rank_all(*s, {"data_operations_per_step", "data_bytes_per_step", "tensor_all_reduces_per_step",
                            "tensor_other_operations_per_step", "tensor_bytes_per_step", "norm_operations_per_step",
                            "norm_bytes_per_step", "positions_per_step"},
                       m.world(), who, &at)) {
    return *missing;
  }
  const nlohmann::json& sends = s->value("sends", nlohmann::json::object());
  const std::optional<Placed> placed = placed_of(*s, m);
  if (!placed || !sends.contains("bytes_per_step")) {
    return {Status::kError, who + ": results.json's mesh section has no coordinates, sends or model shape"};
  }
  const Shape& g = placed->shape;
  const std::vector<int>& layer_stages = placed->layer_stages;
  const int micro_batches = m.micro_batches;
  std::string summary;
  for (int r = 0; r < m.world(); ++r) {
    const auto k = static_cast<size_t>(r);
    const int stage = placed->stages[k];
    const double positions = at["positions_per_step"][k];
    const RankPrediction want = predict(g, layer_stages, stage, m.pipeline, m.tensor, micro_batches, positions);
    const std::string rank = fmt::format("{}: rank {} (stage {} of {})", who, r, stage, m.pipeline);
    const double data_ops = at["data_operations_per_step"][k], data_bytes = at["data_bytes_per_step"][k];
    if (data_ops == 0) {
      return {Status::kWrongNumber,
              fmt::format("{}'s average_over_data ran no operation on its data group: the replicas that hold the "
                          "same slices (mesh.group(kData)) never averaged their gradients", rank)};
    }
    if (data_ops != 1) {
      return {Status::kWrongNumber,
              fmt::format("{}'s average_over_data ran {:g} operations a step on its data group, not 1. One "
                          "all-reduce of every gradient (dist::all_reduce_tensors) carries the same bytes; every "
                          "operation more pays the link's latency once more, and on a cluster that is what an "
                          "unbucketed average costs", rank, data_ops)};
    }
    if (std::abs(data_bytes - double(want.parameter_bytes)) > kByteSlack) {
      return {Status::kWrongNumber,
              fmt::format("{}'s data group carried {:.0f} bytes a step, not its {} bytes of gradients (the float32 "
                          "slices it holds): {:.2f} times them. Is each gradient all-reduced once, in its own type?",
                          rank, data_bytes, want.parameter_bytes, data_bytes / double(want.parameter_bytes))};
    }
    const double norm_ops = at["norm_operations_per_step"][k], norm_bytes = at["norm_bytes_per_step"][k];
    if (norm_ops > 3 || norm_bytes > 8 * norm_ops) {
      return {Status::kWrongNumber,
              fmt::format("{}'s whole_model_gradient_norm ran {:g} collectives a step carrying {:.0f} bytes. The norm "
                          "needs one number from each rank: add this rank's squares first, then one all-reduce "
                          "over the world (or one per axis, 3 at most) of that one number. A collective per "
                          "gradient gives the same norm and pays the link's latency as many times as the stage "
                          "has tensors", rank, norm_ops, norm_bytes)};
    }
    const double all_reduces = at["tensor_all_reduces_per_step"][k], others = at["tensor_other_operations_per_step"][k];
    const double tensor_bytes = at["tensor_bytes_per_step"][k];
    if (others != 0 || all_reduces != want.tensor_all_reduces || std::abs(tensor_bytes - want.tensor_bytes) > kByteSlack) {
      return {Status::kWrongNumber,
              fmt::format("{}'s tensor group ran {:g} all-reduces and {:g} other operations a step, {:.0f} bytes, "
                          "where tp's operators need {:g} all-reduces of {:.0f} bytes: per micro-batch two of the "
                          "activations per block each way, the embedding's on the first stage, the head's and the "
                          "loss's three [B x S] vectors on the last. tp's traffic check says which operator moves "
                          "what", rank, all_reduces, others, tensor_bytes, want.tensor_all_reduces, want.tensor_bytes)};
    }
    double sent = 0;
    for (const auto& b : sends.at("bytes_per_step").at(k)) sent += b.get<double>();
    if (std::abs(sent - want.sent_bytes) > kByteSlack) {
      return {Status::kWrongNumber,
              fmt::format("{} sent {:.0f} bytes a step to other stages, not {:.0f}: the replica's [B, S, H] "
                          "activations to the next stage, their gradients to the previous and the tied "
                          "embedding's slice between the ends, each once",
                          rank, sent, want.sent_bytes)};
    }
    if (r == 0 || r == m.world() - 1) {
      summary += fmt::format("\n  rank {} (stage {}): parameters and data all-reduce {:.3f} MB, tensor group {:g} "
                             "all-reduces {:.3f} MB, pipeline sends {:.3f} MB, the norm {:g} of {:.0f} bytes",
                             r, stage, 1e-6 * double(want.parameter_bytes), all_reduces, 1e-6 * tensor_bytes,
                             1e-6 * sent, norm_ops, norm_bytes);
    }
  }
  return {Status::kPassed,
          fmt::format("{}: every rank's groups carried what GPT-2's shape predicts a step, to the byte (Note [Each "
                      "group's bytes]):{}", who, summary)};
}

// Each rank's memory at data 1 x pipeline 3 x tensor 2, 4 micro-batches: its parameters (float32)
// are its stage's slices, to the byte (Note [Each group's bytes]; the kit places them, Note [A rank
// holds its stage's slices]), and the boundary activations it stored for backward at once are
// 1F1B's min(stages - stage, m) (every run here is 1F1B's), never more held (Note [Held, not only stored] in
// pipeline/stage_step.h). The student's own pp schedules and protocol decide the second: a warm-up
// one forward too long trains the same numbers and stores a micro-batch more on every stage.
Verdict memory(Runner& runner, const std::string& e) {
  const Mesh m = kOdd;
  Verdict failure;
  std::string who;
  const nlohmann::json* s = losses_section(runner, e, m, &who, &failure);
  if (!s) return failure;
  const nlohmann::json run_memory =
      runner.run(mesh_request(e, m, losses_run_steps(runner, m))).results.value("memory", nlohmann::json::object());
  const std::optional<Placed> placed = placed_of(*s, m);
  std::map<std::string, std::vector<double>> at;
  if (std::optional<Verdict> missing =
          per_rank_all(*s, {"parameter_bytes", "positions_per_step", "peak_stored_micro_batches",
                            "peak_held_micro_batches", "peak_activation_bytes"},
                       m.world(), who, &at)) {
    return *missing;
  }
  if (!placed) return {Status::kError, who + ": results.json's mesh section has no coordinates or model shape"};
  std::string summary;
  for (int r = 0; r < m.world(); ++r) {
    const auto k = static_cast<size_t>(r);
    const int stage = placed->stages[k];
    const RankPrediction want = predict(placed->shape, placed->layer_stages, stage, m.pipeline, m.tensor,
                                        m.micro_batches, at["positions_per_step"][k]);
    const std::string rank = fmt::format("{}: rank {} (stage {} of {})", who, r, stage, m.pipeline);
    if (at["parameter_bytes"][k] != double(want.parameter_bytes)) {
      return {Status::kError,
              fmt::format("{} holds {:.0f} bytes of parameters, not the {} its stage's slices take: the kit placed "
                          "them (Note [A rank holds its stage's slices])", rank, at["parameter_bytes"][k],
                          want.parameter_bytes)};
    }
    // mesh_request asks for 1F1B.
    const int bound = std::min(m.pipeline - stage, m.micro_batches);
    const double stored = at["peak_stored_micro_batches"][k], held = at["peak_held_micro_batches"][k];
    if (stored != bound) {
      return {Status::kWrongNumber,
              fmt::format("{} stored {:g} micro-batches' activations at once for backward, of {}; 1F1B stores "
                          "min(stages - stage, m): {}. The schedule is your tasks/pp's: its warm-up is stages - "
                          "stage - 1 forwards, then one forward and one backward in turn",
                          rank, stored, m.micro_batches, bound)};
    }
    if (held > bound) {
      return {Status::kWrongNumber,
              fmt::format("{} held the activations of {:g} micro-batches at once, stored or in sends not yet waited "
                          "for; its schedule stores {}. A send keeps its tensor alive until it is waited for: your "
                          "tasks/pp's protocol must wait for each action's sends once the next action's input has "
                          "arrived, not at the end of the step", rank, held, bound)};
    }
    if (r % m.tensor == 0) {
      // Beside the tensors, what the process held (Note [Memory a rank holds]): its resident peak.
      const nlohmann::json& rss = run_memory.value("steps_peak_rss_bytes", nlohmann::json::array());
      summary += fmt::format("\n  stage {}: parameters {:.3f} MB, boundary activations stored at most {:g} and held "
                             "{:g} ({:.3f} MB){}", stage, 1e-6 * double(want.parameter_bytes), stored, held,
                             1e-6 * at["peak_activation_bytes"][k],
                             k < rss.size() && rss[k].is_number()
                                 ? fmt::format("; the rank's resident peak in the steps {:.1f} MiB",
                                               rss[k].get<double>() / (1 << 20))
                                 : std::string());
    }
  }
  return {Status::kPassed, fmt::format("{}: every rank holds its stage's slices and at most its schedule's "
                                       "micro-batches (1F1B):{}", who, summary)};
}

}  // namespace mesh_check

std::vector<CheckSpec> mesh_checks(const std::string& e) {
  namespace c = mesh_check;
  return {
      {e, "layout", "the layout as a function: every rank's coordinates and its group on each axis, at 3 x 2 x 4, "
                    "2 x 2 x 2 and 2 x 1 x 3 x 2", 3, [e](Runner& r) { return c::layout(r, e); }},
      {e, "gradients", "data 2 x pipeline 2 x tensor 2: step 1's gradient of every rank's slices equals one process's "
                       "(8 ranks)", 4, [e](Runner& r) { return c::gradients(r, e); }},
      {e, "losses", "data 2 x pipeline 2 x tensor 2: 20 per-iteration losses equal single-process training within "
                    "1e-5 (8 ranks)", 4, [e](Runner& r) { return c::losses(r, e, c::kEven); }},
      {e, "losses-odd", "data 1 x pipeline 3 x tensor 2: 20 per-iteration losses equal single-process training within "
                        "1e-5 (6 ranks, a middle stage)", 3, [e](Runner& r) { return c::losses(r, e, c::kOdd); }},
      {e, "losses-zero1", "data 2 x pipeline 2 x tensor 2 with --zero_stage 1 (your tasks/zero's ZeRO-1 over each data "
                          "group): 20 per-iteration losses equal single-process training within 1e-5", 3,
       [e](Runner& r) { return c::losses_zero1(r, e); }},
      {e, "sends", "each activation, gradient and tied-embedding message went to the same replica and tensor rank "
                   "of the stage it was due at, counted from the kit's log", 3, [e](Runner& r) { return c::sends(r, e); }},
      {e, "traffic", "each rank's groups carry what GPT-2's shape predicts a step, counted from the kit's log: the "
                     "data group one all-reduce of exactly its gradients' bytes, the tensor group tp's all-reduces, "
                     "the pipeline its boundaries and tied slice, the norm one number per axis at most", 3,
       [e](Runner& r) { return c::traffic(r, e); }},
      {e, "memory", "data 1 x pipeline 3 x tensor 2, 4 micro-batches: each rank holds its stage's slices, to the byte, "
                    "and stores and holds at most its schedule's micro-batches (1F1B: min(stages - stage, m))", 2,
       [e](Runner& r) { return c::memory(r, e); }},
  };
}

}  // namespace dtlab::grader
