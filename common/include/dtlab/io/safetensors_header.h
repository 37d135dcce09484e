// The LibTorch-free half of the safetensors reader: the length prefix and the JSON header of an
// image, validated against the image's size, into plain structs. io/safetensors.h makes tensors
// from the result; fuzz/safetensors_header.cpp fuzzes this half alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace dtlab::io {

using Metadata = std::map<std::string, std::string>;

// The dtypes the kit reads and writes, by their safetensors name.
struct SafetensorsDtype {
  const char* name;
  size_t element_bytes;
};
inline constexpr SafetensorsDtype kSafetensorsDtypes[] = {
    {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}};
inline constexpr const char* kSupportedSafetensorsDtypes = "F32, F16, BF16, I64";
// Layout constants shared with the writer (io/safetensors.h has the whole layout).
inline constexpr size_t kSafetensorsPrefixBytes = 8;  // N, little-endian uint64
inline constexpr const char* kSafetensorsMetadataKey = "__metadata__";

// One tensor of the header: bytes [begin, end) of the data buffer hold it, row-major.
struct SafetensorsEntry {
  std::string name;
  const SafetensorsDtype* dtype = nullptr;  // into kSafetensorsDtypes
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;  // ordered by begin
  Metadata metadata;                      // __metadata__, empty when absent
  std::string_view data;                  // the data buffer, a view into the image (empty when
                                          // only the header was read: parse_safetensors_header_text)
  uint64_t data_offset = 0;               // where the data buffer starts in the file
};

// Note [Safetensors rules]: what the format (and the reference implementation) requires, all
// checked before any tensor is made:
//   - an 8-byte prefix N <= 100,000,000 (a header above 100 MB means a corrupt file), N bytes
//     of a JSON object after it, no tensor name twice;
//   - per tensor a supported dtype, a shape of non-negative integers, "data_offsets" two
//     non-negative integers begin <= end within the data buffer, and end - begin = the product
//     of the shape times the dtype's size, every product checked for overflow;
//   - the product of the dimensions with each 0 counted as 1 (a contiguous tensor's largest
//     stride) fits in int64, so LibTorch's size and stride arithmetic cannot overflow either;
//   - the tensors tile the data buffer from byte 0 to the end of the file: no overlap, no hole,
//     no tail.
// Anything else is a dtlab::Error "SOURCE: invalid safetensors file: ..." on one line.
SafetensorsHeader parse_safetensors_header(std::string_view image, const std::string& source);

// The same rules for a file read in parts (io::SafetensorsFile): the header's length from the
// file's first 8 bytes (prefix) and its size, checked as above; then the header's JSON text alone,
// against a data buffer of data_bytes. The entries' offsets are then checked against the file
// without reading its data.
uint64_t safetensors_header_length(std::string_view prefix, uint64_t image_bytes, const std::string& source);
SafetensorsHeader parse_safetensors_header_text(std::string_view header_text, uint64_t data_bytes,
                                                const std::string& source);

}  // namespace dtlab::io
