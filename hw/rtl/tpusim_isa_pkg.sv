// Generated from isa/table.h by `build/tpusim isa --sv > hw/rtl/tpusim_isa_pkg.sv`.
// Do not edit: a test fails when this file and the table differ.
package tpusim_isa_pkg;

  localparam int unsigned INSTR_BYTES = 16;
  localparam int unsigned INSTR_BITS = 128;

  typedef enum logic [7:0] {
    OP_NOP = 8'h00,
    OP_HALT = 8'h01,
    OP_SYNC = 8'h02,
    OP_BARRIER = 8'h03,
    OP_SETCFG = 8'h04,
    OP_TAG = 8'h05,
    OP_INT = 8'h06,
    OP_RHM = 8'h10,
    OP_WHM = 8'h11,
    OP_RW = 8'h20,
    OP_MATMUL = 8'h30,
    OP_ACT = 8'h40,
    OP_VEC = 8'h41,
    OP_POOL = 8'h42
  } opcode_e;

  // Field positions: <MNEMONIC>_<FIELD>_LSB and _WIDTH, bit positions in the 128-bit word.
  localparam int unsigned SYNC_UNITS_LSB = 16;
  localparam int unsigned SYNC_UNITS_WIDTH = 4;
  localparam int unsigned SETCFG_REG_LSB = 16;
  localparam int unsigned SETCFG_REG_WIDTH = 8;
  localparam int unsigned SETCFG_VALUE_LSB = 24;
  localparam int unsigned SETCFG_VALUE_WIDTH = 64;
  localparam int unsigned TAG_TAG_LSB = 16;
  localparam int unsigned TAG_TAG_WIDTH = 32;
  localparam int unsigned RHM_HOST_LSB = 16;
  localparam int unsigned RHM_HOST_WIDTH = 40;
  localparam int unsigned RHM_UB_LSB = 56;
  localparam int unsigned RHM_UB_WIDTH = 24;
  localparam int unsigned RHM_ROWS_LSB = 80;
  localparam int unsigned RHM_ROWS_WIDTH = 24;
  localparam int unsigned WHM_HOST_LSB = 16;
  localparam int unsigned WHM_HOST_WIDTH = 40;
  localparam int unsigned WHM_UB_LSB = 56;
  localparam int unsigned WHM_UB_WIDTH = 24;
  localparam int unsigned WHM_ROWS_LSB = 80;
  localparam int unsigned WHM_ROWS_WIDTH = 24;
  localparam int unsigned RW_UNSIGNED_LSB = 8;
  localparam int unsigned RW_UNSIGNED_WIDTH = 1;
  localparam int unsigned RW_WADDR_LSB = 16;
  localparam int unsigned RW_WADDR_WIDTH = 40;
  localparam int unsigned RW_TILES_LSB = 56;
  localparam int unsigned RW_TILES_WIDTH = 16;
  localparam int unsigned RW_TILE_ROWS_LSB = 72;
  localparam int unsigned RW_TILE_ROWS_WIDTH = 16;
  localparam int unsigned RW_TILE_COLS_LSB = 88;
  localparam int unsigned RW_TILE_COLS_WIDTH = 16;
  localparam int unsigned MATMUL_ACCUMULATE_LSB = 8;
  localparam int unsigned MATMUL_ACCUMULATE_WIDTH = 1;
  localparam int unsigned MATMUL_SWITCH_LSB = 9;
  localparam int unsigned MATMUL_SWITCH_WIDTH = 1;
  localparam int unsigned MATMUL_UNSIGNED_LSB = 10;
  localparam int unsigned MATMUL_UNSIGNED_WIDTH = 1;
  localparam int unsigned MATMUL_UB_LSB = 16;
  localparam int unsigned MATMUL_UB_WIDTH = 24;
  localparam int unsigned MATMUL_ACC_LSB = 40;
  localparam int unsigned MATMUL_ACC_WIDTH = 16;
  localparam int unsigned MATMUL_ROWS_LSB = 56;
  localparam int unsigned MATMUL_ROWS_WIDTH = 16;
  localparam int unsigned MATMUL_REPEAT_LSB = 72;
  localparam int unsigned MATMUL_REPEAT_WIDTH = 16;
  localparam int unsigned MATMUL_STRIDE_LSB = 88;
  localparam int unsigned MATMUL_STRIDE_WIDTH = 24;
  localparam int unsigned MATMUL_LANE_LSB = 112;
  localparam int unsigned MATMUL_LANE_WIDTH = 16;
  localparam int unsigned ACT_FUNC_LSB = 8;
  localparam int unsigned ACT_FUNC_WIDTH = 3;
  localparam int unsigned ACT_PERCHAN_LSB = 11;
  localparam int unsigned ACT_PERCHAN_WIDTH = 1;
  localparam int unsigned ACT_UNSIGNED_LSB = 12;
  localparam int unsigned ACT_UNSIGNED_WIDTH = 1;
  localparam int unsigned ACT_ACC_LSB = 16;
  localparam int unsigned ACT_ACC_WIDTH = 16;
  localparam int unsigned ACT_UB_LSB = 32;
  localparam int unsigned ACT_UB_WIDTH = 24;
  localparam int unsigned ACT_ROWS_LSB = 56;
  localparam int unsigned ACT_ROWS_WIDTH = 16;
  localparam int unsigned ACT_MULT_LSB = 72;
  localparam int unsigned ACT_MULT_WIDTH = 16;
  localparam int unsigned ACT_SHIFT_LSB = 88;
  localparam int unsigned ACT_SHIFT_WIDTH = 6;
  localparam int unsigned ACT_CLIP_LSB = 94;
  localparam int unsigned ACT_CLIP_WIDTH = 8;
  localparam int unsigned ACT_QTABLE_LSB = 102;
  localparam int unsigned ACT_QTABLE_WIDTH = 24;
  localparam int unsigned VEC_OP_LSB = 8;
  localparam int unsigned VEC_OP_WIDTH = 3;
  localparam int unsigned VEC_FUNC_LSB = 11;
  localparam int unsigned VEC_FUNC_WIDTH = 3;
  localparam int unsigned VEC_SRC_LSB = 16;
  localparam int unsigned VEC_SRC_WIDTH = 24;
  localparam int unsigned VEC_SRC_B_LSB = 40;
  localparam int unsigned VEC_SRC_B_WIDTH = 24;
  localparam int unsigned VEC_UB_LSB = 64;
  localparam int unsigned VEC_UB_WIDTH = 24;
  localparam int unsigned VEC_ROWS_LSB = 88;
  localparam int unsigned VEC_ROWS_WIDTH = 16;
  localparam int unsigned VEC_MULT_LSB = 104;
  localparam int unsigned VEC_MULT_WIDTH = 16;
  localparam int unsigned VEC_SHIFT_LSB = 120;
  localparam int unsigned VEC_SHIFT_WIDTH = 6;
  localparam int unsigned POOL_KIND_LSB = 8;
  localparam int unsigned POOL_KIND_WIDTH = 1;
  localparam int unsigned POOL_SRC_LSB = 16;
  localparam int unsigned POOL_SRC_WIDTH = 24;
  localparam int unsigned POOL_UB_LSB = 40;
  localparam int unsigned POOL_UB_WIDTH = 24;
  localparam int unsigned POOL_IN_W_LSB = 64;
  localparam int unsigned POOL_IN_W_WIDTH = 12;
  localparam int unsigned POOL_OUT_H_LSB = 76;
  localparam int unsigned POOL_OUT_H_WIDTH = 12;
  localparam int unsigned POOL_OUT_W_LSB = 88;
  localparam int unsigned POOL_OUT_W_WIDTH = 12;
  localparam int unsigned POOL_BATCH_LSB = 100;
  localparam int unsigned POOL_BATCH_WIDTH = 8;
  localparam int unsigned POOL_WINDOW_LSB = 108;
  localparam int unsigned POOL_WINDOW_WIDTH = 4;
  localparam int unsigned POOL_PSTRIDE_LSB = 112;
  localparam int unsigned POOL_PSTRIDE_WIDTH = 4;

  localparam int unsigned FUNC_IDENTITY = 0;
  localparam int unsigned FUNC_RELU = 1;
  localparam int unsigned FUNC_RELUX = 2;
  localparam int unsigned FUNC_SIGMOID = 3;
  localparam int unsigned FUNC_TANH = 4;
  // sigmoid and tanh read y as fixed point with CURVE_FRACTION_BITS fraction bits, clamped to
  // [CURVE_INPUT_MIN, CURVE_INPUT_MAX].
  localparam int unsigned CURVE_FRACTION_BITS = 8;
  localparam int CURVE_INPUT_MIN = -2048;
  localparam int CURVE_INPUT_MAX = 2047;

  localparam int unsigned VEC_ADD = 0;
  localparam int unsigned VEC_SUB = 1;
  localparam int unsigned VEC_MUL = 2;
  localparam int unsigned VEC_MAX = 3;
  localparam int unsigned VEC_MIN = 4;
  localparam int unsigned VEC_PASS = 5;

  localparam int unsigned POOL_MAX = 0;
  localparam int unsigned POOL_AVG = 1;

  localparam int unsigned UNIT_BIT_HOST = 0;
  localparam int unsigned UNIT_BIT_WEIGHTS = 1;
  localparam int unsigned UNIT_BIT_MATRIX = 2;
  localparam int unsigned UNIT_BIT_ACT = 3;

  localparam int unsigned CFG_HOST_STRIDE = 0;
  localparam int unsigned CFG_HOST_ROW_BYTES = 1;
  localparam int unsigned CFG_ACT_LANE = 2;
  localparam int unsigned CFG_GATHER_BYTES = 3;
  localparam int unsigned CFG_GATHER_COLS = 4;
  localparam int unsigned CFG_GATHER_ROWS = 5;
  localparam int unsigned CFG_GATHER_COL_STEP = 6;
  localparam int unsigned CFG_GATHER_ROW_STEP = 7;
  localparam int unsigned CFG_ACT_GROUPS = 8;
  localparam int unsigned CFG_ACT_GROUP_COLS = 9;
  localparam int unsigned CFG_ACT_POOL = 10;
  localparam int unsigned CFG_ACT_POOL_WINDOW = 11;
  localparam int unsigned CFG_ACT_POOL_STRIDE = 12;
  localparam int unsigned CFG_ACT_POOL_WIDTH = 13;
  localparam int unsigned CFG_ACT_POOL_BATCH = 14;
  localparam int unsigned CFG_ACT_HIGH = 15;
  localparam int unsigned CFG_VEC_HIGH_A = 16;
  localparam int unsigned CFG_VEC_HIGH_B = 17;
  localparam int unsigned CFG_VEC_HIGH_OUT = 18;
  localparam int unsigned CFG_MM_IN_HI = 19;
  localparam int unsigned CFG_MM_WEIGHT_HI = 20;
  localparam int unsigned CFG_DENSE_ROWS = 22;
  localparam int unsigned CFG_DENSE_BYTES = 23;
  localparam int unsigned CFG_ACT_DENSE_ROWS = 24;
  localparam int unsigned CFG_ACT_DENSE_BYTES = 25;

endpackage : tpusim_isa_pkg
