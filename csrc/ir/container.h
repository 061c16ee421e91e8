// SPDX-License-Identifier: MIT
#pragma once

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/base_nodes.h"

namespace mdfuser {

// Owns IR statements and numbers them. Statements are created with
// create<T>(args...), which forwards `this` and args to T's constructor.
class IrContainer {
 public:
  IrContainer() = default;
  IrContainer(const IrContainer&) = delete;
  IrContainer& operator=(const IrContainer&) = delete;
  virtual ~IrContainer() = default;

  template <typename T, typename... Args>
  T* create(Args&&... args) {
    auto owned = std::make_unique<T>(this, std::forward<Args>(args)...);
    T* raw = owned.get();
    adopt(std::move(owned));
    return raw;
  }

  // In creation order.
  const std::vector<std::unique_ptr<Statement>>& statements() const {
    return statements_;
  }

 protected:
  // Clones every statement of `other` into this container, keeping names,
  // then restores definitions and uses. Returns the clone of each statement.
  void copyFrom(const IrContainer& other, IrCloner& cloner);

 private:
  void adopt(std::unique_ptr<Statement> statement);

  std::vector<std::unique_ptr<Statement>> statements_;
  std::map<std::string, int64_t, std::less<>> counters_;
};

// Maps statements of one container to their clones in another.
class IrCloner {
 public:
  explicit IrCloner(IrContainer* target) : target_(target) {}

  IrContainer* target() const {
    return target_;
  }

  template <typename T>
  T* clone(const T* statement) {
    if (statement == nullptr) {
      return nullptr;
    }
    return static_cast<T*>(cloneStatement(statement));
  }

  template <typename T>
  std::vector<T*> clone(const std::vector<T*>& statements) {
    std::vector<T*> result;
    result.reserve(statements.size());
    for (const T* s : statements) {
      result.push_back(clone(s));
    }
    return result;
  }

 private:
  Statement* cloneStatement(const Statement* statement);

  IrContainer* target_;
  std::unordered_map<const Statement*, Statement*> clones_;
};

} // namespace mdfuser
