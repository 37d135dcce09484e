// Reading a Hugging Face config.json field by field, shared by every model's config: a missing or
// null key keeps the default; a value of the wrong type, or out of range, is a dtlab::Error that
// names the file (`source`) and the key.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "dtlab/core/error.h"

namespace dtlab::model::config_json {

template <typename T>
void read(const nlohmann::json& j, const char* key, T& out, const std::string& source) {
  if (!j.contains(key) || j.at(key).is_null()) return;
  try {
    out = j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw Error(source + ": \"" + key + "\" has the wrong type (" + j.at(key).dump() + ")");
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

}  // namespace dtlab::model::config_json
