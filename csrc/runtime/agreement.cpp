// SPDX-License-Identifier: MIT
#include "runtime/agreement.h"

#include <algorithm>
#include <chrono>

#include <set>
#include <sstream>

#include <c10/core/DeviceType.h>

#include "ir/device_mesh.h"
#include "ir/parallel_type.h"
#include "runtime/communicator.h"

namespace mdfuser {

namespace {

// Strings travel length-prefixed: "<length>:<bytes>".
void put(std::string& out, const std::string& s) {
  out += std::to_string(s.size());
  out += ':';
  out += s;
}

class Reader {
 public:
  explicit Reader(const std::string& text) : text_(text) {}

  bool done() const {
    return pos_ == text_.size();
  }
  char character() {
    MDF_CHECK(pos_ < text_.size(), "truncated fingerprint");
    return text_[pos_++];
  }
  std::string string() {
    const size_t colon = text_.find(':', pos_);
    MDF_CHECK(colon != std::string::npos, "malformed fingerprint");
    const size_t length = std::stoull(text_.substr(pos_, colon - pos_));
    MDF_CHECK(colon + 1 + length <= text_.size(), "truncated fingerprint");
    std::string s = text_.substr(colon + 1, length);
    pos_ = colon + 1 + length;
    return s;
  }

 private:
  const std::string& text_;
  size_t pos_ = 0;
};

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> result;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    // Without the indentation, for messages.
    const size_t start = line.find_first_not_of(' ');
    result.push_back(
        start == std::string::npos ? std::string() : line.substr(start));
  }
  return result;
}

std::string describeDifference(
    const RunFingerprint::Field& field,
    const std::string& other,
    int64_t rank,
    int64_t other_rank) {
  switch (field.kind) {
    case RunFingerprint::Kind::kDefinition: {
      const std::vector<std::string> a = lines(field.value);
      const std::vector<std::string> b = lines(other);
      size_t i = 0;
      while (i < a.size() && i < b.size() && a[i] == b[i]) {
        ++i;
      }
      auto line = [&](const std::vector<std::string>& ls) {
        return i < ls.size() ? "`" + ls[i] + "`" : std::string("missing");
      };
      return detail::concat(
          "the fusion definitions differ between rank ",
          rank,
          " and rank ",
          other_rank,
          ": line ",
          i + 1,
          " is ",
          line(a),
          " on rank ",
          rank,
          " and ",
          line(b),
          " on rank ",
          other_rank,
          "; every rank of the fusion's mesh must define the same fusion, "
          "schedule included");
    }
    case RunFingerprint::Kind::kOption:
      return detail::concat(
          "the execute options differ: ",
          field.what,
          "=",
          field.value,
          " on rank ",
          rank,
          " and ",
          field.what,
          "=",
          other,
          " on rank ",
          other_rank,
          "; every rank of the fusion's mesh must pass the same options");
    case RunFingerprint::Kind::kInput:
      return detail::concat(
          field.what,
          " ",
          field.value,
          " on rank ",
          rank,
          " and ",
          other,
          " on rank ",
          other_rank,
          "; every rank of the fusion's mesh must pass shards of the same "
          "shapes, dtypes and device types");
  }
  MDF_UNREACHABLE("unknown fingerprint field");
}

std::string shapeString(at::IntArrayRef sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) {
    s += (i > 0 ? ", " : "") + std::to_string(sizes[i]);
  }
  return s + "]";
}

} // namespace

std::string RunFingerprint::encode() const {
  std::string out;
  if (error.has_value()) {
    out += 'E';
    out += error->kind() == UserError::Kind::kType ? 'T' : 'V';
    put(out, error->what());
  }
  for (const Field& field : fields) {
    out += static_cast<char>(field.kind);
    put(out, field.what);
    put(out, field.value);
  }
  return out;
}

RunFingerprint RunFingerprint::decode(const std::string& text) {
  RunFingerprint print;
  Reader in(text);
  while (!in.done()) {
    const char tag = in.character();
    if (tag == 'E') {
      const UserError::Kind kind = in.character() == 'T'
                                       ? UserError::Kind::kType
                                       : UserError::Kind::kValue;
      print.error.emplace(kind, in.string());
      continue;
    }
    MDF_CHECK(
        tag == static_cast<char>(Kind::kDefinition) ||
            tag == static_cast<char>(Kind::kOption) ||
            tag == static_cast<char>(Kind::kInput),
        "malformed fingerprint field '",
        tag,
        "'");
    Field field{static_cast<Kind>(tag), in.string(), ""};
    field.value = in.string();
    print.fields.push_back(std::move(field));
  }
  return print;
}

RunFingerprint fingerprintOf(
    const Fusion& definition,
    const std::vector<at::Tensor>& inputs,
    const ExecuteOptions& options) {
  using Kind = RunFingerprint::Kind;
  RunFingerprint print;
  print.fields.push_back({Kind::kDefinition, "", definition.toString()});
  for (const ExecuteOptions::Value& option : options.values()) {
    print.fields.push_back(
        {Kind::kOption, std::string(option.name), std::string(option.text)});
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor& t = inputs[i];
    const std::string input =
        i < definition.inputs().size()
            ? detail::concat(
                  "input ", i, " (T", definition.inputs()[i]->name(), ")")
            : detail::concat("input ", i);
    print.fields.push_back(
        {Kind::kInput, input + " has shape", shapeString(t.sizes())});
    print.fields.push_back(
        {Kind::kInput,
         input + " has dtype",
         std::string(c10::toString(t.scalar_type()))});
    print.fields.push_back(
        {Kind::kInput,
         input + " is on a device of type",
         c10::DeviceTypeName(t.device().type(), /*lower_case=*/true)});
  }
  return print;
}

std::vector<std::vector<int64_t>> agreementTeams(
    const Fusion& definition, int64_t rank, int64_t world_size) {
  if (world_size < 2) {
    return {};
  }
  std::vector<const DeviceMesh*> meshes;
  std::set<ParallelType> axes;
  for (const TensorView* tv : definition.allTensors()) {
    if (!tv->hasDeviceMesh()) {
      continue;
    }
    const DeviceMesh* mesh = &*tv->deviceMesh();
    if (std::none_of(meshes.begin(), meshes.end(), [&](const DeviceMesh* m) {
          return *m == *mesh;
        })) {
      meshes.push_back(mesh);
    }
    for (const IterDomain* id : tv->loop()) {
      if (isDeviceParallel(id->parallelType())) {
        axes.insert(id->parallelType());
      }
    }
  }
  std::set<std::vector<int64_t>> teams;
  if (meshes.size() == 1) {
    // Collectives run along the mesh axes the tensors are spread on: the
    // rank's team along each of them.
    const DeviceMesh& mesh = *meshes.front();
    if (!mesh.has(rank)) {
      return {};
    }
    for (ParallelType pt : axes) {
      std::vector<int64_t> team = mesh.team(rank, pt);
      if (team.size() > 1) {
        teams.insert(std::move(team));
      }
    }
  } else if (meshes.size() > 1) {
    // Data moves between meshes: every device of them.
    std::set<int64_t> devices;
    for (const DeviceMesh* mesh : meshes) {
      devices.insert(mesh->devices().begin(), mesh->devices().end());
    }
    if (devices.size() > 1 && devices.count(rank) > 0) {
      teams.insert({devices.begin(), devices.end()});
    }
  }
  return {teams.begin(), teams.end()};
}

std::optional<UserError> disagreement(
    const std::vector<int64_t>& team,
    const std::vector<RunFingerprint>& prints) {
  MDF_CHECK_EQ(team.size(), prints.size());
  for (size_t r = 0; r < team.size(); ++r) {
    if (prints[r].error.has_value()) {
      return UserError(
          prints[r].error->kind(),
          detail::concat("rank ", team[r], ": ", prints[r].error->what()));
    }
  }
  const RunFingerprint& first = prints.front();
  for (size_t r = 1; r < team.size(); ++r) {
    const RunFingerprint& other = prints[r];
    const size_t n = std::min(first.fields.size(), other.fields.size());
    for (size_t f = 0; f < n; ++f) {
      const RunFingerprint::Field& a = first.fields[f];
      const RunFingerprint::Field& b = other.fields[f];
      MDF_CHECK(
          a.kind == b.kind && a.what == b.what,
          "fingerprints of ranks ",
          team.front(),
          " and ",
          team[r],
          " compare different properties: ",
          a.what,
          " and ",
          b.what);
      if (a.value != b.value) {
        return UserError(
            UserError::Kind::kValue,
            describeDifference(a, b.value, team.front(), team[r]));
      }
    }
    // Equal definitions take equal numbers of inputs, and each rank checked
    // its own count.
    MDF_CHECK_EQ(first.fields.size(), other.fields.size());
  }
  return std::nullopt;
}

namespace {

// Exchanges `mine` in `team`; the disagreement, if any. With an error in
// `mine`, returns whether the others read it (see agreeAcrossTeams).
std::optional<UserError> exchangeIn(
    Communicator& communicator,
    const std::vector<int64_t>& team,
    const RunFingerprint& mine,
    uint64_t run,
    bool& read) {
  // A rank about to raise its own error waits for the others to read it
  // (slow ones too), unless one of them says it is stuck in a collective
  // that waits for this rank: it runs the fusion without comparing, and
  // only this rank's failure ends its wait.
  std::optional<std::chrono::milliseconds> patience;
  if (mine.error.has_value()) {
    patience = communicator.options().timeout;
  }
  std::optional<std::vector<std::string>> encoded;
  try {
    encoded = communicator.exchange(
        team, mine.encode(), "the agreement check of execute", patience, run);
  } catch (const CommunicationError& e) {
    if (!e.timedOut()) {
      throw;
    }
    throw CommunicationError(
        detail::concat(
            e.what(),
            ". The ranks of a fusion's mesh compare the fusion and their "
            "inputs whenever a rank's input shapes, dtypes or options differ "
            "from its previous run's; a rank that does not take part did not "
            "call execute on this fusion, or runs the same inputs as in its "
            "previous run while this rank's differ: the ranks disagree about "
            "what they run"),
        /*timed_out=*/true);
  }
  read = encoded.has_value();
  if (mine.error.has_value() || !encoded.has_value()) {
    return std::nullopt;
  }
  std::vector<RunFingerprint> prints;
  prints.reserve(encoded->size());
  for (const std::string& text : *encoded) {
    prints.push_back(RunFingerprint::decode(text));
  }
  return disagreement(team, prints);
}

} // namespace

bool agreeAcrossTeams(
    Communicator& communicator,
    const std::vector<std::vector<int64_t>>& teams,
    const RunFingerprint& mine,
    uint64_t run) {
  // The error this rank raises: its own, or the first team's disagreement,
  // which the teams after that one learn as this rank's error.
  std::optional<UserError> error = mine.error;
  bool everyone_read = true;
  for (const std::vector<int64_t>& team : teams) {
    bool read = false;
    if (error.has_value()) {
      RunFingerprint failed;
      failed.error = error;
      exchangeIn(communicator, team, failed, run, read);
      everyone_read = everyone_read && read;
    } else {
      error = exchangeIn(communicator, team, mine, run, read);
    }
  }
  if (error.has_value() && !mine.error.has_value()) {
    if (!everyone_read) {
      // Some team did not read it: its ranks wait for this one.
      communicator.reportFailure(error->what());
    }
    throw *error;
  }
  return everyone_read;
}

} // namespace mdfuser
