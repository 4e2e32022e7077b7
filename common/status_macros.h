#pragma once

// Early returns for absl::Status and absl::StatusOr, for code that chains many
// fallible steps (parsers). Elsewhere, plain `if (!s.ok()) return s;` reads fine.

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define COHORT_STATUS_CONCAT_INNER(a, b) a##b
#define COHORT_STATUS_CONCAT(a, b) COHORT_STATUS_CONCAT_INNER(a, b)

// Returns the status of `expr` from the enclosing function when it is not OK.
#define COHORT_RETURN_IF_ERROR(expr)                     \
  do {                                                  \
    if (absl::Status status_ = (expr); !status_.ok()) { \
      return status_;                                   \
    }                                                   \
  } while (false)

// `lhs = value of expr`, or returns its status when it is not OK.
#define COHORT_ASSIGN_OR_RETURN(lhs, expr) \
  COHORT_ASSIGN_OR_RETURN_IMPL(COHORT_STATUS_CONCAT(status_or_, __LINE__), lhs, expr)
#define COHORT_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
