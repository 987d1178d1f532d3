# The seed's backward CTest matrices (docs/seed.md §8.1-8.2: BASIC, VARLEN, VARLEN_00 … VARLEN_14, BWD_MLA_BASIC,
# BWD_MLA_VARLEN (head dims 192 / 128: two passes, O and LSE from the GPU reference); and the two-pass one below), run through the fmha_bwd CLI with --verify (every element of dQ,
# dK, dV against the GPU backward reference, scale-aware rule), for fp16 and bf16; the causal runs in both
# alignments (the seed's backward is q-begin only). Label gpu; exit code 77 (no GPU) is a skip.
include(${CMAKE_CURRENT_LIST_DIR}/seed_varlen.lists)
set(FMHA_BWD_SEED_TESTS
  "basic|--b=1 --h=4 --q=512 --k=512 --d=128 --verify --mask=no"
  "varlen|--b=1 --h=4 --q=512 --k=512 --d=128 --verify --mask=residual --varlen"
  ${FMHA_SEED_VARLEN_00_14}
  "mla_basic|--b=1 --h=4 --q=512 --k=512 --d=192 --d_vo=128 --verify --mask=no"
  "mla_varlen|--b=1 --h=4 --q=512 --k=512 --d=192 --d_vo=128 --verify --mask=residual --varlen"
)
set(FMHA_BWD_VARLEN_PREFIX "--verify --varlen --mask=causal,residual --causal-type=qbegin,qend")

# One CTest run per (entry, dtype): cli_<prefix>_<dtype>_<name>, `tool` with `flags` and the entry's arguments (the
# varlen entries with the mask and alignment prefix above).
function(fmha_add_bwd_cli_tests prefix tool flags)
  foreach(entry ${ARGN})
    string(REPLACE "|" ";" parts "${entry}")
    list(GET parts 0 name)
    list(GET parts 1 args)
    if(name MATCHES "^varlen_[0-9][0-9]$")
      set(args "${FMHA_BWD_VARLEN_PREFIX} ${args}")
    endif()
    separate_arguments(arg_list UNIX_COMMAND "${flags} ${args}")
    foreach(dtype fp16 bf16)
      add_test(NAME cli_${prefix}_${dtype}_${name} COMMAND ${tool} --dtype=${dtype} ${arg_list})
      set_tests_properties(cli_${prefix}_${dtype}_${name} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300)
    endforeach()
  endforeach()
endfunction()

if(TARGET fmha_bwd)
  fmha_add_bwd_cli_tests(bwd fmha_bwd "" ${FMHA_BWD_SEED_TESTS})
  # The seed's two-pass matrix (fmha_2bwd, docs/seed.md §8.2: BASIC, CAUSAL_00, VARLEN, VARLEN_00 … 03, GQA) through
  # fmha_2bwd (fmha_bwd --two-pass runs the same).
  set(FMHA_2BWD_SEED_TESTS
    "basic|--b=1 --h=4 --q=512 --k=512 --d=128 --verify --mask=no"
    "causal_00|--b=1 --h=4 --q=512 --k=512 --d=128 --verify --mask=causal"
    "varlen|--b=1 --h=4 --q=512 --k=512 --d=128 --verify --mask=residual --varlen"
    "gqa|--b=2 --h=4 --h_k=2 --q=512 --k=512 --d=64 --verify"
  )
  foreach(entry ${FMHA_SEED_VARLEN_00_14})
    if(entry MATCHES "^varlen_0[0-3][|]")
      list(APPEND FMHA_2BWD_SEED_TESTS "${entry}")
    endif()
  endforeach()
  fmha_add_bwd_cli_tests(2bwd fmha_2bwd "" ${FMHA_2BWD_SEED_TESTS})
endif()
