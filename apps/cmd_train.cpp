// `ember train`: command-line options -> TrainOptions (SPEC.md section 8).
#include <algorithm>

#include "apps/commands.h"
#include "apps/trainer.h"
#include "dist/communicator.h"

namespace ember::apps {

namespace {
dist::Communicator* g_comm = nullptr;
}

void set_command_communicator(dist::Communicator* comm) { g_comm = comm; }

CommandRunner add_train_command(CLI::App& app) {
  auto o = std::make_shared<TrainOptions>();
  CLI::App* sub = app.add_subcommand("train", "Train a model from a text corpus or token shards (with no options: "
                                              "dense-small on Debian's fortunes)");
  std::vector<CLI::Option*> opts;
  auto opt = [&](const char* name, auto& field, const char* help) {
    CLI::Option* op = sub->add_option(name, field, help)->capture_default_str();
    opts.push_back(op);
    return op;
  };
  opt("--config", o->config, "model config JSON (SPEC.md section 1)")->check(CLI::ExistingFile);
  opt("--preset", o->preset, "shipped model: dense-small, moe-small, gpt2-small");
  opt("--init-from", o->init_from, "start from this checkpoint's weights (fine-tuning)")->check(CLI::ExistingFile);
  opt("--resume", o->resume, "continue the run in this folder from its newest complete checkpoint");
  opt("--data", o->data, "text file/folder, or llm.c token shards (file, folder, glob); default: fortunes");
  CLI::Option* tokenizer = opt("--tokenizer", o->tokenizer, "tokenizer.json the --data shards were encoded with (default: the checkpoint's, "
                                   "else tokenizer.json beside the shards, else bytes); stored in the checkpoints");
  opt("--val-data", o->val_data, "validation token shards (default: a held-out tail of --data text)");
  opt("--batch-size", o->batch_size, "rows per micro-batch (per rank)");
  opt("--seq-len", o->seq_len, "tokens per row");
  opt("--grad-accum", o->grad_accum, "micro-batches per step");
  opt("--steps", o->steps, "total steps of the run (the schedule's length)");
  opt("--lr", o->lr, "peak learning rate");
  opt("--min-lr", o->min_lr, "final learning rate");
  opt("--warmup", o->warmup, "linear warmup steps");
  opt("--schedule", o->schedule, "cosine, constant, linear or wsd");
  opt("--weight-decay", o->weight_decay, "AdamW decoupled weight decay (tensors of 2+ dims)");
  opt("--beta1", o->beta1, "AdamW beta1");
  opt("--beta2", o->beta2, "AdamW beta2");
  opt("--clip", o->clip, "clip gradients to this global L2 norm (0: off)");
  opt("--seed", o->seed, "seed of the initial weights, data order and dropout");
  sub->add_flag("--sequential", o->sequential, "read windows in order instead of a seeded shuffle");
  sub->add_flag("--profile", o->profile, "time every step by phase and op family; print a table at the end and "
                                         "write OUT/profile.json (the first step or two are warm-up)");
  opt("--out", o->out, "run folder: checkpoints, metrics.jsonl, data");
  opt("--save-every", o->save_every, "checkpoint every N steps (0: at the end only)");
  opt("--keep", o->keep, "keep the newest N checkpoints (0: all)");
  opt("--keep-every", o->keep_every, "also keep every checkpoint whose step is a multiple of M");
  opt("--log-every", o->log_every, "progress line every N steps");
  opt("--eval-every", o->eval_every, "validation loss every N steps (0: at the end)");
  opt("--eval-batches", o->eval_batches, "validation batches per evaluation");
  opt("--val-fraction", o->val_fraction, "held-out tail of a text corpus used for validation");
  opt("--vocab-size", o->vocab_size, "train a BPE tokenizer of this many tokens on the text --data (model vocab follows)")
      ->excludes(tokenizer);
  opt("--sample-tokens", o->sample_tokens, "print a sample of N tokens at the end");
  opt("--sample-prompt", o->sample_prompt, "prompt of the end-of-run sample");
  opt("--dtype", o->dtype, "matmul precision: float32, or bf16 (bfloat16 operands; float32 weights, grads, AdamW)");
  opt("--zero", o->zero, "under mpirun: 1 shards the AdamW moments across ranks (ZeRO-1)")->check(CLI::Range(0, 1));
  opt("--bucket-mb", o->bucket_mb, "under mpirun: gradient all-reduce bucket size in MiB (the first is 1 MiB)")
      ->check(CLI::PositiveNumber);
  opt("--check-every", o->check_every, "under mpirun: compare parameter checksums across ranks every N steps (0: never)");
  return [o, opts]() {
    for (CLI::Option* op : opts) {
      if (op->count() > 0) {  // under TrainOptions' field name: --batch-size -> batch_size
        std::string name = op->get_name().substr(2);
        std::replace(name.begin(), name.end(), '-', '_');
        o->given.insert(name);
      }
    }
    if (o->sequential) o->given.insert("sequential");
    return g_comm ? run_train(*o, *g_comm) : run_train(*o);
  };
}

}  // namespace ember::apps
