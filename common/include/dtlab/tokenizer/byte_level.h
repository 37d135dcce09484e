// The byte-level pieces GPT-2's tokenizer and the BPE trainer share: GPT-2's byte-to-symbol
// table, its pre-tokenisation regex (written out by hand, no regex library) and the lossy UTF-8
// decoding of Hugging Face's ByteLevel decoder. No vocabulary or merges here.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dtlab::tokenizer::byte_level {

// Note [Byte-level symbols]
// GPT-2 (and tokenizers' ByteLevel) never lets BPE see raw bytes: every byte is first mapped
// to one printable code point, so that vocabulary entries are readable strings without spaces
// or control characters. bytes_to_unicode() in GPT-2's encoder.py: the bytes '!'..'~',
// 0xA1..0xAC and 0xAE..0xFF stand for themselves; the other 68 bytes (controls, space, 0x7F,
// 0x80..0xA0, 0xAD), in increasing order, become U+0100, U+0101, ... U+0143. So the space is
// U+0120 'Ġ' and the newline U+010A 'Ċ'. A vocabulary entry is the concatenation of the
// symbols of its bytes.
constexpr int kByteCount = 256;

// The symbol of each byte, UTF-8 encoded (one or two bytes long).
const std::array<std::string, kByteCount>& byte_symbols();
// The byte a symbol stands for; nullopt for any other code point.
std::optional<uint8_t> symbol_byte(char32_t symbol);
// Each byte of text replaced by its symbol: "Hi there" -> "HiĠthere".
std::string to_symbols(std::string_view bytes);

// GPT-2's pre-tokenisation: the matches of
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// as tokenizers' ByteLevel pre-tokenizer runs it (Oniguruma, what GPT2TokenizerFast uses):
// the alternatives are tried in this order at each position and the first that matches wins.
//   - contractions are lower case only: "'S" is "'" then "S";
//   - the optional leading character is U+0020 only, never a tab or newline;
//   - \s is Oniguruma's: U+0009..U+000D, U+0085 and categories Zs, Zl, Zp (so U+00A0 and
//     U+3000 are spaces, U+001C..U+001F and U+200B are not); \p{L} is L*, \p{N} is N*
//     (utf8proc's Unicode 15 tables; Oniguruma's can differ on code points assigned lately);
//   - combining marks (M*) are neither letters nor numbers: "e" + U+0301 is two pieces;
//   - a run of whitespace before a word leaves its last character to that word: "a   b" is
//     "a", "  ", " b"; a single one, or one at the end of the text, stays whole.
// The pieces are UTF-8 substrings of text and concatenate back to it. Bytes that are not valid
// UTF-8 are first replaced by U+FFFD as utf8_lossy does (Python and Rust strings cannot hold
// them; Python's bytes.decode("utf-8", errors="replace") gives the same text).
std::vector<std::string> pre_tokenize(std::string_view text);

// bytes as UTF-8 with each invalid sequence replaced by U+FFFD, exactly as Rust's
// String::from_utf8_lossy (what tokenizers' ByteLevel decoder ends with): one U+FFFD per
// maximal prefix of a well-formed sequence, so "\xE4\xB8" (a cut "中") is one U+FFFD, while
// "\xED\xA0\x80" (a surrogate) and "\xC0\x80" (overlong) are one per byte.
std::string utf8_lossy(std::string_view bytes);

}  // namespace dtlab::tokenizer::byte_level
