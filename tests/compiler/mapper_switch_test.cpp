// The mapper's switches (compiler/lower_options.h): what `--mapper KEY=off` and a sweep's
// `mapper.KEY` axis turn off, the text and JSON forms, and that a program lowered with a
// technique off is still bit-exact on every engine.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "graph_builder.h"
#include "isa/error.h"

namespace tpusim::test {

using compiler::LowerOptions;
using compiler::map_shape;
using isa::Field;
using isa::Opcode;

TEST_CASE("mapper switches: KEY=VALUE text, JSON of the switches that are off, refusals") {
  LowerOptions o;
  CHECK(compiler::describe(o).empty());
  CHECK(compiler::mapper_to_json(o) == nlohmann::json::object());
  compiler::set_mapper_switch(o, "pack=off", "--mapper");
  CHECK(o.pack == false);
  CHECK_FALSE(o.fuse_pools.has_value());  // not given: its default
  compiler::set_mapper_switch(o, "fuse=0", "--mapper");
  CHECK(o.fuse_pools == false);
  // The table's order, whatever the order they were set in.
  CHECK(compiler::describe(o) == "fuse=off, pack=off");
  CHECK(compiler::mapper_to_json(o) == nlohmann::json{{"fuse", false}, {"pack", false}});
  CHECK(compiler::mapper_from_json(compiler::mapper_to_json(o), "meta.mapper") == o);
  compiler::set_mapper_switch(o, "pack", "true", "sweep");
  CHECK(o.pack == true);
  // A switch on by default, given on: nothing to record.
  CHECK(compiler::mapper_to_json(o) == nlohmann::json{{"fuse", false}});

  const auto message = [](auto f) {
    try {
      f();
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message([&] { compiler::set_mapper_switch(o, "packing=off", "--mapper"); }) ==
        "--mapper: 'packing': unknown mapper switch; expected one of fuse, pack, pieces, dense, stream, partial, host_loop, concat_inplace, zero_ahead");
  CHECK(message([&] { compiler::set_mapper_switch(o, "pack", "--mapper"); }) ==
        "--mapper: 'pack': expected KEY=on|off with KEY one of fuse, pack, pieces, dense, stream, partial, host_loop, concat_inplace, zero_ahead");
  CHECK(message([&] { compiler::set_mapper_switch(o, "pack=yes please", "--mapper"); }) ==
        "--mapper: pack: 'yes please': expected on or off (true/false, 1/0)");
  CHECK(message([&] { compiler::mapper_from_json(nlohmann::json{{"pack", 0}}, "meta.mapper"); }) ==
        "meta.mapper: pack: 0: expected true or false");
  CHECK(message([&] { compiler::mapper_from_json(nlohmann::json::array(), "meta.mapper"); }) ==
        "meta.mapper: expected an object of mapper switches");
}

TEST_CASE("pieces, host_loop and partial default to the machine's parameter, and a switch given wins") {
  // tpu-v1's software runs the whole model once per piece, drives a recurrence a step at a time
  // (it has no branches) and fetches partial weight tiles as their boxes (the paper's LSTM1
  // counters; its section 7 prices them whole: docs/validation.md): driver_piece_schedule 0,
  // driver_host_loop 1, driver_partial_tiles 1 (sim/arch.h).
  const sim::Arch tpu_v1;
  REQUIRE(tpu_v1.driver_piece_schedule == 0);
  REQUIRE(tpu_v1.driver_host_loop == 1);
  REQUIRE(tpu_v1.driver_partial_tiles == 1);
  CHECK(compiler::resolve(LowerOptions{}, tpu_v1) == LowerOptions{true, true, false, true, true, true, true, true, false});
  std::vector<std::string_view> keys;
  for (const compiler::MapperSwitch& m : compiler::kMapperSwitches) {
    if (!m.arch_default) continue;
    keys.push_back(m.key);
    INFO(m.key);
    sim::Arch without = tpu_v1, with = tpu_v1;
    without.*(m.arch_default) = 0;
    with.*(m.arch_default) = 1;
    LowerOptions o;
    CHECK_FALSE(compiler::switch_on(o, m, without));
    CHECK(compiler::switch_on(o, m, with));
    CHECK(compiler::mapper_to_json(o).empty());
    const std::string key(m.key);
    compiler::set_mapper_switch(o, key + "=on", "--mapper");
    CHECK(compiler::switch_on(o, m, without));
    // Given either way, it is recorded: its default depends on the machine.
    CHECK(compiler::mapper_to_json(o) == nlohmann::json{{key, true}});
    CHECK(compiler::describe(o) == key + "=on");
    CHECK(compiler::mapper_from_json(compiler::mapper_to_json(o), "meta.mapper") == o);
    compiler::set_mapper_switch(o, key + "=off", "--mapper");
    CHECK_FALSE(compiler::switch_on(o, m, with));
    CHECK(compiler::mapper_to_json(o) == nlohmann::json{{key, false}});
  }
  CHECK(keys == std::vector<std::string_view>{"pieces", "partial", "host_loop"});
}

TEST_CASE("zero_ahead is off unless given, and recorded when given on") {
  const sim::Arch tpu_v1;
  LowerOptions o;
  CHECK(compiler::resolve(o, tpu_v1).zero_ahead == false);
  compiler::set_mapper_switch(o, "zero_ahead=on", "--mapper");
  CHECK(compiler::mapper_to_json(o) == nlohmann::json{{"zero_ahead", true}});
  CHECK(compiler::describe(o) == "zero_ahead=on");
  CHECK(compiler::mapper_from_json(compiler::mapper_to_json(o), "meta.mapper") == o);
  compiler::set_mapper_switch(o, "zero_ahead=off", "--mapper");  // (its default: nothing to record)
  CHECK(compiler::mapper_to_json(o) == nlohmann::json::object());
}

TEST_CASE("pack=off: one weight tile per kernel position, bit-exact, and the program says so") {
  // The packing test's first case (lower_test.cpp): a 1-channel 3x3 convolution on a 6x6 map with
  // 2 filters, batch 1, on a 16 x 16 array. Packed it is two tiles (4 pixels per vector, 2 kernel
  // rows and then 1); with
  // pack=off each of the 9 kernel positions is a tile of its own, read once, and each of the 9
  // matmuls streams the 16 output pixels one UB row each (4 output rows of 4, accumulating).
  sim::Arch a = small_arch();
  a.name = "test-16x16";
  a.array_rows = a.array_cols = 16;
  a.ub_bytes = 2048 * 16;
  a.acc_entries = 256;
  GraphBuilder b(1);
  const int x = b.input(map_shape(6, 6, 1)), y = b.tensor("y", map_shape(4, 4, 2));
  b.add(b.matmul({whole(x)}, whole(y), 3, 3, true), "conv");
  b.g.output = y;
  const isa::Program packed = lower_and_check(b.g, a);
  const isa::Program plain = lower_and_check(b.g, a, LowerOptions{.pack = false});
  CHECK(count(packed, Opcode::read_weights) == 2);
  CHECK(count(plain, Opcode::read_weights) == 9);
  CHECK(count(plain, Opcode::set_config, Field::reg, int64_t(isa::ConfigReg::gather_bytes)) == 0);
  CHECK(count(packed, Opcode::set_config, Field::reg, int64_t(isa::ConfigReg::gather_bytes)) == 1);
  CHECK_FALSE(packed.meta.contains("mapper"));
  CHECK(plain.meta["mapper"] == nlohmann::json{{"pack", false}});
  CHECK_FALSE(plain.meta["mapping"][0].contains("packing"));
  // Useful MACs are the model's either way: 16 pixels x 9 positions x 1 channel x 2 filters.
  CHECK(plain.meta["mapping"][0]["macs"] == 16 * 9 * 2);
  CHECK(packed.meta["mapping"][0]["macs"] == 16 * 9 * 2);
}

}  // namespace tpusim::test
