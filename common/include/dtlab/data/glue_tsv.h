// The LibTorch-free half of the GLUE reader: RTE's tab-separated text to examples. data/glue.h
// reads the file and makes features; fuzz/glue_tsv.cpp fuzzes this half alone.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dtlab::data {

struct InputExample {
  std::string guid;  // "<set>-<index>", e.g. "train-17"
  std::string text_a;
  std::string text_b;
  int64_t label = 0;  // index into the task's label list
};

// A GLUE task as run_glue knows it: its name, its label strings, where its files are.
struct GlueTask {
  std::string name;                 // canonical, e.g. "rte"
  std::vector<std::string> labels;  // label strings in id order
};

// The task called `name` (case-insensitive). Only RTE is provided; any other name is a
// dtlab::Error listing the supported ones.
GlueTask glue_task(const std::string& name);

// The text of RTE's train.tsv or dev.tsv (`source` names it in errors): a header line
// "index sentence1 sentence2 label" then one example per line, fields separated by tabs, no
// quoting, lines ended by "\n" or "\r\n", a UTF-8 byte-order mark before the header skipped (as
// Python's "utf-8-sig" does). A line with the wrong number of fields, a missing
// header or an unknown label is a dtlab::Error "SOURCE:LINE: ..." that says what was expected.
std::vector<InputExample> parse_rte_tsv(std::string_view text, const std::string& source,
                                        const std::string& set_type);

}  // namespace dtlab::data
