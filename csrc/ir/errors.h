// SPDX-License-Identifier: MIT
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace mdfuser {

// A request that cannot be honoured: bad input, an impossible sharding, an
// unsupported combination. The Python binding raises it as ValueError or
// TypeError, so its message must name the offending value and what was
// expected.
class UserError : public std::runtime_error {
 public:
  enum class Kind { kValue, kType };

  UserError(Kind kind, const std::string& message)
      : std::runtime_error(message), kind_(kind) {}

  Kind kind() const {
    return kind_;
  }

 private:
  Kind kind_;
};

// mdfuser broke one of its own invariants. Never the caller's fault.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

namespace detail {

template <typename... Args>
std::string concat(const Args&... args) {
  if constexpr (sizeof...(Args) == 0) {
    return {};
  } else {
    std::ostringstream ss;
    (ss << ... << args);
    return ss.str();
  }
}

[[noreturn]] void throwInternalError(
    const char* file,
    int line,
    const char* condition,
    const std::string& message);

[[noreturn]] void throwUserError(
    UserError::Kind kind, const std::string& message);

} // namespace detail
} // namespace mdfuser

// Internal invariant: failing means mdfuser has a bug.
#define MDF_CHECK(cond, ...)                                                  \
  do {                                                                        \
    if (!(cond)) [[unlikely]] {                                               \
      ::mdfuser::detail::throwInternalError(                                  \
          __FILE__, __LINE__, #cond, ::mdfuser::detail::concat(__VA_ARGS__)); \
    }                                                                         \
  } while (false)

// Internal comparison that prints both sides when it fails.
#define MDF_CHECK_OP(a, b, op, ...)                                           \
  do {                                                                        \
    const auto& mdf_lhs_ = (a);                                               \
    const auto& mdf_rhs_ = (b);                                               \
    if (!(mdf_lhs_ op mdf_rhs_)) [[unlikely]] {                               \
      ::mdfuser::detail::throwInternalError(                                  \
          __FILE__,                                                           \
          __LINE__,                                                           \
          #a " " #op " " #b,                                                  \
          ::mdfuser::detail::concat(                                          \
              mdf_lhs_, " vs. ", mdf_rhs_ __VA_OPT__(, ". ", ) __VA_ARGS__)); \
    }                                                                         \
  } while (false)

#define MDF_CHECK_EQ(a, b, ...) MDF_CHECK_OP(a, b, ==, __VA_ARGS__)
#define MDF_CHECK_LT(a, b, ...) MDF_CHECK_OP(a, b, <, __VA_ARGS__)
#define MDF_CHECK_LE(a, b, ...) MDF_CHECK_OP(a, b, <=, __VA_ARGS__)

#define MDF_UNREACHABLE(...)             \
  ::mdfuser::detail::throwInternalError( \
      __FILE__,                          \
      __LINE__,                          \
      "unreachable",                     \
      ::mdfuser::detail::concat(__VA_ARGS__))

// Caller error reaching Python as ValueError.
#define MDF_USER_CHECK(cond, ...)                  \
  do {                                             \
    if (!(cond)) [[unlikely]] {                    \
      ::mdfuser::detail::throwUserError(           \
          ::mdfuser::UserError::Kind::kValue,      \
          ::mdfuser::detail::concat(__VA_ARGS__)); \
    }                                              \
  } while (false)

// Caller error reaching Python as TypeError.
#define MDF_TYPE_CHECK(cond, ...)                  \
  do {                                             \
    if (!(cond)) [[unlikely]] {                    \
      ::mdfuser::detail::throwUserError(           \
          ::mdfuser::UserError::Kind::kType,       \
          ::mdfuser::detail::concat(__VA_ARGS__)); \
    }                                              \
  } while (false)

#define MDF_USER_ERROR(...)               \
  ::mdfuser::detail::throwUserError(      \
      ::mdfuser::UserError::Kind::kValue, \
      ::mdfuser::detail::concat(__VA_ARGS__))
