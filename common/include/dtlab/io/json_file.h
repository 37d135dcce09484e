// JSON files in and out, with errors that name the file and the line.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace dtlab::io {

// Parses path as JSON. A missing file or a syntax error is a dtlab::Error naming the file and,
// for syntax errors, the line and column.
nlohmann::json read_json_file(const std::filesystem::path& path);

// The same on text already read; `source` names it in errors (a path). What read_json_file and
// the fuzz harnesses (fuzz/) call.
nlohmann::json parse_json_text(std::string_view text, const std::string& source);

// Writes j with 2-space indentation and a final newline, atomically (see write_file_atomically).
void write_json_file(const std::filesystem::path& path, const nlohmann::json& j);

}  // namespace dtlab::io
