// SPDX-License-Identifier: MIT
#pragma once

#include <optional>
#include <vector>

#include "ir/ops/tensor_op.h"

namespace mdfuser {

// The attributes of scaled dot-product attention.
struct SdpaOptions {
  bool is_causal = false;
  // 1 / sqrt(head size) when unset.
  std::optional<double> scale;
};

// Flash attention, forward (OpType::SdpaFwd, nvFuser's sdpfa_fwd):
//   query [B, H, S, E], key [B, H, T, E], value [B, H, T, E]
//   -> output [B, H, S, E] (query's dtype), log_sumexp [B, H, S] (Float),
//      philox_seed [], philox_offset [] (Int; zero: no dropout)
// and backward (OpType::SdpaBwd, nvFuser's sdpfa_bwd):
//   (grad_output, query, key, value, output, log_sumexp)
//   -> (grad_query, grad_key, grad_value)
// Batch and head axes map from every operand to every output, so attention
// shards on them; the sequence and head-size axes map to nothing, so a
// sharded one is gathered first.
class SdpaOp : public TensorOp {
 public:
  SdpaOp(
      IrContainer* container,
      OpType type,
      std::vector<Val*> outputs,
      std::vector<Val*> inputs,
      SdpaOptions options);

  const SdpaOptions& options() const {
    return options_;
  }

  using TensorOp::mapProducerToConsumer;
  std::vector<AxisMapping> mapProducerToConsumer(
      const TensorView* producer, const TensorView* consumer) const override;
  TensorOp* recreate(
      IrContainer* container,
      std::vector<Val*> inputs,
      std::vector<Val*> outputs) const override;

 private:
  std::vector<std::string> attributes() const override;

  SdpaOptions options_;
};

struct SdpaFwdResult {
  TensorView* output;
  TensorView* log_sumexp;
  TensorView* philox_seed;
  TensorView* philox_offset;
};

// `dropout_p` must be 0 (dropout is not supported; ValueError otherwise).
// ValueError for operands that are not 4-dimensional or disagree on batch,
// heads, sequence or head size (value's too: the flash kernels take one);
// TypeError for non-floating or mixed dtypes.
SdpaFwdResult sdpfaFwd(
    TensorView* query,
    TensorView* key,
    TensorView* value,
    double dropout_p,
    const SdpaOptions& options);

struct SdpaBwdResult {
  TensorView* grad_query;
  TensorView* grad_key;
  TensorView* grad_value;
};

SdpaBwdResult sdpfaBwd(
    TensorView* grad_output,
    TensorView* query,
    TensorView* key,
    TensorView* value,
    TensorView* output,
    TensorView* log_sumexp,
    double dropout_p,
    const SdpaOptions& options);

} // namespace mdfuser
