#include "common/metrics/registry.h"

#include <algorithm>
#include <cmath>
#include <variant>

#include "absl/strings/str_cat.h"
#include "common/metrics/text_format.h"

namespace cohort::metrics {

void Counter::Increment(double by) {
  if (by >= 0) value_.fetch_add(by, std::memory_order_relaxed);
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  absl::MutexLock lock(&mu_);
  counts_[bucket] += 1;
  sum_ += value;
}

Histogram::Snapshot Histogram::Take() const {
  Snapshot s;
  s.bounds = bounds_;
  absl::MutexLock lock(&mu_);
  uint64_t total = 0;
  for (uint64_t c : counts_) {
    total += c;
    s.cumulative.push_back(total);
  }
  s.sum = sum_;
  s.count = total;
  return s;
}

template <typename T>
T& Family<T>::WithLabels(const std::vector<std::string>& values) {
  std::vector<std::string> key = values;
  key.resize(label_names_.size());
  absl::MutexLock lock(&mu_);
  std::unique_ptr<T>& child = children_[key];
  if (!child) {
    if constexpr (std::is_same_v<T, Histogram>) {
      child = std::make_unique<Histogram>(bounds_);
    } else {
      child = std::make_unique<T>();
    }
  }
  return *child;
}

template <typename T>
void Family<T>::Remove(const std::vector<std::string>& values) {
  std::vector<std::string> key = values;
  key.resize(label_names_.size());
  absl::MutexLock lock(&mu_);
  children_.erase(key);
}

template <typename T>
void Family<T>::Clear() {
  absl::MutexLock lock(&mu_);
  children_.clear();
}

template <typename T>
void Family<T>::ForEach(
    const std::function<void(const std::vector<std::string>&, const T&)>& f) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [labels, child] : children_) f(labels, *child);
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

struct Registry::Entry {
  std::string name;
  std::string help;
  Type type;
  std::variant<std::unique_ptr<Family<Counter>>, std::unique_ptr<Family<Gauge>>,
               std::unique_ptr<Family<Histogram>>>
      family;
};

Registry::Registry() = default;
Registry::~Registry() = default;

absl::Status Registry::CheckNew(absl::string_view name, const std::vector<std::string>& labels,
                                Type type) const {
  if (!IsValidMetricName(name)) {
    return absl::InvalidArgumentError(absl::StrCat("metric name '", name, "' is not valid"));
  }
  for (const auto& e : entries_) {
    if (e->name == name) {
      return absl::AlreadyExistsError(absl::StrCat("metric '", name, "' is registered twice"));
    }
  }
  for (size_t i = 0; i < labels.size(); ++i) {
    if (!IsValidLabelName(labels[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric '", name, "': label name '", labels[i], "' is not valid"));
    }
    if (type == Type::kHistogram && labels[i] == "le") {
      return absl::InvalidArgumentError(
          absl::StrCat("histogram '", name, "': the label 'le' is the bucket's"));
    }
    if (std::find(labels.begin(), labels.begin() + i, labels[i]) != labels.begin() + i) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric '", name, "': label '", labels[i], "' is named twice"));
    }
  }
  return absl::OkStatus();
}

template <typename T>
Family<T>* Registry::Insert(absl::string_view name, absl::string_view help, Type type,
                           std::vector<std::string> label_names, std::vector<double> bounds) {
  auto family = std::make_unique<Family<T>>(std::move(label_names), std::move(bounds));
  Family<T>* result = family.get();
  entries_.push_back(std::make_unique<Entry>(
      Entry{std::string(name), std::string(help), type, std::move(family)}));
  return result;
}

absl::StatusOr<Family<Counter>*> Registry::AddCounter(absl::string_view name, absl::string_view help,
                                                      std::vector<std::string> label_names) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckNew(name, label_names, Type::kCounter); !s.ok()) return s;
  return Insert<Counter>(name, help, Type::kCounter, std::move(label_names), {});
}

absl::StatusOr<Family<Gauge>*> Registry::AddGauge(absl::string_view name, absl::string_view help,
                                                  std::vector<std::string> label_names) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckNew(name, label_names, Type::kGauge); !s.ok()) return s;
  return Insert<Gauge>(name, help, Type::kGauge, std::move(label_names), {});
}

absl::StatusOr<Family<Histogram>*> Registry::AddHistogram(absl::string_view name,
                                                          absl::string_view help,
                                                          std::vector<std::string> label_names,
                                                          std::vector<double> bounds) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckNew(name, label_names, Type::kHistogram); !s.ok()) return s;
  if (bounds.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("histogram '", name, "' has no buckets"));
  }
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (std::isnan(bounds[i]) || (i > 0 && bounds[i] <= bounds[i - 1])) {
      return absl::InvalidArgumentError(
          absl::StrCat("histogram '", name, "': bucket bounds must increase"));
    }
  }
  if (std::isinf(bounds.back()) && bounds.back() > 0) bounds.pop_back();  // implicit
  return Insert<Histogram>(name, help, Type::kHistogram, std::move(label_names), std::move(bounds));
}

void Registry::AddCollector(std::function<void()> collector) {
  absl::MutexLock lock(&mu_);
  collectors_.push_back(std::move(collector));
}

namespace {

constexpr absl::string_view TypeName(Type t) {
  switch (t) {
    case Type::kCounter:
      return "counter";
    case Type::kGauge:
      return "gauge";
    case Type::kHistogram:
      return "histogram";
  }
  return "untyped";
}

void RenderHistogram(const std::string& name, const std::vector<std::string>& label_names,
                     const std::vector<std::string>& values, const Histogram& h, std::string* out) {
  Histogram::Snapshot s = h.Take();
  std::vector<std::string> names = label_names;
  names.push_back("le");
  std::vector<std::string> with_le = values;
  with_le.push_back("");
  for (size_t i = 0; i <= s.bounds.size(); ++i) {
    with_le.back() = i < s.bounds.size() ? FormatValue(s.bounds[i]) : "+Inf";
    absl::StrAppend(out, name, "_bucket", FormatLabels(names, with_le), " ", s.cumulative[i], "\n");
  }
  std::string labels = FormatLabels(label_names, values);
  absl::StrAppend(out, name, "_sum", labels, " ", FormatValue(s.sum), "\n");
  absl::StrAppend(out, name, "_count", labels, " ", s.count, "\n");
}

}  // namespace

std::string Registry::TextFormat() const {
  std::vector<std::function<void()>> collectors;
  {
    absl::MutexLock lock(&mu_);
    collectors = collectors_;
  }
  for (const auto& c : collectors) c();
  std::string out;
  absl::MutexLock lock(&mu_);
  for (const auto& e : entries_) {
    absl::StrAppend(&out, "# HELP ", e->name, " ", EscapeHelp(e->help), "\n");
    absl::StrAppend(&out, "# TYPE ", e->name, " ", TypeName(e->type), "\n");
    std::visit(
        [&](const auto& family) {
          using F = std::decay_t<decltype(*family)>;
          const std::vector<std::string>& names = family->label_names();
          if constexpr (std::is_same_v<F, Family<Histogram>>) {
            family->ForEach([&](const std::vector<std::string>& values, const Histogram& h) {
              RenderHistogram(e->name, names, values, h, &out);
            });
          } else {
            family->ForEach([&](const std::vector<std::string>& values, const auto& child) {
              absl::StrAppend(&out, e->name, FormatLabels(names, values), " ",
                              FormatValue(child.value()), "\n");
            });
          }
        },
        e->family);
  }
  return out;
}

std::vector<double> LatencyBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

}  // namespace cohort::metrics
