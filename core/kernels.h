// Every core kernel, one include: the math on plain Tensors (no autograd).
#pragma once
#include "core/kernels/elementwise.h"
#include "core/kernels/index.h"
#include "core/kernels/matmul.h"
#include "core/kernels/nf4.h"
#include "core/kernels/reduce.h"
#include "core/kernels/shape_ops.h"
#include "core/kernels/softmax.h"
