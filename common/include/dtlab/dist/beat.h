// One heartbeat of a rank (Note [Who stopped], dist/detail/heartbeat.h), as the kit stores it in
// the rendezvous store and writes it to --beat_file, and as the grader reads it back: six lines,
// "count\nunix_ms\nstep\nin_flight\noperation_unix_ms\noperation": how many beats so far, the
// wall-clock time of this one (ms since the epoch), the training step (0 before step 1), how many
// of the rank's operations are started and not yet waited for (0: the rank runs code of its own),
// when the last one started, and its name ("all_reduce #41 (gradients)"; "the rendezvous" before
// any). No LibTorch here: the grader's launcher reads beats too.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace dtlab::dist {

struct Beat {
  int64_t count = 0, unix_ms = 0, step = 0, in_flight = 0, operation_unix_ms = 0;
  std::string operation;
};

std::string encode_beat(const Beat& beat);
// nullopt for text that is not a whole beat (a file caught half written, a foreign value).
std::optional<Beat> decode_beat(const std::string& text);

}  // namespace dtlab::dist
