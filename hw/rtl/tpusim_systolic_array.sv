// The matrix unit's ROWS x COLS weight-stationary systolic array, built from tpusim_mac_cell.
// Its ports are SystolicArray::step()'s (sim/systolic_array.h), one clock cycle per step():
//  - left_*[k]: what enters column 0 of row k this cycle, ALREADY skewed (row k sees vector i's
//    element k at cycle t0 + i + k; tpusim_systolic_setup does that from unskewed vectors);
//  - shadow_we, shadow_row, shadow_values[j], shadow_signed: one shadow weight row written this
//    cycle (a tile shifts in over ROWS cycles);
//  - bottom_psum[j], bottom_valid[j]: the bottom row's partial-sum registers, the result the
//    accumulators take in the next cycle.
// psum_all / weight_all / shadow_all / x_all / x_valid_all expose every cell's registers ([k][j])
// for inspection (x_all: the input register widened to 9 bits by its signedness, as
// SystolicArray::x_value gives it).
// any_valid: some cell's x (hence psum) register holds valid data; low means stepping with
// invalid inputs changes nothing observable (SystolicArray::empty() is its negation).
module tpusim_systolic_array #(
  parameter int ROWS = 4,
  parameter int COLS = 4,
  localparam int RowBits = ROWS > 1 ? $clog2(ROWS) : 1
) (
  input  logic                               clk,
  input  logic                               rst,
  input  logic [ROWS-1:0][7:0]               left_value,
  input  logic [ROWS-1:0]                    left_signed,
  input  logic [ROWS-1:0]                    left_valid,
  input  logic [ROWS-1:0]                    left_switch,
  input  logic                               shadow_we,
  input  logic [RowBits-1:0]                 shadow_row,
  input  logic [COLS-1:0][7:0]               shadow_values,
  input  logic                               shadow_signed,
  output logic [COLS-1:0][31:0]              bottom_psum,
  output logic [COLS-1:0]                    bottom_valid,
  output logic                               any_valid,
  output logic [31:0]                        psum_all  [ROWS][COLS],
  output logic [8:0]                         weight_all[ROWS][COLS],
  output logic [8:0]                         shadow_all[ROWS][COLS],
  output logic [8:0]                         x_all     [ROWS][COLS],
  output logic                               x_valid_all[ROWS][COLS]
);
  // x moves right: x_*[k][j] enters cell (k, j); column COLS is the last cell's output (unused).
  logic [7:0] x_value [ROWS][COLS+1];
  logic       x_signed[ROWS][COLS+1];
  logic       x_valid [ROWS][COLS+1];
  logic       x_switch[ROWS][COLS+1];
  // psum moves down: psum[k][j] enters cell (k, j); row ROWS is the bottom output.
  logic [31:0] psum      [ROWS+1][COLS];
  logic        psum_valid[ROWS+1][COLS];
  // Every cell's x valid register (which psum_valid equals), flattened for any_valid.
  logic [ROWS*COLS-1:0] cell_valid;

  for (genvar k = 0; k < ROWS; ++k) begin : g_row
    assign x_value[k][0] = left_value[k];
    assign x_signed[k][0] = left_signed[k];
    assign x_valid[k][0] = left_valid[k];
    assign x_switch[k][0] = left_switch[k];
    for (genvar j = 0; j < COLS; ++j) begin : g_col
      tpusim_mac_cell u_cell (
        .clk, .rst,
        .x_in(x_value[k][j]), .x_signed(x_signed[k][j]),
        .x_valid_in(x_valid[k][j]), .x_switch_in(x_switch[k][j]),
        .psum_in(psum[k][j]),
        .shadow_we(shadow_we && shadow_row == RowBits'(k)),
        .shadow_in(shadow_values[j]), .w_signed(shadow_signed),
        .x_out(x_value[k][j+1]), .x_signed_out(x_signed[k][j+1]),
        .x_valid_out(x_valid[k][j+1]), .x_switch_out(x_switch[k][j+1]),
        .psum_out(psum[k+1][j]), .psum_valid_out(psum_valid[k+1][j]),
        .weight_out(weight_all[k][j]), .shadow_out(shadow_all[k][j])
      );
      assign psum_all[k][j] = psum[k+1][j];
      assign cell_valid[k*COLS+j] = x_valid[k][j+1];
      assign x_all[k][j] = {x_signed[k][j+1] & x_value[k][j+1][7], x_value[k][j+1]};
      assign x_valid_all[k][j] = x_valid[k][j+1];
    end
  end

  for (genvar j = 0; j < COLS; ++j) begin : g_edge
    assign psum[0][j] = '0;
    assign psum_valid[0][j] = 1'b0;
    assign bottom_psum[j] = psum[ROWS][j];
    assign bottom_valid[j] = psum_valid[ROWS][j];
  end
  assign any_valid = |cell_valid;
endmodule
