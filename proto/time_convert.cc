#include "proto/time_convert.h"

namespace cohort {

void ToProto(absl::Time t, google::protobuf::Timestamp* out) {
  int64_t us = absl::ToUnixMicros(t);
  int64_t seconds = us / 1000000;
  int64_t micros = us % 1000000;
  if (micros < 0) {
    micros += 1000000;
    seconds -= 1;
  }
  out->set_seconds(seconds);
  out->set_nanos(static_cast<int32_t>(micros * 1000));
}

void ToProto(absl::Duration d, google::protobuf::Duration* out) {
  int64_t ns = absl::ToInt64Nanoseconds(d);
  out->set_seconds(ns / 1000000000);
  out->set_nanos(static_cast<int32_t>(ns % 1000000000));
}

absl::Time FromProto(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

absl::Duration FromProto(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

}  // namespace cohort
