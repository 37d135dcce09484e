// grader list: the exercises, their checks and points.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "checks.h"
#include "commands.h"

namespace dtlab::grader {

int list_command() {
  double total = 0;
  size_t width = 0;  // the longest check's name, so that the points line up
  for (const Exercise& e : exercises()) {
    for (const CheckSpec* c : checks_of(e.name)) width = std::max(width, c->id.size());
  }
  for (const Exercise& e : exercises()) {
    fmt::print("{}  {}{}\n", e.name, e.title,
               e.uses.empty() ? "" : fmt::format(" (compiles your tasks/{} too)", fmt::join(e.uses, ", tasks/")));
    for (const CheckSpec* c : checks_of(e.name)) {
      fmt::print("  {:<{}} {:>2g} pt  {}\n", c->id, width, c->points, c->title);
      total += c->points;
    }
  }
  fmt::print("\n{:g} points. `grader check T` runs the checks of T; `grader check all` all of them.\n", total);
  return 0;
}

}  // namespace dtlab::grader
