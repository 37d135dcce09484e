// 64-bit FNV-1a over bytes, files and folders: an identity, not a signature. It tells two graded
// trees apart (provenance.h) and two reference runs' inputs apart (reference_cache.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace dtlab::grader {

class ContentHash {
 public:
  ContentHash& add(const std::string& bytes);
  // The file's bytes (a dtlab::Error naming it when it cannot be read).
  ContentHash& add_file(const std::filesystem::path& file);
  // Every regular file under folder (recursively), in the order of their relative paths, as:
  // relative path (with '/'), a NUL, the size in decimal, a NUL, the bytes. Returns the count.
  size_t add_tree(const std::filesystem::path& folder);
  std::string hex() const;  // 16 lowercase hex digits

 private:
  uint64_t h_ = 14695981039346656037ull;
};

// FNV-1a of bytes, as 16 lowercase hex digits (FNV-1a("a") = af63dc4c8601ec8c).
std::string fnv1a64_hex(const std::string& bytes);

}  // namespace dtlab::grader
