// The checks of the mesh exercise: the layout asked as a function about meshes too large to run
// here; step 1's gradient of every rank's slices and 20 losses at data 2 x pipeline 2 x tensor 2
// (8 ranks) and 20 losses at data 1 x pipeline 3 x tensor 2 (6 ranks, a middle stage with no tied
// copy) against the kit's single-process run; each send's peer, measured from the kit's log
// (Note [The sends measured] in mesh/mesh_trainer.h); and the data group's operations and bytes
// (Note [The data group's traffic]).
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
constexpr int kMicroBatches = 2;

struct Mesh {
  int data, pipeline, tensor;
  int world() const { return data * pipeline * tensor; }
  std::string label() const {
    return fmt::format("data {} x pipeline {} x tensor {} ({} ranks)", data, pipeline, tensor, world());
  }
};

constexpr Mesh kEven = {2, 2, 2};
constexpr Mesh kOdd = {1, 3, 2};

// The single-process flags of pp's and tp's checks (checks_tp.cpp): the same ids, the same runs.
std::vector<std::string> reference_flags(int steps) {
  std::vector<std::string> flags = lm_equivalence_flags(steps);
  flags.insert(flags.end(), {"--batch_size", std::to_string(kBatch)});
  return flags;
}

RunRequest mesh_request(const std::string& e, const Mesh& m, int steps) {
  std::vector<std::string> flags = lm_equivalence_flags(steps);
  flags.insert(flags.end(), {"--global_batch_size", std::to_string(kBatch), "--stages", std::to_string(m.pipeline),
                             "--tp", std::to_string(m.tensor), "--micro_batches", std::to_string(kMicroBatches)});
  const std::string purpose = steps == 1 ? "gradients" : "losses";
  return {fmt::format("{}-{}-d{}p{}t{}", e, purpose, m.data, m.pipeline, m.tensor), e, "mesh-" + purpose, m.world(),
          flags, steps == 1};
}

// The "mesh" section of the 20-step losses run at `m` (the sends and traffic checks read it), and
// who it is; nullptr and the verdict when the run failed or wrote none.
const nlohmann::json* losses_section(Runner& runner, const std::string& e, const Mesh& m, std::string* who,
                                     Verdict* failure) {
  const Run& run = runner.run(mesh_request(e, m, kLossSteps));
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
  const Run& run = runner.run(mesh_request(e, m, kLossSteps));
  if (run.failure) return *run.failure;
  return losses_match(run, *ref, kLossSteps, fmt::format("{} at {}", e, m.label()),
                      "Step 1 already differs, before any update: the forward is not one process's. The pp and tp "
                      "parts are yours from those exercises (their checks say where); is the tied embedding's "
                      "gradient summed with the same tensor rank of the other end?",
                      "Step 1 agrees, so an update differs. The clip (max norm 0.5 here) scales every gradient by "
                      "the whole model's norm: does whole_model_gradient_norm count each parameter once (a replicated "
                      "one on one tensor rank only, the tied embedding on one end only), sum over the world and "
                      "divide by the replicas, which all add the same? And is average_over_data over the data group?");
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

// Note [The data group's traffic] (mesh/mesh_trainer.h): one all-reduce of the rank's gradients
// a step, exactly its parameter bytes (float32). Counted, not only weighed: an all-reduce per
// gradient moves the same bytes and trains the same numbers.
Verdict traffic(Runner& runner, const std::string& e) {
  const Mesh m = kEven;
  Verdict failure;
  std::string who;
  const nlohmann::json* s = losses_section(runner, e, m, &who, &failure);
  if (!s) return failure;
  const nlohmann::json operations = s->value("data_operations_per_step", nlohmann::json::array());
  const nlohmann::json bytes = s->value("data_bytes_per_step", nlohmann::json::array());
  const nlohmann::json held = s->value("parameter_bytes", nlohmann::json::array());
  if (static_cast<int>(operations.size()) != m.world() || static_cast<int>(bytes.size()) != m.world() ||
      static_cast<int>(held.size()) != m.world()) {
    return {Status::kError, who + ": results.json's mesh section has no data traffic of every rank"};
  }
  for (int r = 0; r < m.world(); ++r) {
    const double ops = operations[static_cast<size_t>(r)].get<double>(), sent = bytes[static_cast<size_t>(r)].get<double>();
    const auto want = held[static_cast<size_t>(r)].get<int64_t>();
    if (ops != 1) {
      return {Status::kWrongNumber,
              fmt::format("{}: rank {}'s average_over_data ran {:g} operations a step on its data group, not 1. One "
                          "all-reduce of every gradient (dist::all_reduce_tensors) carries the same bytes; every "
                          "operation more pays the link's latency once more, and on a cluster that is what an "
                          "unbucketed average costs",
                          who, r, ops)};
    }
    if (sent != static_cast<double>(want)) {
      return {Status::kWrongNumber,
              fmt::format("{}: rank {}'s data group carried {:.0f} bytes a step, not its {} bytes of gradients (the "
                          "float32 slices it holds): {:.2f} times them. Is each gradient all-reduced once, in its own "
                          "type?",
                          who, r, sent, want, sent / static_cast<double>(want))};
    }
  }
  return {Status::kPassed,
          fmt::format("{}: every rank's data group carried one all-reduce a step of exactly its gradients' bytes "
                      "({:.3f} MB on the first stage's ranks, {:.3f} MB on the last's)",
                      who, 1e-6 * held[0].get<double>(), 1e-6 * held[static_cast<size_t>(m.world() - 1)].get<double>())};
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
      {e, "sends", "each activation, gradient and tied-embedding message went to the same replica and tensor rank "
                   "of the stage it was due at, counted from the kit's log", 3, [e](Runner& r) { return c::sends(r, e); }},
      {e, "traffic", "each rank's data group carries one all-reduce a step of exactly its gradients' bytes, counted "
                     "from the kit's log", 2, [e](Runner& r) { return c::traffic(r, e); }},
  };
}

}  // namespace dtlab::grader
