#include "placement.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

namespace dtlab::grader {
namespace {

// The bytes of slice i of t along dim: equal bytes are equal values of one dtype.
std::string slice_bytes(const torch::Tensor& t, int64_t dim, int64_t i) {
  const torch::Tensor s = t.select(dim, i).contiguous().cpu();
  return std::string(static_cast<const char*>(s.data_ptr()), static_cast<size_t>(s.numel() * s.element_size()));
}

torch::Tensor long_tensor(const std::vector<int64_t>& v) {
  torch::Tensor t = torch::empty({static_cast<int64_t>(v.size())}, torch::kLong);
  std::copy(v.begin(), v.end(), t.data_ptr<int64_t>());
  return t;
}

}  // namespace

int64_t Placement::padding() const {
  int64_t n = 0;
  for (int64_t i : index) n += i < 0;
  return n;
}

std::optional<Placement> place_by_value(const torch::Tensor& mine, const torch::Tensor& whole, std::string* why) {
  Placement p;
  if (mine.sizes() == whole.sizes()) return p;
  if (mine.dim() != whole.dim() || mine.scalar_type() != whole.scalar_type()) {
    *why = "not of the whole's rank and type";
    return std::nullopt;
  }
  for (int64_t d = 0; d < mine.dim(); ++d) {
    if (mine.size(d) == whole.size(d)) continue;
    if (p.dim >= 0) {
      *why = fmt::format("its shape differs from the whole's in dimensions {} and {}", p.dim, d);
      return std::nullopt;
    }
    p.dim = d;
  }
  std::unordered_map<std::string, int64_t> where;  // the whole's slices, by value; -1 where two are equal
  for (int64_t j = 0; j < whole.size(p.dim); ++j) {
    const auto [at, fresh] = where.emplace(slice_bytes(whole, p.dim, j), j);
    if (!fresh) at->second = -1;
  }
  for (int64_t i = 0; i < mine.size(p.dim); ++i) {
    const auto found = where.find(slice_bytes(mine, p.dim, i));
    if (found != where.end() && found->second < 0) {
      *why = fmt::format("its slice {} along dimension {} equals several of the whole's, so it cannot be placed", i,
                         p.dim);
      return std::nullopt;
    }
    if (found != where.end()) {
      p.index.push_back(found->second);
    } else if (mine.select(p.dim, i).count_nonzero().item<int64_t>() == 0) {
      p.index.push_back(-1);
    } else {
      *why = fmt::format("its slice {} along dimension {} equals none of the whole's and is not padding (zeros)", i,
                         p.dim);
      return std::nullopt;
    }
  }
  return p;
}

std::optional<Placement> place_parameter(const std::string& name, const torch::Tensor& mine, const torch::Tensor& whole,
                                         const std::map<std::string, Placement>& placed, std::string* why) {
  const std::string weight = name.size() > 4 ? name.substr(0, name.size() - 4) + "weight" : name;
  const bool bias = name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
  if (!bias || mine.sizes() == whole.sizes() || !placed.count(weight)) return place_by_value(mine, whole, why);
  Placement p = placed.at(weight);
  const bool weight_split = !p.whole();
  p.dim = 0;
  if (!weight_split || mine.dim() != 1 || static_cast<int64_t>(p.index.size()) != mine.size(0)) {
    *why = "not as many as its weight's columns";
    return std::nullopt;
  }
  return p;
}

namespace {

// The positions of the placement that are padding (want_padding) or real, and the whole's indices
// of the real ones.
std::vector<int64_t> positions(const Placement& p, bool want_padding) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < p.index.size(); ++i) {
    if ((p.index[i] < 0) == want_padding) out.push_back(static_cast<int64_t>(i));
  }
  return out;
}

}  // namespace

torch::Tensor real_part_of_mine(const torch::Tensor& mine, const Placement& p) {
  return p.whole() ? mine : mine.index_select(p.dim, long_tensor(positions(p, false)));
}

torch::Tensor paired_part_of_whole(const torch::Tensor& whole, const Placement& p) {
  if (p.whole()) return whole;
  std::vector<int64_t> indices;
  for (int64_t i : p.index) {
    if (i >= 0) indices.push_back(i);
  }
  return whole.index_select(p.dim, long_tensor(indices));
}

torch::Tensor padding_part_of_mine(const torch::Tensor& mine, const Placement& p) {
  if (p.whole()) return mine.flatten().narrow(0, 0, 0);
  return mine.index_select(p.dim, long_tensor(positions(p, true)));
}

std::string partition_gap(const std::vector<const Placement*>& ranks, int64_t size) {
  std::vector<int> holder(static_cast<size_t>(size), -1);
  for (size_t r = 0; r < ranks.size(); ++r) {
    for (int64_t i : ranks[r]->index) {
      if (i < 0) continue;
      int& h = holder.at(static_cast<size_t>(i));
      if (h >= 0) return fmt::format("index {} is on ranks {} and {}", i, h, r);
      h = static_cast<int>(r);
    }
  }
  for (int64_t i = 0; i < size; ++i) {
    if (holder[static_cast<size_t>(i)] < 0) return fmt::format("index {} is on no rank", i);
  }
  return "";
}

}  // namespace dtlab::grader
