#pragma once

// Models built by real Keras (make_models.py, beside this file) for the common/keras
// tests, generated once per test process into a temporary directory.

#include <nlohmann/json.hpp>
#include <string>

namespace cohort::keras::testing {

// Runs make_models.py `mode` ("good" or "other") the first time it is asked for that
// mode and returns the directory it wrote; fails the test when Keras fails.
const std::string& KerasModels(const std::string& mode);

// The contents of `dir`/`name`; fails the test when missing.
std::string ReadFixture(const std::string& dir, const std::string& name);
nlohmann::json ReadJsonFixture(const std::string& dir, const std::string& name);

}  // namespace cohort::keras::testing
