// Reads and writes safetensors images: the header is validated by io/safetensors_header.h, this
// file makes the tensors and writes images.
#include "dtlab/io/safetensors.h"

#include <fmt/core.h>

#include <cstdint>
#include <cstring>
#include <iterator>
#include <nlohmann/json.hpp>
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/io/file.h"
#include "dtlab/io/safetensors_header.h"

// Tensor bytes are copied verbatim and the length prefix is written from memory: both assume
// the host has the file's (little-endian) byte order.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors I/O assumes a little-endian host");

namespace dtlab::io {
namespace {

// Header is padded so the data buffer starts 8-byte aligned, as the reference writer does.
constexpr size_t kHeaderAlignment = 8;
constexpr char kHeaderPadding = ' ';

// The LibTorch type of each entry of kSafetensorsDtypes, in the same order.
constexpr torch::ScalarType kScalarTypes[] = {torch::kFloat32, torch::kFloat16, torch::kBFloat16,
                                              torch::kInt64};
static_assert(std::size(kScalarTypes) == std::size(kSafetensorsDtypes));

torch::ScalarType scalar_type_of(const SafetensorsDtype* dtype) {
  return kScalarTypes[dtype - kSafetensorsDtypes];
}

const SafetensorsDtype* safetensors_dtype_of(torch::ScalarType type) {
  for (size_t i = 0; i < std::size(kScalarTypes); ++i)
    if (type == kScalarTypes[i]) return &kSafetensorsDtypes[i];
  return nullptr;
}

}  // namespace

TensorMap parse_safetensors(std::string_view bytes, const std::string& source, Metadata* metadata) {
  SafetensorsHeader header = parse_safetensors_header(bytes, source);
  TensorMap tensors;
  for (const SafetensorsEntry& e : header.entries) {
    const torch::ScalarType type = scalar_type_of(e.dtype);
    if (c10::elementSize(type) != e.dtype->element_bytes)
      throw Error("internal: safetensors dtype table disagrees with LibTorch for " +
                  std::string(e.dtype->name));
    torch::Tensor t = torch::empty(e.shape, torch::TensorOptions().dtype(type));
    const size_t nbytes = e.end - e.begin;
    if (nbytes > 0) std::memcpy(t.data_ptr(), header.data.data() + e.begin, nbytes);
    tensors.emplace(e.name, std::move(t));
  }
  if (metadata != nullptr) *metadata = std::move(header.metadata);
  return tensors;
}

std::string serialize_safetensors(const TensorMap& tensors, const Metadata& metadata) {
  // ordered_json keeps __metadata__ first and the tensors in name order, like the reference.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header[kSafetensorsMetadataKey] = metadata;

  std::vector<torch::Tensor> contiguous;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (name == kSafetensorsMetadataKey)
      throw Error(fmt::format("cannot save a tensor named \"{}\": the name is reserved", name));
    if (!tensor.defined())
      throw Error(fmt::format("cannot save tensor \"{}\": it is undefined", name));
    const SafetensorsDtype* dtype = safetensors_dtype_of(tensor.scalar_type());
    if (dtype == nullptr)
      throw Error(
          fmt::format("cannot save tensor \"{}\": dtype {} is not supported (supported: {})", name,
                      c10::toString(tensor.scalar_type()), kSupportedSafetensorsDtypes));
    torch::Tensor t = tensor.to(torch::kCPU).contiguous();
    const uint64_t nbytes = static_cast<uint64_t>(t.numel()) * dtype->element_bytes;
    header[name] = {{"dtype", dtype->name},
                    {"shape", t.sizes().vec()},
                    {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    contiguous.push_back(std::move(t));
  }

  std::string header_text;
  try {
    header_text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    throw Error(
        fmt::format("cannot save tensors: names and metadata must be valid UTF-8 ({})", e.what()));
  }
  header_text.append((kHeaderAlignment - header_text.size() % kHeaderAlignment) % kHeaderAlignment,
                     kHeaderPadding);

  const uint64_t header_bytes = header_text.size();
  std::string image;
  image.reserve(kSafetensorsPrefixBytes + header_text.size() + offset);
  image.append(reinterpret_cast<const char*>(&header_bytes), kSafetensorsPrefixBytes);
  image += header_text;
  for (const torch::Tensor& t : contiguous)
    if (t.numel() > 0)
      image.append(static_cast<const char*>(t.data_ptr()), t.numel() * t.element_size());
  return image;
}

TensorMap load_safetensors(const std::filesystem::path& path, Metadata* metadata) {
  return parse_safetensors(read_file(path), path.string(), metadata);
}

void save_safetensors(const std::filesystem::path& path, const TensorMap& tensors,
                      const Metadata& metadata) {
  write_file_atomically(path, serialize_safetensors(tensors, metadata));
}

}  // namespace dtlab::io
