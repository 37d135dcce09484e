// The process's resident memory, see report/process_memory.h.
#include "dtlab/report/process_memory.h"

#include <malloc.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace dtlab::report {
namespace {

// "VmRSS:	  123456 kB" -> bytes; -1 when the line is absent or malformed.
int64_t kib_field(const std::string& status, const std::string& key) {
  std::istringstream lines(status);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(key + ":", 0) != 0) continue;
    std::istringstream fields(line.substr(key.size() + 1));
    int64_t value = -1;
    std::string unit;
    if (!(fields >> value >> unit) || unit != "kB" || value < 0) return -1;
    return value * 1024;
  }
  return -1;
}

}  // namespace

ProcessMemory parse_process_status(const std::string& status) {
  return {kib_field(status, "VmRSS"), kib_field(status, "VmHWM")};
}

ProcessMemory read_process_memory() {
  std::ifstream in("/proc/self/status");
  std::stringstream text;
  text << in.rdbuf();
  return parse_process_status(text.str());
}

bool reset_peak_rss() {
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (!f) return false;
  const bool written = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && written;
}

void give_back_free_heap() { malloc_trim(0); }

}  // namespace dtlab::report
