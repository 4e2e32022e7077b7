#include "client/keras_format.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace cohort::client {

std::string FormatMetricValue(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  // keras/src/utils/progbar.py: f" {avg:.4f}" if abs(avg) > 1e-3 else f" {avg:.4e}".
  if (std::fabs(value) > 1e-3) return absl::StrFormat("%.4f", value);
  return absl::StrFormat("%.4e", value);
}

std::string FormatMetrics(const google::protobuf::RepeatedPtrField<v1::Metric>& metrics) {
  std::vector<const v1::Metric*> sorted;
  for (const v1::Metric& m : metrics) sorted.push_back(&m);
  std::stable_sort(sorted.begin(), sorted.end(), [](const v1::Metric* a, const v1::Metric* b) {
    const bool a_val = absl::StartsWith(a->name(), "val_");
    const bool b_val = absl::StartsWith(b->name(), "val_");
    if (a_val != b_val) return !a_val;
    return a->name() < b->name();
  });
  std::string out;
  for (const v1::Metric* m : sorted) {
    absl::StrAppend(&out, " - ", m->name(), ": ", FormatMetricValue(m->value()));
  }
  return out;
}

std::string FormatElapsed(double seconds) {
  return absl::StrFormat("%.0fs", std::max(0.0, seconds));
}

std::string FormatPerStep(double seconds) {
  seconds = std::max(0.0, seconds);
  if (seconds >= 1 || seconds == 0) return absl::StrFormat("%.0fs/step", seconds);
  if (seconds >= 1e-3) return absl::StrFormat("%.0fms/step", seconds * 1e3);
  return absl::StrFormat("%.0fus/step", seconds * 1e6);
}

std::string FormatStepCount(int64_t step, int64_t total) {
  const int digits = static_cast<int>(absl::StrCat(total).size());
  return absl::StrFormat("%*d/%d", digits, step, total);
}

std::string RenderBar(int64_t step, int64_t total, int width, bool color) {
  int filled = 0;
  if (total > 0) {
    const double fraction = std::clamp(static_cast<double>(step) / total, 0.0, 1.0);
    filled = static_cast<int>(width * fraction);
  }
  std::string done, rest;
  for (int i = 0; i < filled; ++i) done += "━";
  for (int i = filled; i < width; ++i) rest += color ? "━" : "─";
  if (!color) return done + rest;
  std::string out;
  if (!done.empty()) absl::StrAppend(&out, "\x1b[32m", done, "\x1b[0m");
  if (!rest.empty()) absl::StrAppend(&out, "\x1b[2m", rest, "\x1b[0m");
  return out;
}

std::string FitToColumns(const std::string& line, int columns) {
  std::string out;
  int used = 0;
  bool cut = false;
  for (size_t i = 0; i < line.size();) {
    const unsigned char c = static_cast<unsigned char>(line[i]);
    if (c == 0x1b) {  // CSI: ESC [ parameters final-byte
      size_t end = i + 1;
      if (end < line.size() && line[end] == '[') {
        ++end;
        while (end < line.size() && !(line[end] >= 0x40 && line[end] <= 0x7e)) ++end;
      }
      end = std::min(line.size(), end + 1);
      out.append(line, i, end - i);
      i = end;
      continue;
    }
    size_t length = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : 4;
    length = std::min(length, line.size() - i);
    if (used < columns && !cut) {
      out.append(line, i, length);
      ++used;
    } else {
      cut = true;
    }
    i += length;
  }
  return out;
}

}  // namespace cohort::client
