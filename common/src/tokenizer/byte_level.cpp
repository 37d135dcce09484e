// GPT-2's byte-level symbols, pre-tokenisation and lossy decoding: see byte_level.h.
#include "dtlab/tokenizer/byte_level.h"

#include <utf8proc.h>

#include "dtlab/tokenizer/unicode.h"

namespace dtlab::tokenizer::byte_level {
namespace {

constexpr char32_t kFirstShiftedSymbol = 0x100;  // where the 68 non-printable bytes go
constexpr char32_t kSpace = U' ';
constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

// The bytes GPT-2 keeps as they are: printable ASCII and Latin-1 except the soft hyphen.
bool stands_for_itself(int byte) {
  return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
         (byte >= 0xAE && byte <= 0xFF);
}

// Symbol of each byte, as code points; bytes_to_unicode() of GPT-2's encoder.py.
std::array<char32_t, kByteCount> make_symbol_table() {
  std::array<char32_t, kByteCount> table{};
  char32_t next_shifted = kFirstShiftedSymbol;
  for (int b = 0; b < kByteCount; ++b)
    table[b] = stands_for_itself(b) ? static_cast<char32_t>(b) : next_shifted++;
  return table;
}

const std::array<char32_t, kByteCount>& symbol_table() {
  static const std::array<char32_t, kByteCount> table = make_symbol_table();
  return table;
}

// The classes of GPT-2's pattern: \s, \p{L}, \p{N} and everything else.
enum class CharClass { kSpace, kLetter, kNumber, kOther };

CharClass char_class(char32_t c) {
  // Oniguruma's \s for Unicode text: U+0009..U+000D, U+0085 and the Z* categories.
  if ((c >= 0x09 && c <= 0x0D) || c == 0x85) return CharClass::kSpace;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_ZS:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
      return CharClass::kSpace;
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
      return CharClass::kLetter;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return CharClass::kNumber;
    default:
      return CharClass::kOther;
  }
}

// 's|'t|'re|'ve|'m|'ll|'d, in the pattern's order (none is a prefix of another).
constexpr std::u32string_view kContractions[] = {U"'s", U"'t", U"'re", U"'ve", U"'m", U"'ll",
                                                 U"'d"};

// End of the match that starts at i: the pattern's alternatives in order, as a backtracking
// engine tries them.
size_t match_end(std::u32string_view text, size_t i) {
  const size_t n = text.size();
  for (std::u32string_view c : kContractions)
    if (text.compare(i, c.size(), c) == 0) return i + c.size();
  // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": an optional U+0020, then a run of one
  // class. Backtracking over the optional space never helps: the space itself is \s.
  const size_t start = text[i] == kSpace ? i + 1 : i;
  if (start < n) {
    const CharClass run = char_class(text[start]);
    if (run != CharClass::kSpace) {
      size_t end = start + 1;
      while (end < n && char_class(text[end]) == run) ++end;
      return end;
    }
  }
  // text[i] is whitespace. "\s+(?!\S)": the whole run when it ends the text, otherwise the run
  // less its last character (which then starts the next match, e.g. " b"). A run of one before
  // text cannot give up a character, so "\s+" takes it.
  size_t end = i + 1;
  while (end < n && char_class(text[end]) == CharClass::kSpace) ++end;
  if (end == n || end - i == 1) return end;
  return end - 1;
}

}  // namespace

const std::array<std::string, kByteCount>& byte_symbols() {
  static const std::array<std::string, kByteCount> symbols = [] {
    std::array<std::string, kByteCount> s;
    for (int b = 0; b < kByteCount; ++b)
      s[b] = unicode::encode_utf8(std::u32string(1, symbol_table()[b]));
    return s;
  }();
  return symbols;
}

std::optional<uint8_t> symbol_byte(char32_t symbol) {
  // Every symbol is below U+0100 + 68, so a table indexed by code point inverts the mapping.
  static const std::vector<int> byte_of = [] {
    std::vector<int> t(kFirstShiftedSymbol + kByteCount, -1);
    for (int b = 0; b < kByteCount; ++b) t[symbol_table()[b]] = b;
    return t;
  }();
  if (symbol >= byte_of.size() || byte_of[symbol] < 0) return std::nullopt;
  return static_cast<uint8_t>(byte_of[symbol]);
}

std::string to_symbols(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += byte_symbols()[static_cast<uint8_t>(c)];
  return out;
}

std::vector<std::string> pre_tokenize(std::string_view text) {
  const std::u32string chars = unicode::decode_utf8(utf8_lossy(text));
  std::vector<std::string> pieces;
  size_t i = 0;
  while (i < chars.size()) {
    const size_t end = match_end(chars, i);
    pieces.push_back(unicode::encode_utf8(std::u32string_view(chars).substr(i, end - i)));
    i = end;
  }
  return pieces;
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  const size_t n = bytes.size();
  size_t i = 0;
  while (i < n) {
    const auto lead = static_cast<uint8_t>(bytes[i]);
    if (lead < 0x80) {
      out.push_back(bytes[i++]);
      continue;
    }
    // Continuation bytes a lead byte needs, and the range its first one must be in (the
    // narrower ranges exclude overlong forms, surrogates and code points above U+10FFFF).
    int needed = 0;
    uint8_t low = 0x80, high = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
      needed = 1;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      needed = 2;
      if (lead == 0xE0) low = 0xA0;
      if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      needed = 3;
      if (lead == 0xF0) low = 0x90;
      if (lead == 0xF4) high = 0x8F;
    }
    size_t next = i + 1;
    for (int k = 0; k < needed; ++k, ++next) {
      const uint8_t lo = k == 0 ? low : 0x80;
      const uint8_t hi = k == 0 ? high : 0xBF;
      if (next >= n || static_cast<uint8_t>(bytes[next]) < lo ||
          static_cast<uint8_t>(bytes[next]) > hi)
        break;
    }
    if (needed > 0 && next == i + 1 + static_cast<size_t>(needed)) {
      out.append(bytes.substr(i, next - i));
    } else {
      // The well-formed prefix read so far (at least the lead byte) becomes one U+FFFD.
      out.append(kReplacementCharacter);
    }
    i = next;
  }
  return out;
}

}  // namespace dtlab::tokenizer::byte_level
