// The Unicode predicates and transforms that Hugging Face's BERT tokenizer takes from Python
// (str.lower, str.isspace, unicodedata), reimplemented on code points with utf8proc.
#pragma once

#include <string>
#include <string_view>

// Checked code point by code point against Python 3.11 (the golden data's Python): every
// predicate and transform below agrees except on 4,482 code points, all of them unassigned in
// Unicode 14 (Python 3.11) and assigned in Unicode 15 (utf8proc 2.8). Python sees those as
// category Cn and drops them as control characters; we keep them, as Python 3.12+ would.
namespace dtlab::tokenizer::unicode {

// UTF-8 to code points. Each invalid byte sequence (stray or truncated bytes, overlong forms,
// surrogates) becomes U+FFFD, which the BERT tokenizer drops like Python's errors="replace".
std::u32string decode_utf8(std::string_view text);
std::string encode_utf8(std::u32string_view text);
bool is_valid_utf8(std::string_view text);

// Hugging Face's _is_whitespace: space, \t, \n, \r or category Zs.
bool is_whitespace(char32_t c);
// Hugging Face's _is_control: any category C* (Cc, Cf, Cs, Co, Cn) except \t, \n and \r.
bool is_control(char32_t c);
// Hugging Face's _is_punctuation: non-alphanumeric printable ASCII or any category P*.
bool is_punctuation(char32_t c);
// Hugging Face's _is_chinese_char: the CJK Unified Ideograph blocks (not kana, not Hangul).
bool is_chinese_char(char32_t c);
// Python's str.isspace, which str.split() splits on. After cleaning only the space and the
// line and paragraph separators U+2028 and U+2029 (categories Zl, Zp) can still be present.
bool is_python_space(char32_t c);
// Category Lu or Lt.
bool is_upper_case_letter(char32_t c);

// Python's str.lower applied to one code point at a time (no final-sigma context; see
// bert_tokenizer.cpp for why that is what BertTokenizer does). U+0130 'İ' becomes two code
// points, "i" and U+0307, as in Python.
std::u32string to_lower(std::u32string_view text);
// Canonical composition (NFC), as unicodedata.normalize("NFC").
std::u32string nfc(std::u32string_view text);
// Hugging Face's _run_strip_accents: canonical decomposition (NFD), then every nonspacing mark
// (category Mn) removed. The result stays decomposed (Hangul syllables come out as jamo).
std::u32string strip_accents(std::u32string_view text);

}  // namespace dtlab::tokenizer::unicode
