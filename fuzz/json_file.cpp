// Fuzzes the JSON reader every JSON file goes through (io/json_file.h's parse_json_text):
// results.json, run.json, the checkpoint index, --train_order, and the parse step of every
// config; then the excerpt an error message would quote from the parsed value.
#include "dtlab/io/excerpt.h"
#include "dtlab/io/json_file.h"

#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dtlab::fuzz::expect_error_or_success([&] {
    const nlohmann::json j = dtlab::io::parse_json_text(dtlab::fuzz::as_text(data, size), "fuzz.json");
    const std::string excerpt = dtlab::io::json_excerpt(j);
    if (excerpt.size() > dtlab::io::kExcerptBytes + 3 || excerpt.find('\n') != std::string::npos)
      std::abort();
  });
  return 0;
}
