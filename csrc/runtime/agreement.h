// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "ir/errors.h"
#include "ir/fusion.h"
#include "runtime/options.h"

namespace mdfuser {

class Communicator;

// The agreement check. The collectives of a host program only meet when
// every rank runs the same program on shards of the same shapes; when they
// do not, the collective library aborts the process or waits until its
// timeout. So at a fusion's first run, and at every run whose inputs'
// signature (shapes, dtypes, device types, options) differs from the
// previous run's, the ranks of the fusion's meshes exchange what each is
// about to run, through the rendezvous store, and every rank raises the
// same user error when they differ. A run like the previous one goes
// without it.

// What one rank is about to run: the fusion as defined, the execute options
// and each input's shape, dtype and device type (strides may differ: each
// rank's program reads its own layout), or the user error its own checks
// raised.
struct RunFingerprint {
  enum class Kind : char { kDefinition = 'D', kOption = 'O', kInput = 'I' };
  struct Field {
    Kind kind;
    // kDefinition: unused; kOption: the option's name; kInput: the input
    // and property, e.g. "input 0 (T0) has shape".
    std::string what;
    std::string value;
  };
  std::vector<Field> fields;
  std::optional<UserError> error;

  std::string encode() const;
  // Internal error on a malformed string.
  static RunFingerprint decode(const std::string& text);
};

RunFingerprint fingerprintOf(
    const Fusion& definition,
    const std::vector<at::Tensor>& inputs,
    const ExecuteOptions& options);

// The teams whose ranks must agree before `rank` runs `definition`: on one
// mesh, its team along each mesh axis a tensor is spread on (the ranks its
// collectives run with; a 2 x 2 mesh's rows and columns agree apart, so
// that ranks may run fusions of different teams in different orders); for
// a fusion on several meshes, every device of them. In a fixed order.
// Empty when there is nothing to agree on: a world of one process, no
// device axis, or a rank outside the mesh.
std::vector<std::vector<int64_t>> agreementTeams(
    const Fusion& definition, int64_t rank, int64_t world_size);

// The error every rank raises for the fingerprints of `team` (one per rank,
// in team order): the error of the lowest rank that raised one, else the
// first difference from the lowest rank's fingerprint, naming both ranks
// and both values. None when they agree.
std::optional<UserError> disagreement(
    const std::vector<int64_t>& team,
    const std::vector<RunFingerprint>& prints);

// Exchanges `mine` in each of `teams`, in order, and throws the first
// disagreement, if any, having posted it as this rank's error in the teams
// after (every rank of every team raises an error, none waits). With an
// error in `mine`, which the caller raises, waits in each team for the
// others to read it and returns whether they all did: false when an
// exchange did not complete within the timeout, or sooner when a member
// says it waits in a collective on this rank instead (a run of this fusion
// it did not compare), whose wait the caller ends by reporting its
// failure. `run` is the run's token (Watchdog::Entry::run).
bool agreeAcrossTeams(
    Communicator& communicator,
    const std::vector<std::vector<int64_t>>& teams,
    const RunFingerprint& mine,
    uint64_t run);

} // namespace mdfuser
