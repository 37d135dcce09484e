// Reading a training set in a given order, see train/train_order.h.
#include "dtlab/train/train_order.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "dtlab/core/error.h"
#include "dtlab/io/json_file.h"

namespace dtlab::train {

data::Batch OrderedExamples::batch(const std::vector<int64_t>& rows) const {
  std::vector<int64_t> examples;
  for (int64_t row : rows) examples.push_back(order_.at(static_cast<size_t>(row)));
  return all_.batch(examples);
}

std::vector<int64_t> read_train_order(const std::string& path, int64_t dataset_size) {
  const nlohmann::json j = io::read_json_file(path);
  if (!j.is_array() || j.empty()) {
    throw Error("--train_order " + path + ": expected a non-empty JSON array of training-set indices");
  }
  std::vector<int64_t> order;
  for (size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_number_integer() || j[i].get<int64_t>() < 0 || j[i].get<int64_t>() >= dataset_size) {
      throw Error(fmt::format("--train_order {}: entry {} is {}, not an index of the {} training examples", path, i,
                              j[i].dump(), dataset_size));
    }
    order.push_back(j[i].get<int64_t>());
  }
  return order;
}

}  // namespace dtlab::train
