"""Golden test data for the kit's C++ BertTokenizer (tests/tokenizer_test.cpp).

Hugging Face's slow, pure-Python transformers.BertTokenizer is the oracle (not BertTokenizerFast,
whose Rust implementation differs in corner cases). This script writes two small vocabularies
of its own design, runs the tokenizer on tricky text and sentence pairs, and records what it
returns.

Rerun (from the repo root; tooling only, the kit never runs Python):

    tests/golden/setup_venv.sh && .venv-golden/bin/python tests/golden/make_tokenizer_golden.py

Generated with: transformers 4.40.2, tokenizers 0.19.1, Python 3.11 (unicodedata 14.0.0). The
output is deterministic: rerunning rewrites byte-identical files.

Writes tests/golden/tokenizer/
  cased/      vocab.txt with upper- and lower-case entries, and the tokenizer_config.json (plus
              special_tokens_map.json) that save_pretrained writes for do_lower_case=False, so
              the C++ side reads a real Hugging Face config. vocab.txt has one empty line: an
              empty line is a token in Hugging Face's load_vocab and shifts every later id.
  uncased/    vocab.txt only, lower-case and with jamo for accent-stripped Hangul. Without a
              config Hugging Face assumes do_lower_case=True, and the C++ side infers the same
              from the vocabulary.
  cases.json  "configs": five tokenizer settings over those two folders;
              "tokenize": per text, the tokens and ids under every config;
              "encode": sentences and pairs with max_length, truncation="longest_first" and
              padding="max_length": input_ids, token_type_ids, attention_mask.
Texts that are not valid UTF-8 are stored as "text_hex" and decoded here with errors="replace"
(each bad sequence becomes U+FFFD, which the tokenizer drops).
"""

import json
import os
import shutil

import tokenizers
import transformers
from transformers import BertTokenizer

# Hugging Face warns on every pair truncated with longest_first; the warning is about overflow
# tokens, which we do not ask for.
transformers.logging.set_verbosity_error()

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "tokenizer")

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]"]
PUNCTUATION = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + list("¡¿«»…–—“”‘’·！、。")
DIGITS = [str(d) for d in range(10)]
LOWER = [chr(c) for c in range(ord("a"), ord("z") + 1)]
UPPER = [chr(c) for c in range(ord("A"), ord("Z") + 1)]
ACCENTED = list("éèêëàâäåçïîñöôüúáíóßæ")
GREEK = list("αβγδοςσ")
# U+8C48 is what NFC makes of the compatibility ideograph U+F900; U+20000 is in extension B.
CJK = list("中国人你好的日本我爱語\u8c48\U00020000")
EMOJI = ["😀", "❤"]  # no pizza: "🍕" is unknown
# Lower-case words and pieces; "una ##ffa ##ble" and "un ##aff ##able" compete for "unaffable".
WORDS = """the quick brown fox jumps over lazy dog hello world un ##aff ##able una ##ffa ##ble
cafe café au lait naive naïve resume résumé ##s don t stop it costs wait what and is this a test
istanbul ist ##anbul angstrom ångström play ##ing ##ed ##er ##bel ##iev email example com hash
##tag mr o neill 2nd place finish p m dit il bonjour sep mask cls ##ly ##tion ##al привет
ｈｅｌｌｏ finance ǆ""".split()
CONTINUATIONS = ["##" + c for c in LOWER + DIGITS + ACCENTED[:6] + GREEK]
UPPER_ONLY = ["The", "Hello", "World", "Café", "Ångström", "İ", "##stanbul", "Istanbul", "U",
              "S", "A", "O", "Mr", "Neill", "Σ", "Ο", "Δ", "##Σ", "##Ο", "##Δ", "É", "Å", "Ö",
              "한", "##국", "##어", "ＨＥＬＬＯ", "Bonjour", "Ǆ", "ǅ"]
UPPER_CONTINUATIONS = ["##" + c for c in UPPER]
# Hangul after NFD (what strip_accents makes of 한국어): leading consonant, vowel, final.
JAMO = ["ᄒ", "##ᅡ", "##ᆫ", "##ᄀ", "##ᅮ", "##ᆨ", "##ᄋ", "##ᅥ"]


def unique(entries):
    seen, out = set(), []
    for e in entries:
        if e not in seen:
            seen.add(e)
            out.append(e)
    return out


def cased_vocab():
    v = unique(SPECIALS + PUNCTUATION + DIGITS + LOWER + UPPER + ACCENTED + GREEK + CJK + EMOJI +
               WORDS + CONTINUATIONS + UPPER_ONLY + UPPER_CONTINUATIONS)
    # The empty line, after the specials: every later id depends on it being counted.
    return v[:len(SPECIALS)] + [""] + v[len(SPECIALS):]


def uncased_vocab():
    return unique(SPECIALS + PUNCTUATION + DIGITS + LOWER + ACCENTED + GREEK + CJK + EMOJI +
                  WORDS + CONTINUATIONS + JAMO)


# name -> (folder, BertTokenizer keyword arguments; None means from_pretrained(folder) as is)
CONFIGS = {
    "cased": ("cased", None),
    "uncased": ("uncased", None),
    "cased_strip_accents": ("cased", dict(do_lower_case=False, strip_accents=True)),
    "uncased_keep_accents": ("uncased", dict(do_lower_case=True, strip_accents=False)),
    "uncased_no_cjk_split": ("uncased", dict(do_lower_case=True, tokenize_chinese_chars=False)),
}

TEXTS = [
    "Hello, world!",
    "unaffable",
    "Café au lait",
    "naïve résumé",
    "Ångström",
    "A\u030angstro\u0308m",  # decomposed: NFC makes it the same as above
    "Wait... what?!",
    "U.S.A.",
    "don't stop",
    "It costs $5.00!",
    "我爱中国 and 日本語",
    "hello中国world",
    "\uf900 is a compatibility ideograph, \U00020000 is in extension B",
    "Øresund smørrebrød",  # ø is not in either vocabulary
    "xqzj",
    "a" * 100,
    "a" * 101,
    "supercalifragilisticexpialidocious" * 3 + " end",
    "tab\there\nnewline\r\nend",
    "bell\x07char and nul\x00byte and del\x7f and \x85nel",
    "zero\u200bwidth join\u200der and nbsp\u00a0here \ufeffbom soft\u00adhyphen",
    "line\u2028separator\u2029paragraph",
    "em\u2003space and ideographic\u3000space",
    "I ❤️ pizza 😀🍕",
    "İstanbul ISTANBUL ıstanbul",
    "ΟΔΟΣ Σ σ ς",
    "한국어",
    "\u0301 alone and e\u0301",
    "ＨＥＬＬＯ！ｈｅｌｌｏ",
    "Kelvin \u212a and Ångström sign \u212b",
    "x²+y²=z³",
    "«Bonjour» — dit-il…",
    "ﬁnance finance",
    "Ǆemal ǅemal ǆemal",
    "private\ue000use and unassigned\u0378",
    "Mr. O'Neill's 2nd-place finish (3:45 p.m.)",
    "email@example.com #hashtag ~tilde^caret`backtick|pipe",
    "привет Привет",
    "hello [MASK] world",
    "[CLS] the [SEP] dog [SEP]",
    "[sep] [Mask] [mask]",
    "x[MASK]y[MASK][MASK]",
    "[MA\u200bSK] [UNK] [PAD]",
    "[unused0]",
    "",
    "   \t\n  ",
    "The Quick Brown Fox",
]
# Stored as hex: not valid UTF-8.
INVALID_UTF8 = [
    b"ab\xffcd \xc3( end",
    b"trunc\xe2\x82 and \xed\xa0\x80surrogate and \xc0\x80overlong",
]

PAIRS = [
    # (config, a, b or None, max_lengths)
    ("uncased", "The quick brown fox", "jumps over the lazy dog", [64, 12, 10, 9, 8, 7, 5, 3]),
    ("uncased", "a b c d", "e f g h", [16, 11, 10, 9, 8, 7, 6, 4, 3]),
    ("uncased", "one two three four five six seven eight", "nine", [16, 8, 6, 5, 4, 3]),
    ("uncased", "x", "y y y y y y", [16, 8, 6, 5, 4, 3]),
    ("uncased", "unaffable unaffable", "unaffable", [12, 8, 7, 6, 5]),
    ("uncased", "", "", [3, 5]),
    ("uncased", "", "hello world", [4, 8]),
    ("uncased", "hello [MASK] world", "[SEP] is special", [16, 7]),
    ("cased", "The Quick Brown Fox", "Hello, World!", [32, 9, 6]),
    ("cased", "Café au lait", "naïve résumé", [16, 7]),
    ("uncased", "hello world", None, [16, 4, 3]),
    ("uncased", "The quick brown fox jumps over the lazy dog", None, [20, 8, 5]),
    ("cased", "", None, [2, 4]),
]


def write_vocab(folder, entries):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "vocab.txt"), "w", encoding="utf-8", newline="\n") as f:
        for e in entries:
            f.write(e + "\n")


def make_folders():
    shutil.rmtree(OUT, ignore_errors=True)
    cased_dir = os.path.join(OUT, "cased")
    uncased_dir = os.path.join(OUT, "uncased")
    write_vocab(cased_dir, cased_vocab())
    write_vocab(uncased_dir, uncased_vocab())
    # Let Hugging Face write its own config for the cased folder; it rewrites vocab.txt the same.
    BertTokenizer(os.path.join(cased_dir, "vocab.txt"), do_lower_case=False).save_pretrained(
        cased_dir)
    # Only these three files, so the C++ side sees exactly what a hub folder would hold.
    assert sorted(os.listdir(cased_dir)) == [
        "special_tokens_map.json", "tokenizer_config.json", "vocab.txt"], os.listdir(cased_dir)


def load(name):
    folder, kwargs = CONFIGS[name]
    path = os.path.join(OUT, folder)
    if kwargs is None:
        return BertTokenizer.from_pretrained(path)
    return BertTokenizer(os.path.join(path, "vocab.txt"), **kwargs)


def config_record(name):
    folder, kwargs = CONFIGS[name]
    tok = load(name)
    b = tok.basic_tokenizer
    return {"folder": folder, "from_pretrained": kwargs is None, "do_lower_case": b.do_lower_case,
            "strip_accents": b.strip_accents, "tokenize_chinese_chars": b.tokenize_chinese_chars}


def main():
    make_folders()
    tokenizers_by_name = {name: load(name) for name in CONFIGS}
    assert not tokenizers_by_name["cased"].do_lower_case
    assert tokenizers_by_name["uncased"].do_lower_case

    texts = [{"text": t} for t in TEXTS] + [{"text_hex": b.hex()} for b in INVALID_UTF8]
    tokenize_cases = []
    for entry in texts:
        text = entry["text"] if "text" in entry else bytes.fromhex(entry["text_hex"]).decode(
            "utf-8", errors="replace")
        case = dict(entry)
        case["results"] = {}
        for name, tok in tokenizers_by_name.items():
            tokens = tok.tokenize(text)
            case["results"][name] = {"tokens": tokens, "ids": tok.convert_tokens_to_ids(tokens)}
        tokenize_cases.append(case)

    encode_cases = []
    for name, a, b, lengths in PAIRS:
        tok = tokenizers_by_name[name]
        for max_length in lengths:
            enc = tok(a, b, max_length=max_length, truncation="longest_first",
                      padding="max_length")
            assert len(enc["input_ids"]) == max_length, (a, b, max_length)
            encode_cases.append({
                "config": name, "a": a, "b": b, "max_length": max_length,
                "input_ids": enc["input_ids"], "token_type_ids": enc["token_type_ids"],
                "attention_mask": enc["attention_mask"]})

    # One case per line keeps the file small and its diffs readable.
    lines = ["{",
             f' "generator": "tests/golden/make_tokenizer_golden.py",',
             f' "transformers": {json.dumps(transformers.__version__)},',
             f' "tokenizers": {json.dumps(tokenizers.__version__)},',
             ' "configs": {']
    names = list(CONFIGS)
    for i, name in enumerate(names):
        sep = "," if i + 1 < len(names) else ""
        lines.append(f'  {json.dumps(name)}: {json.dumps(config_record(name))}{sep}')
    lines.append(" },")
    for key, cases, last in (("tokenize", tokenize_cases, False), ("encode", encode_cases, True)):
        lines.append(f' "{key}": [')
        for i, case in enumerate(cases):
            sep = "," if i + 1 < len(cases) else ""
            lines.append("  " + json.dumps(case, ensure_ascii=False) + sep)
        lines.append(" ]" + ("" if last else ","))
    lines.append("}")
    with open(os.path.join(OUT, "cases.json"), "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {OUT}: {len(tokenize_cases)} texts x {len(CONFIGS)} configs, "
          f"{len(encode_cases)} encodings")


if __name__ == "__main__":
    main()
