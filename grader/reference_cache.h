// Note [A reference run made once]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The kit's single-process reference runs (dtlab-reference, dtlab-gpt2) are deterministic: the
// same binary with the same arguments on the same files, in the same environment, trains to the
// same bytes. Gradings that
// share a cache folder (`grader check --reference-cache DIR`, or DTLAB_REFERENCE_CACHE=DIR; the
// kit's test suites set BUILD/reference-cache) make each such run once. Its key is the 64-bit
// FNV-1a of the binary's bytes, of every argument (one that names a file or folder counted by its
// contents: a fixture folder; a training order, which each grading writes into its own folder),
// and of the variables the sandbox passes the run that could change its numbers (threads,
// BLAS, backends: OMP_*, OPENBLAS_*, ...; not DTLAB_*, which the kit's reference binaries read
// only for what their numbers do not depend on, so that a mutant's DTLAB_MUTANT, read by the
// mutant binaries alone, does not make its own key): a rebuilt binary, a regenerated fixture,
// another flag or thread setting is another key. A hit
// copies the stored run into RESULTS/runs/<id>/ and run.json says so ("reference_cache": the
// key); the checks then read it as they read a run made now. Only a run that ended well, with
// everything brought back, is stored: copied under a temporary name and renamed into place, so a
// grading beside it reads a whole run or none. A student's run is never read from the cache: its
// binary is what is graded. Neither are the libraries the binary loads part of the key: one cache
// per build folder (and so per LibTorch), as the test suites keep it.
//
// What it saves: a grading makes each reference once anyway; a class graded one submission after
// the other, or the kit's suites (about 200 gradings of the same reference binaries), make each
// once in all instead of once per grading.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace dtlab::grader {

// "<id>-<16 hex digits>": the run's id for the reader, the hash of its inputs for the cache.
// environment: NAME=VALUE entries (environment_passed_to_runs); DTLAB_* ones are left out.
std::string reference_key(const std::string& id, const std::filesystem::path& binary,
                          const std::vector<std::string>& args, const std::vector<std::string>& environment);

// Copies the stored run `key` into run_dir (which exists); false when the cache has none.
bool restore_reference(const std::filesystem::path& cache, const std::string& key,
                       const std::filesystem::path& run_dir);

// A stored run is a few MB (its dumps); a build's suites make about 40 different ones.
inline constexpr size_t kMaxStoredRuns = 120;

// Stores run_dir's files (not run.json, which each grading writes for itself) as `key`, unless
// the cache has it already, then keeps the kMaxStoredRuns most recently used (stored or read). A
// failure to store is not the grading's: it is ignored.
void store_reference(const std::filesystem::path& cache, const std::string& key, const std::filesystem::path& run_dir);

}  // namespace dtlab::grader
