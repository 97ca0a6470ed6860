// The model and its optimizer: weights from the seed or the checkpoint started
// from, broadcast from rank 0; the reducer and AdamW (or ZeRO-1's); on --resume
// the optimizer's moments, the step, the tokens seen and the dropout stream's
// offset, so that the run continues as an unbroken one would.
#include "apps/train/run.h"
#include "apps/train/pipeline_run.h"
#include "apps/train/tensor_parallel_run.h"
#include "core/allocator.h"
#include "dist/consistency.h"

namespace ember::apps {

void build_model_and_optimizer(TrainRun& run) {
  const TrainOptions& o = run.o;
  std::vector<std::pair<std::string, Variable>> trained;
  if (o.finetune) {
    trained = build_finetune_model(run);
  } else {
    run.model = std::make_unique<nn::Transformer>(run.cfg, o.seed, DType::Float32,
                                                  nn::TensorParallel{run.tp_group.get()}, run.stage);
    if (!run.start_path.empty()) run.model->load_state_dict(shard_state(run, stage_state(run, run.start.model)));
    // --tp, --pp: the whole tensors drawn and dropped (other shards, other stages) go back to the
    // system; cached, blocks of their sizes would stay unused beside the shards.
    if (run.tp_group || run.pp_group) allocator_empty_cache();
    trained = run.model->named_parameters();
  }
  run.model->set_activation_checkpointing(checkpoint_interval(o));
  // Bytes per token for bits per byte (none without a tokenizer: then it is bits per token).
  run.token_bytes = run.tokenizer ? token_byte_lengths(*run.tokenizer, run.cfg.vocab_size)
                                  : std::vector<int64_t>();
  for (const auto& [name, v] : trained) {
    run.params.push_back(v);
    if (!is_tied_copy(run, name)) run.trained_params += v.data().numel();
  }
  if (run.pp_group) {  // --pp: every stage's
    Tensor sum = Tensor::from_vector(std::vector<double>{static_cast<double>(run.trained_params)});
    run.pp_group->all_reduce_sum(sum);
    run.trained_params = static_cast<int64_t>(sum.to_vector<double>()[0]);
  }
  // Every rank starts from rank 0's weights (also after --init-from / --resume); under --tp from
  // those of its data-parallel rank 0, which holds the same shards.
  dist::broadcast_parameters(run.data_parallel(), run.params);
  // Gradients are averaged across the data-parallel ranks by the reducer (none in a plain
  // single-process run).
  run.optimization = make_optimization(run.data_parallel(), *run.model, trained, o);
}

void restore_training_state(TrainRun& run) {
  const TrainOptions& o = run.o;
  agreed(run.comm, [&] {
    if (o.resume.empty()) return;
    const nn::Checkpoint& start = run.start;
    EMBER_CHECK(start.optim_step, run.start_path, ": has no optimizer state");
    const optim::Optimizer::StateSource whole = nn::CheckpointOptimReader(run.start_path);
    run.optimization.optimizer->load_state(run.tp_group ? sharding_source(run, whole) : whole,
                                           *start.optim_step, stage_state(run, start.optim_param_steps));
    with_train_state(run.start_path, *start.train_state, [&](const nlohmann::json& st) {
      run.step = st.at("step").get<int64_t>();
      run.tokens_seen = st.at("tokens_seen").get<int64_t>();
      run.model->dropout_generator().offset = st.at("dropout_offset").get<uint64_t>();
      // The stream's seed too: a LoRA run's model is rebuilt from its base (seed 0), not --seed.
      if (st.contains("dropout_seed"))
        run.model->dropout_generator().seed = st.at("dropout_seed").get<uint64_t>();
    });
    EMBER_CHECK(run.step <= o.steps, "--resume: the checkpoint is at step ", run.step,
                ", beyond --steps ", o.steps);
  });
  // The model holds them now: a copy kept for the whole run would cost 4 bytes per parameter.
  run.start.model.clear();
  run.schedule = optim::Schedule{o.schedule, o.lr, o.min_lr, o.warmup, o.steps, o.steps / 5};
  // ember align and reward: a pair is two rows (its chosen and rejected sides).
  const bool pairs = o.align || o.reward;
  run.tokens_per_step = run.data_world * o.batch_size * o.seq_len * o.grad_accum * (pairs ? 2 : 1);
  run.stats = nn::model_stats(run.cfg, o.batch_size, o.seq_len);
  if (o.reward) {  // the score head (d FLOPs) stands in for the LM head's vocab x d products
    const int64_t head = run.cfg.vocab_size * run.cfg.d_model;
    run.stats.active_matmul_params -= head;
    run.stats.flops_per_token -= 6.0 * static_cast<double>(head);
  }
  if (o.finetune && !o.full) {
    // LoRA / QLoRA: a frozen weight costs its forward and input-gradient products (4 FLOPs per
    // parameter and token) but no weight gradient; the trained tensors cost the usual 6.
    const int64_t trained = run.trained_params;
    run.stats.flops_per_token = 4.0 * static_cast<double>(run.stats.active_matmul_params) +
                                6.0 * static_cast<double>(trained) +
                                run.stats.attention_flops_per_token;
  }
}

}  // namespace ember::apps
