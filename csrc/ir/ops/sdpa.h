// SPDX-License-Identifier: MIT
#pragma once

#include <optional>
#include <vector>

#include "ir/ops/tensor_op.h"

namespace mdfuser {

// The attributes of scaled dot-product attention.
struct SdpaOptions {
  // The probability of zeroing an attention weight, in [0, 1); the kept
  // weights are scaled by 1 / (1 - dropout_p).
  double dropout_p = 0.0;
  bool is_causal = false;
  // 1 / sqrt(head size) when unset.
  std::optional<double> scale;
};

// Flash attention, forward (OpType::SdpaFwd, nvFuser's sdpfa_fwd):
//   query [B, H, S, E], key [B, H, T, E], value [B, H, T, E]
//   -> output [B, H, S, E] (query's dtype), log_sumexp [B, H, S] (Float),
//      philox_seed [2], philox_offset [] (UInt64: the state the dropout mask
//      was drawn from, as torch's flash attention returns it)
// and backward (OpType::SdpaBwd, nvFuser's sdpfa_bwd):
//   (grad_output, query, key, value, output, log_sumexp
//    [, philox_seed, philox_offset])
//   -> (grad_query, grad_key, grad_value)
// The operands may have one more leading axis, [D, B, H/D, S, E]: a device
// axis kept as a logical axis of its own; every axis before the sequence
// axis is then a batch axis. Batch and head axes map from every operand to
// every output, so attention shards on them; the sequence and head-size
// axes map to nothing, so a sharded one is gathered first. The philox
// tensors take nothing from the other operands' data: they neither map
// nor reshard.
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
  // The number of leading (batch and head) axes of query: 2, or 3 with a
  // device axis of its own.
  size_t batchAxes() const;

  using TensorOp::mapProducerToConsumer;
  std::vector<AxisMapping> mapProducerToConsumer(
      const TensorView* producer, const TensorView* consumer) const override;
  bool takesOperandData(const TensorView* consumer) const override;
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

// ValueError for `dropout_p` outside [0, 1), for operands that are not 4-
// or 5-dimensional or disagree on rank, batch, heads, sequence or head size
// (value's too: the flash kernels take one); TypeError for non-floating or
// mixed dtypes. `options.dropout_p` is replaced by `dropout_p`.
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

// `philox_seed` and `philox_offset` are sdpfa_fwd's (UInt64 [2] and [];
// TypeError or ValueError otherwise); they may be null when dropout_p is
// 0, and are required otherwise (ValueError).
SdpaBwdResult sdpfaBwd(
    TensorView* grad_output,
    TensorView* query,
    TensorView* key,
    TensorView* value,
    TensorView* output,
    TensorView* log_sumexp,
    TensorView* philox_seed,
    TensorView* philox_offset,
    double dropout_p,
    const SdpaOptions& options);

} // namespace mdfuser
