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

// File versions of the two above. save_safetensors writes atomically (io/file.h).
TensorMap load_safetensors(const std::filesystem::path& path, Metadata* metadata = nullptr);
void save_safetensors(const std::filesystem::path& path, const TensorMap& tensors,
                      const Metadata& metadata = {});

}  // namespace dtlab::io
