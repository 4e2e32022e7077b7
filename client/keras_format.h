#pragma once

// Numbers and times as Keras' progress bar (keras.utils.Progbar, Keras 3) prints them,
// so a line of `cohort watch` reads like a line of model.fit. Pure functions.
//
//   FormatMetricValue(0.30123)   -> "0.3012"      (4 decimals when |v| > 1e-3,
//   FormatMetricValue(0.0001234) -> "1.2340e-04"   else 4 significant digits, as Keras)
//   FormatElapsed(3.4)           -> "3s"
//   FormatPerStep(0.0123)        -> "12ms/step"   (s/, ms/ or us/step, as Keras)
//   RenderBar(117, 234, 20)      -> 10 filled cells of "━" then 10 empty ones

#include <string>
#include <vector>

#include "cohort/v1/types.pb.h"

namespace cohort::client {

std::string FormatMetricValue(double value);

// " - name: value" for each metric, training metrics first, then val_* ones, each group
// in name order (the order Keras 3 prints its logs in).
std::string FormatMetrics(const google::protobuf::RepeatedPtrField<v1::Metric>& metrics);

// Whole seconds, as Keras prints an epoch's elapsed time ("3s", "125s").
std::string FormatElapsed(double seconds);

// Time per step: "2s/step", "12ms/step", "850us/step".
std::string FormatPerStep(double seconds);

// "steps done/total" right-aligned to the width of `total`, as Keras: " 17/234".
std::string FormatStepCount(int64_t step, int64_t total);

// A bar of `width` cells, the first width*step/total filled. With `color` the filled
// cells are green and the rest dim (as Keras draws them, same character); without,
// the empty cells are drawn as "─" so the bar still reads.
std::string RenderBar(int64_t step, int64_t total, int width, bool color);

// `line` cut to at most `columns` terminal columns (one per code point; ANSI escape
// sequences take none and are kept, so colors still end). A line redrawn in place must
// not wrap: "\r" returns to the start of the last row only.
std::string FitToColumns(const std::string& line, int columns);

}  // namespace cohort::client
