// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/Scalar.h>
#include <c10/core/Stream.h>

namespace mdfuser {

namespace hir {
class HostIrContainer;
}

class Communicator;
class CudaBackend;

// Runs a host program as CUDA graphs (the `cuda_graph` execute option): the
// host launches one graph instead of running the program's statements one
// by one, which is what bounds a program of many small GEMMs and moves.
//
// A graph reads its inputs and writes its outputs where its capture found
// them, so graphs are kept per set of input addresses: the first run with
// new addresses runs the program eagerly, the next captures it and replays
// the capture, and later runs replay it. The outputs of a replay are the
// graph's own buffers; a graph whose outputs the caller still holds (a
// tensor or a view of one) is not replayed, as that would overwrite them:
// each address set has two graphs taking turns, so that a loop that keeps
// the previous iteration's outputs while it computes the next replays
// every time, and a caller that keeps more runs eagerly. Programs whose
// outputs alias their inputs always run eagerly.
//
// Communications are captured with the rest: NCCL's collectives (c10d's
// NCCL process group supports capture), and the CUDA backend's moves,
// whose memory operations are the same at every run (CudaBackend), so
// that a replay meets its peers' runs, replayed or not. A replay of a program
// that communicates is watched as a whole: one that a peer never meets is
// reported with the rank after the communicator's timeout.
class ProgramGraphs {
 public:
  struct Stats {
    int64_t eager = 0;           // runs of the statements, not captured
    int64_t captures = 0;        // graphs captured (each replayed at once)
    int64_t replays = 0;         // graph launches, the captures' first included
    int64_t failed_captures = 0; // by default: captures given up for good

    void add(const Stats& other) {
      eager += other.eager;
      captures += other.captures;
      replays += other.replays;
      failed_captures += other.failed_captures;
    }
  };
  // Runs the program's statements on the current stream; `capturing` when
  // a capture records them.
  using Run = std::function<std::vector<at::Tensor>(bool capturing)>;

  // `communicator` is null when the program exchanges nothing with peers;
  // otherwise its replays are watched, bounded by its timeout, and when a
  // rank's failure ends their epoch, released by the CUDA backend the
  // program's moves go through (`cuda`, which may be null or empty).
  // `by_default`: the graphs were not asked for (useCudaGraphsByDefault),
  // so a capture that fails (a statement that synchronizes with the host,
  // which a capture cannot hold) makes this and every later run of the
  // program run the statements instead of failing; asked for, the failure
  // is the caller's.
  ProgramGraphs(
      c10::Device device,
      Communicator* communicator,
      const std::unique_ptr<CudaBackend>* cuda = nullptr,
      bool by_default = false);
  ProgramGraphs(const ProgramGraphs&) = delete;
  ProgramGraphs& operator=(const ProgramGraphs&) = delete;
  ~ProgramGraphs();

  // `values` are the scalar inputs' values, which a capture bakes into its
  // kernels as it does CPU scalar tensors': graphs are kept per set of
  // addresses and values.
  // `run` is the token of the call (Watchdog::Entry::run).
  std::vector<at::Tensor> run(
      const std::vector<at::Tensor>& inputs,
      const std::vector<c10::Scalar>& values,
      uint64_t run,
      const Run& statements);

  const Stats& stats() const {
    return stats_;
  }
  // Adds `earlier` to the counts (of graphs this one replaces).
  void addStats(const Stats& earlier) {
    stats_.add(earlier);
  }

  // Address sets kept per program; the least recently used goes first.
  static constexpr size_t kAddressSets = 4;
  // Graphs per address set, taking turns.
  static constexpr size_t kGraphsPerSet = 2;

 private:
  struct Graph;
  struct AddressSet;

  std::vector<at::Tensor> capture(
      AddressSet& set, uint64_t run, const Run& statements);
  std::vector<at::Tensor> replay(Graph& graph, uint64_t run);

  c10::Device device_;
  Communicator* communicator_;
  const std::unique_ptr<CudaBackend>* cuda_;
  // The stream captures begin on: of its own, never the caller's (which
  // may be the legacy default stream, which cannot capture).
  std::shared_ptr<void> capture_stream_;
  std::list<AddressSet> sets_; // most recently used first
  Stats stats_;
  bool by_default_ = false;
  // By default, after a capture failed: the statements run from then on.
  bool given_up_ = false;
};

// The user errors of the cuda_graph option, raised when `program` is
// compiled: CPU tensors, and random numbers drawn anew at every run (a
// replay would draw the same).
void checkCudaGraphs(const hir::HostIrContainer& program, c10::Device device);

// Whether execute replays `program` as CUDA graphs when the cuda_graph
// option is neither enabled nor disabled: on CUDA tensors, for programs
// whose every communication is a move of the CUDA backend (copy engines,
// their memory operations the same at every run) and that draw no random
// numbers. Measured on H200s, such programs ran 1-20 % faster replayed
// (host time per statement bounds their rings' steps) and at most 1.5 %
// slower (doc/runtime.md#cuda-graphs); NCCL's collectives gained no GPU
// time replayed, and programs without communication are left as the
// caller's (torch.cuda.graphs captures them whole). The fused
// AllgatherLinear and LinearReduceScatter are replayed too.
bool useCudaGraphsByDefault(
    const hir::HostIrContainer& program, c10::Device device);

// Whether work enqueued on `stream` now is captured into a CUDA graph
// rather than run; false on the CPU.
bool isCapturing(c10::Stream stream);

} // namespace mdfuser
