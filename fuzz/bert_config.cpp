// Fuzzes BERT's config.json reader (model/bert_config.h, Note [Bounded configs]).
#include "dtlab/io/json_file.h"
#include "dtlab/model/bert_config.h"

#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dtlab::fuzz::expect_error_or_success([&] {
    const std::string source = "config.json";
    const auto config = dtlab::model::BertConfig::from_json(
        dtlab::io::parse_json_text(dtlab::fuzz::as_text(data, size), source), source);
    (void)config.to_json();
  });
  return 0;
}
