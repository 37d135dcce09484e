// Where GPT-2's layers go in a pipeline: the device of each of its num_stages() layers (Note
// [Stages] in model/gpt2.h), balanced by what each layer computes, or as an explicit balance.
// The kit's part of the pipeline exercise; the students' prepare_pipeline_parallel takes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dtlab/model/gpt2.h"

namespace dtlab::pipeline {

// What each layer costs to run, in parameters multiplied per token: a block's parameters; the
// head's output projection (vocab x width, the tied embedding matrix) and ln_f; the embeddings
// nothing (a lookup, not a product). Balancing parameters as stored would put the embeddings'
// vocab x width matrix on a stage of its own and leave the head's identical product unweighed.
std::vector<int64_t> gpt2_layer_costs(const model::Gpt2LMHeadModel& model);

// The device (stage) of every layer: balance (layers per stage, torchgpipe's list) when given,
// else balance_by_size over gpt2_layer_costs into `stages`. A balance must list `stages` counts
// (the flags --balance and --stages must agree, or the recorded layout would not be the one
// run). Errors name --stages or --balance.
std::vector<int> gpt2_layer_devices(const model::Gpt2LMHeadModel& model, int stages,
                                    const std::vector<int>& balance = {});

// Puts every layer's parameters on its device, stage_device(devices[layer]) (core/device.h): the
// GPU of that number where CUDA is present; nothing moves on the CPU. A tied weight stays with
// its first user, the embeddings (Note [A tied weight on two devices], model/gpt2.cpp). Before
// the optimiser is made, whose state follows its parameters.
void place_layers(model::Gpt2LMHeadModel& model, const std::vector<int>& devices);

// The name of layer `layer` of GPT-2's `layers` (model->num_stages()): "embeddings", "block 0"
// .. "block L-1", "head". What the driver prints and the Layers of prepare_pipeline_parallel say.
std::string gpt2_layer_name(int64_t layer, int64_t layers);

}  // namespace dtlab::pipeline
