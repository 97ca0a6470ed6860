// Keeping ranks identical: parameters and state broadcast from rank 0, a
// bitwise parameter checksum compared across ranks (a clear error naming the
// step when they diverge), the ranks' agreement on their settings at start
// (a clear error naming the first that differs), and the OpenMP threads each rank should use
// (the node's cores divided by the ranks on the node).
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "dist/communicator.h"

namespace ember::dist {

// root's parameter values into every rank's parameters (same shapes everywhere).
void broadcast_parameters(const Communicator& comm, const std::vector<Variable>& params,
                          int root = 0);
// root's named tensors (e.g. a checkpoint's optimizer state) to every rank;
// the others' argument is ignored (it may be empty). Collective.
std::map<std::string, Tensor> broadcast_state(const Communicator& comm,
                                              const std::map<std::string, Tensor>& state,
                                              int root = 0);

// A 64-bit hash of the parameters' bytes and shapes, in order: equal on two
// ranks exactly when their parameters are bitwise equal (up to collisions).
uint64_t parameter_checksum(const std::vector<Variable>& params);
// Collective: compares the checksums of every rank; when they differ, every
// rank throws CollectiveError naming the step and each rank's checksum.
void check_parameters_consistent(const Communicator& comm, const std::vector<Variable>& params,
                                 int64_t step);

// Collective, at start: every rank passes the same field names in the same
// order (e.g. each option of the run, each key of the model config) with its
// own values. When a value differs between ranks, every rank throws
// CollectiveError naming the first such field and two ranks' values:
// "ranks disagree on --steps (rank 0: 100, rank 1: 50)".
void check_ranks_agree(const Communicator& comm,
                       const std::vector<std::pair<std::string, std::string>>& fields);

// Cores of this node (those this process may run on when that is fewer)
// divided by the ranks on this node; at least 1.
int threads_per_rank(const Communicator& comm);
// Sets OpenMP's thread count to threads_per_rank(comm) unless OMP_NUM_THREADS
// is set; returns the count in effect.
int set_threads_per_rank(const Communicator& comm);

}  // namespace ember::dist
