// SPDX-License-Identifier: MIT
#pragma once

#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "ir/fusion.h"
#include "ir/scalar_eval.h"

namespace mdfuser {

class Communicator;

// Checks what execute() received against the fusion's inputs before
// anything runs: count, dtype (TypeError), number of dimensions, device.
// User errors name the input and what was expected.
void checkInputs(const Fusion& fusion, const std::vector<at::Tensor>& inputs);

// Checks the values given for the fusion's scalar inputs: their count
// (ValueError) and that each is of the kind its dtype holds (TypeError:
// bool for Bool, int for integral types, int or float for floating types).
void checkScalarInputs(
    const Fusion& fusion, const std::vector<Literal::Value>& scalars);

// The device the program runs on: that of the inputs, apart from the
// 0-dimensional ones defined with is_cpu; the CPU when there are none.
c10::Device programDevice(
    const Fusion& fusion, const std::vector<at::Tensor>& inputs);

// Checks the local shards against a fusion whose shardings have been
// propagated, and returns the values of its symbolic extents: each global
// extent is a local size times the number of devices its axis is sharded
// over. Also checks that the mesh fits the world and holds this rank, and
// that extents an operation requires equal are equal. User errors name the
// input, the axis, the size found and the size expected.
ScalarEvaluator bindInputs(
    const Fusion& fusion,
    const std::vector<at::Tensor>& inputs,
    const Communicator& communicator);

} // namespace mdfuser
