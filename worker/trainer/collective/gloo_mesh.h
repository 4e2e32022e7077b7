#pragma once

// The Gloo backend's connections (internal to it): the gloo context, connected through
// our Store and switched to synchronous pairs, and the translation of gloo's exceptions
// into the statuses collective.h promises.

#include <memory>
#include <optional>

#include <gloo/rendezvous/context.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "worker/trainer/collective/gloo_collective.h"
#include "worker/trainer/collective/store.h"

namespace cohort::trainer::collective {

// A gloo context whose slot counter can be set aside. Every gloo algorithm takes message
// slots from the context's counter (an int) when it is built, and all ranks must build
// the same algorithms in the same order so their slots match. Algorithms built for one
// call and destroyed right after (broadcasts) reuse one fixed range
// instead, so the counter does not run out over millions of steps. Reuse is safe: with
// synchronous pairs a rank reads a connection only inside an operation, and TCP delivers
// the previous operation's messages before the next one's.
class GlooContext final : public gloo::rendezvous::Context {
 public:
  using gloo::rendezvous::Context::Context;

  // Calls `build` with the slot counter at the start of the reusable range.
  template <typename Build>
  auto BuildEphemeral(Build build) {
    struct Restore {
      GlooContext* context;
      int saved;
      ~Restore() { context->slot_ = saved; }
    } restore{this, slot_};
    slot_ = kEphemeralSlotBase;
    return build();
  }

 private:
  // Far above anything the counter reaches: it only counts long-lived algorithms.
  static constexpr int kEphemeralSlotBase = 1 << 30;
};

// Joins the rendezvous, connects a full mesh and switches its pairs to synchronous mode.
// The context is shared because gloo's algorithms keep it by shared_ptr.
absl::StatusOr<std::shared_ptr<GlooContext>> ConnectGlooMesh(const GlooOptions& options,
                                                             Store& store);

// The peer whose pair failed with the exception message `what`, if any: gloo's error
// messages name a socket address, which need not be one the peer knows itself by. Call
// on the thread that ran the operation, before closing the connections.
std::optional<int> FailedPeer(GlooContext& context, bool busy_poll, absl::string_view what);

// The status for an exception gloo threw during `op` ("all-reduce"): `peer` timed out
// (DEADLINE_EXCEEDED) or closed its connection (UNAVAILABLE); INTERNAL otherwise.
absl::Status TranslateGlooError(absl::string_view op, std::optional<int> peer,
                                absl::Duration timeout, absl::string_view what);

}  // namespace cohort::trainer::collective
