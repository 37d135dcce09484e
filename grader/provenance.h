// Where a grading's numbers come from: commit, LibTorch and backend, machine, seed, and the
// graded sources. Every results.json, figure and table of the report carries it.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

#include "content_hash.h"  // fnv1a64_hex, for provenance's users

namespace dtlab::grader {

// Note [Release identity]
// A student release is no git checkout, so `git rev-parse` cannot name what was graded. `grader
// release` writes kReleaseIdentityFile at the release's root: {"kit_commit": the full commit it
// was made from, "kit_commit_short", "kit_dirty": whether that checkout had uncommitted changes,
// "made": UTC date}. Provenance then names the kit's commit ("abc1234 (release)") and carries
// the file as "release". Either way it carries "sources": a hash of the graded source folder
// (the student's tasks/ or submission folder), since in a release the commit is the same for
// every student and says nothing about their code.
constexpr const char* kReleaseIdentityFile = "release.json";

struct GitState {
  bool known = false;  // source_dir is a git checkout with a commit
  std::string commit, short_commit;
  bool dirty = false;  // tracked files differ from the commit
};
GitState git_state(const std::filesystem::path& source_dir);

// {"folder", "files", "fnv1a64"}: every regular file under folder (recursively), in the order of
// their relative paths, hashed with 64-bit FNV-1a as: relative path (with '/'), a NUL, the size
// in decimal, a NUL, the bytes. An identity, not a signature: it tells two graded trees apart.
// A folder that does not exist is a dtlab::Error naming it.
nlohmann::json sources_identity(const std::filesystem::path& folder);


// {"commit", "dirty", "libtorch", "backend", "hostname", "cpu", "cores", "date", "seed",
//  "submission"}, and "release" (Note [Release identity]) in a release, "sources" when `sources`
// (the graded source folder) is not empty. The commit is source_dir's short HEAD; in a release
// that is no git checkout, the kit's, "abc1234 (release)"; else "unknown".
nlohmann::json collect_provenance(const std::filesystem::path& source_dir, const std::string& submission,
                                  const std::string& backend, const std::filesystem::path& sources = {});

}  // namespace dtlab::grader
