// SPDX-License-Identifier: MIT
#include "runtime/options.h"

#include <cstdlib>
#include <sstream>
#include <utility>

#include "ir/errors.h"

namespace mdfuser {

namespace {

std::vector<std::string> splitList(const std::string& spec) {
  std::vector<std::string> names;
  std::istringstream ss(spec);
  for (std::string name; std::getline(ss, name, ',');) {
    const size_t begin = name.find_first_not_of(" \t");
    const size_t end = name.find_last_not_of(" \t");
    if (begin != std::string::npos) {
      names.push_back(name.substr(begin, end - begin + 1));
    }
  }
  return names;
}

std::string joinNames(const std::vector<std::string>& names) {
  if (names.empty()) {
    return "(none)";
  }
  std::string s;
  for (const std::string& n : names) {
    s += (s.empty() ? "" : ", ") + n;
  }
  return s;
}

} // namespace

DumpOptions DumpOptions::parse(const std::string& spec) {
  DumpOptions options;
  const std::vector<std::pair<std::string, bool DumpOptions::*>> known = {
      {"fusion_ir", &DumpOptions::fusion_ir},
      {"fusion_ir_passes", &DumpOptions::fusion_ir_passes},
      {"host_ir", &DumpOptions::host_ir},
      {"host_ir_passes", &DumpOptions::host_ir_passes},
  };
  for (const std::string& name : splitList(spec)) {
    bool found = false;
    for (const auto& [known_name, flag] : known) {
      if (name == known_name) {
        options.*flag = true;
        found = true;
      }
    }
    if (!found) {
      std::vector<std::string> valid;
      for (const auto& entry : known) {
        valid.push_back(entry.first);
      }
      MDF_USER_ERROR(
          "unknown dump option '",
          name,
          "' in NVFUSER_DUMP/MDFUSER_DUMP; valid options are: ",
          joinNames(valid));
    }
  }
  return options;
}

const DumpOptions& DumpOptions::fromEnvironment() {
  static const DumpOptions options = [] {
    std::string spec;
    for (const char* var : {"NVFUSER_DUMP", "MDFUSER_DUMP"}) {
      if (const char* value = std::getenv(var)) {
        spec += std::string(",") + value;
      }
    }
    return parse(spec);
  }();
  return options;
}

const std::vector<std::string>& ExecuteOptions::ignoredEnableOptions() {
  // Host IR lowering is mdfuser's only execution path; the others tune
  // nvFuser's kernel generation, which mdfuser does not have.
  static const std::vector<std::string> names = {
      "host_ir_lowering",
      "infer_contiguity",
      "id_model",
      "kernel_profile",
      "fast_math",
      "fuse_matmul",
      "static_fusion_count",
  };
  return names;
}

const std::vector<std::string>& ExecuteOptions::ignoredDisableOptions() {
  static const std::vector<std::string> names = {
      "infer_contiguity",
      "resize_scheduler",
      "kernel_reuse",
      "matmul_expr_eval",
      "parallel_compile",
      "fallback",
      "expr_simplify",
  };
  return names;
}

std::vector<ExecuteOptions::Value> ExecuteOptions::values() const {
  auto flag = [](std::string_view name, bool on) {
    return Value{name, on ? 1 : 0, on ? "1" : "0"};
  };
  auto choice = [](std::string_view name, Choice c) {
    return Value{
        name,
        static_cast<int64_t>(c),
        c == Choice::kOn    ? "1"
        : c == Choice::kOff ? "0"
                            : "default"};
  };
  return {
      flag("inplace_allreduce", inplace_allreduce),
      flag("compute_on_main_stream", compute_on_main_stream),
      flag("alias_layout_ops", alias_layout_ops),
      flag("fuse_layer_norms", fuse_layer_norms),
      flag("ring_decomposition", ring_decomposition),
      choice("cuda_graph", cuda_graph),
      choice("ring_prologues_first", ring_prologues_first),
      choice("concurrent_moves", concurrent_moves),
      choice("exchange_allreduce", exchange_allreduce),
      flag("direct_reduce_scatter", direct_reduce_scatter),
      {"backend",
       backend.has_value() ? static_cast<int64_t>(*backend) : -1,
       backend.has_value() ? hir::backendName(*backend) : "default"},
      choice("fused_matmul_communication", fused_matmul_communication),
  };
}

ExecuteOptions ExecuteOptions::parse(
    const std::vector<std::string>& enable,
    const std::vector<std::string>& disable) {
  // Built once: every execute parses its options.
  static const std::vector<std::string> known_enable = [] {
    std::vector<std::string> names = {
        "compute_on_main_stream",
        "ring_decomposition",
        "cuda_graph",
        "ring_prologues_first",
        "concurrent_moves",
        "exchange_allreduce",
        "fused_matmul_communication"};
    const auto& ignored = ignoredEnableOptions();
    names.insert(names.end(), ignored.begin(), ignored.end());
    return names;
  }();
  static const std::vector<std::string> known_disable = [] {
    std::vector<std::string> names = {
        "inplace_allreduce",
        "alias_layout_ops",
        "fuse_layer_norms",
        "direct_reduce_scatter",
        "cuda_graph",
        "ring_prologues_first",
        "concurrent_moves",
        "exchange_allreduce",
        "fused_matmul_communication"};
    const auto& ignored = ignoredDisableOptions();
    names.insert(names.end(), ignored.begin(), ignored.end());
    return names;
  }();
  auto check = [](const std::vector<std::string>& names,
                  const std::vector<std::string>& known,
                  const char* which) {
    for (const std::string& name : names) {
      bool found = false;
      for (const std::string& k : known) {
        found |= name == k;
      }
      MDF_USER_CHECK(
          found,
          "unknown option '",
          name,
          "' in ",
          which,
          "; valid options are: ",
          joinNames(known));
    }
  };
  check(enable, known_enable, "_enable_options");
  check(disable, known_disable, "_disable_options");
  ExecuteOptions options;
  for (const std::string& name : enable) {
    if (name == "compute_on_main_stream") {
      options.compute_on_main_stream = true;
    }
    if (name == "ring_decomposition") {
      options.ring_decomposition = true;
    }
    if (name == "cuda_graph") {
      options.cuda_graph = Choice::kOn;
    }
    if (name == "ring_prologues_first") {
      options.ring_prologues_first = Choice::kOn;
    }
    if (name == "concurrent_moves") {
      options.concurrent_moves = Choice::kOn;
    }
    if (name == "exchange_allreduce") {
      options.exchange_allreduce = Choice::kOn;
    }
    if (name == "fused_matmul_communication") {
      options.fused_matmul_communication = Choice::kOn;
    }
  }
  for (const std::string& name : disable) {
    if (name == "inplace_allreduce") {
      options.inplace_allreduce = false;
    }
    if (name == "alias_layout_ops") {
      options.alias_layout_ops = false;
    }
    if (name == "fuse_layer_norms") {
      options.fuse_layer_norms = false;
    }
    if (name == "direct_reduce_scatter") {
      options.direct_reduce_scatter = false;
    }
    Choice* refused =
        name == "cuda_graph"             ? &options.cuda_graph
        : name == "ring_prologues_first" ? &options.ring_prologues_first
        : name == "concurrent_moves"     ? &options.concurrent_moves
        : name == "exchange_allreduce"   ? &options.exchange_allreduce
        : name == "fused_matmul_communication"
            ? &options.fused_matmul_communication
            : nullptr;
    if (refused != nullptr) {
      MDF_USER_CHECK(
          *refused != Choice::kOn,
          name,
          " is both in _enable_options and in _disable_options");
      *refused = Choice::kOff;
    }
  }
  return options;
}

} // namespace mdfuser
