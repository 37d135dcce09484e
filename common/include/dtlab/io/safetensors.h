// Reader and writer of the safetensors format used by Hugging Face checkpoints.
//
// Layout of a file (all integers little-endian):
//   bytes [0, 8)      N, an unsigned 64-bit header length
//   bytes [8, 8+N)    a UTF-8 JSON object: for each tensor name
//                       {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [begin, end]}
//                     and optionally "__metadata__": {string: string}
//   bytes [8+N, EOF)  the data buffer; offsets are relative to its start, [begin, end) half-open,
//                     tensors row-major, contiguous, not overlapping and covering the buffer.
// Supported dtypes: F32, F16, BF16, I64. Anything else is an error naming the tensor.
#pragma once

#include <torch/types.h>

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "dtlab/io/safetensors_header.h"

namespace dtlab::io {

using TensorMap = std::map<std::string, torch::Tensor>;

// Parses a whole safetensors image held in memory. `source` names it in error messages (a path).
// Every offset and size is checked against the image before any byte is copied
// (parse_safetensors_header, Note [Safetensors rules]): a truncated or corrupt image is a
// dtlab::Error, never a read out of bounds. Returned tensors are CPU tensors
// of the stored dtype that own their memory. If metadata is non-null it receives __metadata__.
TensorMap parse_safetensors(std::string_view bytes, const std::string& source,
                            Metadata* metadata = nullptr);

// Serialises tensors (any device, contiguous or not; dtype must be supported) to a safetensors
// image: tensors sorted by name, header padded with spaces to a multiple of 8 bytes.
std::string serialize_safetensors(const TensorMap& tensors, const Metadata& metadata = {});

// Note [Reading only what a rank keeps]: a safetensors file opened for reads of its parts. The
// header is read and checked (Note [Safetensors rules], against the file's size) when it is
// opened; a tensor, or a run of its elements, is read from its offsets when asked, straight into
// the tensor that keeps it (pread: nothing of the file stays in the process, not even the page
// cache's pages, which a mapping would count in the resident set). A sharded rank reads its
// pieces and nothing else; a whole load holds one tensor beyond the model, not the file.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& source() const { return source_; }
  const std::vector<SafetensorsEntry>& entries() const { return header_.entries; }
  const Metadata& metadata() const { return header_.metadata; }
  const SafetensorsEntry* find(const std::string& name) const;  // null when absent
  // The whole tensor, of its stored dtype.
  torch::Tensor read(const SafetensorsEntry& entry) const;
  // Elements [begin, begin + into.numel()) of the tensor, flattened row-major, into `into` (a
  // contiguous CPU tensor of any floating dtype: converted when it differs from the stored one).
  void read_into(const SafetensorsEntry& entry, int64_t begin, torch::Tensor into) const;
  // Bytes read from the file's data so far (what the tests and the memory figures hold it to).
  uint64_t bytes_read() const { return bytes_read_; }

 private:
  void read_bytes(uint64_t offset, uint64_t count, void* into) const;
  std::string source_;
  int fd_ = -1;
  SafetensorsHeader header_;
  std::string header_text_;  // the header's JSON, which header_'s views do not point into
  mutable uint64_t bytes_read_ = 0;
};

// File versions of the two above. save_safetensors writes atomically (io/file.h); load_safetensors
// reads tensor by tensor (SafetensorsFile), never the whole image at once.
TensorMap load_safetensors(const std::filesystem::path& path, Metadata* metadata = nullptr);
void save_safetensors(const std::filesystem::path& path, const TensorMap& tensors,
                      const Metadata& metadata = {});

}  // namespace dtlab::io
