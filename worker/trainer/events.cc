#include "worker/trainer/events.h"

#include "absl/time/clock.h"

namespace cohort::trainer {

void EventWriter::Emit(const std::string& kind, nlohmann::json fields) {
  if (out_ == nullptr) return;
  fields["event"] = kind;
  fields["time"] = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
  std::string line = fields.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fflush(out_);
}

}  // namespace cohort::trainer
