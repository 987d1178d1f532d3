# The seed's backward CTest matrix (docs/seed.md §8.1-8.2: BASIC, VARLEN, VARLEN_00 … VARLEN_14; BWD_MLA_BASIC and
# BWD_MLA_VARLEN wait for the MLA backward kernel), run through the fmha_bwd CLI with --verify (every element of dQ,
# dK, dV against the GPU backward reference, scale-aware rule), for fp16 and bf16; the causal runs in both
# alignments (the seed's backward is q-begin only). Label gpu; exit code 77 (no GPU) is a skip.
include(${CMAKE_CURRENT_LIST_DIR}/seed_varlen.lists)
set(FMHA_BWD_SEED_TESTS
  "basic|--b=1 --h=4 --q=512 --k=512 --d=128 --verify --mask=no"
  "varlen|--b=1 --h=4 --q=512 --k=512 --d=128 --verify --mask=residual --varlen"
  ${FMHA_SEED_VARLEN_00_14}
)
set(FMHA_BWD_VARLEN_PREFIX "--verify --varlen --mask=causal,residual --causal-type=qbegin,qend")

if(TARGET fmha_bwd)
  foreach(entry ${FMHA_BWD_SEED_TESTS})
    string(REPLACE "|" ";" parts "${entry}")
    list(GET parts 0 name)
    list(GET parts 1 args)
    if(name MATCHES "^varlen_[0-9][0-9]$")
      set(args "${FMHA_BWD_VARLEN_PREFIX} ${args}")
    endif()
    separate_arguments(arg_list UNIX_COMMAND "${args}")
    foreach(dtype fp16 bf16)
      add_test(NAME cli_bwd_${dtype}_${name} COMMAND fmha_bwd --dtype=${dtype} ${arg_list})
      set_tests_properties(cli_bwd_${dtype}_${name} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300)
    endforeach()
  endforeach()
endif()
