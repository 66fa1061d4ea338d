// The six TPU paper workloads end to end at a small batch: compile on tpu-v1, simulate on the fast
// and timing engines, compare the output with the golden reference. Paper-scale work (CNN1: 100M
// weights): labelled `slow` in CTest, run by the Release suite, skipped by scripts/test.sh --asan.
#include <catch2/catch.hpp>

#include "e2e_support.h"

namespace tpusim::test {

TEST_CASE("the six TPU paper workloads compile and run bit-exact on the fast and timing engines at batch 2") {
  for (const char* w : {"tpu-v1/mlp0.toml", "tpu-v1/mlp1.toml", "tpu-v1/lstm0.toml", "tpu-v1/lstm1.toml",
                        "tpu-v1/cnn0.toml", "tpu-v1/cnn1.toml"}) {
    SECTION(w) { check_model(load(w, 2), sim::Arch{}, false); }
  }
}

}  // namespace tpusim::test
