// RTE's tab-separated files to examples (run_glue.py's RteProcessor), see data/glue_tsv.h.
#include "dtlab/data/glue_tsv.h"

#include <algorithm>
#include <cctype>

#include "dtlab/core/error.h"
#include "dtlab/io/excerpt.h"

namespace dtlab::data {
namespace {

constexpr size_t kRteFields = 4;  // index, sentence1, sentence2, label

// What spreadsheet tools write first when they save UTF-8 (U+FEFF encoded). run_glue reads
// with encoding="utf-8-sig" and pandas skips it too, so it is not part of the header's "index".
constexpr std::string_view kUtf8ByteOrderMark = "\xEF\xBB\xBF";

std::vector<std::string> split_tabs(std::string_view line) {
  std::vector<std::string> fields;
  size_t start = 0;
  while (true) {
    const size_t tab = line.find('\t', start);
    fields.emplace_back(line.substr(start, tab == std::string_view::npos ? std::string_view::npos
                                                                         : tab - start));
    if (tab == std::string_view::npos) return fields;
    start = tab + 1;
  }
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

GlueTask glue_task(const std::string& name) {
  if (lower(name) == "rte") return {"rte", {"entailment", "not_entailment"}};
  throw Error("--task_name " + io::printable(name) + " is not supported: the kit provides RTE");
}

std::vector<InputExample> parse_rte_tsv(std::string_view text, const std::string& source,
                                        const std::string& set_type) {
  const std::vector<std::string> labels = glue_task("rte").labels;
  std::vector<InputExample> examples;
  size_t line_number = 0;
  // Only a mark that opens the file is dropped; one anywhere else stays text, as in Python.
  if (text.substr(0, kUtf8ByteOrderMark.size()) == kUtf8ByteOrderMark) {
    text.remove_prefix(kUtf8ByteOrderMark.size());
  }
  // Lines as std::getline gives them: each ends at "\n", and text after the last "\n" is a
  // line only when there is some.
  for (size_t start = 0; start < text.size();) {
    const size_t newline = text.find('\n', start);
    const size_t end = newline == std::string_view::npos ? text.size() : newline;
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::string where = source + ":" + std::to_string(line_number) + ": ";
    const std::vector<std::string> fields = split_tabs(line);
    if (line_number == 1) {
      if (fields.size() != kRteFields || fields[0] != "index") {
        throw Error(where + "expected the header line \"index<TAB>sentence1<TAB>sentence2<TAB>label\"");
      }
      continue;
    }
    if (fields.size() != kRteFields) {
      throw Error(where + "expected 4 tab-separated fields (index, sentence1, sentence2, label), "
                  "found " + std::to_string(fields.size()));
    }
    const auto label = std::find(labels.begin(), labels.end(), fields[3]);
    if (label == labels.end()) {
      throw Error(where + "label \"" + io::printable(fields[3]) +
                  "\" is not entailment or not_entailment");
    }
    examples.push_back({set_type + "-" + fields[0], fields[1], fields[2],
                        static_cast<int64_t>(label - labels.begin())});
  }
  if (line_number == 0) throw Error(source + ": the file is empty (expected a header line)");
  return examples;
}

}  // namespace dtlab::data
