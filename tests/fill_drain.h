// GPipe's fill-drain schedule, the tests' own (not the students' clock_cycles, which the tests
// check): tick k runs every (micro-batch i, stage j) with i + j = k.
#pragma once

#include "dtlab/pipeline/schedule.h"

namespace dtlab::test {

inline pipeline::Schedule fill_drain(int m, int n) {
  pipeline::Schedule s(static_cast<size_t>(m + n - 1));
  for (int k = 0; k < m + n - 1; ++k) {
    for (int i = 0; i < m; ++i) {
      if (k - i >= 0 && k - i < n) s[k].push_back({i, k - i});
    }
  }
  return s;
}

}  // namespace dtlab::test
