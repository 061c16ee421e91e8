// SPDX-License-Identifier: MIT
#include "ir/errors.h"

namespace mdfuser::detail {

void throwInternalError(
    const char* file,
    int line,
    const char* condition,
    const std::string& message) {
  std::ostringstream ss;
  ss << "mdfuser internal error (a bug in mdfuser, please report it) at "
     << file << ":" << line << ": check `" << condition << "` failed";
  if (!message.empty()) {
    ss << ": " << message;
  }
  throw InternalError(ss.str());
}

void throwUserError(UserError::Kind kind, const std::string& message) {
  throw UserError(kind, message);
}

} // namespace mdfuser::detail
