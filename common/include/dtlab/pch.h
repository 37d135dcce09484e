// Precompiled header of dtlab_common and every target built with dtlab_target_defaults.
// Only headers that many translation units need and that rarely change belong here.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/optim/adamw.h>
#include <torch/types.h>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>
