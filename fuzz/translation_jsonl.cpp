// Fuzzes the translation data reader (data/translation_jsonl.h): train.jsonl, validation.jsonl
// and test.jsonl.
#include "dtlab/data/translation_jsonl.h"

#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dtlab::fuzz::expect_error_or_success([&] {
    const auto pairs = dtlab::data::parse_translation_jsonl(dtlab::fuzz::as_text(data, size),
                                                            "train.jsonl", "(hint)");
    if (pairs.empty()) std::abort();
  });
  return 0;
}
