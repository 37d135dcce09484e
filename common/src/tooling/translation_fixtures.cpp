// The invented translation set, see tooling/translation_fixtures.h and its Note [Invented
// translation rule].
#include "dtlab/tooling/translation_fixtures.h"

#include <random>
#include <set>

#include "dtlab/core/error.h"

namespace dtlab::tooling {
namespace {

constexpr int kNouns = 80, kVerbs = 50, kSayVerbs = 6, kAdjectives = 40, kAdverbs = 24;
constexpr int kMaxWords = 10;          // per sentence, German and English alike
constexpr int kAdjectivePercent = 35;  // chance that a noun phrase has an adjective
constexpr int64_t kTriesPerSentence = 100;  // before giving up on finding new distinct sentences

// Deterministic on every platform: std::mt19937_64 is specified exactly; the distributions of
// <random> are not, so draw integers by hand.
class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  int64_t below(int64_t n) { return static_cast<int64_t>(engine_() % static_cast<uint64_t>(n)); }
  bool percent(int p) { return below(100) < p; }
  template <size_t N>
  const char* pick(const char* const (&options)[N]) { return options[below(N)]; }

 private:
  std::mt19937_64 engine_;
};

// Spelling of the two invented languages. German-like: German consonant clusters and umlauts;
// English-like: English digraphs. Every syllable is onset + vowel.
constexpr const char* kDeOnsets[] = {"b", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s",
                                     "t", "w", "z", "sch", "st", "pf", "kr", "gr", "br", "tr", "fl"};
constexpr const char* kDeVowels[] = {"a", "e", "i", "o", "u", "ä", "ö", "ü", "ei", "au", "ie"};
constexpr const char* kDeNounEnds[] = {"n", "l", "r", "ch", "ng", "s", "m"};
constexpr const char* kDeVerbEnds[] = {"n", "l", "r", "ch", "s", "m", "f"};
constexpr const char* kDeAdjectiveEnds[] = {"l", "n", "r", "ch", "ig", "isch", "sam"};
constexpr const char* kDeAdverbEnds[] = {"lich", "s", "weise", "wärts"};
constexpr const char* kEnOnsets[] = {"b", "c", "d", "f", "g", "h", "j", "l", "m", "n", "p", "r",
                                     "s", "t", "v", "w", "th", "sh", "ch", "bl", "cr", "st", "sl",
                                     "pl", "gr"};
constexpr const char* kEnVowels[] = {"a", "e", "i", "o", "u", "ee", "oo", "ea", "ay", "oa"};
constexpr const char* kEnEnds[] = {"n", "t", "ck", "ll", "p", "m", "ng", "d"};

// The German forms of an adjective stem: after der, after ein, in the accusative.
constexpr const char* kAdjectiveEndings[] = {"e", "er", "en"};

std::string capitalised(std::string s) {
  if (!s.empty() && s[0] >= 'a' && s[0] <= 'z') s[0] = static_cast<char>(s[0] - 'a' + 'A');
  return s;
}

// Every draw is a statement of its own: the order in which a compiler evaluates the operands
// of one expression is unspecified, and the words must not depend on the compiler.
template <size_t O, size_t V>
std::string syllables(Rng& rng, const char* const (&onsets)[O], const char* const (&vowels)[V],
                      int count) {
  std::string w;
  for (int i = 0; i < count; ++i) {
    w += rng.pick(onsets);
    w += rng.pick(vowels);
  }
  return w;
}

int one_or_two(Rng& rng) { return 1 + static_cast<int>(rng.below(2)); }

std::string invent_german(Rng& rng, WordClass c) {
  const bool two = c == WordClass::kNoun || c == WordClass::kAdverb;
  std::string w = syllables(rng, kDeOnsets, kDeVowels, two ? 2 : one_or_two(rng));
  switch (c) {
    case WordClass::kNoun: return capitalised(w + rng.pick(kDeNounEnds));
    case WordClass::kVerb:
    case WordClass::kSayVerb: return w + rng.pick(kDeVerbEnds) + "t";
    case WordClass::kAdjective: return w + rng.pick(kDeAdjectiveEnds);
    case WordClass::kAdverb: return w + rng.pick(kDeAdverbEnds);
  }
  return w;
}

std::string invent_english(Rng& rng, WordClass c) {
  const int count = c == WordClass::kNoun ? one_or_two(rng) : c == WordClass::kAdverb ? 2 : 1;
  std::string w = syllables(rng, kEnOnsets, kEnVowels, count);
  switch (c) {
    case WordClass::kNoun: return w + rng.pick(kEnEnds);
    case WordClass::kVerb:
    case WordClass::kSayVerb: return w + rng.pick(kEnEnds) + "s";
    case WordClass::kAdjective: return w + rng.pick(kEnEnds) + "y";
    case WordClass::kAdverb: return w + "ly";
  }
  return w;
}

// Every spelling a word can take in a sentence, so that no two lexicon entries (or an entry and
// a function word) can ever be confused, in either language.
std::vector<std::string> surface_forms(const std::string& word, WordClass c) {
  if (c != WordClass::kAdjective) return {word};
  std::vector<std::string> forms;
  for (const char* ending : kAdjectiveEndings) forms.push_back(word + ending);
  return forms;
}

// Claims every form for a new word, or none if one is taken. Words compare with their first
// letter capitalised, as a capitalised noun or the first word of a sentence would be written.
bool claim(std::set<std::string>& taken, const std::vector<std::string>& forms) {
  for (const std::string& f : forms) {
    if (taken.count(capitalised(f))) return false;
  }
  for (const std::string& f : forms) taken.insert(capitalised(f));
  return true;
}

// Indices into the lexicon by class.
struct Classes {
  std::vector<int> nouns, verbs, say_verbs, adjectives, adverbs;
};

Classes by_class(const std::vector<LexiconEntry>& lexicon) {
  Classes c;
  for (int i = 0; i < static_cast<int>(lexicon.size()); ++i) {
    switch (lexicon[i].word_class) {
      case WordClass::kNoun: c.nouns.push_back(i); break;
      case WordClass::kVerb: c.verbs.push_back(i); break;
      case WordClass::kSayVerb: c.say_verbs.push_back(i); break;
      case WordClass::kAdjective: c.adjectives.push_back(i); break;
      case WordClass::kAdverb: c.adverbs.push_back(i); break;
    }
  }
  return c;
}

// A sentence being built in both languages at once.
struct Sentence {
  std::vector<std::string> de, en;
  void add(const std::string& d, const std::string& e) {
    de.push_back(d);
    en.push_back(e);
  }
};

enum class Case { kNominative, kAccusative };

class SentenceMaker {
 public:
  SentenceMaker(const std::vector<LexiconEntry>& lexicon, Rng& rng)
      : lexicon_(lexicon), classes_(by_class(lexicon)), rng_(rng) {}

  data::TranslationPair make() {
    // Templates and their shares in percent; see the Note in the header.
    const int64_t t = rng_.below(100);
    if (t < 30) return simple(/*object=*/true, /*adverb=*/false);
    if (t < 50) return simple(/*object=*/true, /*adverb=*/true);
    if (t < 65) return simple(/*object=*/false, /*adverb=*/true);
    if (t < 85) return reported();
    return because();
  }

 private:
  const LexiconEntry& any(const std::vector<int>& of) { return lexicon_[of[rng_.below(of.size())]]; }

  // A noun phrase. The adjective is decided by the caller, which keeps sentences within
  // kMaxWords.
  void noun_phrase(Sentence& s, Case c, bool with_adjective) {
    const bool definite = rng_.percent(50);
    if (c == Case::kNominative) {
      s.add(definite ? "der" : "ein", definite ? "the" : "a");
    } else {
      s.add(definite ? "den" : "einen", definite ? "the" : "a");
    }
    if (with_adjective) {
      const LexiconEntry& a = any(classes_.adjectives);
      const char* ending = c == Case::kAccusative ? "en" : definite ? "e" : "er";
      s.add(a.de + ending, a.en);
    }
    const LexiconEntry& n = any(classes_.nouns);
    s.add(n.de, n.en);
  }

  // Which of `count` noun phrases get an adjective, with at most `spare` of them.
  std::vector<bool> adjectives(int count, int spare) {
    std::vector<bool> with(count);
    for (int i = 0; i < count; ++i) {
      with[i] = spare > 0 && rng_.percent(kAdjectivePercent);
      if (with[i]) --spare;
    }
    return with;
  }

  // S V [O] [Adv].
  data::TranslationPair simple(bool object, bool adverb) {
    const std::vector<bool> adj = adjectives(2, /*spare=*/2);
    Sentence s;
    noun_phrase(s, Case::kNominative, adj[0]);
    const LexiconEntry& v = any(classes_.verbs);
    s.add(v.de, v.en);
    if (object) noun_phrase(s, Case::kAccusative, adj[1]);
    if (adverb) {
      const LexiconEntry& a = any(classes_.adverbs);
      s.add(a.de, a.en);
    }
    return finish(s);
  }

  // S Vsay, dass S O V.  ->  S Vsay that S V O.  (9 words without adjectives)
  data::TranslationPair reported() {
    const std::vector<bool> adj = adjectives(3, /*spare=*/kMaxWords - 9);
    Sentence main;
    noun_phrase(main, Case::kNominative, adj[0]);
    const LexiconEntry& say = any(classes_.say_verbs);
    main.add(say.de + ",", say.en);
    main.add("dass", "that");
    Sentence subject, object;
    noun_phrase(subject, Case::kNominative, adj[1]);
    noun_phrase(object, Case::kAccusative, adj[2]);
    const LexiconEntry& v = any(classes_.verbs);
    // German: subject, object, verb last. English: subject, verb, object.
    append(main.de, subject.de);
    append(main.de, object.de);
    main.de.push_back(v.de);
    append(main.en, subject.en);
    main.en.push_back(v.en);
    append(main.en, object.en);
    return finish(main);
  }

  // S V Adv, weil S Adv V.  ->  S V Adv because S V Adv.  (9 words without adjectives)
  data::TranslationPair because() {
    const std::vector<bool> adj = adjectives(2, /*spare=*/kMaxWords - 9);
    Sentence main;
    noun_phrase(main, Case::kNominative, adj[0]);
    const LexiconEntry& v1 = any(classes_.verbs);
    main.add(v1.de, v1.en);
    const LexiconEntry& a1 = any(classes_.adverbs);
    main.add(a1.de + ",", a1.en);
    main.add("weil", "because");
    Sentence subject;
    noun_phrase(subject, Case::kNominative, adj[1]);
    const LexiconEntry& a2 = any(classes_.adverbs);
    const LexiconEntry& v2 = any(classes_.verbs);
    append(main.de, subject.de);
    main.de.push_back(a2.de);
    main.de.push_back(v2.de);
    append(main.en, subject.en);
    main.en.push_back(v2.en);
    main.en.push_back(a2.en);
    return finish(main);
  }

  static void append(std::vector<std::string>& to, const std::vector<std::string>& words) {
    to.insert(to.end(), words.begin(), words.end());
  }

  static std::string join(std::vector<std::string> words) {
    words.front() = capitalised(words.front());
    std::string text;
    for (const std::string& w : words) text += (text.empty() ? "" : " ") + w;
    return text + ".";
  }

  static data::TranslationPair finish(const Sentence& s) { return {join(s.de), join(s.en)}; }

  const std::vector<LexiconEntry>& lexicon_;
  Classes classes_;
  Rng& rng_;
};

std::vector<data::TranslationPair> distinct_sentences(SentenceMaker& maker, int64_t count,
                                                      std::set<std::string>& seen) {
  std::vector<data::TranslationPair> pairs;
  for (int64_t tries = 0; static_cast<int64_t>(pairs.size()) < count; ++tries) {
    if (tries > kTriesPerSentence * count) {
      throw Error("the invented language has too few distinct sentences for " +
                  std::to_string(count) + " more; ask for smaller splits");
    }
    data::TranslationPair p = maker.make();
    if (seen.insert(p.de).second) pairs.push_back(std::move(p));
  }
  return pairs;
}

}  // namespace

std::vector<LexiconEntry> translation_fixture_lexicon(uint64_t seed) {
  Rng rng(seed);
  std::set<std::string> taken;
  claim(taken, {"der", "den", "ein", "einen", "dass", "weil", "the", "a", "that", "because"});
  std::vector<LexiconEntry> lexicon;
  const std::pair<WordClass, int> sizes[] = {{WordClass::kNoun, kNouns},
                                             {WordClass::kVerb, kVerbs},
                                             {WordClass::kSayVerb, kSayVerbs},
                                             {WordClass::kAdjective, kAdjectives},
                                             {WordClass::kAdverb, kAdverbs}};
  for (const auto& [word_class, count] : sizes) {
    for (int i = 0; i < count;) {
      std::string de = invent_german(rng, word_class);
      if (!claim(taken, surface_forms(de, word_class))) continue;
      std::string en;
      do {
        en = invent_english(rng, word_class);
      } while (!claim(taken, {en}));
      lexicon.push_back({std::move(de), std::move(en), word_class});
      ++i;
    }
  }
  return lexicon;
}

TranslationFixture make_translation_fixture(const TranslationFixtureOptions& options) {
  if (options.train < 1 || options.validation < 1 || options.test < 1) {
    throw Error("translation fixture sizes must be at least 1 each, got " +
                std::to_string(options.train) + "," + std::to_string(options.validation) + "," +
                std::to_string(options.test));
  }
  const std::vector<LexiconEntry> lexicon = translation_fixture_lexicon(options.seed);
  // The sentences draw from their own stream, so the lexicon does not shift with the sizes.
  Rng rng(options.seed ^ 0x7472616e736c6174ULL);  // "translat"
  SentenceMaker maker(lexicon, rng);
  std::set<std::string> seen;
  TranslationFixture f;
  f.train = distinct_sentences(maker, options.train, seen);
  f.validation = distinct_sentences(maker, options.validation, seen);
  f.test = distinct_sentences(maker, options.test, seen);
  return f;
}

void write_translation_fixture(const std::filesystem::path& dir,
                               const TranslationFixtureOptions& options) {
  const TranslationFixture f = make_translation_fixture(options);
  data::write_translation_split(dir, "train", f.train);
  data::write_translation_split(dir, "validation", f.validation);
  data::write_translation_split(dir, "test", f.test);
}

}  // namespace dtlab::tooling
