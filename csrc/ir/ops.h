// SPDX-License-Identifier: MIT
#pragma once

// Every operation family of a fusion and its builders. See ops/op_type.h
// for the list of operations.
#include "ir/ops/broadcast.h"
#include "ir/ops/composite.h"
#include "ir/ops/creation.h"
#include "ir/ops/grouped_matmul.h"
#include "ir/ops/layer_norm.h"
#include "ir/ops/load_store.h"
#include "ir/ops/matmul.h"
#include "ir/ops/permute.h"
#include "ir/ops/pointwise.h"
#include "ir/ops/reduction.h"
#include "ir/ops/reshape.h"
#include "ir/ops/sdpa.h"
#include "ir/ops/slice.h"
#include "ir/ops/squeeze.h"
#include "ir/ops/tensor_op.h"
