#include "worker/trainer/collective/gloo_mesh.h"

#include <chrono>
#include <exception>
#include <optional>

#include <gloo/common/error.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "worker/trainer/collective/failure.h"
#include "worker/trainer/collective/listen_address.h"
#include "worker/trainer/collective/rendezvous.h"

namespace cohort::trainer::collective {
namespace {

std::chrono::milliseconds ToChrono(absl::Duration d) {
  return std::chrono::milliseconds(absl::ToInt64Milliseconds(d));
}

// Our Store as gloo's rendezvous store. gloo reports failures as exceptions, so a failed
// call throws; the status it came from is kept for the caller to report instead of
// gloo's rewording.
class GlooStoreAdapter final : public gloo::rendezvous::Store {
 public:
  GlooStoreAdapter(collective::Store& store, std::string prefix, absl::Duration timeout)
      : store_(store), prefix_(std::move(prefix)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    Check(store_.Set(prefix_ + key, absl::string_view(data.data(), data.size())));
  }

  std::vector<char> get(const std::string& key) override {
    absl::StatusOr<std::vector<std::string>> got = store_.Get({prefix_ + key}, timeout_);
    Check(got.status());
    return std::vector<char>(got->front().begin(), got->front().end());
  }

  void wait(const std::vector<std::string>& keys) override { wait(keys, ToChrono(timeout_)); }

  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    std::vector<std::string> full;
    for (const std::string& key : keys) full.push_back(prefix_ + key);
    Check(store_.Get(full, absl::FromChrono(timeout)).status());
  }

  const absl::Status& error() const { return error_; }

 private:
  void Check(absl::Status status) {
    if (status.ok()) return;
    if (error_.ok()) error_ = status;
    throw gloo::IoException(std::string(status.message()));
  }

  collective::Store& store_;
  const std::string prefix_;
  const absl::Duration timeout_;
  absl::Status error_;
};

// gloo prefixes its messages with "[/path/to/file.cc:123] ".
absl::string_view StripLocation(absl::string_view what) {
  if (absl::StartsWith(what, "[")) {
    size_t end = what.find("] ");
    if (end != absl::string_view::npos) what.remove_prefix(end + 2);
  }
  return what;
}

}  // namespace

absl::StatusOr<std::shared_ptr<GlooContext>> ConnectGlooMesh(const GlooOptions& options,
                                                             Store& store) {
  if (absl::Status s = ValidateRankAndSize("gloo", options.rank, options.size); !s.ok()) return s;
  // gloo's own lookup trusts its input (a name that does not resolve crashes it), so the
  // address is checked here first.
  if (absl::Status s = ResolveListenAddress(options).status(); !s.ok()) return s;
  if (absl::Status s = JoinRendezvous(store, options.rank, options.size, options.timeout);
      !s.ok()) {
    return s;
  }

  gloo::transport::tcp::attr attr;
  if (!options.interface.empty()) {
    attr.iface = options.interface;
  } else {
    attr.hostname = options.hostname;
  }
  std::shared_ptr<gloo::transport::Device> device;
  try {
    device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gloo: cannot listen on ",
        options.interface.empty() ? absl::StrCat("address \"", options.hostname, "\"")
                                  : absl::StrCat("interface \"", options.interface, "\""),
        ": ", StripLocation(e.what())));
  }

  auto context = std::make_shared<GlooContext>(options.rank, options.size);
  context->setTimeout(ToChrono(options.timeout));
  GlooStoreAdapter gloo_store(store, "mesh/", options.timeout);
  try {
    context->connectFullMesh(gloo_store, device);
    for (int peer = 0; peer < options.size; ++peer) {
      if (peer != options.rank) context->getPair(peer)->setSync(true, options.busy_poll);
    }
  } catch (const std::exception& e) {
    if (!gloo_store.error().ok()) return gloo_store.error();
    return TranslateGlooError("connecting to peers", std::nullopt, options.timeout, e.what());
  }
  return context;
}

std::optional<int> FailedPeer(GlooContext& context, bool busy_poll, absl::string_view what) {
  for (int peer = 0; peer < context.size; ++peer) {
    if (peer == context.rank) continue;
    try {
      // A synchronous pair rethrows the exception it failed with here; on a healthy pair
      // this sets what is set already.
      context.getPair(peer)->setSync(true, busy_poll);
    } catch (const std::exception& e) {
      if (what == e.what()) return peer;
    }
  }
  return std::nullopt;
}

absl::Status TranslateGlooError(absl::string_view op, std::optional<int> peer,
                                absl::Duration timeout, absl::string_view what) {
  absl::string_view message = StripLocation(what);
  std::string detail = absl::StrCat("gloo: ", message);
  std::string lower = absl::AsciiStrToLower(message);
  if (absl::StrContains(lower, "timeout") || absl::StrContains(lower, "timed out")) {
    return PeerTimedOut(op, peer, timeout, detail);
  }
  for (absl::string_view lost : {"closed", "reset by peer", "broken pipe", "refused"}) {
    if (absl::StrContains(lower, lost)) return PeerLost(op, peer, detail);
  }
  return absl::InternalError(absl::StrCat(op, " failed: ", detail));
}

}  // namespace cohort::trainer::collective
