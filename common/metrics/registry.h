#pragma once

// Metrics in the Prometheus text exposition format (version 0.0.4), for the daemons'
// `--metrics-listen` endpoints: counters, gauges and histograms, each a family of
// children told apart by label values.
//
//   metrics::Registry registry;
//   auto rpcs = registry.AddCounter("cohort_rpcs_total", "RPCs handled.", {"method", "code"});
//   (*rpcs)->WithLabels({"SubmitJob", "OK"}).Increment();
//   std::string text = registry.TextFormat();   // what GET /metrics returns
//
// The registry owns its families and they own their children: the pointers and
// references handed out live as long as the registry. Collectors registered with
// AddCollector run at the start of every TextFormat call, on its thread: the place to
// set gauges from state that is cheaper to read on demand (jobs by state) than to
// track. Thread-safe: every method may be called from any thread.
//
// Names are checked when a family is added (INVALID_ARGUMENT for a bad metric or label
// name, a histogram label "le", or unsorted buckets; ALREADY_EXISTS for a name taken).
// A WithLabels call with the wrong number of values is a bug of the caller: missing
// values are empty and extra ones are dropped.

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace cohort::metrics {

class Counter {
 public:
  // `by` must be >= 0 (a counter only goes up); a negative value is ignored.
  void Increment(double by = 1.0);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Add(double by) { value_.fetch_add(by, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Histogram {
 public:
  // `bounds`: the buckets' upper bounds, increasing; +Inf is implicit.
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);

  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // per bound, then +Inf
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Take() const;

 private:
  const std::vector<double> bounds_;
  mutable absl::Mutex mu_;
  std::vector<uint64_t> counts_ ABSL_GUARDED_BY(mu_);  // per bucket, not cumulative
  double sum_ ABSL_GUARDED_BY(mu_) = 0;
};

enum class Type { kCounter, kGauge, kHistogram };

// The children of one metric name. `T` is Counter, Gauge or Histogram.
template <typename T>
class Family {
 public:
  Family(std::vector<std::string> label_names, std::vector<double> bounds)
      : label_names_(std::move(label_names)), bounds_(std::move(bounds)) {}

  // The child with these label values (in the order of the family's label names),
  // made on first use.
  T& WithLabels(const std::vector<std::string>& values);
  // Forgets the child with these label values (a rank that ended), if any.
  void Remove(const std::vector<std::string>& values);
  // Forgets every child: for gauges refreshed by a collector, so that label sets that
  // are gone stop being reported.
  void Clear();

  const std::vector<std::string>& label_names() const { return label_names_; }
  // Calls `f(label values, child)` for each child, in label order, under the lock.
  void ForEach(const std::function<void(const std::vector<std::string>&, const T&)>& f) const;

 private:
  const std::vector<std::string> label_names_;
  const std::vector<double> bounds_;  // histograms only
  mutable absl::Mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<T>> children_ ABSL_GUARDED_BY(mu_);
};

class Registry {
 public:
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  absl::StatusOr<Family<Counter>*> AddCounter(absl::string_view name, absl::string_view help,
                                              std::vector<std::string> label_names = {});
  absl::StatusOr<Family<Gauge>*> AddGauge(absl::string_view name, absl::string_view help,
                                          std::vector<std::string> label_names = {});
  absl::StatusOr<Family<Histogram>*> AddHistogram(absl::string_view name, absl::string_view help,
                                                  std::vector<std::string> label_names,
                                                  std::vector<double> bounds);

  void AddCollector(std::function<void()> collector);

  // Runs the collectors, then renders every family in the order added: "# HELP",
  // "# TYPE", then one line per sample.
  std::string TextFormat() const;

 private:
  struct Entry;
  absl::Status CheckNew(absl::string_view name, const std::vector<std::string>& labels,
                        Type type) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds a family already checked by CheckNew; returns it.
  template <typename T>
  Family<T>* Insert(absl::string_view name, absl::string_view help, Type type,
                    std::vector<std::string> label_names, std::vector<double> bounds)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Entry>> entries_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void()>> collectors_ ABSL_GUARDED_BY(mu_);
};

// Buckets for latencies in seconds: 1 ms to 60 s.
std::vector<double> LatencyBuckets();

}  // namespace cohort::metrics
