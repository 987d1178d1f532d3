# The seed's forward CTest matrix (docs/seed.md §8.1), run through the fmha_fwd CLI with --verify under the seed's
# fixed thresholds (--tolerance=seed), for fp16 and bf16.
# Causal cases run in both alignments (--causal-type=qbegin,qend). Label gpu; exit code 77 (no GPU) is a skip.
include(${CMAKE_CURRENT_LIST_DIR}/seed_varlen.lists)
set(FMHA_FWD_SEED_TESTS
  "basic|--b=1 --h=4 --q=512 --k=512 --d=128 --verify --mask=no"
  "causal_00|--b=1 --h=4 --q=512 --k=512 --d=128 --verify --mask=causal --causal-type=qbegin,qend"
  "causal_01|--verify --iterations=0 --b=1 --h=1 --h_k=1 --q=1013 --k=1024 --d=128 --mask=causal --causal-type=qend,qbegin"
  "varlen|--b=1 --h=4 --q=512 --k=512 --d=128 --verify --mask=residual --varlen"
  "hdim64|--b=2 --h=4 --q=512 --k=512 --d=64 --verify"
  "gqa|--b=2 --h=4 --h_k=2 --q=512 --k=512 --d=64 --verify"
  ${FMHA_SEED_VARLEN_00_14}
  "varlen_15|--verify --varlen --mask=causal --causal-type=qbegin --d=128 --h=4 --h_k=4 --varlen-q=128 --varlen-k=128"
  "varlen_16|--verify --varlen --mask=causal --causal-type=qbegin --d=128 --h=4 --h_k=4 --varlen-q=17 --varlen-k=257"
  "varlen_17|--verify --varlen --mask=causal --causal-type=qbegin --d=128 --h=4 --h_k=4 --varlen-q=17 --varlen-k=25"
  "varlen_18|--verify --varlen --mask=causal --causal-type=qend --d=128 --h=4 --h_k=4 --varlen-q=128 --varlen-k=128"
  "varlen_19|--verify --varlen --mask=causal --causal-type=qend --d=128 --h=4 --h_k=4 --varlen-q=17 --varlen-k=257"
  "varlen_20|--verify --varlen --mask=causal --causal-type=qend --d=128 --h=4 --h_k=4 --varlen-q=17 --varlen-k=25"
  "varlen_21|--verify --varlen --mask=causal --causal-type=qend --d=128 --h=4 --h_k=4 --varlen-q=1013 --varlen-k=1024"
  "varlen_22|--verify --varlen --mask=causal --causal-type=qend --d=128 --h=4 --h_k=4 --varlen-q=1024 --varlen-k=1035"
)
# VARLEN_00…14 share a prefix in the seed: --verify --varlen --mask=causal,residual (both alignments here).
set(FMHA_VARLEN_PREFIX "--verify --varlen --mask=causal,residual --causal-type=qbegin,qend")

if(TARGET fmha_fwd)
  foreach(entry ${FMHA_FWD_SEED_TESTS})
    string(REPLACE "|" ";" parts "${entry}")
    list(GET parts 0 name)
    list(GET parts 1 args)
    if(name MATCHES "^varlen_(0[0-9]|1[0-4])$")
      set(args "${FMHA_VARLEN_PREFIX} ${args}")
    endif()
    separate_arguments(arg_list UNIX_COMMAND "${args}")
    foreach(dtype fp16 bf16)
      # The seed's own rule (its fixed thresholds): the GoogleTest seed matrix checks the same cases with the
      # scale-aware rule, the CLI's default.
      add_test(NAME cli_fwd_${dtype}_${name} COMMAND fmha_fwd --dtype=${dtype} --tolerance=seed ${arg_list})
      set_tests_properties(cli_fwd_${dtype}_${name} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300)
    endforeach()
  endforeach()
endif()
