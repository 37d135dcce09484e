// Reading a Hugging Face config.json field by field, shared by every model's config: a missing or
// null key keeps the default; a value of the wrong type, or out of range, is a dtlab::Error that
// names the file (`source`) and the key.
#pragma once

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/io/excerpt.h"

namespace dtlab::model::config_json {

template <typename T>
void read(const nlohmann::json& j, const char* key, T& out, const std::string& source) {
  if (!j.contains(key) || j.at(key).is_null()) return;
  try {
    out = j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw Error(source + ": \"" + key + "\" has the wrong type (" + io::json_excerpt(j.at(key)) + ")");
  }
}

// Sizes and ids: a JSON integer within int64, or a float with an integral value (Python writes
// 768.0 for a size computed in floats). nlohmann's own conversion would truncate 2.5 to 2, and
// 1e300 or 2^64 - 1 would not fit (a float out of range is undefined behaviour).
inline void read(const nlohmann::json& j, const char* key, int64_t& out, const std::string& source) {
  if (!j.contains(key) || j.at(key).is_null()) return;
  const nlohmann::json& v = j.at(key);
  constexpr double kExactIntegers = 9007199254740992.0;  // 2^53: every integer below is a double
  if (v.is_number_unsigned() && v.get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max())) {
    out = v.get<int64_t>();
  } else if (v.is_number_integer() && !v.is_number_unsigned()) {
    out = v.get<int64_t>();
  } else if (v.is_number_float() && std::abs(v.get<double>()) <= kExactIntegers &&
             std::trunc(v.get<double>()) == v.get<double>()) {
    out = static_cast<int64_t>(v.get<double>());
  } else {
    throw Error(source + ": \"" + key + "\" has the wrong type (" + io::json_excerpt(v) +
                "): expected an integer");
  }
}

// A field that may be null (GPT-2's n_inner, special token ids): absent keeps the default, null
// unsets it.
inline void read_optional(const nlohmann::json& j, const char* key, std::optional<int64_t>& out,
                          const std::string& source) {
  if (!j.contains(key)) return;
  if (j.at(key).is_null()) {
    out.reset();
    return;
  }
  int64_t value = 0;
  read(j, key, value, source);
  out = value;
}

inline void require_positive(int64_t value, const char* key, const std::string& source) {
  if (value <= 0) throw Error(source + ": \"" + key + "\" must be positive, got " + std::to_string(value));
}

inline void require_probability(double p, const char* key, const std::string& source) {
  if (!(p >= 0.0 && p < 1.0)) throw Error(source + ": \"" + key + "\" must be in [0, 1), got " + std::to_string(p));
}

// Note [Bounded configs]: every size of a config is checked against its meaning before anything
// is allocated, so that a forged or mistyped config.json ("n_positions": 1000000000000) is the
// kit's one-line error naming the field, its value and the limit, not an allocator's failure
// with a stack dump. The limits are far above any published model of these architectures and
// far below what would overflow a size: then the whole model, in float32, must fit in this
// machine's memory (require_fits_in_memory).
constexpr int64_t kMaxVocabulary = int64_t{1} << 24;  // 16,777,216 tokens; the hub's largest: ~256k
constexpr int64_t kMaxPositions = int64_t{1} << 20;   // 1,048,576 positions
constexpr int64_t kMaxWidth = int64_t{1} << 16;       // 65,536 (hidden size, inner sizes up to 4x)
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxSmallCount = int64_t{1} << 16;  // segment types, labels

inline void require_size(int64_t value, int64_t limit, const char* key, const std::string& source) {
  require_positive(value, key, source);
  if (value > limit) {
    throw Error(source + ": \"" + key + "\" " + std::to_string(value) + " is above the limit " +
                std::to_string(limit) + " (no model of this kind is that large; a typo or a damaged file?)");
  }
}

inline void require_epsilon(double eps, const char* key, const std::string& source) {
  if (!(eps >= 0.0 && eps < 1.0)) {
    throw Error(source + ": \"" + key + "\" must be in [0, 1) (a small number added to a variance), got " +
                std::to_string(eps));
  }
}

// Bytes of physical memory of this machine (0 where unknown: then nothing is refused).
inline double machine_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? double(pages) * double(page) : 0.0;
}

// parts: what each group of the model's parameters counts ("vocab_size x n_embd" -> V*E); their
// sum, in float32, must fit in `memory` bytes (the machine's by default). The error names the
// largest part.
inline void require_fits_in_memory(const std::vector<std::pair<std::string, double>>& parts,
                                   const std::string& source, double memory = machine_memory_bytes()) {
  double parameters = 0;
  const std::pair<std::string, double>* largest = nullptr;
  for (const auto& part : parts) {
    parameters += part.second;
    if (!largest || part.second > largest->second) largest = &part;
  }
  const double bytes = 4.0 * parameters;
  if (memory > 0 && bytes > memory) {
    char text[160];
    std::snprintf(text, sizeof text, "%.3g parameters, %.3g GB in float32, more than this machine's %.3g GB of memory",
                  parameters, bytes / 1e9, memory / 1e9);
    throw Error(source + ": the model would have " + text + " (the most from " + largest->first + ")");
  }
}

}  // namespace dtlab::model::config_json
