// Pieces of an input file quoted in a dtlab::Error: whatever the file holds, the message stays
// one short line (control characters escaped, long text cut, deep JSON never recursed into).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace dtlab::io {

// Enough to recognise a value; a forged file may hold megabytes in one token.
inline constexpr size_t kExcerptBytes = 120;

// text with each control byte written as \n, \r, \t or \xHH; when that is longer than
// max_bytes, cut (at a UTF-8 character boundary) with "..." appended: at most max_bytes + 3
// bytes. No quotes are added.
std::string printable(std::string_view text, size_t max_bytes = kExcerptBytes);

// j as JSON (j.dump()), through printable(). A value nested deeper than nlohmann's recursive
// dump can safely walk is described instead ("an array nested over 64 levels deep").
std::string json_excerpt(const nlohmann::json& j, size_t max_bytes = kExcerptBytes);

}  // namespace dtlab::io
