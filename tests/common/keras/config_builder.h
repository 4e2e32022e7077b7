#pragma once

// Hand-written Keras 3 model configs for tests, in the exact form Keras writes them
// (see make_models.py for configs written by Keras itself).

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cohort::keras::testing {

using Json = nlohmann::json;

// A layer entry: module, class_name, registered_name and a config holding name,
// trainable, a float32 dtype policy and `fields`.
Json LayerEntry(const std::string& class_name, const std::string& name,
                Json fields = Json::object());

// An InputLayer entry; `shape` excludes the batch dimension (null entries for None).
Json InputEntry(const std::string& name, const std::vector<Json>& shape,
                const std::string& dtype = "float32");

// `entry` called once on the outputs of `inputs`; Add and Concatenate take them as a list.
Json Connect(Json entry, const std::vector<std::string>& inputs);

Json SequentialModel(std::vector<Json> layers, const std::string& name = "seq");
Json FunctionalModel(std::vector<Json> layers, const std::string& input, const std::string& output,
                     const std::string& name = "func");

// Dense/Conv2D entries with the fields Keras writes.
Json DenseEntry(const std::string& name, int64_t units, const std::string& activation = "linear");
Json Conv2DEntry(const std::string& name, int64_t filters, int64_t kernel,
                 const std::string& padding = "valid", int64_t strides = 1);

}  // namespace cohort::keras::testing
