// `ember train`: the training loop of docs/architecture.md. One flat
// loop (as llm.c): batch -> forward -> backward (x grad_accum) -> clip ->
// AdamW -> log; validation, checkpoints and the end-of-run sample around it.
// Exact resume: the model, AdamW moments and step, the dropout stream offset
// and the run's options are checkpointed; the data order is a pure function
// of the step (data/batch_loader.h), so a resumed run repeats the unbroken one.
#pragma once
#include <cstdint>
#include <string>

#include "apps/train/options.h"

namespace ember::dist {
class Communicator;
}

namespace ember::apps {

// Runs training; returns the process exit code: 0 when the run reached --steps,
// 128 + the signal when SIGINT/SIGTERM stopped it after writing a checkpoint
// (130 for Ctrl-C). Errors are thrown as ember::Error.
// With comm's world size W > 1 the run is data-parallel: rank r reads its rows
// of each batch, gradients are averaged, rank 0 prints and writes checkpoints.
int run_train(TrainOptions options, dist::Communicator& comm);
// A single process (world size 1, never MPI).
int run_train(TrainOptions options);

// `ember finetune` (docs/cli.md#fine-tuning): the same run on chat data from the checkpoint
// options.base (options.finetune is set): each step's loss is normalised by its trained
// tokens over all micro-batches and ranks; conversations held out by --val-fraction are
// the validation. Returns and throws as run_train.
int run_finetune(TrainOptions options, dist::Communicator& comm);
int run_finetune(TrainOptions options);

// `ember align` (docs/cli.md#alignment): a fine-tuning run (options.finetune and options.align
// are set) on preference pairs: each step's loss is the pair loss (options.loss) averaged over
// the step's pairs of all micro-batches and ranks, against reference log-probabilities computed
// once before the first step (kept in OUT/ref_logps.json); pairs held out by --val-fraction are
// the validation. Returns and throws as run_train.
int run_align(TrainOptions options, dist::Communicator& comm);
int run_align(TrainOptions options);

// `ember reward` (docs/cli.md#reward-models): a fine-tuning run (options.finetune and
// options.reward are set) on preference pairs that trains a reward model: the base with the
// score head `score.weight` (always trained; the rest LoRA, QLoRA or --full); each step's loss
// is the Bradley-Terry loss with the pairs' margins and --center-rewards, averaged over the
// step's pairs of all micro-batches and ranks; no reference model. Returns and throws as run_train.
int run_reward(TrainOptions options, dist::Communicator& comm);
int run_reward(TrainOptions options);

// `ember rl` (docs/cli.md#rl-from-a-reward): a fine-tuning run (options.finetune and options.rl
// are set) on prompts: each step samples --group-size completions of each of its prompts through
// the serving engine, scores them (--reward match or a reward model) and takes --iterations
// updates of GRPO's or PPO's loss (docs/model.md#rl-from-a-reward) against the reference (for
// LoRA the base with adapters off); prompts held out by --val-fraction are the validation (their
// greedy completions' reward). Returns and throws as run_train.
int run_rl(TrainOptions options, dist::Communicator& comm);
int run_rl(TrainOptions options);

}  // namespace ember::apps
