// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>

namespace mdfuser {

// splitmix64's finalizer: nearby inputs give unrelated seeds. The random
// operations and attention's dropout seed their generators through it.
inline uint64_t mixSeed(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

} // namespace mdfuser
