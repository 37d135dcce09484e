// Pins down the safetensors reader and writer: round trips, the reference layout, and that every
// corrupt or truncated image is a dtlab::Error naming what is wrong, never a crash.
#include "dtlab/io/safetensors.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/io/file.h"
#include "golden_util.h"
#include "test_util.h"

// Everything in a namespace named after the file (no anonymous namespace): the unit suites share
// one binary, compiled in groups of files (Note [Unity builds] in cmake/Dtlab.cmake), so helpers
// must not collide, and a TEST_F class must not derive from a type of an anonymous namespace.
namespace safetensors_test {

namespace fs = std::filesystem;
using dtlab::io::Metadata;
using dtlab::io::TensorMap;

constexpr size_t kLengthPrefixBytes = 8;
constexpr size_t kHeaderAlignment = 8;
const std::string kSource = "checkpoints/model.safetensors";

// Eight little-endian bytes of n, as the length prefix stores it.
std::string le64(uint64_t n) {
  std::string out(kLengthPrefixBytes, '\0');
  for (size_t i = 0; i < kLengthPrefixBytes; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

// A raw image: length prefix, header text as given (no padding), data buffer.
std::string image(const std::string& header, const std::string& data = "") {
  return le64(header.size()) + header + data;
}

// An image holding one tensor whose header entry is `entry`, under the name "layer.weight".
std::string one_tensor(const std::string& entry, const std::string& data) {
  return image(R"({"layer.weight":)" + entry + "}", data);
}

// Raw bytes of a tensor's values (row-major, host order).
std::string bytes_of(const torch::Tensor& t) {
  const torch::Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.numel() * c.element_size());
}

// Raw bytes of little-endian values of type T.
template <typename T>
std::string bytes_of(std::initializer_list<T> values) {
  std::string out;
  for (T v : values) out.append(reinterpret_cast<const char*>(&v), sizeof(T));
  return out;
}

// Bytes from a string of hex digit pairs.
TensorMap parse(const std::string& bytes, Metadata* metadata = nullptr) {
  return dtlab::io::parse_safetensors(bytes, kSource, metadata);
}

// The message of the dtlab::Error that parsing `bytes` throws; fails the test if none is thrown.
std::string rejection(const std::string& bytes) {
  try {
    parse(bytes);
  } catch (const dtlab::Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(kSource), std::string::npos) << "message lacks the source: " << message;
    return message;
  }
  ADD_FAILURE() << "expected a dtlab::Error";
  return "";
}

// The header of a serialised image, parsed keeping key order, and its length N.
nlohmann::ordered_json header_of(const std::string& image, uint64_t* length = nullptr) {
  uint64_t n = 0;
  std::memcpy(&n, image.data(), kLengthPrefixBytes);
  if (length != nullptr) *length = n;
  return nlohmann::ordered_json::parse(image.substr(kLengthPrefixBytes, n));
}

void expect_same_tensor(const torch::Tensor& actual, const torch::Tensor& expected,
                        const std::string& name) {
  SCOPED_TRACE(name);
  ASSERT_TRUE(actual.defined());
  EXPECT_EQ(actual.scalar_type(), expected.scalar_type());
  EXPECT_EQ(actual.sizes(), expected.sizes());
  EXPECT_TRUE(actual.device().is_cpu());
  EXPECT_EQ(bytes_of(actual), bytes_of(expected));
}

void expect_same_map(const TensorMap& actual, const TensorMap& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (const auto& [name, tensor] : expected) {
    ASSERT_EQ(actual.count(name), 1u) << "missing " << name;
    expect_same_tensor(actual.at(name), tensor, name);
  }
}

TensorMap every_dtype() {
  torch::manual_seed(0);
  const int64_t big = std::numeric_limits<int64_t>::max();
  const int64_t small = std::numeric_limits<int64_t>::min();
  return {
      {"f32", torch::randn({3, 4})},
      {"f16", torch::randn({2, 5}).to(torch::kFloat16)},
      {"bf16", torch::randn({7}).to(torch::kBFloat16)},
      {"i64", torch::tensor({small, int64_t{-1}, int64_t{0}, big}).reshape({2, 2})},
  };
}

// A valid image with several tensors, metadata and a zero-size tensor, for the damage tests.
std::string sample_image() {
  TensorMap tensors = every_dtype();
  tensors["empty"] = torch::zeros({0, 3});
  tensors["scalar"] = torch::tensor(2.5f).reshape({});
  return dtlab::io::serialize_safetensors(tensors, {{"format", "pt"}});
}

TEST(Safetensors, RoundTripKeepsDtypeShapeAndValues) {
  const TensorMap tensors = every_dtype();
  expect_same_map(parse(dtlab::io::serialize_safetensors(tensors)), tensors);
}

TEST(Safetensors, RoundTripKeepsScalarsAndZeroSizeTensors) {
  TensorMap tensors;
  for (const auto& [name, t] : every_dtype()) {
    tensors[name + ".scalar"] = t.flatten()[0].clone();
    tensors[name + ".empty"] = torch::empty({0}, t.options());
    tensors[name + ".empty3d"] = torch::empty({3, 0, 2}, t.options());
  }
  ASSERT_EQ(tensors.at("f32.scalar").dim(), 0);
  const TensorMap back = parse(dtlab::io::serialize_safetensors(tensors));
  expect_same_map(back, tensors);
  EXPECT_EQ(back.at("i64.scalar").dim(), 0);
  EXPECT_EQ(back.at("bf16.empty3d").sizes(), torch::IntArrayRef({3, 0, 2}));
}

TEST(Safetensors, OnlyZeroSizeTensorsGiveAnEmptyDataBuffer) {
  const TensorMap tensors = {{"a", torch::empty({0})}, {"b", torch::empty({2, 0}, torch::kInt64)}};
  const std::string bytes = dtlab::io::serialize_safetensors(tensors);
  uint64_t n = 0;
  header_of(bytes, &n);
  EXPECT_EQ(bytes.size(), kLengthPrefixBytes + n);
  expect_same_map(parse(bytes), tensors);
}

TEST(Safetensors, EmptyMapRoundTrips) {
  EXPECT_TRUE(parse(dtlab::io::serialize_safetensors({})).empty());
}

TEST(Safetensors, NonContiguousTensorIsWrittenInLogicalOrder) {
  const torch::Tensor base = torch::arange(12, torch::kFloat32).reshape({3, 4});
  const torch::Tensor transposed = base.t();
  const torch::Tensor strided = torch::arange(20, torch::kInt64).slice(0, 0, 20, 3);
  ASSERT_FALSE(transposed.is_contiguous());
  ASSERT_FALSE(strided.is_contiguous());
  const TensorMap back =
      parse(dtlab::io::serialize_safetensors({{"t", transposed}, {"s", strided}}));
  EXPECT_EQ(back.at("t").sizes(), torch::IntArrayRef({4, 3}));
  EXPECT_TRUE(torch::equal(back.at("t"), transposed));
  EXPECT_TRUE(torch::equal(back.at("s"), strided));
}

TEST(Safetensors, ReturnedTensorsOwnTheirMemory) {
  std::string bytes = dtlab::io::serialize_safetensors({{"x", torch::ones({4})}});
  const TensorMap back = parse(bytes);
  std::fill(bytes.begin(), bytes.end(), '\0');
  bytes.clear();
  bytes.shrink_to_fit();
  EXPECT_TRUE(torch::equal(back.at("x"), torch::ones({4})));
}

TEST(Safetensors, MetadataRoundTrips) {
  const Metadata metadata = {{"format", "pt"}, {"step", "1200"}, {"note", "héllo \"quoted\""}};
  Metadata back = {{"stale", "entry"}};
  parse(dtlab::io::serialize_safetensors({{"x", torch::ones({2})}}, metadata), &back);
  EXPECT_EQ(back, metadata);
}

TEST(Safetensors, MetadataIsWrittenOnlyWhenNonEmpty) {
  const TensorMap tensors = {{"x", torch::ones({2})}};
  EXPECT_FALSE(header_of(dtlab::io::serialize_safetensors(tensors)).contains("__metadata__"));
  EXPECT_TRUE(
      header_of(dtlab::io::serialize_safetensors(tensors, {{"k", "v"}})).contains("__metadata__"));
  Metadata back = {{"stale", "entry"}};
  parse(dtlab::io::serialize_safetensors(tensors), &back);
  EXPECT_TRUE(back.empty());
}

TEST(Safetensors, HeaderIsCompactAndPaddedWithSpacesToMultipleOf8) {
  // Names of every length mod 8 exercise every amount of padding.
  for (size_t name_length = 1; name_length <= 2 * kHeaderAlignment; ++name_length) {
    const std::string bytes =
        dtlab::io::serialize_safetensors({{std::string(name_length, 'w'), torch::ones({1})}});
    uint64_t n = 0;
    const nlohmann::ordered_json header = header_of(bytes, &n);
    EXPECT_EQ(n % kHeaderAlignment, 0u) << "name length " << name_length;
    const std::string text = bytes.substr(kLengthPrefixBytes, n);
    const std::string compact = header.dump();
    EXPECT_EQ(text.substr(0, compact.size()), compact);
    EXPECT_EQ(text.find_first_not_of(' ', compact.size()), std::string::npos);
    EXPECT_LT(n - compact.size(), kHeaderAlignment);
  }
}

TEST(Safetensors, OffsetsAreConsecutiveInNameOrder) {
  const TensorMap tensors = every_dtype();
  const std::string bytes = dtlab::io::serialize_safetensors(tensors);
  uint64_t n = 0;
  const nlohmann::ordered_json header = header_of(bytes, &n);
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {  // std::map: name order
    SCOPED_TRACE(name);
    const nlohmann::ordered_json& entry = header.at(name);
    EXPECT_EQ(entry.at("shape").get<std::vector<int64_t>>(), tensor.sizes().vec());
    const auto offsets = entry.at("data_offsets").get<std::vector<uint64_t>>();
    ASSERT_EQ(offsets.size(), 2u);
    EXPECT_EQ(offsets[0], offset);
    offset += tensor.numel() * tensor.element_size();
    EXPECT_EQ(offsets[1], offset);
  }
  EXPECT_EQ(bytes.size(), kLengthPrefixBytes + n + offset);
  EXPECT_EQ(header.at("f32").at("dtype"), "F32");
  EXPECT_EQ(header.at("f16").at("dtype"), "F16");
  EXPECT_EQ(header.at("bf16").at("dtype"), "BF16");
  EXPECT_EQ(header.at("i64").at("dtype"), "I64");
}

TEST(Safetensors, ReadsImageWrittenByTheReferenceLibrary) {
  // Bytes of safetensors 0.8.0 (Python, safetensors.serialize) for
  //   {"weight": [[1, -2], [0.5, 3]] F32, "ids": [7, -1] I64, "bias": [1, -2, 0.5] BF16,
  //    "gain": 1.0 F16 scalar}, metadata={"format": "pt"}.
  // It writes __metadata__ first, then tensors by descending dtype, then name, so the offsets
  // are not in name order; the header is padded with spaces to N = 272.
  const std::string header = R"({"__metadata__":{"format":"pt"},)"
                             R"("ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},)"
                             R"("weight":{"dtype":"F32","shape":[2,2],"data_offsets":[16,32]},)"
                             R"("bias":{"dtype":"BF16","shape":[3],"data_offsets":[32,38]},)"
                             R"("gain":{"dtype":"F16","shape":[],"data_offsets":[38,40]}}      )";
  ASSERT_EQ(header.size(), 272u);
  const std::string data = dtlab::test::from_hex(
      "0700000000000000ffffffffffffffff"  // ids
      "0000803f000000c00000003f00004040"  // weight
      "803f00c0003f"                      // bias
      "003c");                            // gain
  Metadata metadata;
  const TensorMap t = parse(image(header, data), &metadata);
  EXPECT_EQ(metadata, (Metadata{{"format", "pt"}}));
  ASSERT_EQ(t.size(), 4u);
  EXPECT_TRUE(torch::equal(t.at("ids"), torch::tensor({int64_t{7}, int64_t{-1}})));
  EXPECT_TRUE(
      torch::equal(t.at("weight"), torch::tensor({1.0f, -2.0f, 0.5f, 3.0f}).reshape({2, 2})));
  EXPECT_EQ(t.at("bias").scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(t.at("bias").to(torch::kFloat32), torch::tensor({1.0f, -2.0f, 0.5f})));
  EXPECT_EQ(t.at("gain").scalar_type(), torch::kFloat16);
  EXPECT_EQ(t.at("gain").dim(), 0);
  EXPECT_EQ(t.at("gain").item<float>(), 1.0f);
}

TEST(Safetensors, WritesTheReferenceLibrarysBytesWhenDtypesAgree) {
  // safetensors 0.8.0 orders by dtype first, so with one dtype its order is name order too and
  // its output for {"b": [3] F32, "a": [1, 2] F32}, metadata={"format": "pt"} must match ours.
  const std::string expected = dtlab::test::from_hex(
      "9000000000000000"
      "7b225f5f6d657461646174615f5f223a7b22666f726d6174223a227074227d2c2261223a7b226474797065"
      "223a22463332222c227368617065223a5b325d2c22646174615f6f666673657473223a5b302c385d7d2c22"
      "62223a7b226474797065223a22463332222c227368617065223a5b315d2c22646174615f6f666673657473"
      "223a5b382c31325d7d7d2020202020"
      "0000803f0000004000004040");
  EXPECT_EQ(
      dtlab::io::serialize_safetensors(
          {{"b", torch::tensor({3.0f})}, {"a", torch::tensor({1.0f, 2.0f})}}, {{"format", "pt"}}),
      expected);
}

TEST(Safetensors, AcceptsUnpaddedHeaderAndUnknownEntryFields) {
  const std::string bytes = one_tensor(
      R"({"dtype":"F32","shape":[1],"data_offsets":[0,4],"extra":true})", bytes_of<float>({4.0f}));
  EXPECT_EQ(parse(bytes).at("layer.weight").item<float>(), 4.0f);
}

TEST(Safetensors, SaveAndLoadRoundTripThroughAFile) {
  const fs::path dir = dtlab::test::fresh_temp_dir("safetensors");
  const fs::path path = dir / "nested" / "model.safetensors";
  const TensorMap tensors = every_dtype();
  dtlab::io::save_safetensors(path, tensors, {{"format", "pt"}});
  EXPECT_EQ(dtlab::io::read_file(path),
            dtlab::io::serialize_safetensors(tensors, {{"format", "pt"}}));
  Metadata metadata;
  expect_same_map(dtlab::io::load_safetensors(path, &metadata), tensors);
  EXPECT_EQ(metadata.at("format"), "pt");
  int files = 0;
  for (const auto& e : fs::directory_iterator(path.parent_path())) files += e.is_regular_file();
  EXPECT_EQ(files, 1) << "a temporary file was left behind";
}

TEST(Safetensors, LoadErrorsNameThePath) {
  EXPECT_THROW_WITH(dtlab::io::load_safetensors("/nonexistent/dtlab/model.safetensors"),
                    dtlab::Error, "/nonexistent/dtlab/model.safetensors");
  const fs::path path = dtlab::test::fresh_temp_dir("safetensors_bad") / "bad.safetensors";
  dtlab::io::write_file_atomically(path, "short");
  EXPECT_THROW_WITH(dtlab::io::load_safetensors(path), dtlab::Error, path.string());
}

TEST(Safetensors, UnsupportedDtypeIsAnErrorNamingTensorDtypeAndSupportedOnes) {
  for (const std::string dtype : {"F64", "I8", "BOOL", "U8", "I32", "F8_E4M3", "f32"}) {
    SCOPED_TRACE(dtype);
    const std::string message = rejection(one_tensor(
        R"({"dtype":")" + dtype + R"(","shape":[1],"data_offsets":[0,8]})", std::string(8, '\0')));
    EXPECT_NE(message.find("layer.weight"), std::string::npos) << message;
    EXPECT_NE(message.find('"' + dtype + '"'), std::string::npos) << message;
    EXPECT_NE(message.find("F32, F16, BF16, I64"), std::string::npos) << message;
  }
}

TEST(Safetensors, SavingUnsupportedDtypeIsAnErrorNamingTheTensor) {
  for (const auto type : {torch::kFloat64, torch::kInt32, torch::kBool, torch::kInt8}) {
    SCOPED_TRACE(c10::toString(type));
    EXPECT_THROW_WITH(dtlab::io::serialize_safetensors(
                          {{"ok", torch::ones({1})}, {"bad.one", torch::ones({2}, type)}}),
                      dtlab::Error, "bad.one");
  }
  EXPECT_THROW_WITH(dtlab::io::serialize_safetensors({{"d", torch::ones({1}, torch::kFloat64)}}),
                    dtlab::Error, "Double");
}

TEST(Safetensors, SavingNameThatIsNotUtf8IsAnError) {
  EXPECT_THROW_WITH(dtlab::io::serialize_safetensors({{"bad\xff", torch::ones({1})}}), dtlab::Error,
                    "UTF-8");
  EXPECT_THROW_WITH(dtlab::io::serialize_safetensors({{"x", torch::ones({1})}}, {{"k", "\xfe"}}),
                    dtlab::Error, "UTF-8");
}

TEST(Safetensors, SavingUndefinedTensorOrReservedNameIsAnError) {
  EXPECT_THROW_WITH(dtlab::io::serialize_safetensors({{"missing", torch::Tensor()}}), dtlab::Error,
                    "missing");
  EXPECT_THROW_WITH(dtlab::io::serialize_safetensors({{"__metadata__", torch::ones({1})}}),
                    dtlab::Error, "reserved");
}

// ---- Corrupt images: each is a dtlab::Error naming the source and what is wrong. ----

TEST(SafetensorsCorrupt, ImageShorterThanLengthPrefixIsTruncated) {
  for (size_t size = 0; size < kLengthPrefixBytes; ++size)
    EXPECT_NE(rejection(std::string(size, '\0')).find("truncated"), std::string::npos);
}

TEST(SafetensorsCorrupt, HeaderLengthBeyondImageIsTruncated) {
  const std::string header = R"({})";
  const std::string message = rejection(le64(header.size() + 1) + header);
  EXPECT_NE(message.find("truncated"), std::string::npos) << message;
}

TEST(SafetensorsCorrupt, AbsurdHeaderLengthIsRejectedBeforeReading) {
  for (const uint64_t n : {uint64_t{100'000'001}, std::numeric_limits<uint64_t>::max()}) {
    const std::string message = rejection(le64(n) + "{}");
    EXPECT_NE(message.find("exceeds the limit"), std::string::npos) << message;
  }
}

TEST(SafetensorsCorrupt, HeaderThatIsNotJsonIsRejected) {
  for (const std::string header : {"", "{", "{\"a\":}", "not json", "{} trailing", "\xff\xfe"}) {
    const std::string message = rejection(image(header));
    EXPECT_NE(message.find("not valid JSON"), std::string::npos) << message;
  }
}

TEST(SafetensorsCorrupt, HeaderWithInvalidUtf8IsRejected) {
  const std::string message = rejection(image("{\"a\xff\":{}}"));
  EXPECT_NE(message.find("not valid JSON"), std::string::npos) << message;
}

TEST(SafetensorsCorrupt, HeaderThatIsNotAnObjectIsRejected) {
  for (const std::string header : {"[]", "[1,2]", "\"x\"", "42", "null"}) {
    const std::string message = rejection(image(header));
    EXPECT_NE(message.find("header is not a JSON object"), std::string::npos) << message;
  }
}

TEST(SafetensorsCorrupt, EntryThatIsNotAnObjectIsRejected) {
  for (const std::string entry : {"[]", "\"F32\"", "1", "null"}) {
    const std::string message = rejection(one_tensor(entry, ""));
    EXPECT_NE(message.find("layer.weight"), std::string::npos) << message;
    EXPECT_NE(message.find("not a JSON object"), std::string::npos) << message;
  }
}

TEST(SafetensorsCorrupt, EntryLackingAFieldIsRejected) {
  const std::string data(4, '\0');
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"dtype", R"({"shape":[1],"data_offsets":[0,4]})"},
      {"shape", R"({"dtype":"F32","data_offsets":[0,4]})"},
      {"data_offsets", R"({"dtype":"F32","shape":[1]})"},
  };
  for (const auto& [field, entry] : cases) {
    const std::string message = rejection(one_tensor(entry, data));
    EXPECT_NE(message.find("layer.weight"), std::string::npos) << message;
    EXPECT_NE(message.find("lacks \"" + field + "\""), std::string::npos) << message;
  }
}

TEST(SafetensorsCorrupt, EntryFieldsOfWrongJsonTypeAreRejected) {
  const std::string data(4, '\0');
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"\"dtype\" is not a string", R"({"dtype":32,"shape":[1],"data_offsets":[0,4]})"},
      {"\"shape\" is not an array", R"({"dtype":"F32","shape":"1","data_offsets":[0,4]})"},
      {"\"shape\" is not an array", R"({"dtype":"F32","shape":{"0":1},"data_offsets":[0,4]})"},
      {"\"data_offsets\"", R"({"dtype":"F32","shape":[1],"data_offsets":"0,4"})"},
      {"\"data_offsets\"", R"({"dtype":"F32","shape":[1],"data_offsets":{"begin":0}})"},
  };
  for (const auto& [needle, entry] : cases) {
    const std::string message = rejection(one_tensor(entry, data));
    EXPECT_NE(message.find("layer.weight"), std::string::npos) << message;
    EXPECT_NE(message.find(needle), std::string::npos) << message;
  }
}

TEST(SafetensorsCorrupt, NegativeOrNonIntegerShapeDimIsRejected) {
  for (const std::string dim : {"-1", "1.5", "1.0", "\"1\"", "null", "true", "[1]", "1e30"}) {
    const std::string message = rejection(one_tensor(
        R"({"dtype":"F32","shape":[)" + dim + R"(],"data_offsets":[0,4]})", std::string(4, '\0')));
    EXPECT_NE(message.find("layer.weight"), std::string::npos) << message;
    EXPECT_NE(message.find("shape dimension"), std::string::npos) << message;
  }
}

TEST(SafetensorsCorrupt, OffsetsThatAreNotTwoNonNegativeIntegersAreRejected) {
  for (const std::string offsets : {"[]", "[0]", "[0,4,8]", "[-1,3]", "[0,-4]", "[0.0,4]",
                                    "[0,4.5]", "[\"0\",4]", "[0,null]"}) {
    const std::string message = rejection(one_tensor(
        R"({"dtype":"F32","shape":[1],"data_offsets":)" + offsets + "}", std::string(4, '\0')));
    EXPECT_NE(message.find("layer.weight"), std::string::npos) << message;
    EXPECT_NE(message.find("not two non-negative integers"), std::string::npos) << message;
  }
}

TEST(SafetensorsCorrupt, OffsetsWithBeginAfterEndAreRejected) {
  const std::string message = rejection(
      one_tensor(R"({"dtype":"F32","shape":[1],"data_offsets":[8,4]})", std::string(8, '\0')));
  EXPECT_NE(message.find("layer.weight"), std::string::npos) << message;
  EXPECT_NE(message.find("begin after end"), std::string::npos) << message;
}

TEST(SafetensorsCorrupt, OffsetsBeyondDataBufferAreRejected) {
  const std::string message = rejection(
      one_tensor(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})", std::string(4, '\0')));
  EXPECT_NE(message.find("layer.weight"), std::string::npos) << message;
  EXPECT_NE(message.find("beyond the data buffer"), std::string::npos) << message;
  // An end so large that begin + size arithmetic could wrap must fail the same way.
  const std::string huge = std::to_string(std::numeric_limits<uint64_t>::max());
  const std::string message2 = rejection(
      one_tensor(R"({"dtype":"F32","shape":[0],"data_offsets":[)" + huge + "," + huge + "]}", ""));
  EXPECT_NE(message2.find("beyond the data buffer"), std::string::npos) << message2;
}

TEST(SafetensorsCorrupt, OffsetsThatDisagreeWithShapeAndDtypeAreRejected) {
  for (const std::string entry : {R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})",
                                  R"({"dtype":"F16","shape":[2],"data_offsets":[0,8]})",
                                  R"({"dtype":"I64","shape":[],"data_offsets":[0,4]})",
                                  R"({"dtype":"BF16","shape":[0],"data_offsets":[0,8]})"}) {
    const std::string message = rejection(one_tensor(entry, std::string(8, '\0')));
    EXPECT_NE(message.find("layer.weight"), std::string::npos) << message;
    EXPECT_NE(message.find("need"), std::string::npos) << message;
  }
}

TEST(SafetensorsCorrupt, ShapeWhoseSizeOverflowsIsRejected) {
  // 2^32 * 2^32 wraps to 0 elements in 64 bits, which would match empty offsets unchecked.
  const std::string message = rejection(
      one_tensor(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]})", ""));
  EXPECT_NE(message.find("layer.weight"), std::string::npos) << message;
  EXPECT_NE(message.find("overflows"), std::string::npos) << message;
  // 2^62 elements of 4 bytes wrap to 0 bytes.
  const std::string message2 = rejection(
      one_tensor(R"({"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]})", ""));
  EXPECT_NE(message2.find("overflows"), std::string::npos) << message2;
  // A dimension that does not fit a signed 64-bit size.
  const std::string message3 = rejection(
      one_tensor(R"({"dtype":"F32","shape":[9223372036854775808,0],"data_offsets":[0,0]})", ""));
  EXPECT_NE(message3.find("shape dimension"), std::string::npos) << message3;
}

TEST(SafetensorsCorrupt, OverlappingTensorsAreRejected) {
  const std::string message =
      rejection(image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                      std::string(12, '\0')));
  EXPECT_NE(message.find("overlap"), std::string::npos) << message;
  EXPECT_NE(message.find("\"a\""), std::string::npos) << message;
  EXPECT_NE(message.find("\"b\""), std::string::npos) << message;
  // Two tensors sharing the same bytes.
  const std::string message2 =
      rejection(image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                      R"("b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                      std::string(4, '\0')));
  EXPECT_NE(message2.find("overlap"), std::string::npos) << message2;
}

TEST(SafetensorsCorrupt, HoleBetweenTensorsIsRejected) {
  const std::string message =
      rejection(image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                      R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                      std::string(12, '\0')));
  EXPECT_NE(message.find("\"b\""), std::string::npos) << message;
  EXPECT_NE(message.find("hole"), std::string::npos) << message;
  // A buffer whose first bytes belong to nobody.
  const std::string message2 = rejection(
      one_tensor(R"({"dtype":"F32","shape":[1],"data_offsets":[4,8]})", std::string(8, '\0')));
  EXPECT_NE(message2.find("hole"), std::string::npos) << message2;
}

TEST(SafetensorsCorrupt, BytesAfterTheLastTensorAreRejected) {
  const std::string message = rejection(
      one_tensor(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})", std::string(5, '\0')));
  EXPECT_NE(message.find("belong to no tensor"), std::string::npos) << message;
  const std::string message2 = rejection(image("{}", "x"));
  EXPECT_NE(message2.find("belong to no tensor"), std::string::npos) << message2;
}

TEST(SafetensorsCorrupt, MetadataThatIsNotAnObjectOfStringsIsRejected) {
  for (const std::string metadata : {"[]", "\"pt\"", "null"}) {
    const std::string message = rejection(image(R"({"__metadata__":)" + metadata + "}"));
    EXPECT_NE(message.find("\"__metadata__\" is not a JSON object"), std::string::npos) << message;
  }
  for (const std::string value : {"1", "null", "[\"pt\"]", "{}", "true"}) {
    const std::string message = rejection(image(R"({"__metadata__":{"format":)" + value + "}}"));
    EXPECT_NE(message.find("\"format\" is not a string"), std::string::npos) << message;
  }
}

TEST(SafetensorsCorrupt, DuplicateTensorNameIsRejected) {
  const std::string message =
      rejection(image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                      R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                      std::string(8, '\0')));
  EXPECT_NE(message.find("\"a\""), std::string::npos) << message;
  EXPECT_NE(message.find("twice"), std::string::npos) << message;
}

TEST(SafetensorsCorrupt, EveryTruncationOfAValidImageIsAnError) {
  const std::string bytes = sample_image();
  ASSERT_NO_THROW(parse(bytes));
  for (size_t size = 0; size < bytes.size(); ++size) {
    SCOPED_TRACE(size);
    EXPECT_THROW(parse(bytes.substr(0, size)), dtlab::Error);
  }
}

TEST(SafetensorsCorrupt, FlippedHeaderBytesParseOrThrowDtlabErrorNeverCrash) {
  const std::string bytes = sample_image();
  uint64_t n = 0;
  header_of(bytes, &n);
  const size_t header_end = kLengthPrefixBytes + n;
  std::mt19937 rng(1234);  // fixed seed: reproducible
  constexpr int kRandomFlipsPerByte = 4;
  int parsed = 0;
  int rejected = 0;
  for (size_t pos = 0; pos < header_end; ++pos) {
    // Every single-bit flip, then a few random byte values.
    std::vector<unsigned char> masks;
    for (int bit = 0; bit < 8; ++bit) masks.push_back(static_cast<unsigned char>(1u << bit));
    for (int i = 0; i < kRandomFlipsPerByte; ++i)
      masks.push_back(static_cast<unsigned char>(std::uniform_int_distribution<int>(1, 255)(rng)));
    for (const unsigned char mask : masks) {
      std::string damaged = bytes;
      damaged[pos] = static_cast<char>(static_cast<unsigned char>(damaged[pos]) ^ mask);
      try {
        parse(damaged);
        ++parsed;
      } catch (const dtlab::Error&) {
        ++rejected;
      } catch (const std::exception& e) {
        ADD_FAILURE() << "byte " << pos << " ^ " << int(mask)
                      << ": not a dtlab::Error: " << e.what();
      }
    }
  }
  EXPECT_GT(rejected, 0);
  // Some flips are harmless (inside a metadata value, a name), so both outcomes occur.
  EXPECT_GT(parsed, 0);
}

// Note [Reading only what a rank keeps]: the file reader applies the image parser's rules to
// what it reads of a file, and says the same thing: every truncation of a valid file is refused
// with the same words, naming the file.
TEST(SafetensorsFile, EveryTruncationIsRefusedAsTheImageParserRefusesIt) {
  const std::string bytes = sample_image();
  const fs::path path = dtlab::test::fresh_temp_dir("safetensors_file") / "model.safetensors";
  for (size_t size = 0; size < bytes.size(); ++size) {
    SCOPED_TRACE(size);
    dtlab::io::write_file_atomically(path, bytes.substr(0, size));
    std::string by_parser, by_file;
    try {
      dtlab::io::parse_safetensors(bytes.substr(0, size), path.string());
    } catch (const dtlab::Error& e) {
      by_parser = e.what();
    }
    try {
      dtlab::io::SafetensorsFile file(path);
    } catch (const dtlab::Error& e) {
      by_file = e.what();
    }
    ASSERT_FALSE(by_parser.empty());
    EXPECT_EQ(by_file, by_parser);
  }
}

// A run of a tensor's elements is read from its offsets into the tensor that keeps it, converted
// to its dtype, and the file's other bytes are never read.
TEST(SafetensorsFile, ReadsARunOfElementsAndNothingElse) {
  const TensorMap tensors = every_dtype();
  const fs::path path = dtlab::test::fresh_temp_dir("safetensors_runs") / "model.safetensors";
  dtlab::io::save_safetensors(path, tensors);
  const dtlab::io::SafetensorsFile file(path);
  EXPECT_EQ(file.bytes_read(), 0u) << "opening reads the header, not the data";
  const dtlab::io::SafetensorsEntry* f32 = file.find("f32");
  ASSERT_NE(f32, nullptr);
  torch::Tensor run = torch::full({5}, -1.0f);
  file.read_into(*f32, 3, run);
  EXPECT_TRUE(torch::equal(run, tensors.at("f32").reshape({-1}).narrow(0, 3, 5)));
  EXPECT_EQ(file.bytes_read(), 5u * sizeof(float));
  // F16 into float32: converted, two bytes an element read.
  torch::Tensor half = torch::zeros({4});
  file.read_into(*file.find("f16"), 6, half);
  EXPECT_TRUE(torch::equal(half, tensors.at("f16").reshape({-1}).narrow(0, 6, 4).to(torch::kFloat)));
  EXPECT_EQ(file.bytes_read(), 5u * sizeof(float) + 4u * 2);
  expect_same_tensor(file.read(*file.find("i64")), tensors.at("i64"), "i64");
  EXPECT_EQ(file.find("absent"), nullptr);
  torch::Tensor past = torch::zeros({2});
  EXPECT_THROW(file.read_into(*f32, 11, past), dtlab::Error);  // elements [11, 13) of 12
}

}  // namespace safetensors_test
