# The seed's generation CTest matrix (docs/seed.md §8.1: GEN_BASIC, GEN_VARLEN, GEN_GQA, GEN_REMAP, GEN_CACHEONLY,
# and GEN_HDIM64, which the seed defines but leaves out of its target), run through the fmha_gen CLI with --verify,
# for fp16 and bf16, each on a contiguous cache and on a paged one (64-key pages, and 5-key pages, which are not a
# whole number of 16-key boxes). Label gpu; exit code 77 (no GPU) is a skip.
set(FMHA_GEN_SEED_TESTS
  "basic|--b=1 --h=4 --k=512 --d=128 --verify"
  "varlen|--b=1 --h=4 --k=512 --d=128 --verify --varlen"
  "hdim64|--b=2 --h=4 --k=512 --d=64 --verify"
  "gqa|--b=2 --h=4 --h_k=2 --k=512 --d=128 --verify"
  "remap|--b=2 --h=4 --h_k=2 --k=512 --d=128 --verify --remap"
  "cacheonly|--b=2 --h=4 --h_k=2 --k=512 --d=128 --verify --cache-only"
)

if(TARGET fmha_gen)
  foreach(entry ${FMHA_GEN_SEED_TESTS})
    string(REPLACE "|" ";" parts "${entry}")
    list(GET parts 0 name)
    list(GET parts 1 args)
    separate_arguments(arg_list UNIX_COMMAND "${args}")
    foreach(dtype fp16 bf16)
      add_test(NAME cli_gen_${dtype}_${name} COMMAND fmha_gen --dtype=${dtype} --page=0,64,5 ${arg_list})
      set_tests_properties(cli_gen_${dtype}_${name} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300)
    endforeach()
  endforeach()
endif()
