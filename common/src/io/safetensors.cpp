// Reads and writes safetensors images, validating every header field against the image first.
#include "dtlab/io/safetensors.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/io/file.h"

// Tensor bytes are copied verbatim and the length prefix is read with memcpy: both assume the
// host has the file's (little-endian) byte order.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors I/O assumes a little-endian host");

namespace dtlab::io {
namespace {

using json = nlohmann::json;

constexpr size_t kLengthPrefixBytes = sizeof(uint64_t);
// The reference implementation refuses larger headers; a bigger N means a corrupt file.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// Header is padded so the data buffer starts 8-byte aligned, as the reference writer does.
constexpr size_t kHeaderAlignment = 8;
constexpr char kHeaderPadding = ' ';
constexpr const char* kMetadataKey = "__metadata__";
constexpr const char* kSupportedDtypes = "F32, F16, BF16, I64";

struct DtypeInfo {
  const char* name;
  torch::ScalarType type;
  size_t element_bytes;
};

constexpr DtypeInfo kDtypes[] = {
    {"F32", torch::kFloat32, sizeof(float)},
    {"F16", torch::kFloat16, sizeof(c10::Half)},
    {"BF16", torch::kBFloat16, sizeof(c10::BFloat16)},
    {"I64", torch::kInt64, sizeof(int64_t)},
};

const DtypeInfo* find_dtype(const std::string& name) {
  for (const DtypeInfo& d : kDtypes)
    if (name == d.name) return &d;
  return nullptr;
}

const DtypeInfo* find_dtype(torch::ScalarType type) {
  for (const DtypeInfo& d : kDtypes)
    if (type == d.type) return &d;
  return nullptr;
}

// A JSON number that is a non-negative integer, as uint64; nullopt for floats, negatives, others.
std::optional<uint64_t> as_non_negative_integer(const json& j) {
  if (j.is_number_unsigned()) return j.get<uint64_t>();
  if (j.is_number_integer() && j.get<int64_t>() >= 0)
    return static_cast<uint64_t>(j.get<int64_t>());
  return std::nullopt;
}

// One validated header entry: everything needed to copy the tensor out of the data buffer.
struct Entry {
  std::string name;
  const DtypeInfo* dtype;
  std::vector<int64_t> shape;
  uint64_t begin;
  uint64_t end;
};

[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw Error(fmt::format("{}: invalid safetensors file: {}", source, what));
}

// Validates the header of one image whose data buffer holds buffer_bytes bytes.
class HeaderParser {
 public:
  HeaderParser(const std::string& source, uint64_t buffer_bytes)
      : source_(source), buffer_bytes_(buffer_bytes) {}

  [[noreturn]] void fail(const std::string& what) const { io::fail(source_, what); }
  [[noreturn]] void fail(const std::string& tensor, const std::string& what) const {
    fail(fmt::format("tensor \"{}\": {}", tensor, what));
  }

  Entry parse_entry(const std::string& name, const json& j) const {
    if (!j.is_object()) fail(name, "header entry is not a JSON object");
    for (const char* field : {"dtype", "shape", "data_offsets"})
      if (!j.contains(field)) fail(name, fmt::format("header entry lacks \"{}\"", field));

    Entry e{name, nullptr, {}, 0, 0};
    const json& dtype = j.at("dtype");
    if (!dtype.is_string()) fail(name, "\"dtype\" is not a string");
    e.dtype = find_dtype(dtype.get<std::string>());
    if (e.dtype == nullptr)
      fail(name, fmt::format("dtype \"{}\" is not supported (supported: {})",
                             dtype.get<std::string>(), kSupportedDtypes));

    const json& shape = j.at("shape");
    if (!shape.is_array()) fail(name, "\"shape\" is not an array");
    uint64_t numel = 1;
    for (const json& dim : shape) {
      const std::optional<uint64_t> d = as_non_negative_integer(dim);
      if (!d || *d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail(name, fmt::format("shape dimension {} is not a non-negative integer", dim.dump()));
      // Checked, since a corrupt shape can wrap around to a product that matches the offsets.
      if (__builtin_mul_overflow(numel, *d, &numel))
        fail(name, fmt::format("shape {} overflows the element count", shape.dump()));
      e.shape.push_back(static_cast<int64_t>(*d));
    }
    uint64_t nbytes = 0;
    if (__builtin_mul_overflow(numel, e.dtype->element_bytes, &nbytes))
      fail(name, fmt::format("shape {} overflows the byte size", shape.dump()));

    const json& offsets = j.at("data_offsets");
    const bool is_pair = offsets.is_array() && offsets.size() == 2;
    const std::optional<uint64_t> first =
        is_pair ? as_non_negative_integer(offsets[0]) : std::nullopt;
    const std::optional<uint64_t> second =
        is_pair ? as_non_negative_integer(offsets[1]) : std::nullopt;
    if (!first || !second)
      fail(name,
           fmt::format("\"data_offsets\" {} is not two non-negative integers", offsets.dump()));
    const uint64_t begin = first.value();
    const uint64_t end = second.value();
    if (begin > end) fail(name, fmt::format("data_offsets [{}, {}] begin after end", begin, end));
    if (end > buffer_bytes_)
      fail(name, fmt::format("data_offsets end {} is beyond the data buffer of {} bytes "
                             "(truncated file?)",
                             end, buffer_bytes_));
    if (end - begin != nbytes)
      fail(name,
           fmt::format("data_offsets [{}, {}] hold {} bytes but dtype {} and shape {} need {}",
                       begin, end, end - begin, e.dtype->name, shape.dump(), nbytes));
    e.begin = begin;
    e.end = end;
    return e;
  }

  void parse_metadata(const json& j, Metadata* metadata) const {
    if (!j.is_object()) fail("\"__metadata__\" is not a JSON object");
    for (const auto& [key, value] : j.items()) {
      if (!value.is_string())
        fail(fmt::format("\"__metadata__\" value of \"{}\" is not a string", key));
      if (metadata != nullptr) (*metadata)[key] = value.get<std::string>();
    }
  }

  // The spec requires the tensors to tile the buffer exactly: no overlap, no hole, no tail.
  void check_coverage(std::vector<Entry>& entries) const {
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    uint64_t expected = 0;
    const std::string* previous = nullptr;
    for (const Entry& e : entries) {
      if (e.begin < expected)
        fail(e.name, fmt::format("data_offsets [{}, {}] overlap tensor \"{}\"", e.begin, e.end,
                                 previous != nullptr ? *previous : std::string()));
      if (e.begin > expected)
        fail(e.name, fmt::format("data_offsets [{}, {}] leave a hole: bytes [{}, {}) belong to no "
                                 "tensor",
                                 e.begin, e.end, expected, e.begin));
      expected = e.end;
      previous = &e.name;
    }
    if (expected != buffer_bytes_)
      fail(
          fmt::format("data buffer has {} bytes but tensors cover only {}: bytes [{}, {}) belong "
                      "to no tensor",
                      buffer_bytes_, expected, expected, buffer_bytes_));
  }

 private:
  const std::string& source_;
  uint64_t buffer_bytes_;
};

}  // namespace

TensorMap parse_safetensors(std::string_view bytes, const std::string& source, Metadata* metadata) {
  if (bytes.size() < kLengthPrefixBytes)
    fail(source, fmt::format("truncated: {} bytes, shorter than the {}-byte length prefix",
                             bytes.size(), kLengthPrefixBytes));
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, bytes.data(), kLengthPrefixBytes);
  const uint64_t remaining = bytes.size() - kLengthPrefixBytes;
  if (header_bytes > kMaxHeaderBytes)
    fail(source, fmt::format("header length {} exceeds the limit of {} bytes (corrupt file?)",
                             header_bytes, kMaxHeaderBytes));
  if (header_bytes > remaining)
    fail(source, fmt::format("truncated: header length {} but only {} bytes follow", header_bytes,
                             remaining));
  const std::string_view header_text = bytes.substr(kLengthPrefixBytes, header_bytes);
  const std::string_view data = bytes.substr(kLengthPrefixBytes + header_bytes);
  HeaderParser parser(source, data.size());

  // nlohmann keeps the last of duplicate keys silently; a duplicate tensor name would hide one.
  std::set<std::string> names;
  std::optional<std::string> duplicate;
  const json::parser_callback_t on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    constexpr int kTopLevel = 1;
    if (event == json::parse_event_t::key && depth == kTopLevel && !duplicate &&
        !names.insert(parsed.get<std::string>()).second)
      duplicate = parsed.get<std::string>();
    return true;
  };
  json header;
  try {
    header = json::parse(header_text.begin(), header_text.end(), on_event);
  } catch (const json::exception& e) {
    parser.fail(fmt::format("header is not valid JSON ({})", e.what()));
  }
  if (!header.is_object()) parser.fail("header is not a JSON object");
  if (duplicate) parser.fail(*duplicate, "name appears twice in the header");

  std::vector<Entry> entries;
  Metadata parsed_metadata;
  try {
    for (const auto& [name, value] : header.items()) {
      if (name == kMetadataKey)
        parser.parse_metadata(value, &parsed_metadata);
      else
        entries.push_back(parser.parse_entry(name, value));
    }
  } catch (const json::exception& e) {
    // Every access above is type-checked first; this only guards against a missed case.
    parser.fail(fmt::format("malformed header ({})", e.what()));
  }
  parser.check_coverage(entries);

  TensorMap tensors;
  for (const Entry& e : entries) {
    torch::Tensor t = torch::empty(e.shape, torch::TensorOptions().dtype(e.dtype->type));
    const size_t nbytes = e.end - e.begin;
    if (nbytes > 0) std::memcpy(t.data_ptr(), data.data() + e.begin, nbytes);
    tensors.emplace(e.name, std::move(t));
  }
  if (metadata != nullptr) *metadata = std::move(parsed_metadata);
  return tensors;
}

std::string serialize_safetensors(const TensorMap& tensors, const Metadata& metadata) {
  // ordered_json keeps __metadata__ first and the tensors in name order, like the reference.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;

  std::vector<torch::Tensor> contiguous;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (name == kMetadataKey)
      throw Error(fmt::format("cannot save a tensor named \"{}\": the name is reserved", name));
    if (!tensor.defined())
      throw Error(fmt::format("cannot save tensor \"{}\": it is undefined", name));
    const DtypeInfo* dtype = find_dtype(tensor.scalar_type());
    if (dtype == nullptr)
      throw Error(
          fmt::format("cannot save tensor \"{}\": dtype {} is not supported (supported: {})", name,
                      c10::toString(tensor.scalar_type()), kSupportedDtypes));
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
  image.reserve(kLengthPrefixBytes + header_text.size() + offset);
  image.append(reinterpret_cast<const char*>(&header_bytes), kLengthPrefixBytes);
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
