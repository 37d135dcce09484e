// Fuzzes the safetensors header reader (io/safetensors_header.h): model.safetensors of every
// checkpoint and the grader's rank dumps go through it before any tensor is made.
#include "dtlab/io/safetensors_header.h"

#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dtlab::fuzz::expect_error_or_success([&] {
    const std::string_view image = dtlab::fuzz::as_text(data, size);
    const dtlab::io::SafetensorsHeader header =
        dtlab::io::parse_safetensors_header(image, "fuzz.safetensors");
    // What parse_safetensors then relies on: every tensor inside the data buffer, which ends
    // at the end of the image, tiled from 0; its bytes are read here so ASan sees any overrun.
    uint64_t expected = 0;
    unsigned sum = 0;
    for (const auto& e : header.entries) {
      if (e.begin != expected || e.end < e.begin || e.end > header.data.size()) std::abort();
      for (uint64_t i = e.begin; i < e.end; ++i) sum += static_cast<unsigned char>(header.data[i]);
      expected = e.end;
    }
    if (expected != header.data.size() ||
        header.data.data() + header.data.size() != image.data() + image.size())
      std::abort();
    (void)sum;
  });
  return 0;
}
