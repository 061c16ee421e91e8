// SPDX-License-Identifier: MIT
#pragma once

namespace mdfuser::kernels {

// The element types the fused kernels multiply (fp32 accumulation).
enum class GemmDtype { kBFloat16, kHalf };

} // namespace mdfuser::kernels
