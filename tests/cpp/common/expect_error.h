// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "ir/errors.h"

namespace mdfuser::test {

// Passes when `f` throws a UserError of `kind` whose message contains
// `substring`; reports what happened otherwise.
template <typename F>
::testing::AssertionResult throwsUserError(
    F&& f, UserError::Kind kind, std::string_view substring) {
  try {
    f();
  } catch (const UserError& e) {
    if (e.kind() != kind) {
      return ::testing::AssertionFailure()
             << "threw a UserError of the other kind: " << e.what();
    }
    if (std::string_view(e.what()).find(substring) == std::string_view::npos) {
      return ::testing::AssertionFailure()
             << "message lacks \"" << substring << "\": " << e.what();
    }
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure()
           << "threw something other than a UserError: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

// Passes when `f` throws an InternalError whose message contains
// `substring`.
template <typename F>
::testing::AssertionResult throwsInternalError(
    F&& f, std::string_view substring) {
  try {
    f();
  } catch (const InternalError& e) {
    if (std::string_view(e.what()).find(substring) == std::string_view::npos) {
      return ::testing::AssertionFailure()
             << "message lacks \"" << substring << "\": " << e.what();
    }
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure()
           << "threw something other than an InternalError: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

} // namespace mdfuser::test

// The statement must raise a user error reaching Python as ValueError.
#define EXPECT_VALUE_ERROR(statement, substring) \
  EXPECT_TRUE(::mdfuser::test::throwsUserError(  \
      [&] { statement; }, ::mdfuser::UserError::Kind::kValue, substring))

// The statement must raise a user error reaching Python as TypeError.
#define EXPECT_TYPE_ERROR(statement, substring) \
  EXPECT_TRUE(::mdfuser::test::throwsUserError( \
      [&] { statement; }, ::mdfuser::UserError::Kind::kType, substring))

// The statement must fail an internal check.
#define EXPECT_INTERNAL_ERROR(statement, substring) \
  EXPECT_TRUE(                                      \
      ::mdfuser::test::throwsInternalError([&] { statement; }, substring))
