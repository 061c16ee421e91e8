// SPDX-License-Identifier: MIT
//
// PlaceSymmetricBuffers: the buffers the CUDA backend's permutes land in,
// and only those, live in symmetric memory shared with the permute's team;
// lowering for the CUDA backend turns the ring pairs into rings on it and
// leaves the other collectives to NCCL.

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "common/program_builder.h"
#include "common/row_parallel.h"
#include "common/transformer_mlp.h"
#include "host_ir/lower.h"
#include "host_ir/passes/pass_manager.h"
#include "host_ir/passes/place_symmetric_buffers.h"
#include "ir/errors.h"
#include "ir/ops.h"
#include "passes/pipeline.h"

namespace mdfuser {
namespace {

using namespace hir;

std::unique_ptr<HostIrContainer> compile(
    std::unique_ptr<Fusion> fusion,
    int64_t device,
    CommunicatorBackend backend) {
  runFusionPasses(fusion.get());
  LoweringOptions options;
  options.device = device;
  options.backend = backend;
  auto hic = lowerToHostIr(std::move(fusion), options);
  runHostPasses(*hic);
  return hic;
}

// What a program's communications and allocations are.
struct Summary {
  // Communications by "type backend", e.g. "CollectivePermute CUDA".
  std::multiset<std::string> communications;
  // The buffers CUDA permutes land in (through their views), by name.
  std::set<int64_t> landings;
  // Allocated buffers by name: their team when symmetric, else empty.
  std::map<int64_t, std::vector<int64_t>> allocations;
};

Summary summarize(const HostIrContainer& hic) {
  std::vector<const Expr*> all;
  forEachExpr(hic.topLevel(), [&](const Expr* e) { all.push_back(e); });
  std::map<const TensorView*, const TensorView*> source;
  for (const Expr* expr : all) {
    if (std::optional<ViewOf> view = asView(expr)) {
      source[view->view] = view->source;
    }
  }
  Summary s;
  for (const Expr* expr : all) {
    if (const auto* alloc = dynamic_cast<const Allocate*>(expr)) {
      s.allocations[alloc->buffer()->name()] = alloc->team();
    } else if (const auto* c = dynamic_cast<const Communication*>(expr)) {
      s.communications.insert(
          std::string(communicationTypeName(c->type())) + " " +
          std::string(backendName(c->backend())));
      if (c->backend() == CommunicatorBackend::kCuda) {
        const TensorView* root = c->landing();
        while (source.count(root) > 0) {
          root = source.at(root);
        }
        s.landings.insert(root->name());
      }
    }
  }
  return s;
}

std::set<int64_t> symmetricOf(const Summary& s) {
  std::set<int64_t> names;
  for (const auto& [name, team] : s.allocations) {
    if (!team.empty()) {
      EXPECT_EQ(team, (std::vector<int64_t>{0, 1})) << "T" << name;
      names.insert(name);
    }
  }
  return names;
}

TEST(PlaceSymmetricBuffers, CudaRingsLandInSymmetricBuffersOnly) {
  for (int64_t s : {1, 2}) {
    for (int64_t device : {0, 1}) {
      const Summary mlp = summarize(*compile(
          test::makeMlp(2, 2, s, "sp"), device, CommunicatorBackend::kCuda));
      // Both of the SP MLP's collectives became rings on the CUDA backend.
      EXPECT_EQ(
          mlp.communications,
          (std::multiset<std::string>{
              "CollectivePermute CUDA", "CollectivePermute CUDA"}));
      // The gathered input and the reduce-scatter's receive buffer.
      EXPECT_EQ(mlp.landings.size(), 2u);
      EXPECT_EQ(symmetricOf(mlp), mlp.landings);
    }
  }
}

TEST(PlaceSymmetricBuffers, OtherBackendsAllocateNothingSymmetric) {
  for (CommunicatorBackend backend :
       {CommunicatorBackend::kNccl, CommunicatorBackend::kGloo}) {
    const Summary mlp =
        summarize(*compile(test::makeMlp(2, 2, 2, "sp"), 0, backend));
    EXPECT_TRUE(symmetricOf(mlp).empty());
    EXPECT_EQ(
        mlp.communications.count("Allgather NCCL") +
            mlp.communications.count("Allgather Gloo"),
        1u);
  }
}

TEST(PlaceSymmetricBuffers, CollectivesBesideCudaRingsGoToNccl) {
  // The TP MLP's allreduce of the second linear's partial sums is a ring;
  // an allgather feeding no linear stays a collective, on NCCL.
  const Summary tp = summarize(
      *compile(test::makeMlp(2, 2, 1, "tp"), 0, CommunicatorBackend::kCuda));
  EXPECT_EQ(tp.communications.count("CollectivePermute CUDA"), 2u);
  EXPECT_EQ(symmetricOf(tp), tp.landings);

  auto fusion = std::make_unique<Fusion>();
  TensorView* in = fusion->defineTensor({4, 8}, {}, DataType::Float);
  TensorView* out = set(in);
  fusion->addOutput(out);
  const DeviceMesh mesh({0, 1});
  in->setDeviceMesh(mesh);
  out->setDeviceMesh(mesh);
  in->outerSplit(0, 2);
  in->parallelize(0, ParallelType::DIDx);
  const Summary gather =
      summarize(*compile(std::move(fusion), 0, CommunicatorBackend::kCuda));
  EXPECT_EQ(
      gather.communications, (std::multiset<std::string>{"Allgather NCCL"}));
  EXPECT_TRUE(symmetricOf(gather).empty());
}

TEST(PlaceSymmetricBuffers, AnOutputRingReceivesInABufferOfItsOwn) {
  // The row-parallel linear's allreduce (a ring, or its direct form at
  // s = 1) would land in the program's output, which each run returns afresh:
  // peers' parts arrive in a symmetric buffer of its own. The GEMMs still write
  // into the output's parts and the permutes send from there, so that the part
  // this device reduces is never copied: only the d - 1 parts the allgather
  // brings are.
  for (int64_t s : {1, 3}) {
    auto hic = compile(
        test::makeRowParallelLinear(2, 2, s), 0, CommunicatorBackend::kCuda);
    const Summary ar = summarize(*hic);
    EXPECT_EQ(ar.communications.count("CollectivePermute CUDA"), 2u);
    ASSERT_EQ(ar.landings.size(), 1u);
    EXPECT_EQ(symmetricOf(ar), ar.landings);
    const TensorView* output = hic->outputs().front();
    EXPECT_EQ(ar.landings.count(output->name()), 0u);
    EXPECT_TRUE(ar.allocations.at(output->name()).empty());

    std::map<const TensorView*, const TensorView*> source;
    forEachExpr(hic->topLevel(), [&](const Expr* e) {
      if (std::optional<ViewOf> view = asView(e)) {
        source[view->view] = view->source;
      }
    });
    auto root = [&](const TensorView* tv) {
      while (source.count(tv) > 0) {
        tv = source.at(tv);
      }
      return tv->name();
    };
    const int64_t stand_in = *ar.landings.begin();
    int64_t gemms = 0;
    int64_t adds = 0;
    int64_t copies = 0;
    forEachExpr(hic->topLevel(), [&](const Expr* e) {
      if (const auto* c = dynamic_cast<const Communication*>(e)) {
        EXPECT_EQ(root(c->in()), output->name()) << c->toString();
        EXPECT_EQ(root(c->out()), stand_in) << c->toString();
        EXPECT_NE(c->landing(), c->out()) << c->toString();
      } else if (const auto* op = dynamic_cast<const TensorOp*>(e)) {
        EXPECT_EQ(root(op->out()), output->name()) << op->toString();
        if (dynamic_cast<const LoadStoreOp*>(op) != nullptr) {
          ++copies;
          EXPECT_EQ(root(op->tensorInputs().front()), stand_in);
        } else if (dynamic_cast<const LinearOp*>(op) != nullptr) {
          ++gemms;
        } else {
          ++adds;
          EXPECT_EQ(root(op->tensorInputs().back()), stand_in);
        }
      }
    });
    // Per stream chunk: the GEMMs of both steps, one copy of the other
    // device's reduced part; in the direct form of one chunk, the own
    // GEMM runs beside the move and its arrival is added after it.
    EXPECT_EQ(gemms, 2);
    EXPECT_EQ(adds, s == 1 ? 1 : 0) << hic->toString();
    EXPECT_EQ(copies, 1) << hic->toString();
    const std::string program = hic->toString();
    EXPECT_NE(program.find("mem_type=symmetric, team=(0 1)"), std::string::npos)
        << program;
  }
}

TEST(PlaceSymmetricBuffers, ALandingWithoutAllocationIsRefused) {
  test::ProgramBuilder b;
  TensorView* in = b.input({4});
  TensorView* out = b.tensor({4});
  b.output(out);
  auto hic = b.build();
  // A permute landing in the program's input: nothing allocates it.
  auto* c = hic->create<Communication>(
      test::collectivePermute({0, 1}), in, out, CommunicatorBackend::kCuda, in);
  hic->topLevel().pushBack(
      hic->create<Allocate>(out, std::vector<Scalar*>{constant(hic->ir(), 4)}));
  hic->topLevel().pushBack(c);
  hic->topLevel().pushBack(hic->create<Wait>(c));
  try {
    placeSymmetricBuffers(*hic, /*symmetric_memory=*/false);
    FAIL() << "expected an error";
  } catch (const InternalError& e) {
    EXPECT_NE(
        std::string(e.what()).find("cannot live in symmetric memory"),
        std::string::npos)
        << e.what();
  }
}

TEST(PlaceSymmetricBuffers, ALandingOfItsOwnIsWhatBecomesSymmetric) {
  // A permute that sends from one buffer, receives into a second and lands
  // on the next device in a third: only the third is written by peers.
  test::ProgramBuilder b;
  TensorView* in = b.input({4});
  TensorView* out = b.tensor({4});
  TensorView* place = b.tensor({4});
  b.output(out);
  auto hic = b.build();
  auto* c = hic->create<Communication>(
      test::collectivePermute({0, 1}),
      in,
      out,
      CommunicatorBackend::kCuda,
      place);
  EXPECT_EQ(c->landing(), place);
  // Nothing reads it here, but its view must exist before the permute.
  EXPECT_EQ(c->inputs(), (std::vector<Val*>{in, place}));
  EXPECT_NE(
      c->toString().find(", lands_at=" + place->toString() + ", backend=CUDA"),
      std::string::npos)
      << c->toString();
  for (TensorView* tv : {out, place}) {
    hic->topLevel().pushBack(hic->create<Allocate>(
        tv, std::vector<Scalar*>{constant(hic->ir(), 4)}));
  }
  hic->topLevel().pushBack(c);
  hic->topLevel().pushBack(hic->create<Wait>(c));
  placeSymmetricBuffers(*hic, /*symmetric_memory=*/false);
  const Summary summary = summarize(*hic);
  EXPECT_EQ(symmetricOf(summary), (std::set<int64_t>{place->name()}));
  EXPECT_TRUE(summary.allocations.at(out->name()).empty());

  // Only a permute has one.
  CommunicationSpec spec;
  spec.type = CommunicationType::Allreduce;
  spec.team = {0, 1};
  EXPECT_THROW(
      hic->create<Communication>(
          spec, in, out, CommunicatorBackend::kNccl, place),
      InternalError);
}

TEST(PlaceSymmetricBuffers, OnlyPermutesRunOnTheCudaBackend) {
  test::ProgramBuilder b;
  TensorView* in = b.input({4});
  TensorView* out = b.tensor({4});
  b.output(out);
  auto hic = b.build();
  CommunicationSpec spec;
  spec.type = CommunicationType::Allreduce;
  spec.team = {0, 1};
  auto* c =
      hic->create<Communication>(spec, in, out, CommunicatorBackend::kCuda);
  hic->topLevel().pushBack(
      hic->create<Allocate>(out, std::vector<Scalar*>{constant(hic->ir(), 4)}));
  hic->topLevel().pushBack(c);
  hic->topLevel().pushBack(hic->create<Wait>(c));
  EXPECT_THROW(
      placeSymmetricBuffers(*hic, /*symmetric_memory=*/false), InternalError);
}

// relu(inp) placed in symmetric memory by the user, then a linear whose
// in_features are split across {0 1}: an intermediate of the program.
std::unique_ptr<Fusion> makePlacedIntermediate(TensorView** placed) {
  auto fusion = std::make_unique<Fusion>();
  TensorView* inp = fusion->defineTensor({-1, 8}, {}, DataType::Float);
  TensorView* w = fusion->defineTensor({4, 8}, {}, DataType::Float);
  TensorView* a = unaryOp(OpType::Relu, inp);
  fusion->addOutput(linear(a, w));
  const DeviceMesh mesh({0, 1});
  for (TensorView* tv : {inp, w}) {
    tv->setDeviceMesh(mesh);
    tv->outerSplit(1, 2);
    tv->parallelize(1, ParallelType::DIDx);
  }
  a->setMemoryType(MemoryType::Symmetric);
  *placed = a;
  return fusion;
}

std::string allocationOf(const HostIrContainer& hic, int64_t name) {
  std::string line;
  forEachExpr(hic.topLevel(), [&](const Expr* e) {
    if (const auto* alloc = dynamic_cast<const Allocate*>(e);
        alloc != nullptr && alloc->buffer()->name() == name) {
      line = alloc->toString();
    }
  });
  return line;
}

TEST(PlaceSymmetricBuffers, TheUsersPlacementWhereSymmetricMemoryIs) {
  for (const bool symmetric_memory : {true, false}) {
    SCOPED_TRACE(symmetric_memory);
    TensorView* placed = nullptr;
    std::unique_ptr<Fusion> fusion = makePlacedIntermediate(&placed);
    const int64_t name = placed->name();
    EXPECT_EQ(
        placed->toString().rfind("T" + std::to_string(name) + "_sym_", 0), 0u)
        << placed->toString();
    runFusionPasses(fusion.get());
    LoweringOptions options;
    options.device = 1;
    options.backend = symmetric_memory ? CommunicatorBackend::kCuda
                                       : CommunicatorBackend::kNccl;
    auto hic = lowerToHostIr(std::move(fusion), options);
    runHostPasses(*hic, {.symmetric_memory = symmetric_memory});
    const std::string line = allocationOf(*hic, name);
    ASSERT_FALSE(line.empty()) << hic->toString();
    EXPECT_NE(
        line.find(
            symmetric_memory ? "mem_type=symmetric, team=(0 1)"
                             : "mem_type=global"),
        std::string::npos)
        << line;
  }
}

} // namespace
} // namespace mdfuser
