// Reads and writes safetensors images: the header is validated by io/safetensors_header.h, this
// file makes the tensors and writes images.
#include "dtlab/io/safetensors.h"

#include <fmt/core.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
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

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : source_(path.string()) {
  fd_ = ::open(source_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw Error(fmt::format("cannot open {}: {}", source_, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw Error(source_ + ": not a regular file");
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  try {
    char prefix[kSafetensorsPrefixBytes] = {};
    if (size >= kSafetensorsPrefixBytes) read_bytes(0, kSafetensorsPrefixBytes, prefix);
    const uint64_t header_bytes =
        safetensors_header_length(std::string_view(prefix, sizeof prefix), size, source_);
    header_text_.resize(header_bytes);
    read_bytes(kSafetensorsPrefixBytes, header_bytes, header_text_.data());
    header_ = parse_safetensors_header_text(header_text_, size - kSafetensorsPrefixBytes - header_bytes, source_);
  } catch (...) {
    ::close(fd_);
    throw;
  }
  bytes_read_ = 0;  // the header is not data
}

SafetensorsFile::~SafetensorsFile() {
  if (fd_ >= 0) ::close(fd_);
}

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
  for (const SafetensorsEntry& e : header_.entries) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

void SafetensorsFile::read_bytes(uint64_t offset, uint64_t count, void* into) const {
  char* out = static_cast<char*>(into);
  while (count > 0) {
    const ssize_t n = ::pread(fd_, out, count, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      throw Error(fmt::format("{}: cannot read {} bytes at offset {}: {}", source_, count, offset,
                              n == 0 ? "the file is shorter than its header says" : std::strerror(errno)));
    }
    out += n;
    offset += static_cast<uint64_t>(n);
    count -= static_cast<uint64_t>(n);
    bytes_read_ += static_cast<uint64_t>(n);
  }
}

torch::Tensor SafetensorsFile::read(const SafetensorsEntry& e) const {
  torch::Tensor t = torch::empty(e.shape, torch::TensorOptions().dtype(scalar_type_of(e.dtype)));
  if (e.end > e.begin) read_bytes(header_.data_offset + e.begin, e.end - e.begin, t.data_ptr());
  return t;
}

void SafetensorsFile::read_into(const SafetensorsEntry& e, int64_t begin, torch::Tensor into) const {
  const int64_t count = into.numel();
  int64_t numel = 1;
  for (int64_t d : e.shape) numel *= d;
  if (begin < 0 || count < 0 || begin + count > numel) {
    throw Error(fmt::format("{}: elements [{}, {}) of {}, which has {}", source_, begin, begin + count, e.name, numel));
  }
  if (!into.is_contiguous() || !into.device().is_cpu()) {
    throw Error("SafetensorsFile::read_into: the destination must be a contiguous CPU tensor (a bug of the kit)");
  }
  const torch::ScalarType stored = scalar_type_of(e.dtype);
  const uint64_t offset = header_.data_offset + e.begin + static_cast<uint64_t>(begin) * e.dtype->element_bytes;
  const uint64_t bytes = static_cast<uint64_t>(count) * e.dtype->element_bytes;
  if (into.scalar_type() == stored) {
    if (bytes > 0) read_bytes(offset, bytes, into.data_ptr());
    return;
  }
  torch::Tensor staged = torch::empty({count}, torch::TensorOptions().dtype(stored));
  if (bytes > 0) read_bytes(offset, bytes, staged.data_ptr());
  into.view({count}).copy_(staged);
}

TensorMap load_safetensors(const std::filesystem::path& path, Metadata* metadata) {
  const SafetensorsFile file(path);
  TensorMap tensors;
  for (const SafetensorsEntry& e : file.entries()) tensors.emplace(e.name, file.read(e));
  if (metadata != nullptr) *metadata = file.metadata();
  return tensors;
}

void save_safetensors(const std::filesystem::path& path, const TensorMap& tensors,
                      const Metadata& metadata) {
  write_file_atomically(path, serialize_safetensors(tensors, metadata));
}

}  // namespace dtlab::io
