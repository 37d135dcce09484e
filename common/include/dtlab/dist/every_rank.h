// Every rank's row of numbers, gathered: the per-rank figures a run's summary writes to
// results.json (each rank's memory, its peak, its bytes sent). One collective for the whole row.
#pragma once

#include <string>
#include <vector>

#include "dtlab/dist/group.h"

namespace dtlab::dist {

// Row r of the result is rank r's `mine`. Every rank of `group` calls it with a row of the same
// length; one all_gather tagged `tag` (the group's device, float64: counts below 2^53 are exact).
std::vector<std::vector<double>> every_rank(Group& group, const std::vector<double>& mine, const std::string& tag);

}  // namespace dtlab::dist
