// SPDX-License-Identifier: MIT
//
// gemm_tiles: the fused kernels' CUTLASS GEMM in each tile shape of
// gemm_tiles_config.cu, along N and along M, against cuBLAS (at::mm) on
// the same operands in the same run; and the GEMM + reduce-scatter kernel,
// its peers simulated, against cuBLAS's GEMM. One GPU, BFloat16. Prints a
// table and, with --json PATH, writes the records.
//
//   gemm_tiles [--shapes MxNxK,...] [--iters N] [--json PATH]
//
// The default shapes are the fused kernels' GEMMs of benchmarks/
// ring_pairs.py at h = t = 8192 (k = 2048 and the default k) at d = 2 and 4.

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include "gemm_tiles.h"
#include "kernels/gemm_reduce_scatter_pulled.h"

namespace mdfuser::bench {
namespace {

void check(cudaError_t error, const std::string& what) {
  if (error != cudaSuccess) {
    throw std::runtime_error(what + ": " + cudaGetErrorString(error));
  }
}

// The median of `iters` timed calls of `fn` (after three untimed ones), in
// milliseconds, each timed by CUDA events on `stream`.
double medianMs(
    const std::function<void()>& fn, int iters, cudaStream_t stream) {
  for (int i = 0; i < 3; ++i) {
    fn();
  }
  std::vector<cudaEvent_t> events(2 * iters);
  for (cudaEvent_t& e : events) {
    check(cudaEventCreate(&e), "cudaEventCreate");
  }
  for (int i = 0; i < iters; ++i) {
    check(cudaEventRecord(events[2 * i], stream), "cudaEventRecord");
    fn();
    check(cudaEventRecord(events[2 * i + 1], stream), "cudaEventRecord");
  }
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  std::vector<float> ms(iters);
  for (int i = 0; i < iters; ++i) {
    check(
        cudaEventElapsedTime(&ms[i], events[2 * i], events[2 * i + 1]),
        "elapsed");
  }
  for (cudaEvent_t e : events) {
    (void)cudaEventDestroy(e);
  }
  std::sort(ms.begin(), ms.end());
  return ms[iters / 2];
}

struct Shape {
  int64_t m, n, k;
};

std::vector<Shape> parseShapes(const std::string& text) {
  std::vector<Shape> shapes;
  std::stringstream list(text);
  std::string item;
  while (std::getline(list, item, ',')) {
    Shape s{};
    if (std::sscanf(item.c_str(), "%ldx%ldx%ld", &s.m, &s.n, &s.k) != 3 ||
        s.m <= 0 || s.n <= 0 || s.k <= 0) {
      throw std::invalid_argument(
          "--shapes takes MxNxK,... of positive extents, got " + item);
    }
    shapes.push_back(s);
  }
  return shapes;
}

std::vector<GemmVariant> variants() {
  return {
      gemmVariant<0>(),
      gemmVariant<1>(),
      gemmVariant<2>(),
      gemmVariant<3>(),
      gemmVariant<4>(),
      gemmVariant<5>(),
      gemmVariant<6>(),
      gemmVariant<7>(),
      gemmVariant<8>(),
      gemmVariant<9>(),
      gemmVariant<10>()};
}

std::string record(
    const std::string& kind,
    const std::string& name,
    const std::string& shape,
    double ms,
    double tflops,
    double gbps,
    double ratio,
    double error) {
  std::ostringstream out;
  out << "{\"kind\": \"" << kind << "\", \"variant\": \"" << name
      << "\", \"shape\": \"" << shape << "\", \"ms\": " << ms
      << ", \"tflops\": " << tflops << ", \"gb_per_s\": " << gbps
      << ", \"x_reference\": " << ratio << ", \"max_error\": " << error << "}";
  return out.str();
}

void benchGemms(
    const std::vector<Shape>& shapes,
    int iters,
    std::vector<std::string>& json) {
  const at::TensorOptions options =
      at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  for (const Shape& s : shapes) {
    const std::string shape = std::to_string(s.m) + "x" + std::to_string(s.n) +
                              "x" + std::to_string(s.k);
    const at::Tensor a = at::randn({s.m, s.k}, options);
    const at::Tensor b = at::randn({s.n, s.k}, options);
    at::Tensor d = at::empty({s.m, s.n}, options);
    const at::Tensor expected = at::mm(a, b.t());
    const double flop = 2.0 * s.m * s.n * s.k;
    const double bytes = 2.0 * (s.m * s.k + s.n * s.k + s.m * s.n);
    const double cublas =
        medianMs([&] { at::mm_out(d, a, b.t()); }, iters, stream);
    std::printf(
        "\n%s (bf16): cuBLAS %.3f ms, %.0f TFLOP/s\n",
        shape.c_str(),
        cublas,
        flop / cublas / 1e9);
    json.push_back(record(
        "gemm",
        "cublas",
        shape,
        cublas,
        flop / cublas / 1e9,
        bytes / cublas / 1e6,
        1.0,
        0.0));
    std::printf(
        "  %-26s %-7s %7s %9s %8s %9s\n",
        "tiles",
        "raster",
        "swizzle",
        "ms",
        "TFLOP/s",
        "x cuBLAS");
    for (const GemmVariant& v : variants()) {
      for (bool along_n : {true, false}) {
        for (int swizzle : {1, 2, 4}) {
          TileProblem p{
              a.data_ptr(),
              b.data_ptr(),
              d.data_ptr(),
              s.m,
              s.n,
              s.k,
              a.device().index(),
              along_n,
              swizzle};
          const at::Tensor workspace = at::empty(
              {static_cast<int64_t>(v.workspace_bytes(p)) + 1},
              options.dtype(at::kByte));
          d.zero_();
          check(v.run(p, workspace.data_ptr(), stream), v.name);
          const double error = (d.to(at::kFloat) - expected.to(at::kFloat))
                                   .abs()
                                   .max()
                                   .item<double>();
          const double ms = medianMs(
              [&] { check(v.run(p, workspace.data_ptr(), stream), v.name); },
              iters,
              stream);
          const std::string name = std::string(v.name) +
                                   (along_n ? " along N" : " along M") +
                                   " swizzle " + std::to_string(swizzle);
          std::printf(
              "  %-26s %-7s %7d %9.3f %8.0f %8.3fx%s\n",
              v.name,
              along_n ? "N" : "M",
              swizzle,
              ms,
              flop / ms / 1e9,
              ms / cublas,
              error > 0.5 ? "  WRONG" : "");
          json.push_back(record(
              "gemm",
              name,
              shape,
              ms,
              flop / ms / 1e9,
              bytes / ms / 1e6,
              ms / cublas,
              error));
        }
      }
    }
  }
}

// The GEMM + reduce-scatter kernel whose owners sum the partial sums, run
// by one member of `members` whose peers are buffers of this GPU already
// complete (their counters past every count the kernel waits for): the
// kernel's own cost (the GEMM on the SMs the summing CTAs leave, the pulls
// reading this GPU's memory where they may read a link, the epilogue
// adding their sum; with two members also without summing CTAs, the
// epilogue adding the peer's partial sums itself), against cuBLAS's GEMM
// of every member's rows, which is what the kernel computes.
void benchPulled(int iters, std::vector<std::string>& json) {
  const at::TensorOptions options =
      at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  struct Case {
    int32_t members;
    int64_t rows, n, k;
  };
  std::printf(
      "\npulled GEMM + reduce-scatter, peers simulated (bf16)\n"
      "  %-26s %9s %9s %8s %9s\n",
      "members x rows x n x k",
      "cuBLAS ms",
      "ms",
      "TFLOP/s",
      "x cuBLAS");
  for (const Case c :
       {Case{2, 4096, 8192, 2048},
        Case{4, 2048, 8192, 2048},
        Case{2, 4096, 8192, 16384},
        Case{2, 512, 1024, 1024}}) {
    const int64_t m = c.members * c.rows;
    const at::Tensor in = at::randn({m, c.k}, options);
    const at::Tensor w = at::randn({c.n, c.k}, options);
    at::Tensor out = at::empty({c.rows, c.n}, options);
    const at::Tensor partials = at::empty({m, c.n}, options);
    const at::Tensor zeros = at::zeros({c.rows, c.n}, options);
    const at::Tensor received = at::empty({c.rows, c.n}, options);
    std::vector<at::Tensor> peers;
    for (int32_t p = 1; p < c.members; ++p) {
      peers.push_back(at::randn({c.rows, c.n}, options));
    }
    kernels::PulledReduceScatterArgs args;
    // Both halves in one buffer: no peer reads them here.
    for (int32_t p = 1; p < c.members; ++p) {
      args.sends[0][p] = args.sends[1][p] =
          partials.narrow(0, p * c.rows, c.rows).data_ptr();
    }
    args.zeros = zeros.data_ptr();
    args.rows = c.rows;
    args.n = c.n;
    args.k = c.k;
    args.members = c.members;
    args.me = 0;
    args.blocks = static_cast<int32_t>(
        std::clamp<int64_t>(c.rows / 512, 1, kernels::kPulledMaxBlocks));
    const at::Tensor counters =
        at::zeros({c.members * args.blocks}, options.dtype(at::kLong));
    const at::Tensor done =
        at::full({args.blocks}, int64_t(1) << 62, options.dtype(at::kLong));
    const at::Tensor summed =
        at::zeros({args.blocks}, options.dtype(at::kLong));
    const at::Tensor calls = at::zeros({2}, options.dtype(at::kLong));
    for (int32_t p = 1; p < c.members; ++p) {
      args.counts[p] =
          static_cast<uint64_t*>(counters.data_ptr()) + p * args.blocks;
    }
    args.calls = static_cast<uint64_t*>(calls.data_ptr());
    for (int32_t p = 1; p < c.members; ++p) {
      args.pulls.sources[0][p] = args.pulls.sources[1][p] =
          peers[p - 1].data_ptr();
      args.pulls.source_counts[p] =
          static_cast<const uint64_t*>(done.data_ptr());
    }
    args.pulls.received = received.data_ptr();
    args.pulls.summed = static_cast<uint64_t*>(summed.data_ptr());
    void* status = nullptr;
    check(
        cudaHostAlloc(&status, sizeof(int32_t), cudaHostAllocMapped),
        "cudaHostAlloc");
    *static_cast<int32_t*>(status) = 0;
    args.status = static_cast<int32_t*>(status);
    args.timeout_ns = int64_t(10) * 1000 * 1000 * 1000;
    const std::string refusal = kernels::pulledReduceScatterRefusal(args);
    if (!refusal.empty()) {
      throw std::runtime_error("pulled reduce-scatter: " + refusal);
    }
    kernels::planPulledReduceScatter(args);
    const at::Tensor workspace = at::empty(
        {static_cast<int64_t>(
             kernels::pulledReduceScatterWorkspaceBytes(args)) +
         1},
        options.dtype(at::kByte));
    // 0: no summing CTA, the epilogue adding the one peer's partial sums
    // itself (two members only).
    for (const int32_t ctas : {0, 4, 8, 16}) {
      if (ctas == 0 && c.members != 2) {
        continue;
      }
      args.sums = ctas > 0;
      args.pulls.ctas = ctas;
      *static_cast<int32_t*>(status) = 0;
      (void)summed.zero_();
      (void)calls.zero_();
      cudaError_t prepared = cudaSuccess;
      const std::unique_ptr<kernels::FusedLaunch> launch =
          kernels::preparePulledReduceScatter(
              args, workspace.data_ptr(), stream, &prepared);
      check(prepared, "preparePulledReduceScatter");
      auto pulled = [&] {
        check(
            launch->launch(in.data_ptr(), w.data_ptr(), out.data_ptr(), stream),
            "FusedLaunch::launch");
      };
      pulled();
      at::Tensor expected =
          at::mm(in.narrow(0, 0, c.rows), w.t()).to(at::kFloat);
      for (const at::Tensor& peer : peers) {
        expected += peer.to(at::kFloat);
      }
      const double error =
          (out.to(at::kFloat) - expected).abs().max().item<double>() /
          expected.abs().max().item<double>();
      if (*static_cast<volatile int32_t*>(status) != 0) {
        throw std::runtime_error("pulled reduce-scatter: the kernel gave up");
      }
      const double ms = medianMs(pulled, iters, stream);
      at::Tensor all = at::empty({m, c.n}, options);
      const double cublas =
          medianMs([&] { at::mm_out(all, in, w.t()); }, iters, stream);
      const double flop = 2.0 * m * c.n * c.k;
      const std::string shape =
          std::to_string(c.members) + "x" + std::to_string(c.rows) + "x" +
          std::to_string(c.n) + "x" + std::to_string(c.k) +
          (ctas > 0 ? " pull " + std::to_string(ctas) : " direct");
      std::printf(
          "  %-26s %9.3f %9.3f %8.0f %8.3fx  (max relative error %.2g)\n",
          shape.c_str(),
          cublas,
          ms,
          flop / ms / 1e9,
          ms / cublas,
          error);
      json.push_back(record(
          "pulled",
          "pulled GEMM + reduce-scatter, peers simulated",
          shape,
          ms,
          flop / ms / 1e9,
          0,
          ms / cublas,
          error));
    }
    (void)cudaFreeHost(status);
  }
}

} // namespace
} // namespace mdfuser::bench

int main(int argc, char** argv) {
  using namespace mdfuser::bench;
  std::string shapes =
      "8192x8192x2048,8192x16384x2048,8192x16384x8192,8192x8192x16384";
  std::string json_path;
  int iters = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 < argc && arg == "--shapes") {
      shapes = argv[++i];
    } else if (i + 1 < argc && arg == "--iters") {
      iters = std::stoi(argv[++i]);
    } else if (i + 1 < argc && arg == "--json") {
      json_path = argv[++i];
    } else {
      std::fprintf(
          stderr,
          "usage: %s [--shapes MxNxK,...] [--iters N] [--json PATH]\n",
          argv[0]);
      return 2;
    }
  }
  try {
    if (iters < 1) {
      throw std::invalid_argument("--iters must be positive");
    }
    cudaDeviceProp props{};
    check(cudaGetDeviceProperties(&props, 0), "cudaGetDeviceProperties");
    std::printf(
        "device: %s (sm_%d%d, %d SMs)\n",
        props.name,
        props.major,
        props.minor,
        props.multiProcessorCount);
    if (props.major != 9 || props.minor != 0) {
      throw std::runtime_error("the kernels are built for sm_90a");
    }
    std::vector<std::string> json;
    benchGemms(parseShapes(shapes), iters, json);
    benchPulled(iters, json);
    if (!json_path.empty()) {
      std::ofstream out(json_path);
      out << "{\"device\": \"" << props.name << "\", \"records\": [\n";
      for (size_t i = 0; i < json.size(); ++i) {
        out << "  " << json[i] << (i + 1 < json.size() ? ",\n" : "\n");
      }
      out << "]}\n";
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gemm_tiles: %s\n", e.what());
    return 1;
  }
  return 0;
}
