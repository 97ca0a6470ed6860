// dist::Group's checks and its size-1 shortcuts (no MPI), the MPI work being the Communicator's
// (communicator.cpp is the one file with mpi.h); and the three groups of a ParallelLayout rank,
// made by three splits of the world; the tensor group counts its all-reduces on the profiler's
// tensor-parallel channel.
#include "dist/group.h"

#include <chrono>
#include <utility>

namespace ember::dist {

const prof::Channel kTensorParallelChannel = prof::register_channel("tp_all_reduce", 410);

namespace {

void require_reducible(const Tensor& t, const char* what) {
  EMBER_CHECK(t.defined() && t.is_contiguous(), what,
              ": the tensor must be defined and contiguous");
  EMBER_CHECK(t.dtype() == DType::Float32 || t.dtype() == DType::Float64, what,
              ": needs a float32 or float64 tensor, got ", dtype_name(t.dtype()));
}

}  // namespace

Group::~Group() {
  if (comm_ && handle_ >= 0) comm_->group_free(handle_);
}

Group::Group(Group&& other) noexcept
    : comm_(std::exchange(other.comm_, nullptr)),
      handle_(std::exchange(other.handle_, -1)),
      rank_(std::exchange(other.rank_, 0)),
      size_(std::exchange(other.size_, 1)),
      traffic_(std::exchange(other.traffic_, {})),
      channel_(other.channel_),
      profiled_(std::exchange(other.profiled_, false)) {}

Group& Group::operator=(Group&& other) noexcept {
  if (this != &other) {
    if (comm_ && handle_ >= 0) comm_->group_free(handle_);
    comm_ = std::exchange(other.comm_, nullptr);
    handle_ = std::exchange(other.handle_, -1);
    rank_ = std::exchange(other.rank_, 0);
    size_ = std::exchange(other.size_, 1);
    traffic_ = std::exchange(other.traffic_, {});
    channel_ = other.channel_;
    profiled_ = std::exchange(other.profiled_, false);
  }
  return *this;
}

void Group::all_reduce_sum(const Tensor& t) const {
  require_reducible(t, "Group::all_reduce_sum");
  all_reduce(t, ReduceOp::Sum);
}

void Group::all_reduce_max(const Tensor& t) const {
  require_reducible(t, "Group::all_reduce_max");
  all_reduce(t, ReduceOp::Max);
}

// The all-reduce, counted: one call, the tensor's bytes, the seconds inside MPI.
void Group::all_reduce(const Tensor& t, ReduceOp op) const {
  if (size_ == 1) return;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  comm_->group_all_reduce(handle_, t, op);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const int64_t bytes = t.numel() * static_cast<int64_t>(dtype_size(t.dtype()));
  traffic_.calls++;
  traffic_.bytes += bytes;
  traffic_.seconds += seconds;
  if (profiled_) prof::add_traffic(channel_, bytes, seconds);
}

void Group::check_peer(const Tensor& t, int peer, int tag, const char* what) const {
  EMBER_CHECK(t.defined() && t.is_contiguous(), what,
              ": the tensor must be defined and contiguous");
  EMBER_CHECK(tag >= 0 && tag <= 32767, what, ": tag ", tag, " is outside 0 .. 32767");
  EMBER_CHECK(peer >= 0 && peer < size_ && peer != rank_, what, ": group rank ", peer,
              " is not another rank of this group (rank ", rank_, " of ", size_, ")");
}

void Group::send(const Tensor& t, int peer, int tag) const {
  check_peer(t, peer, tag, "Group::send");
  comm_->group_send(handle_, t, peer, tag);
}

void Group::recv(const Tensor& t, int peer, int tag) const {
  check_peer(t, peer, tag, "Group::recv");
  comm_->group_recv(handle_, t, peer, tag);
}

Request Group::isend(const Tensor& t, int peer, int tag) {
  check_peer(t, peer, tag, "Group::isend");
  return comm_->group_isend(handle_, t, peer, tag);
}

Request Group::irecv(const Tensor& t, int peer, int tag) {
  check_peer(t, peer, tag, "Group::irecv");
  return comm_->group_irecv(handle_, t, peer, tag);
}

void Group::wait(Request& request) {
  if (request.pending()) comm_->wait(request);
}

bool Group::test(Request& request) {
  return !request.pending() || comm_->test(request);
}

LayoutGroups make_layout_groups(Communicator& comm, const ParallelLayout& layout) {
  EMBER_CHECK(layout.world == comm.world_size(), "--tp ", layout.tp, " --pp ", layout.pp,
              ": the layout is for ", layout.world, " ranks but the world has ", comm.world_size());
  const int r = comm.rank();
  const int tensor = layout.tensor_index(r), data = layout.data_index(r), stage = layout.stage(r);
  LayoutGroups groups;
  // Colors number the groups of each kind; keys order the ranks inside one by their index.
  groups.tensor = comm.split(data + layout.dp * stage, tensor);
  groups.tensor.count_in_profile(kTensorParallelChannel);
  groups.data = comm.split(tensor + layout.tp * stage, data);
  groups.pipeline = comm.split(tensor + layout.tp * data, stage);
  return groups;
}

}  // namespace ember::dist
