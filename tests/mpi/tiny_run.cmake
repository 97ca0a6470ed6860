# write_tiny_run(DIR): a fresh DIR holding tiny.json (a 6.7 k-parameter model) and corpus.txt
# (61 short lines), the inputs of the short `mpirun ... ember train` runs of the MPI tests.
function(write_tiny_run dir)
  file(REMOVE_RECURSE ${dir})
  file(MAKE_DIRECTORY ${dir})
  file(WRITE ${dir}/tiny.json "{\"vocab_size\": 256, \"d_model\": 16, \"n_layers\": 1, \"n_heads\": 2, \"ffn_hidden\": 32, \"max_seq_len\": 32}")
  set(text "")
  foreach(i RANGE 60)
    string(APPEND text "line ${i}: the quick brown fox jumps over the lazy dog.\n")
  endforeach()
  file(WRITE ${dir}/corpus.txt "${text}")
endfunction()
