// dist::Communicator and the consistency helpers on every rank: sizes, the
// collectives (sum / average / max, broadcast, uneven reduce-scatter and
// all-gather, non-blocking), MPI failures as Errors, the collective error
// agreement, the parameter checksum and broadcast, threads per rank, a split communicator.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>

#include "dist/consistency.h"
#include "mpi_testing.h"

using namespace ember;
using ember::testing::comm;

TEST_CASE("rank, world size and local ranks", "[mpi]") {
  const char* env = std::getenv("OMPI_COMM_WORLD_SIZE");
  const int expected = env ? std::atoi(env) : 1;
  CHECK(comm().world_size() == expected);
  CHECK(comm().uses_mpi() == dist::Communicator::launched_by_mpirun());
  CHECK(comm().rank() >= 0);
  CHECK(comm().rank() < comm().world_size());
  CHECK(comm().is_root() == (comm().rank() == 0));
  // One node here: every rank is local.
  CHECK(comm().local_size() == comm().world_size());
  CHECK(comm().local_rank() == comm().rank());
}

TEST_CASE("all_reduce sums, averages and takes the max of tensors", "[mpi]") {
  const int w = comm().world_size(), r = comm().rank();
  for (DType dt : {DType::Float32, DType::Float64}) {
    const int64_t n = 1001;
    Tensor t = Tensor::arange(0, n, 1, dt).view({7, 143}).contiguous();
    Tensor s = t.clone(), a = t.clone(), m = Tensor::full({3}, r, dt);
    {
      std::vector<double> v = s.to_vector<double>();
      for (double& x : v) x *= (r + 1);
      s = Tensor::from_vector(v, {7, 143}).to(dt);
      a = s.clone();
    }
    comm().all_reduce(s, dist::ReduceOp::Sum);
    comm().all_reduce(a, dist::ReduceOp::Average);
    comm().all_reduce(m, dist::ReduceOp::Max);
    const double f = w * (w + 1) / 2.0;
    const std::vector<double> sv = s.to_vector<double>(), av = a.to_vector<double>();
    bool sum_ok = true, avg_ok = true;
    for (int64_t i = 0; i < n; ++i) {
      sum_ok = sum_ok && sv[i] == i * f;
      avg_ok = avg_ok && std::abs(av[i] - i * f / w) <= 1e-6 * (1 + i * f / w);
    }
    CHECK(sum_ok);
    CHECK(avg_ok);
    CHECK(m.to_vector<double>() == std::vector<double>(3, w - 1));
  }
  Tensor ints = Tensor::full({5}, r + 1, DType::Int64);
  comm().all_reduce(ints);
  CHECK(ints.to_vector<int64_t>() == std::vector<int64_t>(5, w * (w + 1) / 2));
  CHECK_THROWS_WITH(comm().all_reduce(ints, dist::ReduceOp::Average),
                    Catch::Contains("Average needs a float tensor"));
  CHECK_THROWS_WITH(comm().all_reduce(Tensor::zeros({4, 4}).transpose(0, 1)),
                    Catch::Contains("contiguous"));
}

TEST_CASE("scalar reductions, any and all_gather", "[mpi]") {
  const int w = comm().world_size(), r = comm().rank();
  CHECK(comm().all_reduce(1.5 * r, dist::ReduceOp::Sum) == 1.5 * w * (w - 1) / 2);
  CHECK(comm().all_reduce(std::vector<double>{1.0 * r, 2.0}, dist::ReduceOp::Average) ==
        std::vector<double>{(w - 1) / 2.0, 2.0});
  CHECK(comm().all_reduce(double(r), dist::ReduceOp::Min) == 0);
  CHECK(comm().any(r == w - 1));
  CHECK_FALSE(comm().any(false));
  const std::vector<uint64_t> all = comm().all_gather(uint64_t(10 + r));
  REQUIRE(static_cast<int>(all.size()) == w);
  for (int i = 0; i < w; ++i) CHECK(all[i] == uint64_t(10 + i));
}

TEST_CASE("broadcast of tensors and strings from any root", "[mpi]") {
  const int w = comm().world_size(), r = comm().rank();
  for (int root : {0, w - 1}) {
    Tensor t = Tensor::full({2, 3}, r * 10.0, DType::Float64);
    comm().broadcast(t, root);
    CHECK(t.to_vector<double>() == std::vector<double>(6, root * 10.0));
    std::string s = r == root ? std::string("from the root, with\0a zero", 26) : "other";
    comm().broadcast(s, root);
    CHECK(s == std::string("from the root, with\0a zero", 26));
  }
  comm().barrier();
}

TEST_CASE("non-blocking all-reduces complete through test and wait", "[mpi]") {
  const int w = comm().world_size(), r = comm().rank();
  std::vector<Tensor> ts;
  std::vector<dist::Request> reqs;
  for (int k = 0; k < 4; ++k) ts.push_back(Tensor::full({1000 * (k + 1)}, r + k, DType::Float32));
  for (auto& t : ts) reqs.push_back(comm().iall_reduce_sum(t));
  for (int spin = 0; spin < 10; ++spin) comm().test(reqs[0]);
  for (auto& q : reqs) comm().wait(q);
  for (auto& q : reqs) CHECK_FALSE(q.pending());
  for (int k = 0; k < 4; ++k) {
    CHECK(ts[k].to_vector<float>() ==
          std::vector<float>(1000 * (k + 1), w * (w - 1) / 2.0f + w * k));
  }
}

TEST_CASE("uneven reduce-scatter and all-gather", "[mpi]") {
  const int w = comm().world_size(), r = comm().rank();
  // Rank i receives 2i + 1 elements, except the middle one receives none.
  std::vector<int64_t> counts(w);
  int64_t total = 0;
  for (int i = 0; i < w; ++i) total += counts[i] = (w > 2 && i == 1) ? 0 : 2 * i + 1;
  Tensor in = Tensor::arange(0, total, 1, DType::Float64);
  {
    std::vector<double> v = in.to_vector<double>();
    for (double& x : v) x += 1000 * r;
    in = Tensor::from_vector(v);
  }
  int64_t before = 0;
  for (int i = 0; i < r; ++i) before += counts[i];
  Tensor out = Tensor::zeros({counts[r] + 1}, DType::Float64);
  dist::Request q = comm().ireduce_scatter_sum(in, out, counts);
  comm().wait(q);
  const std::vector<double> got = out.to_vector<double>();
  for (int64_t j = 0; j < counts[r]; ++j) {
    CHECK(got[j] == w * static_cast<double>(before + j) + 1000.0 * w * (w - 1) / 2);
  }
  CHECK(got[counts[r]] == 0);  // nothing written past this rank's part
  // All-gather: each rank fills its own part, all end with everything.
  Tensor buf = Tensor::full({total}, -1, DType::Float32);
  buf.narrow(0, before, counts[r]).fill_(r);
  comm().all_gather_in_place(buf, counts);
  const std::vector<float> b = buf.to_vector<float>();
  int64_t at = 0;
  for (int i = 0; i < w; ++i) {
    for (int64_t j = 0; j < counts[i]; ++j) CHECK(b[at++] == i);
  }
  // Gather to the last rank: each sends its part (rank 0's may be empty), only the root receives.
  const int root = w - 1;
  Tensor part = Tensor::full({counts[r]}, r + 10, DType::Float32);
  Tensor all = r == root ? Tensor::full({total}, -1, DType::Float32) : Tensor();
  comm().gather(part, all, counts, root);
  if (r == root) {
    const std::vector<float> g = all.to_vector<float>();
    at = 0;
    for (int i = 0; i < w; ++i) {
      for (int64_t j = 0; j < counts[i]; ++j) CHECK(g[at++] == i + 10);
    }
  }
  CHECK_THROWS_WITH(comm().gather(Tensor::zeros({counts[r] + 1}), all, counts, root),
                    Catch::Contains("its count is"));
}

TEST_CASE("an MPI failure is an Error naming the call and the rank", "[mpi]") {
  if (!comm().uses_mpi()) return;
  Tensor t = Tensor::zeros({2});
  // Every rank passes the same bad root: MPI's argument check fails locally everywhere.
  CHECK_THROWS_WITH(comm().broadcast(t, comm().world_size() + 3),
                    Catch::Contains("MPI_Bcast failed on rank " + std::to_string(comm().rank())) &&
                        Catch::Contains("root"));
}

TEST_CASE("raise_if_any_failed gives every rank the failing rank's message", "[mpi]") {
  const int w = comm().world_size(), r = comm().rank();
  CHECK_NOTHROW(comm().raise_if_any_failed(""));
  bool thrown = false;
  try {
    comm().raise_if_any_failed(r == w - 1 ? "shard 7 is missing" : "");
  } catch (const dist::CollectiveError& e) {
    thrown = true;
    CHECK(e.failed_rank() == w - 1);
    // "rank r: " only when there are ranks to tell apart.
    CHECK(std::string(e.what()) ==
          (w > 1 ? "rank " + std::to_string(w - 1) + ": " : std::string()) + "shard 7 is missing");
  }
  CHECK(thrown);
  // Several failing: the lowest rank's message wins.
  try {
    comm().raise_if_any_failed("error on " + std::to_string(r));
  } catch (const dist::CollectiveError& e) {
    CHECK(e.failed_rank() == 0);
    CHECK(std::string(e.what()) == (w > 1 ? "rank 0: error on 0" : "error on 0"));
  }
}

TEST_CASE("parameter checksum, broadcast and divergence check", "[mpi]") {
  const int w = comm().world_size(), r = comm().rank();
  nn::Transformer model(testing::tiny_config(), 10 + r);  // different on every rank
  const auto params = model.parameters();
  dist::broadcast_parameters(comm(), params);
  const uint64_t sum = dist::parameter_checksum(params);
  CHECK(comm().all_gather(sum) == std::vector<uint64_t>(w, sum));
  CHECK_NOTHROW(dist::check_parameters_consistent(comm(), params, 5));
  nn::Transformer root_model(testing::tiny_config(), 10);
  CHECK(dist::parameter_checksum(root_model.parameters()) == sum);
  // One element of one rank off by one ulp: every rank throws, naming the step.
  if (w > 1 && r == w - 1) {
    const float x = params[5].data().data<float>()[3];
    params[5].data().data<float>()[3] = std::nextafter(x, 1.0f);
  }
  CHECK((dist::parameter_checksum(params) != sum || r != w - 1 || w == 1));
  if (w > 1) {
    CHECK_THROWS_WITH(dist::check_parameters_consistent(comm(), params, 1234),
                      Catch::Contains("parameters diverged across ranks at step 1234"));
  }
  // Named state from the root.
  std::map<std::string, Tensor> state;
  if (r == 0) state = {{"a/exp_avg", Tensor::full({2, 2}, 3.0)}, {"b", Tensor::arange(0, 5)}};
  const auto got = dist::broadcast_state(comm(), state);
  REQUIRE(got.size() == 2);
  CHECK(got.at("a/exp_avg").to_vector<float>() == std::vector<float>(4, 3.0f));
  CHECK(got.at("b").to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4});
}

TEST_CASE("threads per rank: node cores over local ranks", "[mpi]") {
  const int t = dist::threads_per_rank(comm());
  CHECK(t >= 1);
  CHECK(t * comm().local_size() <=
        std::max<long>(comm().local_size(), sysconf(_SC_NPROCESSORS_ONLN)));
}

TEST_CASE("split_communicator: the ranks of one color as a Communicator of their own", "[mpi]") {
  const int w = comm().world_size(), r = comm().rank();
  // Even and odd world ranks, ordered by descending world rank.
  const std::unique_ptr<dist::Communicator> half = comm().split_communicator(r % 2, w - r);
  const int size = (w + 1 - r % 2) / 2;  // ranks of r's parity
  CHECK(half->world_size() == size);
  CHECK(half->rank() == (w - 1 - r) / 2);  // members above r come first
  CHECK(half->local_size() == comm().local_size());
  // Blocking and non-blocking sums over the half: each member contributes 2^r.
  double expect = 0;
  for (int q = r % 2; q < w; q += 2) expect += std::ldexp(1.0, q);
  CHECK(half->all_reduce(std::ldexp(1.0, r)) == expect);
  Tensor t = Tensor::full({5}, std::ldexp(1.0, r), DType::Float64);
  dist::Request req = half->iall_reduce_sum(t);
  half->wait(req);
  CHECK(t.to_vector<double>() == std::vector<double>(5, expect));
  half->barrier();
  // The world is still whole after the child goes.
  CHECK(comm().all_reduce(1.0) == w);
}
