// SPDX-License-Identifier: MIT
#pragma once

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace mdfuser::test {

// Sets or unsets environment variables for the lifetime of the guard, then
// restores them.
class EnvGuard {
 public:
  EnvGuard& set(const std::string& name, const std::string& value) {
    remember(name);
    setenv(name.c_str(), value.c_str(), 1);
    return *this;
  }
  EnvGuard& unset(const std::string& name) {
    remember(name);
    unsetenv(name.c_str());
    return *this;
  }
  ~EnvGuard() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second.has_value()) {
        setenv(it->first.c_str(), it->second->c_str(), 1);
      } else {
        unsetenv(it->first.c_str());
      }
    }
  }

 private:
  void remember(const std::string& name) {
    const char* old = std::getenv(name.c_str());
    saved_.emplace_back(
        name, old == nullptr ? std::nullopt : std::optional<std::string>(old));
  }

  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

} // namespace mdfuser::test
