// SPDX-License-Identifier: MIT
#include "passes/reorder_parallel_axes.h"

#include <algorithm>

namespace mdfuser {

namespace {

int rank(const IterDomain* id) {
  switch (id->parallelType()) {
    case ParallelType::Stream:
      return 0;
    case ParallelType::DIDz:
      return 1;
    case ParallelType::DIDy:
      return 2;
    case ParallelType::DIDx:
      return 3;
    case ParallelType::Serial:
      return 4;
  }
  return 4;
}

} // namespace

void reorderParallelAxes(Fusion* fusion) {
  for (TensorView* tv : fusion->allTensors()) {
    std::vector<IterDomain*> loop = tv->loop();
    std::stable_sort(loop.begin(), loop.end(), [](auto* a, auto* b) {
      return rank(a) < rank(b);
    });
    tv->setLoop(std::move(loop));
  }
}

} // namespace mdfuser
