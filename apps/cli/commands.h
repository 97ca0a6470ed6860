// The subcommands of the `ember` binary. Each registers its options on a
// CLI11 subcommand and returns the function that runs it (exit code).
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string_view>

namespace ember::dist {
class Communicator;
}

namespace ember::apps {

using CommandRunner = std::function<int()>;
CommandRunner add_info_command(CLI::App& app);
CommandRunner add_loss_command(CLI::App& app);  // mean loss on token shards
CommandRunner add_eval_command(CLI::App& app);  // `ember eval`: the old spelling of `ember loss`
CommandRunner add_evaluate_command(CLI::App& app);  // multiple-choice tasks, perplexity
// `train` runs data-parallel on the process's communicator (main owns it).
CommandRunner add_train_command(CLI::App& app, dist::Communicator& comm);
// `finetune`, `align` and `reward` (likewise): the row `name` of the fine-tuning commands' table
// (finetune_commands.cpp) registered on app; returns the subcommand and its runner.
struct RegisteredCommand {
  CLI::App* sub;
  CommandRunner run;
};
RegisteredCommand add_finetuning_command(CLI::App& app, dist::Communicator& comm,
                                         std::string_view name);
CommandRunner add_reward_command(CLI::App& app, dist::Communicator& comm);  // the "reward" row
CommandRunner add_tokenize_command(CLI::App& app);
CommandRunner add_generate_command(CLI::App& app);
CommandRunner add_chat_command(CLI::App& app);
CommandRunner add_export_command(CLI::App& app);
CommandRunner add_import_command(CLI::App& app);
CommandRunner add_plot_command(CLI::App& app);
CommandRunner add_bench_command(CLI::App& app);
// `serve` runs until SIGTERM or SIGINT, then exits 0.
CommandRunner add_serve_command(CLI::App& app);
CommandRunner add_bench_serve_command(CLI::App& app);

}  // namespace ember::apps
