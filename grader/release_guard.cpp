// The guard that keeps answers out of the release, see Note [No answers in the release] in
// release_guard.h.
#include "release_guard.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <unordered_map>
#include <unordered_set>

#include "dtlab/io/file.h"
#include "dtlab/tooling/skeleton.h"

namespace fs = std::filesystem;

namespace dtlab::grader {
// Named, not anonymous: the grader compiles in batches (Note [Unity builds]).
namespace answer_leaks {

struct Token {
  std::string text;
  size_t line;
};

bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Words (identifiers, numbers), string literals and single punctuation characters, without
// comments or spacing. A string literal is one token (a "/*" in it starts no comment); one that
// does not close on its line is a lone '"' (prose). Block comments are C++'s only: in other text
// "/*" is a path's glob (solutions/*/*.cpp), and taking it for a comment would hide the rest.
std::vector<Token> tokens_of(const std::string& text, bool cpp, size_t first_line = 1) {
  std::vector<Token> out;
  size_t line = first_line;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      ++i;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (text.compare(i, 2, "//") == 0) {
      i = std::min(text.find('\n', i), text.size());
    } else if (cpp && text.compare(i, 2, "/*") == 0) {
      const size_t end = std::min(text.find("*/", i + 2), text.size());
      line += static_cast<size_t>(std::count(text.begin() + static_cast<std::ptrdiff_t>(i),
                                             text.begin() + static_cast<std::ptrdiff_t>(end), '\n'));
      i = std::min(end + 2, text.size());
    } else if (word_char(c)) {
      const size_t start = i;
      while (i < text.size() && word_char(text[i])) ++i;
      out.push_back({text.substr(start, i - start), line});
    } else if (c == '"') {
      size_t end = i + 1;
      while (end < text.size() && text[end] != '"' && text[end] != '\n') end += text[end] == '\\' ? 2 : 1;
      const bool closed = end < text.size() && text[end] == '"';
      out.push_back({closed ? text.substr(i, end + 1 - i) : "\"", line});
      i = closed ? end + 1 : i + 1;
    } else {
      out.push_back({std::string(1, c), line});
      ++i;
    }
  }
  return out;
}

bool is_cpp(const std::string& path) {
  const std::string ext = fs::path(path).extension().string();
  for (const char* e : {".cpp", ".h", ".hpp", ".cc", ".cxx", ".c", ".cu", ".inc"}) {
    if (ext == e) return true;
  }
  return false;
}

std::string window(const std::vector<Token>& tokens, size_t at) {
  std::string joined;
  for (size_t k = at; k < at + kLeakWindowTokens; ++k) joined += (k == at ? "" : " ") + tokens[k].text;
  return joined;
}

struct Region {
  std::string solution;
  std::string exercise;
};

}  // namespace answer_leaks

using answer_leaks::is_cpp;
using answer_leaks::Region;
using answer_leaks::Token;
using answer_leaks::tokens_of;
using answer_leaks::window;

std::vector<AnswerLeak> find_answer_leaks(const fs::path& source_dir, const std::vector<std::string>& shipped) {
  const fs::path solutions = source_dir / "solutions";
  if (!fs::is_directory(solutions)) return {};
  // Every window of every body long enough, to the region it comes from.
  std::vector<Region> regions;
  std::unordered_map<std::string, size_t> windows;
  std::unordered_set<std::string> vocabulary;  // a window with another token cannot match
  for (const SkeletonFile& f : plan_skeletons(solutions, source_dir / "tasks")) {
    const std::string relative = fs::relative(f.solution, source_dir).generic_string();
    for (const ExerciseRegion& r : exercise_regions(io::read_file(f.solution), relative)) {
      const std::vector<Token> body = tokens_of(r.body, /*cpp=*/true, r.first_line);
      if (body.size() < kLeakWindowTokens) continue;
      regions.push_back({relative + ":" + std::to_string(r.first_line), r.exercise});
      for (const Token& t : body) vocabulary.insert(t.text);
      for (size_t at = 0; at + kLeakWindowTokens <= body.size(); ++at) windows.emplace(window(body, at), regions.size() - 1);
    }
  }
  std::vector<AnswerLeak> leaks;
  for (const std::string& path : shipped) {
    const fs::path file = source_dir / path;
    if (!fs::is_regular_file(file)) continue;
    const std::string text = io::read_file(file);
    if (text.find('\0') != std::string::npos) continue;
    const std::vector<Token> tokens = tokens_of(text, is_cpp(path));
    std::vector<bool> reported(regions.size(), false);  // one line per (file, region)
    size_t known = 0;  // how many tokens before `end` are in the vocabulary, in a row
    for (size_t end = 0; end < tokens.size(); ++end) {
      known = vocabulary.count(tokens[end].text) ? known + 1 : 0;
      if (known < kLeakWindowTokens) continue;
      const size_t at = end + 1 - kLeakWindowTokens;
      const std::string w = window(tokens, at);
      const auto hit = windows.find(w);
      if (hit == windows.end() || reported[hit->second]) continue;
      reported[hit->second] = true;
      const Region& r = regions[hit->second];
      leaks.push_back({path, tokens[at].line, r.solution, r.exercise, w});
    }
  }
  return leaks;
}

std::string describe(const AnswerLeak& leak) {
  return fmt::format("{}:{}: holds the reference code of TODO({}) ({}): `{}`", leak.file, leak.line, leak.exercise,
                     leak.solution, leak.excerpt);
}

}  // namespace dtlab::grader
