// ember: train · finetune · align · reward · loss · evaluate · generate · chat · tokenize · info · bench · serve. The only place
// that turns an ember::Error into one line on stderr and a non-zero exit. Under mpirun /
// srun the Communicator (made before anything else, outside the try block so
// an uncaught error aborts the whole job rather than hanging it) starts MPI;
// a failing rank ends every rank with its message (dist::Communicator::fail).
// Exit codes (docs/cli.md): 0 success, 1 error (bad input, runtime failure),
// 2 command-line usage error, 128 + signal when SIGINT/SIGTERM stopped
// `ember train` or `ember finetune` after it wrote a checkpoint (130 for Ctrl-C).
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>

#include "apps/cli/commands.h"
#include "apps/cli/integer_options.h"
#include "apps/common/stop_signals.h"
#include "core/user_message.h"
#include "core/error.h"
#include "core/kernels/cpu_isa.h"
#include "dist/communicator.h"
#include "dist/consistency.h"
#include "ember/version.h"

namespace {
constexpr int kExitUsage = 2;  // as getopt-style tools; CLI11's own codes (100+) are not used

using Runners = std::map<CLI::App*, ember::apps::CommandRunner>;

// Every subcommand on app, each with the function that runs it.
Runners add_commands(CLI::App& app, ember::dist::Communicator& comm) {
  Runners runners;
  auto add = [&](auto&& make) {
    const size_t before = app.get_subcommands({}).size();
    ember::apps::CommandRunner run = make(app);
    runners[app.get_subcommands({})[before]] = std::move(run);
  };
  add([&](CLI::App& a) { return ember::apps::add_train_command(a, comm); });
  for (const char* name : {"finetune", "align", "rl"})
    add([&](CLI::App& a) { return ember::apps::add_finetuning_command(a, comm, name).run; });
  add([&](CLI::App& a) { return ember::apps::add_reward_command(a, comm); });
  add(ember::apps::add_loss_command);
  add(ember::apps::add_evaluate_command);
  add(ember::apps::add_tokenize_command);
  add(ember::apps::add_generate_command);
  add(ember::apps::add_chat_command);
  add(ember::apps::add_info_command);
  add(ember::apps::add_export_command);
  add(ember::apps::add_import_command);
  add(ember::apps::add_plot_command);
  add(ember::apps::add_bench_command);
  add(ember::apps::add_serve_command);
  add(ember::apps::add_bench_serve_command);
  add(ember::apps::add_eval_command);  // last in --help: an old spelling
  return runners;
}

// Under mpirun each rank parses its own arguments (an MPMD job may give
// them different ones): they agree on the outcome before anything else, so
// one rank's usage error never leaves the others waiting in a collective.
// The lowest rank that stopped prints its message; every rank exits with its code:
// the exit code of a rank that is not the one printing, nothing otherwise.
std::optional<int> agree_on_parse(ember::dist::Communicator& comm,
                                  const std::optional<CLI::ParseError>& parse_error) {
  if (comm.world_size() <= 1) return std::nullopt;
  try {
    comm.raise_if_any_failed(parse_error ? std::to_string(parse_error->get_exit_code() == 0 ? 0 : kExitUsage) : "");
  } catch (const ember::dist::CollectiveError& e) {
    const std::string what = e.what();  // "rank r: <exit code>"
    if (e.failed_rank() != comm.rank()) return std::stoi(what.substr(what.rfind(' ') + 1));
  }
  return std::nullopt;
}

// Runs the parsed subcommand; an error is one line on stderr and exit code 1.
int run_parsed_command(ember::dist::Communicator& comm, Runners& runners) {
  std::string command;
  try {
    if (comm.world_size() > 1) {  // an MPMD job whose ranks run different commands would hang
      std::string name;
      for (auto& [sub, run] : runners) {
        if (sub->parsed()) name = sub->get_name();
      }
      ember::dist::check_ranks_agree(comm, {{"the command", "ember " + name}});
    }
    if (comm.uses_mpi()) ember::dist::set_threads_per_rank(comm);
    // The kernels read EMBER_MAX_ISA at every call, some inside OpenMP regions, which an
    // exception cannot leave: a bad value is refused here, before any work.
    ember::kernels::max_isa();
    for (auto& [sub, run] : runners) {
      if (sub->parsed()) {
        command = sub->get_name();
        const int code = run();
        // What a command printed must have reached stdout (a full disk, a closed pipe):
        // otherwise `ember evaluate --json > FILE` would exit 0 having lost its result.
        EMBER_CHECK(std::fflush(stdout) == 0 && !std::ferror(stdout), "ember ", command,
                    ": writing the output to stdout failed (", std::strerror(errno),
                    "); what it printed is incomplete");
        return code;
      }
    }
  } catch (const ember::Error& e) {
    return comm.fail(e, "ember: error: ");
  } catch (const std::exception& e) {  // the library's own: one sentence, never its raw text
    return comm.fail(ember::Error(ember::user_message(e, command)), "ember: error: ");
  }
  return 0;
}

// `ember serve` shares the cores between OpenMP's workers and its HTTP threads. Workers that
// spin between parallel regions (libgomp's default) take the CPU an HTTP thread needs after
// every token (one stream decoded 41 tokens/s that way on 2 cores, 69 with passive waiting),
// so serve runs with OMP_WAIT_POLICY=PASSIVE unless it is set. libgomp reads it when it
// loads, hence one re-execution of the same program with it set (same pid and arguments).
void serve_with_passive_openmp(char** argv) {
  if (argv[1] == nullptr || std::string(argv[1]) != "serve" || std::getenv("OMP_WAIT_POLICY")) return;
  if (setenv("OMP_WAIT_POLICY", "PASSIVE", 1) != 0) return;
  execv("/proc/self/exe", argv);  // returns only on failure: serve then runs as it is
  unsetenv("OMP_WAIT_POLICY");
}

}  // namespace

int main(int argc, char** argv) {
  serve_with_passive_openmp(argv);
  // SIGINT/SIGTERM blocked in every thread from here on and taken by one signal thread
  // (apps/common/stop_signals.h): before MPI, OpenMP or any other thread exists.
  ember::apps::start_stop_signal_thread();
  // A file-size limit (ulimit -f) makes writes fail with EFBIG, reported as
  // one line like a full disk, instead of killing the process mid-checkpoint.
  std::signal(SIGXFSZ, SIG_IGN);
  ember::dist::Communicator comm;
  CLI::App app{"ember: a small PyTorch-style LLM training framework in C++"};
  app.set_version_flag("--version", "ember " EMBER_VERSION "\nbuild: " EMBER_BUILD_INFO);
  // Every option of every subcommand shows its default in --help (set before they are added).
  // A repeated option takes its last value (scripts/run.sh passes its defaults
  // first, so `bash scripts/run.sh --steps 200` overrides them).
  app.option_defaults()->always_capture_default()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.require_subcommand(1);
  Runners runners = add_commands(app, comm);
  ember::apps::check_integer_options(app);  // "010", 2^63, -1 for UINT: usage errors, never silently changed
  std::optional<CLI::ParseError> parse_error;  // a usage error, or --help / --version (exit code 0)
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    parse_error = e;
  }
  if (const std::optional<int> code = agree_on_parse(comm, parse_error)) return *code;
  if (parse_error) {
    if (parse_error->get_exit_code() == 0) return app.exit(*parse_error);  // --help, --version
    app.exit(*parse_error);  // the message and "Run with --help ..."
    return kExitUsage;
  }
  return run_parsed_command(comm, runners);
}
