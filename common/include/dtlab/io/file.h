// Whole-file reads and atomic writes. Nothing dtlab writes is ever left half-written: data goes
// to a temporary file in the same folder, is flushed to disk, then renamed over the target.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace dtlab::io {

// Reads the whole file. Throws dtlab::Error naming the path when it cannot be opened or read.
std::string read_file(const std::filesystem::path& path);

// Writes bytes to path atomically (temporary name in the same folder, fsync, rename).
// Creates missing parent folders. Throws dtlab::Error naming the path on failure; the
// temporary file is removed and an existing target is left untouched.
void write_file_atomically(const std::filesystem::path& path, std::string_view bytes);

}  // namespace dtlab::io
