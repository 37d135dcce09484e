// The offline translation set: an invented German-like language and its English-like translation,
// small enough for a tiny GPT-2 to learn in a few epochs on a laptop, written deterministically
// from a seed in the format of data/translation.h. Tooling: the demo and the tests use it; no
// exercise binary does.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "dtlab/data/translation.h"

namespace dtlab::tooling {

// The language. Note [Invented translation rule]
//
// Lexicon: 200 invented content-word pairs drawn from the seed (80 nouns, 50 verbs, 6 verbs of
// saying, 40 adjectives, 24 adverbs). German-like words use German spelling (sch, ei, ü, ...),
// nouns are capitalised, verbs end in -t; English-like words use English spelling, verbs end in
// -s. The two vocabularies share no word, so copying the source scores almost nothing. Function
// words are real: der/den -> the, ein/einen -> a, dass -> that, weil -> because.
//
// Sentences (4 to 10 words, one final period), NP = determiner [adjective] noun; German
// adjectives take the endings of a masculine noun (der giele, ein gieler, den/einen gielen),
// English ones none. With seed 0:
//   S V O.                     Ein Gietach kalt den Kubreng.
//                              A rineck shoats the soacap.
//   S V O Adv.                 Der Taugöng stürt den Feitres dubrölich.
//                              The loat fayts the gritad stoosily.
//   S V Adv.                   Der Grüzum briemt ziekruweise.
//                              The gid feds peloaly.
//   S Vsay, dass S O V.        Der Pfaunin peizumt, dass der giele Grüzum den Zaweim beibaust.
//                              The coll cens that the gooty gid blems the deell.
//   S V Adv, weil S Adv V.     Ein Deziem pfösamt pfiegölich, weil der Feitres nägrüwärts heft.
//                              A moodang slongs loodeely because the gritad sholls grenely.
// (shares 30, 20, 15, 20 and 15 percent).
//
// The one reordering rule: German puts the verb of a dass/weil clause last; English puts it
// right after that clause's subject. Everything else translates word for word, the comma before
// dass/weil is dropped, and the first word of both sentences is capitalised. So a model must
// learn the lexicon, the determiners' many-to-one mapping, the adjective endings and one
// long-range move, but nothing else.
enum class WordClass { kNoun, kVerb, kSayVerb, kAdjective, kAdverb };

struct LexiconEntry {
  std::string de;  // nouns capitalised; adjectives as their stem (the sentence adds the ending)
  std::string en;
  WordClass word_class;
};

// The lexicon of a seed, in a fixed order (all nouns, then verbs, ...).
std::vector<LexiconEntry> translation_fixture_lexicon(uint64_t seed);

struct TranslationFixtureOptions {
  uint64_t seed = 0;
  // The original's sizes: the first 5,000 / 1,000 / 100 pairs of IWSLT14.
  int64_t train = 5000;
  int64_t validation = 1000;
  int64_t test = 100;
};

// The sentences of all three splits, train first, every German sentence distinct (so none of
// validation or test is seen in training).
struct TranslationFixture {
  std::vector<data::TranslationPair> train, validation, test;
};
TranslationFixture make_translation_fixture(const TranslationFixtureOptions& options);

// Writes DIR/train.jsonl, DIR/validation.jsonl, DIR/test.jsonl (see data/translation.h).
void write_translation_fixture(const std::filesystem::path& dir,
                               const TranslationFixtureOptions& options);

}  // namespace dtlab::tooling
