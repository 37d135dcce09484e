// Unicode helpers of the BERT tokenizer: Python's str and unicodedata behaviour via utf8proc.
#include "dtlab/tokenizer/unicode.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>
#include <stdexcept>

namespace dtlab::tokenizer::unicode {
namespace {

constexpr char32_t kReplacementCharacter = 0xFFFD;
constexpr char32_t kDottedCapitalI = 0x0130;      // 'İ'
constexpr char32_t kCombiningDotAbove = 0x0307;   // what Python's lower() adds after the 'i'
constexpr int kMaxUtf8Bytes = 4;

struct CodePointRange {
  char32_t first, last;
};

// _is_chinese_char in transformers' tokenization_bert.py, range for range.
constexpr CodePointRange kChineseRanges[] = {
    {0x4E00, 0x9FFF},   {0x3400, 0x4DBF},   {0x20000, 0x2A6DF}, {0x2A700, 0x2B73F},
    {0x2B740, 0x2B81F}, {0x2B820, 0x2CEAF}, {0xF900, 0xFAFF},   {0x2F800, 0x2FA1F},
};

// Python's _PyUnicode_IsWhitespace (bidirectional class WS, B or S, or category Zs).
constexpr CodePointRange kPythonSpaceRanges[] = {
    {0x0009, 0x000D}, {0x001C, 0x0020}, {0x0085, 0x0085}, {0x00A0, 0x00A0},
    {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F},
    {0x205F, 0x205F}, {0x3000, 0x3000},
};

template <size_t N>
bool in_ranges(char32_t c, const CodePointRange (&ranges)[N]) {
  for (const CodePointRange& r : ranges)
    if (c >= r.first && c <= r.last) return true;
  return false;
}

utf8proc_category_t category(char32_t c) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}

// Runs utf8proc_map (normalisation) on code points; utf8proc normalises UTF-8 only.
std::u32string map_utf8(std::u32string_view text, utf8proc_option_t options) {
  const std::string utf8 = encode_utf8(text);
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(utf8.data()),
                   static_cast<utf8proc_ssize_t>(utf8.size()), &out, options);
  // Our input is always valid UTF-8, so a failure is a bug or an allocation failure.
  if (n < 0) throw std::runtime_error(std::string("utf8proc_map: ") + utf8proc_errmsg(n));
  const std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(out, &std::free);
  return decode_utf8(std::string_view(reinterpret_cast<const char*>(out), static_cast<size_t>(n)));
}

}  // namespace

std::u32string decode_utf8(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  const auto* end = p + text.size();
  while (p < end) {
    utf8proc_int32_t c = 0;
    const utf8proc_ssize_t n = utf8proc_iterate(p, end - p, &c);
    if (n <= 0) {
      // Skipping one byte at a time keeps every valid character Python's errors="replace"
      // keeps; only the number of U+FFFD differs, and they are all dropped later.
      out.push_back(kReplacementCharacter);
      ++p;
    } else {
      out.push_back(static_cast<char32_t>(c));
      p += n;
    }
  }
  return out;
}

bool is_valid_utf8(std::string_view text) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  const auto* end = p + text.size();
  while (p < end) {
    utf8proc_int32_t c = 0;
    const utf8proc_ssize_t n = utf8proc_iterate(p, end - p, &c);
    if (n <= 0) return false;
    p += n;
  }
  return true;
}

std::string encode_utf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  utf8proc_uint8_t buffer[kMaxUtf8Bytes];
  for (char32_t c : text) {
    const utf8proc_ssize_t n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(c), buffer);
    out.append(reinterpret_cast<const char*>(buffer), static_cast<size_t>(n));
  }
  return out;
}

bool is_whitespace(char32_t c) {
  if (c == U' ' || c == U'\t' || c == U'\n' || c == U'\r') return true;
  return category(c) == UTF8PROC_CATEGORY_ZS;
}

bool is_control(char32_t c) {
  if (c == U'\t' || c == U'\n' || c == U'\r') return false;
  switch (category(c)) {
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
      return true;
    default:
      return false;
  }
}

bool is_punctuation(char32_t c) {
  // All non-alphanumeric printable ASCII counts, even "$", "^" or "`" (categories S*).
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
      (c >= 123 && c <= 126))
    return true;
  switch (category(c)) {
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
      return true;
    default:
      return false;
  }
}

bool is_chinese_char(char32_t c) { return in_ranges(c, kChineseRanges); }

bool is_python_space(char32_t c) { return in_ranges(c, kPythonSpaceRanges); }

bool is_upper_case_letter(char32_t c) {
  const utf8proc_category_t cat = category(c);
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LT;
}

std::u32string to_lower(std::u32string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (char32_t c : text) {
    if (c == kDottedCapitalI) {
      // Python uses the full mapping of SpecialCasing.txt; utf8proc only the simple one ("i").
      out.push_back(U'i');
      out.push_back(kCombiningDotAbove);
    } else {
      out.push_back(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
    }
  }
  return out;
}

std::u32string nfc(std::u32string_view text) {
  return map_utf8(text, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
}

std::u32string strip_accents(std::u32string_view text) {
  const std::u32string decomposed =
      map_utf8(text, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE));
  std::u32string out;
  out.reserve(decomposed.size());
  for (char32_t c : decomposed)
    if (category(c) != UTF8PROC_CATEGORY_MN) out.push_back(c);
  return out;
}

}  // namespace dtlab::tokenizer::unicode
