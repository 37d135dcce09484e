// Validates a safetensors image's header, see Note [Safetensors rules] in io/safetensors_header.h.
#include "dtlab/io/safetensors_header.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "dtlab/core/error.h"
#include "dtlab/io/excerpt.h"

// The length prefix is read with memcpy, which assumes the file's (little-endian) byte order.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors I/O assumes a little-endian host");

namespace dtlab::io {
namespace {

using json = nlohmann::json;

static_assert(kSafetensorsPrefixBytes == sizeof(uint64_t));
// The reference implementation refuses larger headers; a bigger N means a corrupt file.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr uint64_t kMaxInt64 = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

const SafetensorsDtype* find_dtype(const std::string& name) {
  for (const SafetensorsDtype& d : kSafetensorsDtypes)
    if (name == d.name) return &d;
  return nullptr;
}

// A JSON number that is a non-negative integer, as uint64; nullopt for floats, negatives, others.
std::optional<uint64_t> as_non_negative_integer(const json& j) {
  if (j.is_number_unsigned()) return j.get<uint64_t>();
  if (j.is_number_integer() && j.get<int64_t>() >= 0)
    return static_cast<uint64_t>(j.get<int64_t>());
  return std::nullopt;
}

[[noreturn]] void fail_header(const std::string& source, const std::string& what) {
  throw Error(fmt::format("{}: invalid safetensors file: {}", source, what));
}

// Validates the header of one image whose data buffer holds buffer_bytes bytes.
class HeaderParser {
 public:
  HeaderParser(const std::string& source, uint64_t buffer_bytes)
      : source_(source), buffer_bytes_(buffer_bytes) {}

  [[noreturn]] void fail(const std::string& what) const { fail_header(source_, what); }
  [[noreturn]] void fail(const std::string& tensor, const std::string& what) const {
    fail(fmt::format("tensor \"{}\": {}", printable(tensor), what));
  }

  SafetensorsEntry parse_entry(const std::string& name, const json& j) const {
    if (!j.is_object()) fail(name, "header entry is not a JSON object");
    for (const char* field : {"dtype", "shape", "data_offsets"})
      if (!j.contains(field)) fail(name, fmt::format("header entry lacks \"{}\"", field));

    SafetensorsEntry e;
    e.name = name;
    const json& dtype = j.at("dtype");
    if (!dtype.is_string()) fail(name, "\"dtype\" is not a string");
    e.dtype = find_dtype(dtype.get<std::string>());
    if (e.dtype == nullptr)
      fail(name, fmt::format("dtype \"{}\" is not supported (supported: {})",
                             printable(dtype.get<std::string>()), kSupportedSafetensorsDtypes));

    const json& shape = j.at("shape");
    if (!shape.is_array()) fail(name, "\"shape\" is not an array");
    uint64_t numel = 1;
    uint64_t largest_stride = 1;  // the product with each 0 counted as 1
    for (const json& dim : shape) {
      const std::optional<uint64_t> d = as_non_negative_integer(dim);
      if (!d || *d > kMaxInt64)
        fail(name, fmt::format("shape dimension {} is not a non-negative integer",
                               json_excerpt(dim)));
      // Checked, since a corrupt shape can wrap around to a product that matches the offsets.
      if (__builtin_mul_overflow(numel, *d, &numel))
        fail(name, fmt::format("shape {} overflows the element count", json_excerpt(shape)));
      if (__builtin_mul_overflow(largest_stride, std::max<uint64_t>(*d, 1), &largest_stride) ||
          largest_stride > kMaxInt64)
        fail(name, fmt::format("shape {} has dimensions whose product (each 0 counted as 1) "
                               "overflows int64",
                               json_excerpt(shape)));
      e.shape.push_back(static_cast<int64_t>(*d));
    }
    uint64_t nbytes = 0;
    if (__builtin_mul_overflow(numel, e.dtype->element_bytes, &nbytes))
      fail(name, fmt::format("shape {} overflows the byte size", json_excerpt(shape)));

    const json& offsets = j.at("data_offsets");
    const bool is_pair = offsets.is_array() && offsets.size() == 2;
    const std::optional<uint64_t> first =
        is_pair ? as_non_negative_integer(offsets[0]) : std::nullopt;
    const std::optional<uint64_t> second =
        is_pair ? as_non_negative_integer(offsets[1]) : std::nullopt;
    if (!first || !second)
      fail(name, fmt::format("\"data_offsets\" {} is not two non-negative integers",
                             json_excerpt(offsets)));
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
                       begin, end, end - begin, e.dtype->name, json_excerpt(shape), nbytes));
    e.begin = begin;
    e.end = end;
    return e;
  }

  void parse_metadata(const json& j, Metadata* metadata) const {
    if (!j.is_object()) fail("\"__metadata__\" is not a JSON object");
    for (const auto& [key, value] : j.items()) {
      if (!value.is_string())
        fail(fmt::format("\"__metadata__\" value of \"{}\" is not a string", printable(key)));
      (*metadata)[key] = value.get<std::string>();
    }
  }

  // The spec requires the tensors to tile the buffer exactly: no overlap, no hole, no tail.
  void check_coverage(std::vector<SafetensorsEntry>& entries) const {
    std::sort(entries.begin(), entries.end(),
              [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
                return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
              });
    uint64_t expected = 0;
    const std::string* previous = nullptr;
    for (const SafetensorsEntry& e : entries) {
      if (e.begin < expected)
        fail(e.name, fmt::format("data_offsets [{}, {}] overlap tensor \"{}\"", e.begin, e.end,
                                 previous != nullptr ? printable(*previous) : std::string()));
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

uint64_t safetensors_header_length(std::string_view prefix, uint64_t image_bytes, const std::string& source) {
  if (image_bytes < kSafetensorsPrefixBytes || prefix.size() < kSafetensorsPrefixBytes)
    fail_header(source, fmt::format("truncated: {} bytes, shorter than the {}-byte length prefix",
                                    image_bytes, kSafetensorsPrefixBytes));
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, prefix.data(), kSafetensorsPrefixBytes);
  const uint64_t remaining = image_bytes - kSafetensorsPrefixBytes;
  if (header_bytes > kMaxHeaderBytes)
    fail_header(source,
                fmt::format("header length {} exceeds the limit of {} bytes (corrupt file?)",
                            header_bytes, kMaxHeaderBytes));
  if (header_bytes > remaining)
    fail_header(source, fmt::format("truncated: header length {} but only {} bytes follow",
                                    header_bytes, remaining));
  return header_bytes;
}

SafetensorsHeader parse_safetensors_header(std::string_view image, const std::string& source) {
  const uint64_t header_bytes = safetensors_header_length(image, image.size(), source);
  SafetensorsHeader out = parse_safetensors_header_text(
      image.substr(kSafetensorsPrefixBytes, header_bytes),
      image.size() - kSafetensorsPrefixBytes - header_bytes, source);
  out.data = image.substr(kSafetensorsPrefixBytes + header_bytes);
  return out;
}

SafetensorsHeader parse_safetensors_header_text(std::string_view header_text, uint64_t data_bytes,
                                                const std::string& source) {
  SafetensorsHeader out;
  out.data_offset = kSafetensorsPrefixBytes + header_text.size();
  HeaderParser parser(source, data_bytes);

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
    parser.fail(fmt::format("header is not valid JSON ({})", printable(e.what(), 400)));
  }
  if (!header.is_object()) parser.fail("header is not a JSON object");
  if (duplicate) parser.fail(*duplicate, "name appears twice in the header");

  try {
    for (const auto& [name, value] : header.items()) {
      if (name == kSafetensorsMetadataKey)
        parser.parse_metadata(value, &out.metadata);
      else
        out.entries.push_back(parser.parse_entry(name, value));
    }
  } catch (const json::exception& e) {
    // Every access above is type-checked first; this only guards against a missed case.
    parser.fail(fmt::format("malformed header ({})", printable(e.what(), 400)));
  }
  parser.check_coverage(out.entries);
  return out;
}

}  // namespace dtlab::io
