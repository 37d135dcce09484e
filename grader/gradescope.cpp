// Gradescope's results.json and the terminal table, see gradescope.h.
#include "gradescope.h"

#include <fmt/format.h>

#include "dtlab/io/json_file.h"

namespace dtlab::grader {
namespace {

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

}  // namespace

nlohmann::json gradescope_json(const std::vector<CheckOutcome>& outcomes, const nlohmann::json& provenance,
                               double seconds) {
  double score = 0, max_score = 0;
  nlohmann::json tests = nlohmann::json::array();
  for (const auto& o : outcomes) {
    score += o.score();
    max_score += o.spec->points;
    tests.push_back({{"name", o.spec->name() + ": " + o.spec->title},
                     {"score", o.score()},
                     {"max_score", o.spec->points},
                     {"status", o.verdict.status == Status::kPassed ? "passed" : "failed"},
                     {"output", fmt::format("[{}] {}", status_name(o.verdict.status), o.verdict.message)},
                     {"extra_data", {{"check", o.spec->name()}, {"outcome", status_name(o.verdict.status)},
                                     {"seconds", o.seconds}}}});
  }
  return {{"score", score},
          {"max_score", max_score},
          {"execution_time", seconds},
          {"output", fmt::format("dtlab grader: {:g} / {:g} points ({} at {}{})", score, max_score,
                                 provenance.value("submission", ""), provenance.value("commit", ""),
                                 provenance.value("dirty", false) ? "+dirty" : "")},
          {"tests", tests},
          {"extra_data", {{"provenance", provenance}}}};
}

void write_gradescope(const std::filesystem::path& path, const nlohmann::json& results) {
  io::write_json_file(path, results);
}

std::string describe_provenance(const nlohmann::json& p) {
  const std::string sources =
      p.contains("sources") ? fmt::format(", sources {} ({} files of {})", p["sources"].value("fnv1a64", "?"),
                                          p["sources"].value("files", 0), p["sources"].value("folder", "?"))
                            : "";
  return fmt::format("commit {}{}{}, LibTorch {} {}, seed {}, {} ({} cores, {}), {}{}", p.value("commit", "unknown"),
                     p.value("dirty", false) ? " (dirty)" : "", sources, p.value("libtorch", "?"), p.value("backend", "?"),
                     p.value("seed", 0), p.value("hostname", "?"), p.value("cores", 0), p.value("cpu", "?"),
                     p.value("date", "?"), p.contains("sandbox") ? ", sandbox " + p.value("sandbox", "?") : "");
}

std::string format_table(const std::vector<CheckOutcome>& outcomes, const nlohmann::json& provenance) {
  std::string out = fmt::format("{:<22} {:>7}  {:<16} {}\n", "check", "points", "result", "what must hold");
  double score = 0, max_score = 0;
  for (const auto& o : outcomes) {
    score += o.score();
    max_score += o.spec->points;
    out += fmt::format("{:<22} {:>3g}/{:<3g}  {:<16} {}\n", o.spec->name(), o.score(), o.spec->points,
                       status_name(o.verdict.status), first_line(o.spec->title));
  }
  bool any_failed = false;
  for (const auto& o : outcomes) {
    if (o.verdict.status == Status::kPassed) continue;
    if (!any_failed) out += "\nWhat to fix:\n";
    any_failed = true;
    out += fmt::format("\n{} ({}):\n  {}\n", o.spec->name(), status_name(o.verdict.status), o.verdict.message);
  }
  out += fmt::format("\nscore: {:g} / {:g}\ngraded: {}\n", score, max_score, describe_provenance(provenance));
  return out;
}

}  // namespace dtlab::grader
