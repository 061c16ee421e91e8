// SPDX-License-Identifier: MIT
#include "runtime/sdpa_dropout.h"

#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/empty.h>

#include "ir/errors.h"
#include "runtime/rng_mix.h"

namespace mdfuser {

at::Tensor sdpaDropoutKeep(
    uint64_t seed,
    uint64_t offset,
    const at::Tensor& slice_ids,
    int64_t seq_q,
    int64_t seq_k,
    double dropout_p) {
  MDF_CHECK(slice_ids.scalar_type() == at::kLong, "slice ids must be Int");
  const at::Tensor ids = slice_ids.cpu().contiguous();
  std::vector<int64_t> shape(ids.sizes().begin(), ids.sizes().end());
  shape.push_back(seq_q);
  shape.push_back(seq_k);
  at::Tensor keep = at::empty(shape, at::TensorOptions().dtype(at::kBool));
  at::Tensor draws =
      at::empty({seq_q, seq_k}, at::TensorOptions().dtype(at::kFloat));
  const uint64_t base = mixSeed(mixSeed(seed) ^ offset);
  const int64_t* id = ids.const_data_ptr<int64_t>();
  at::Tensor flat = keep.view({ids.numel(), seq_q, seq_k});
  for (int64_t i = 0; i < ids.numel(); ++i) {
    at::Generator generator = at::detail::createCPUGenerator(
        mixSeed(base ^ static_cast<uint64_t>(id[i])));
    draws.uniform_(0.0, 1.0, generator);
    flat[i].copy_(draws.ge(dropout_p));
  }
  return keep;
}

} // namespace mdfuser
