// Everything a program built on ember usually needs, one include (as
// <torch/torch.h>): tensors and kernels, autograd (with the recording API for
// new ops and gradcheck), modules and the Transformer, generation, optimizers
// and schedules, the tokenizer and data loading, model checkpoints and presets.
// Link ember::ember. The command-line runtime (apps/) is not part of it.
// Finer-grained headers keep the folder layout: "core/tensor.h", "nn/layers.h", ...
#pragma once

#include "ember/version.h"

#include "core/error.h"
#include "core/kernels.h"
#include "core/rng.h"
#include "core/tensor.h"

#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/variable.h"

#include "nn/adapters/adapters.h"
#include "nn/checkpoint_file.h"
#include "nn/config.h"
#include "nn/layers.h"
#include "nn/module.h"
#include "nn/presets.h"
#include "nn/transformer.h"

#include "inference/generate.h"
#include "inference/sample/sampler.h"

#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/schedule.h"
#include "optim/sgd.h"

#include "data/batch_loader.h"
#include "data/chat.h"
#include "data/chat_loader.h"
#include "data/token_shard.h"
#include "data/tokenizer/stored_tokenizer.h"
#include "data/tokenizer/tokenizer.h"
