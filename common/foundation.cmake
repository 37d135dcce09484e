# Note [The foundation]: the kit's sources that need no tensor, compiled into dtlab_foundation
# without LibTorch's headers (common/CMakeLists.txt): each of them costs a second or two to compile
# where a unit that includes LibTorch pays the precompiled header's floor of seconds (about 5 s on
# 1.13, more on 2.x; Note [Unity builds]). The parser and tokenizer suites (foundation_tests) and
# every fuzz harness (fuzz/CMakeLists.txt) link it and nothing of LibTorch. A file belongs here
# when neither it nor any header it includes reaches LibTorch; foundation_headers_test holds every
# file listed here to that, from the compiler's own list of the headers it read.
#
# Paths relative to common/src. Read by common/CMakeLists.txt and fuzz/CMakeLists.txt.

# The readers of outside input: what the fuzz harnesses link (docs/FUZZING.md).
set(DTLAB_FOUNDATION_READERS
  io/excerpt.cpp
  io/file.cpp
  io/json_file.cpp
  io/safetensors_header.cpp
  model/bert_config.cpp
  model/flops.cpp
  model/gpt2_config.cpp
  tokenizer/bert_tokenizer.cpp
  tokenizer/bpe_trainer.cpp
  tokenizer/byte_level.cpp
  tokenizer/gpt2_tokenizer.cpp
  tokenizer/unicode.cpp
  data/glue_tsv.cpp
  data/translation_jsonl.cpp)

# The rest: flags, schedules and their checks, BLEU, results.json, the heartbeat's text, network
# counters.
set(DTLAB_FOUNDATION_SOURCES
  ${DTLAB_FOUNDATION_READERS}
  dist/beat.cpp
  dist/netdev.cpp
  mesh/layout.cpp
  metrics/bleu.cpp
  model/load_report.cpp
  model/ops.cpp
  pipeline/balance.cpp
  pipeline/schedule.cpp
  pipeline/simulate.cpp
  pipeline/stage_schedule.cpp
  pipeline/timeline.cpp
  report/process_memory.cpp
  report/results.cpp
  report/timing.cpp
  train/adamw_kernel.cpp)

# The kit's own tooling that needs no tensor (starting processes, free ports, skeleton generation):
# dtlab_foundation_tooling, which dtlab_tooling links; like dtlab_tooling, no student binary does.
set(DTLAB_FOUNDATION_TOOLING_SOURCES
  tooling/process.cpp
  tooling/skeleton.cpp)
