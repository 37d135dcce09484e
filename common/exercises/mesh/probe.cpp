// The mesh exercise's grading aid --probe layout, see mesh/mesh_trainer.h: the student's layout
// asked as a function about every rank and axis of one mesh, whatever its size, in one process.
#include <fmt/format.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dtlab/core/error.h"
#include "dtlab/core/main.h"
#include "dtlab/io/json_file.h"
#include "dtlab/lm/options.h"
#include "dtlab/mesh/mesh_trainer.h"
#include "dtlab/tasks/mesh.h"

namespace fs = std::filesystem;

namespace dtlab::mesh {
namespace {

// What one call gave: its value, or the words of what it threw (the grader names them). A TODO
// not done ends the probe as one (core/main.h's exit code), not as an answer.
template <typename F>
nlohmann::json answer(F&& call) {
  try {
    return call();
  } catch (const NotImplemented&) {
    throw;
  } catch (const std::exception& e) {
    return {{"error", e.what()}};
  }
}

nlohmann::json layout_probe(const std::vector<int>& sizes) {
  int world = 1;
  for (const int s : sizes) {
    if (s < 1) throw Error(fmt::format("--mesh_sizes {}: every size at least 1", fmt::join(sizes, ",")));
    world *= s;
  }
  if (sizes.empty() || world > 4096) {
    throw Error(fmt::format("--mesh_sizes {}: 1 to 4096 ranks in all", fmt::join(sizes, ",")));
  }
  nlohmann::json coordinates = nlohmann::json::array(), groups = nlohmann::json::array();
  for (int rank = 0; rank < world; ++rank) {
    coordinates.push_back(answer([&] { return nlohmann::json(coordinates_of(rank, sizes)); }));
    nlohmann::json per_axis = nlohmann::json::array();
    for (int axis = 0; axis < static_cast<int>(sizes.size()); ++axis) {
      per_axis.push_back(answer([&] { return nlohmann::json(group_of(rank, axis, sizes)); }));
    }
    groups.push_back(per_axis);
  }
  // The contract's errors: a rank outside the mesh, an axis outside its sizes.
  const auto throws = [](auto&& call) {
    try {
      call();
      return false;
    } catch (const Error&) {
      return true;
    }
  };
  return {{"sizes", sizes}, {"coordinates", coordinates}, {"groups", groups},
          {"rank_outside_throws", throws([&] { coordinates_of(world, sizes); })},
          {"axis_outside_throws", throws([&] { group_of(0, static_cast<int>(sizes.size()), sizes); })}};
}

}  // namespace

int run_probe(const lm::LmOptions& o) {
  if (o.output_dir.empty()) throw Error("--probe needs --output_dir (it writes OUTPUT_DIR/results.json)");
  if (o.probe != "layout") throw Error("--probe " + o.probe + ": unknown (layout)");
  if (o.mesh_sizes.empty()) throw Error("--probe layout needs --mesh_sizes (e.g. 3,2,4: the mesh's sizes, slowest first)");
  const fs::path out = o.output_dir;
  fs::create_directories(out);
  io::write_json_file(out / "results.json",
                      {{"exercise", "mesh"}, {"probe", o.probe}, {"result", layout_probe(o.mesh_sizes)}});
  fmt::print("probe {}: {}\n", o.probe, out.string());
  return kExitOk;
}

}  // namespace dtlab::mesh
