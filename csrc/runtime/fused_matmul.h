// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

namespace mdfuser {

class CudaBackend;

// Matmul–communication pairs computed by one kernel that also waits for the
// data it reads (Hopper, sm_90a; csrc/kernels/).
//
// allgather + linear: out[M, N] = allgather(in)[M, K] · weight[N, K]^T,
// `in` this member's rows (M / d of them, member i holding rows
// [i M / d, (i + 1) M / d)). Each member's rows go into every peer's
// gathered buffer (symmetric memory), where a flag or a count says they
// are there; the GEMM kernel computes the tiles of its own rows first and
// then, peer by peer, the tiles whose rows have arrived, each tile waiting
// (in the kernel, with a bound) for the rows it reads. Where the GEMM's
// tiles leave SMs free (pushedAllgatherFits), CTAs of the same launch push
// the rows over NVLink (one launch a call, nothing else); elsewhere copy
// engines move them beside the GEMM, which keeps every SM.
//
// linear + reduce-scatter: out[M / d, N] = this member's rows of
// Σ_members in[M, K] · weight[N, K]^T, each member holding its own `in`
// and `weight` (K split among them) and receiving rows [i M / d, (i + 1)
// M / d) of the sum. The GEMM kernel computes the tiles of the peers' rows
// first, peer after peer, into this member's partial sums (symmetric
// memory), and counts each block of them stored; CTAs of the same launch
// pull the peers' partial sums of this member's rows as the peers count
// them stored, and the epilogue of this member's own rows adds them
// (kernels/gemm_reduce_scatter_pulled.h). No copy engine, nothing after
// the kernel.

// Whether this build has the fused kernels and `device` can run them
// (compute capability 9.0).
bool fusedMatmulKernelsAvailable(c10::Device device);

// Why fusedMatmulKernelsAvailable is false, for an error message; empty if
// it is true.
std::string fusedMatmulKernelsUnavailableReason(c10::Device device);

// Whether the allgather + linear of a GEMM of `rows` rows (all members'),
// N = `n` and K = `k`, over a team of `d`, runs on `device` the kernel
// whose own CTAs push the rows (kernels/allgather_gemm_pushed.h): where
// the GEMM's tiles fill less than a wave of the GPU beside the pushing
// CTAs, in a build with the kernels, on Hopper. Those pairs run it when
// the fused kernels are asked for, and by default where a ring's steps
// would not pay (runtime/executor_cache.cpp); the copy-engine kernel runs
// the others asked for.
bool pushedAllgatherFits(
    int64_t rows, int64_t n, int64_t k, int64_t d, c10::Device device);

// Posts, on the current stream, out = allgather(in) · weight^T over `team`
// (ranks in team order, this one among them) through `backend`'s
// symmetric memory. in: [M / d, K] (every member the same rows), weight:
// [N, K], out: [M, N], all contiguous, of one dtype (BFloat16 or Half), on
// the backend's device. `key` names the statement (and its loop iteration)
// so that every run finds the same symmetric buffers; `what` names the
// operation in errors; `run` is the run's token for the watchdog. A peer
// that does not deliver its rows within the communicator's timeout: the
// kernel stops waiting, and the statement's next call raises an error
// naming this rank, the peer and `what` (the watchdog reports a peer that
// never frees the place for this member's rows, as for the rings).
void fusedAllgatherLinear(
    CudaBackend& backend,
    const std::vector<int64_t>& team,
    const at::Tensor& in,
    const at::Tensor& weight,
    const at::Tensor& out,
    const std::string& key,
    const std::string& what,
    uint64_t run);

// Raises, once, the error a fused kernel of `backend` left (a peer whose
// rows or partial sums did not arrive within the bound), as that
// statement's next call does. For CUDA graph replays, which run no
// statement's host code; nothing where no kernel left one.
void raiseFusedKernelErrors(CudaBackend& backend);

// Posts, on the current stream, out = the reduce-scatter over `team` of
// in · weight^T along the rows, through `backend`'s symmetric memory.
// in: [M, K], weight: [N, K] (this member's part of K), out: [M / d, N],
// all contiguous, of one dtype (BFloat16 or Half), on the backend's device;
// M a multiple of d. `key`, `what` and `run` as for fusedAllgatherLinear.
// Its waits are the kernel's, its call's number in device memory, so that
// a CUDA graph can replay it. A peer whose partial sums do not come: the
// watchdog reports it, naming this rank and `what`, and the statement's
// next call raises the error the kernel left.
void fusedLinearReduceScatterPulled(
    CudaBackend& backend,
    const std::vector<int64_t>& team,
    const at::Tensor& in,
    const at::Tensor& weight,
    const at::Tensor& out,
    const std::string& key,
    const std::string& what,
    uint64_t run);

} // namespace mdfuser
