// Fuzzes the GLUE RTE reader (data/glue_tsv.h): train.tsv and dev.tsv.
#include "dtlab/data/glue_tsv.h"

#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dtlab::fuzz::expect_error_or_success([&] {
    for (const auto& e : dtlab::data::parse_rte_tsv(dtlab::fuzz::as_text(data, size), "train.tsv", "train"))
      if (e.label < 0 || e.label > 1) std::abort();
  });
  return 0;
}
