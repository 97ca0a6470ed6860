// The job the fault tests launch (see expect_failure.cmake): rank 1 fails in
// the way argv[1] names while the other ranks go on into collectives; main
// ends the job through Communicator::fail, as the trainer's main does.
// "kill-zero2": rank 1 dies by SIGKILL (as kill -9) in the middle of a ZeRO-2
// step's backward; mpirun must end the others, left waiting in finish().
// "kill-zero3": the same in a ZeRO-3 step (the others wait for its gathers).
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "apps/train/zero3_residency.h"
#include "dist/consistency.h"
#include "dist/reducer.h"
#include "dist/zero_adamw.h"
#include "mpi_testing.h"

using namespace ember;

namespace {
dist::Communicator* g_comm = nullptr;
}
dist::Communicator& ember::testing::comm() {
  return *g_comm;
}

int main(int argc, char** argv) {
  dist::Communicator comm;
  g_comm = &comm;
  const std::string mode = argc > 1 ? argv[1] : "abort";
  try {
    if (mode == "abort") {
      // Only rank 1 knows; the others block in a collective it never joins.
      if (comm.rank() == 1) throw Error("missing data shard /data/train_001.bin on this node");
      comm.all_reduce(Tensor::ones({4}));
    } else if (mode == "agree") {
      // At a point every rank reaches: all of them leave with rank 1's message.
      std::string local;
      if (comm.rank() == 1) local = "bad checkpoint run/step_00000010.h5: no /model group";
      comm.raise_if_any_failed(local);
    } else if (mode == "backward") {
      // Rank 1 throws in the middle of backward, after some buckets started;
      // the others wait for it in finish().
      nn::Transformer model(testing::tiny_config(), 1);
      dist::Reducer reducer(comm, model.parameters(), {64, 256, false});
      model.parameters()[3].register_post_accumulate_grad_hook([&](Variable&) {
        if (comm.rank() == 1) throw Error("NaN in the gradient of model.layers.0.self_attn.q_proj");
      });
      testing::tiny_loss(model, testing::tiny_batch(comm.rank(), 0)).backward();
      reducer.finish();
    } else if (mode == "kill-zero2") {
      nn::Transformer model(testing::tiny_config(), 1);
      const auto named = model.named_parameters();
      dist::Reducer reducer(comm, model.parameters(), {64, 256, true, true});
      dist::ZeroAdamW opt(reducer, optim::decay_groups(named, 0.1));
      for (int step = 0; step < 2; ++step) {  // one whole step, then the fault in the second
        if (step == 1 && comm.rank() == 1) {
          model.parameters()[3].register_post_accumulate_grad_hook([](Variable&) { kill(getpid(), SIGKILL); });
        }
        opt.zero_grad();
        testing::tiny_loss(model, testing::tiny_batch(comm.rank(), step)).backward();
        reducer.finish();
        reducer.clip_grad_norm(1.0);
        opt.step(1e-3);
      }
    } else if (mode == "kill-zero3") {
      nn::Transformer model(testing::tiny_config(), 1);
      const auto named = model.named_parameters();
      dist::ReducerOptions ro{64, 256, true, true};
      ro.units = apps::block_units(named, model.config().n_layers);
      dist::Reducer reducer(comm, model.parameters(), ro);
      dist::ShardedParameters sharded(reducer);
      sharded.shard();
      dist::ZeroAdamW opt(reducer, optim::decay_groups(named, 0.1));
      opt.set_parameter_shard(sharded.values());
      model.set_block_residency(
          std::make_shared<apps::Zero3Residency>(sharded, model.config().n_layers));
      for (int step = 0; step < 2; ++step) {  // one whole step, then the fault in the second
        if (step == 1 && comm.rank() == 1) {
          model.parameters()[3].register_post_accumulate_grad_hook([](Variable&) { kill(getpid(), SIGKILL); });
        }
        opt.zero_grad();
        testing::tiny_loss(model, testing::tiny_batch(comm.rank(), step)).backward();
        reducer.finish();
        sharded.release_all();
        reducer.clip_grad_norm(1.0);
        opt.step(1e-3);
      }
    } else if (mode == "diverge") {
      nn::Transformer model(testing::tiny_config(), 1);
      if (comm.rank() == 1) model.parameters()[2].data().set({0, 0}, 0.5);
      dist::check_parameters_consistent(comm, model.parameters(), 7);
    }
    comm.barrier();
    std::printf("rank %d: no error\n", comm.rank());
    return 0;
  } catch (const std::exception& e) {
    return comm.fail(e, "mpi_fault_child: error: ");
  }
}
