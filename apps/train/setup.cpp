// The first steps of a run: where the model comes from (--config, --preset,
// --init-from, --resume with its saved options) and the options' check; the
// data's fingerprint (compared on --resume); the ranks' agreement on all of it
// under mpirun; then the claim on --out before any long work or any write.
#include <algorithm>
#include <filesystem>
#include <string_view>

#include "apps/train/closed_stdout.h"
#include "apps/train/data_fingerprint.h"
#include "apps/common/model_io.h"
#include "nn/presets.h"
#include "apps/train/run_files.h"
#include "apps/train/run_paths.h"
#include "apps/train/run.h"
#include "dist/consistency.h"

namespace ember::apps {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// --resume: the run's newest checkpoint, its options (a given flag overrides
// one, with a note) and what the rest of the setup compares against.
void read_resumed_run(TrainRun& run) {
  TrainOptions& o = run.o;
  // The checkpoint as verified (read once); the moments stay in the file until the optimizer
  // reads them (restore_training_state).
  ResumePoint resumed = find_resume_point(o.resume);
  run.start_path = std::move(resumed.path);
  run.start = std::move(resumed.checkpoint);
  EMBER_CHECK(run.start.train_state, run.start_path,
              ": has no training state (/train); use --init-from");
  with_train_state(run.start_path, *run.start.train_state, [&](const json& st) {
    // The command that wrote it (its /train state marks fine-tuning, alignment and reward runs).
    const char* wrote = st.contains("reward")     ? "reward"
                        : st.contains("align")    ? "align"
                        : st.contains("rl")       ? "rl"
                        : st.contains("finetune") ? "finetune"
                                                  : "train";
    EMBER_CHECK(std::string_view(wrote) == command_name(o), run.start_path, ": is an ember ",
                wrote, " run's checkpoint, not an ember ", command_name(o),
                " run's (continue it with ember ", wrote, " --resume)");
    run.resume_notes = restore_options(st.at("options"), o);
    run.saved_data_fingerprint = st.value("data_fingerprint", json());
    run.saved_batch = st.at("options").value("batch_size", int64_t{0});
    run.saved_world = st.value("world_size", int64_t{1});
    if (o.finetune) run.finetune_base = st.at("finetune").at("base").get<std::string>();
  });
  if (o.finetune && !o.base.empty()) {  // the base moved: build_finetune_model reads it there
    EMBER_CHECK(run.start.config.lora.has_value(), "--base ", o.base, " with --resume gives a LoRA run's moved base; ",
                run.start_path, " is a --full fine-tune's checkpoint, which holds every weight and reads no base");
    run.finetune_base = absolute_path(o.base);
  }
  o.out = run_folder(o);
}

// --config, --preset, the checkpoint's, else dense-small.
nn::ModelConfig model_config(const TrainRun& run) {
  const TrainOptions& o = run.o;
  if (!o.config.empty()) return nn::ModelConfig::from_file(o.config);
  if (!o.preset.empty()) return nn::preset_config(o.preset);
  if (!run.start_path.empty()) return run.start.config;
  return nn::preset_config("dense-small");
}

}  // namespace

void resolve_model_source(TrainRun& run) {
  TrainOptions& o = run.o;
  const int sources =
      !o.config.empty() + !o.preset.empty() + !o.init_from.empty() + !o.resume.empty();
  EMBER_CHECK(sources <= 1 ||
                  (sources == 2 && !o.resume.empty() && (!o.config.empty() || !o.preset.empty())),
              "give one of --config, --preset, --init-from, --resume");
  ignore_sigpipe();  // `ember train | head`: training goes on without stdout (closed_stdout.h)
  agreed(run.comm, [&] {
    if (!o.resume.empty()) {
      read_resumed_run(run);
    } else if (!o.init_from.empty() || !o.base.empty()) {
      run.start_path = o.finetune ? o.base : o.init_from;
      run.start = o.finetune ? read_base_without_weights(run.start_path)
                             : nn::read_checkpoint(run.start_path, /*with_optim=*/false);
      if (o.finetune) run.finetune_base = fs::absolute(o.base).lexically_normal().string();
      // A reward model's head replaces what it would be tuned for (docs/cli.md#reward-models).
      EMBER_CHECK(!o.finetune || run.start.config.reward.empty(), "--base ", o.base,
                  ": is a reward model (its config has \"reward\"); ember ", command_name(o),
                  " starts from a language model (continue a reward run with ember reward "
                  "--resume)");
    }
    run.paths_as_given = path_option_values(o);
    absolutize_paths(o);  // stored so: --resume finds the data from any working directory
    // ember align: --beta's default is the loss's (a resumed run's is restored above).
    if (o.align && o.resume.empty() && !o.given.count("beta")) o.beta = o.loss == "simpo" ? 2 : 0.1;
    validate_options(o);  // before any work: one line naming the option and what it allows
    run.cfg = model_config(run);
    // A fine-tuning run's default --seq-len fits its base (ember rl has none of its own: a row is
    // as long as its prompt and completion, the memory check's length fits the base).
    if (o.finetune && (o.resume.empty() || o.rl) && !o.given.count("seq_len"))
      o.seq_len = std::min(o.seq_len, run.cfg.max_seq_len);
    EMBER_CHECK(o.seq_len <= run.cfg.max_seq_len, "--seq-len ", o.seq_len,
                " must be between 1 and the model's max_seq_len (", run.cfg.max_seq_len, ")");
    // Every target projection has d_model on one side, so B A has rank at most d_model: a
    // larger r only costs memory (checked here, before --out is claimed).
    EMBER_CHECK(!o.finetune || o.full || o.lora_r <= run.cfg.d_model, "--lora-r ", o.lora_r,
                " exceeds the base's d_model ", run.cfg.d_model,
                " (every target has d_model on one side, so B A has rank at most d_model)");
    // ZeRO-3 shards every parameter through the gradient layout: all must be trained.
    EMBER_CHECK(!(o.finetune && !o.full && o.zero == 3),
                "--zero 3 shards every parameter and needs all of them trained; a LoRA fine-tune "
                "keeps a frozen base (use --zero 2, or --full)");
    if (o.data.empty()) o.data = default_corpus();
  });
}

void fingerprint_data(TrainRun& run) {
  const TrainOptions& o = run.o;
  agreed(run.comm, [&] {
    EMBER_CHECK(fs::exists(o.data) || o.data.find_first_of("*?[") != std::string::npos,
                "--data: ", o.data, ": no such file or directory");
    run.data_files = data_fingerprint(o.data, o.val_data);
    if (!run.saved_data_fingerprint.is_null()) {
      const std::string change = describe_data_change(run.saved_data_fingerprint, run.data_files);
      EMBER_CHECK(change.empty() || o.allow_data_change,
                  "--resume: the training data changed since the run started (", change,
                  "); give --allow-data-change to train on it anyway");
      if (!change.empty())
        run.resume_notes.push_back("--resume: training on changed data (" + change + ")");
    }
  });
}

// Under mpirun every rank must run the same: options, model config, data (dist/consistency.h).
void check_ranks_agree_on_run(TrainRun& run) {
  if (run.world <= 1) return;
  std::vector<std::pair<std::string, std::string>> fields = option_values(run.o);
  for (auto& [flag, value] : fields) {  // data paths as given: their content is compared below
    for (const auto& [given_flag, given] : run.paths_as_given)
      if (flag == given_flag) value = given;
  }
  fields.emplace_back("the checkpoint started from", run.start_path);
  const json config = json::parse(run.cfg.to_json());
  for (auto it = config.begin(); it != config.end(); ++it) {
    fields.emplace_back("the model config's " + it.key(), it.value().dump());
  }
  std::string files;  // one field, so that every rank has the same fields; by position, not path
  size_t number = 0;
  for (const json& f : run.data_files) {
    ++number;
    files += (number == 1 ? "" : "; ") + ("file " + std::to_string(number) + ": ") +
             std::to_string(f.value("bytes", uint64_t{0})) + " bytes hash " + f.value("hash", std::string());
  }
  fields.emplace_back("the data files (size and content)", files);
  dist::check_ranks_agree(run.comm, fields);
}

// Claim --out before any long work or any write (tokenizer training, data preparation):
// the model fits the machine, the folder's lock (one run per folder), no other run's
// checkpoints in it, then its temporaries are stale (rank 0 writes the folder).
void claim_out_folder(TrainRun& run) {
  const TrainOptions& o = run.o;
  agreed(run.comm, [&] {
    nn::ModelConfig planned = run.cfg;  // --vocab-size sets the vocabulary below
    if (o.vocab_size > 0 && run.start_path.empty()) planned.vocab_size = o.vocab_size;
    nn::MemoryNeed need = nn::training_memory(planned, o.batch_size, o.seq_len);
    if (o.finetune && !o.full) {  // LoRA: the frozen weights have no gradients or moments
      need.gradients = need.adamw = 0;
      need.purpose += " with LoRA";
    }
    nn::require_fits_in_memory(need);
    if (run.root) {
      fs::path missing;  // the outermost folder of --out that does not exist yet (/ always does)
      for (fs::path p = fs::absolute(o.out).lexically_normal(); !fs::exists(p); p = p.parent_path())
        missing = p;
      ensure_writable_dir(o.out, "--out");
      run.created_out = missing.string();
      run.run_lock.emplace(o.out);
      check_no_other_run(o.out, o.resume);
      remove_stale_temporaries(o.out);
    }
  });
}

void discard_created_out(TrainRun& run) noexcept {
  if (run.created_out.empty()) return;
  run.run_lock.reset();
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(run.created_out, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().extension() == ".h5") return;  // never a checkpoint, whatever wrote it
  }
  if (!ec) fs::remove_all(run.created_out, ec);
  run.created_out.clear();
}

}  // namespace ember::apps
