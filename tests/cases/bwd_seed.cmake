# The seed's backward CTest matrix (docs/seed.md §8.1-8.2: BASIC, VARLEN, VARLEN_00 … VARLEN_14; BWD_MLA_BASIC and
# BWD_MLA_VARLEN wait for the MLA backward kernel), run through the fmha_bwd CLI with --verify (every element of dQ,
# dK, dV against the GPU backward reference, scale-aware rule), for fp16 and bf16; the causal runs in both
# alignments (the seed's backward is q-begin only). Label gpu; exit code 77 (no GPU) is a skip.
set(FMHA_BWD_SEED_TESTS
  "basic|--b=1 --h=4 --q=512 --k=512 --d=128 --verify --mask=no"
  "varlen|--b=1 --h=4 --q=512 --k=512 --d=128 --verify --mask=residual --varlen"
  "varlen_00|--d=128 --h=8 --h_k=4 --varlen-q=128 --varlen-k=128"
  "varlen_01|--d=64 --h=4 --h_k=4 --varlen-q=128 --varlen-k=128"
  "varlen_02|--d=128 --h=4 --h_k=2 --varlen-q=128 --varlen-k=128"
  "varlen_03|--d=128 --h=8 --h_k=8 --varlen-q=256:256 --varlen-k=512:512"
  "varlen_04|--d=128 --h=8 --h_k=4 --varlen-q=256:256 --varlen-k=512:512"
  "varlen_05|--d=128 --h=8 --h_k=1 --varlen-q=256:256 --varlen-k=512:512"
  "varlen_06|--d=128 --h=8 --h_k=2 --varlen-q=256:256:256:256 --varlen-k=256:768:512:512"
  "varlen_07|--d=128 --h=8 --h_k=2 --varlen-q=256:256:256:256 --varlen-k=256:0:1280:512"
  "varlen_08|--d=128 --h=8 --h_k=2 --varlen-q=256:0:512:256 --varlen-k=256:256:1024:512"
  "varlen_09|--d=64 --h=16 --h_k=16 --varlen-q=100:300 --varlen-k=100:300"
  "varlen_10|--d=64 --h=4 --h_k=4 --varlen-q=3:2 --varlen-k=2:5"
  "varlen_11|--d=64 --h=4 --h_k=2 --varlen-q=17:10 --varlen-k=13:10"
  "varlen_12|--d=64 --h=4 --h_k=4 --varlen-q=177:845 --varlen-k=257:766"
  "varlen_13|--d=64 --h=4 --h_k=2 --varlen-q=177:366:479 --varlen-k=257:0:766"
  "varlen_14|--d=64 --h=4 --h_k=4 --varlen-q=1 --varlen-k=1"
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
