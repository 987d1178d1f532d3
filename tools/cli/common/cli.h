// fmha CLI core: umbrella header for the tools (fmha_fwd, fmha_gen, fmha_bwd, mla_decode, mla_fwd).
//
//   options.h  option table → parser and --help; add_common_options
//   expand.h   comma lists → cross product of runs
//   problem.h  q/k/b/h defaults derivation (docs/seed.md §2.1, §2.5), FLOP formulas (docs/seed.md §7)
//   init.h     init styles r/1/0/d/s/l/n
//   report.h   result / verbose / repro lines, --json, exit codes
//   device.h   CUDA errors, DeviceBuffer, gpu_available + exit-77 policy, ring buffers, event timing, L2 flush
//   driver.h   run_tool(): the shared main loop
// See docs/cli.md for the user-facing description.
#pragma once

#include "common/device.h"
#include "common/driver.h"
#include "common/expand.h"
#include "common/init.h"
#include "common/options.h"
#include "common/problem.h"
#include "common/report.h"
