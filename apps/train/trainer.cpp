// The entry points of `ember train`, `finetune`, `align` and `reward` (see trainer.h): the
// setup steps in order, then the loop (apps/train/: run.h holds the run's state and lists the
// steps).
#include "apps/train/trainer.h"

#include "apps/train/rl_run.h"
#include "apps/train/step_progress.h"
#include "apps/train/run.h"
#include "apps/train/parallel_setup.h"
#include "core/threads.h"

namespace ember::apps {
namespace {

// The steps after the claim on --out: `setup` (the data), the model, its optimizer and state,
// then the loop. A failure before the first step takes back a folder the claim created.
// `after` runs once the model and its state are in place (ember align's reference).
template <class Setup, class After = void (*)()>
int build_and_train(TrainRun& run, Setup&& setup, After&& after = [] {}) {
  try {
    setup();
    print_resume_notes(run);         // what --resume changed
    build_model_and_optimizer(run);  // weights from rank 0; reducer and AdamW
    restore_training_state(run);     // --resume: moments, step, tokens, dropout offset
    after();
  } catch (...) {
    discard_created_out(run);
    throw;
  }
  pin_threads();  // with EMBER_PIN_THREADS=1 (core/threads.h)
  print_run_start(run);
  return train_loop(run);
}

// ember finetune, align and reward: one setup on the base's tokenizer, chat data or preference
// pairs (align's reference checked), then the shared build and loop; the entry points below
// only set the mode.
int run_finetuning(TrainOptions o, dist::Communicator& comm) {
  o.finetune = true;
  const bool pairs = o.align || o.reward;
  TrainProgress::check_setting();  // EMBER_PROGRESS
  TrainRun run(std::move(o), comm);
  resolve_model_source(run);       // --base or --resume; options checked
  fingerprint_data(run);           // compared with the resumed run's
  check_ranks_agree_on_run(run);   // under mpirun: options, model config, data
  setup_parallel_layout(run);      // --tp, --pp: what they combine with; the groups, the stage
  choose_chat_tokenizer(run);      // the base's
  if (run.o.rl) {
    open_rl_prompts(run);  // read, rendered, held out: a bad line writes nothing in --out
  } else if (pairs) {
    open_preference_data(run);  // read, rendered, held out: a bad line writes nothing in --out
    check_reference_vocabulary(run);  // align's --ref scores the policy's token ids
  } else {
    open_chat_data(run);  // read, held out, rendered: a bad line writes nothing in --out
  }
  claim_out_folder(run);  // memory, lock, no other run's checkpoints
  return build_and_train(run, [] {}, [&] {
    if (run.o.align) prepare_reference_logps(run);
    if (run.o.rl) prepare_rl(run);  // the reward model, --full's reference, --rollouts-out
  });
}

}  // namespace

int run_train(TrainOptions o) {
  dist::Communicator single(dist::Launch::Single);
  return run_train(std::move(o), single);
}

int run_train(TrainOptions o, dist::Communicator& comm) {
  TrainProgress::check_setting();  // EMBER_PROGRESS
  TrainRun run(std::move(o), comm);
  resolve_model_source(run);       // --config/--preset/--init-from/--resume; options checked
  fingerprint_data(run);           // compared with the resumed run's
  check_ranks_agree_on_run(run);   // under mpirun: options, model config, data
  setup_parallel_layout(run);      // --tp, --pp: what they combine with; the groups, the stage
  claim_out_folder(run);           // memory, lock, no other run's checkpoints
  return build_and_train(run, [&] {
    train_tokenizer_if_asked(run);  // --vocab-size
    choose_tokenizer(run);          // --tokenizer, the checkpoint's, the shards', bytes
    open_data(run);                 // text tokenised into OUT/data; the loaders
  });
}

int run_finetune(TrainOptions o) {
  dist::Communicator single(dist::Launch::Single);
  return run_finetune(std::move(o), single);
}

int run_finetune(TrainOptions o, dist::Communicator& comm) {
  o.align = o.reward = o.rl = false;
  return run_finetuning(std::move(o), comm);
}

int run_align(TrainOptions o) {
  dist::Communicator single(dist::Launch::Single);
  return run_align(std::move(o), single);
}

int run_align(TrainOptions o, dist::Communicator& comm) {
  o.align = true;
  o.reward = o.rl = false;
  return run_finetuning(std::move(o), comm);
}

int run_reward(TrainOptions o) {
  dist::Communicator single(dist::Launch::Single);
  return run_reward(std::move(o), single);
}

int run_reward(TrainOptions o, dist::Communicator& comm) {
  o.reward = true;
  o.align = o.rl = false;
  return run_finetuning(std::move(o), comm);
}

int run_rl(TrainOptions o) {
  dist::Communicator single(dist::Launch::Single);
  return run_rl(std::move(o), single);
}

int run_rl(TrainOptions o, dist::Communicator& comm) {
  o.rl = true;
  o.align = o.reward = false;
  return run_finetuning(std::move(o), comm);
}

}  // namespace ember::apps
